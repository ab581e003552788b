// primitives/cpu_engine.hpp — the CPU engine and helpers shared by the CPU
// primitive implementations.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "kernels/post_ops.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/args.h"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::cpu_internal {

class cpu_engine final : public backend::engine_impl {
 public:
  explicit cpu_engine(std::size_t index) : engine_impl(engine_kind::cpu, index) {}
  // The ISA code is compiled for is part of the identity: a key made under
  // one ISA cap never finds code built under another.
  void write_identity(key_writer& w) const override;
  std::string describe() const override;
  void* allocate(std::size_t bytes) const override;
  void deallocate(void* p) const noexcept override;
};

// Registers the engine factory and every CPU implementation, from the
// library's static initializer. When a CPU backend is registered already
// (a second copy of the backend in one program), registers nothing, says so
// on stderr and returns false.
bool register_cpu_backend();
void register_matmul_impls();
void register_conv_impls();
void register_conv_via_matmul_impls();  // conv_via_matmul_impl.cpp
void register_eltwise_impls();
void register_reorder_impls();

// A "jit:matmul" descriptor for `op` finalized with `cfg` as its
// configuration (finalize_with_config): the nested matmul of a composing
// implementation whose configuration is the matmul's. Fails like the
// registry's matmul factory, and (invalid_arguments) when `cfg` does not
// validate.
result<std::shared_ptr<const backend::primitive_desc_impl>> make_jit_matmul_pd_with_config(
    const backend::matmul_op& op, const primitive_attr& attr, const backend::engine_impl& eng,
    const backend::kernel_config& cfg);

// The attribute's post-ops as kernel post-ops. Binary operands are matched
// against dst: dst's descriptor exactly, offset0 included (none); one value
// per channel/column `channel_dim`, the values consecutive (per_channel: a
// plain layout whose stride along channel_dim is 1); or one value (scalar).
// Any offset0 of a per_channel or scalar operand is honoured
// (collect_binary_operands); anything else is unimplemented.
result<post_op_chain> translate_post_ops(const primitive_attr& attr, const memory_desc& dst,
                                         int channel_dim);

// How a kernel finds a `none` binary operand, which is laid out as dst,
// offset0 included (translate_post_ops).
enum class dst_addressing {
  // At dst's physical offset, dst's offset0 included (convolution,
  // eltwise): the operand's buffer start serves.
  kernel_adds_offset0,
  // Relative to dst's element 0, the primitive having advanced dst by its
  // offset0 before the kernel runs (matmul): the operand is advanced alike.
  caller_advances,
};

// Up to this many binary post-ops per primitive.
inline constexpr int max_binary_post_ops = 8;
using binary_operand_array = std::array<const float*, max_binary_post_ops>;
// The operands of the chain's binary post-ops from the execution arguments.
// `ops` is the attribute the chain was translated from (one chain entry per
// entry, in order): a per_channel or scalar operand is advanced by its
// descriptor's offset0, so the kernels read one from its element 0; a
// `none` one as `dst` says.
binary_operand_array collect_binary_operands(const backend::exec_ctx& ctx, const post_ops& ops,
                                             const post_op_chain& chain, dst_addressing dst,
                                             const char* what);

// The buffer of a required argument; throws invalid_arguments naming it.
void* required_arg(const backend::exec_ctx& ctx, int arg, const char* what, const char* name);

// The ISA a CPU primitive descriptor compiles for: read once (effective_isa())
// when the descriptor is made, written into its key by write_isa_key, and
// passed to the kernel's create(). The engine identity reads the cap again,
// so a cap changed in between cannot file code for one ISA under the key of
// another: the key holds both.
class isa_bound_pd {
 public:
  explicit isa_bound_pd(cpu_isa isa) noexcept : bound_isa_(isa) {}
  virtual ~isa_bound_pd() = default;
  cpu_isa bound_isa() const noexcept { return bound_isa_; }

 protected:
  void write_isa_key(key_writer& w) const { w.str("cpu_isa").enumeration(bound_isa_); }

 private:
  cpu_isa bound_isa_;
};

inline failure unimplemented(std::string message) {
  return failure{status::unimplemented, std::move(message)};
}

// A result failure as the exception create_impl reports.
[[noreturn]] inline void throw_failure(const failure& f) {
  throw error(f.code, f.message);
}

}  // namespace primcache::cpu_internal
