// kernel_primitive.hpp — the descriptor and implementation of every OpenCL
// primitive that runs one generated kernel.
//
// kernel_pd keeps the resolved argument descriptors, the kernel_plan (source
// with shapes and configuration baked in) and the op part of the key.
// kernel_impl — what the global primitive cache holds — keeps the plan,
// the program BINARY, and the programs realized from it in the latest few
// contexts it ran in (hold): no cl_kernel. create_resource finds or
// realizes the binary in the executing engine's context (kernel_resource);
// execute enqueues on the stream's queue and returns.
//
// Blobs (primitive::cache_blob, the persistent cache): serialize writes the
// binary as a binary_record (device identity, source digest, binary) in the
// runtime's impl_blob; load_impl checks it against the loading engine and
// the descriptor's source, realizes it in the engine's context without
// compiling, and throws invalid_arguments when the driver refuses it (the
// runtime then caches nothing: a persistent cache's entry is erased and
// compiled afresh). The program realized there is kept by the impl, so a
// loaded blob is realized once.
//
// Constant weights: when the plan has a packing kernel, execute takes the
// weights packed into a device buffer from the constant tensor cache of the
// engine's device (constant_weights.hpp).
//
//   auto pd = make_kernel_pd(primitive_kind::eltwise, "ocl:eltwise", attr, eng,
//                            {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}},
//                            eltwise_plan(p), op_key_writer);
//
// Thread-safety: descriptors and impls are immutable; execute may run from
// several threads (the realized kernel serializes its argument setting).
// Exceptions: primcache::error (CL failures by name, build logs).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "binary_record.hpp"
#include "constant_weights.hpp"
#include "primcache/base/result.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

// A kernel whose configuration a tuner may choose (matmul, convolution; see
// docs/autotune.md): the heuristic's configuration, the candidates, the
// check, and the plan a configuration that passed the check generates. A
// descriptor made with one leaves the configuration out of its op key:
// finalize() chooses it (the config source's, the tune table's, else the
// default) and appends it, and the plan follows the choice.
struct kernel_tuning {
  backend::kernel_config default_config;
  std::function<backend::config_space()> candidates;
  std::function<result<bool>(const backend::kernel_config&)> validate;
  std::function<kernel_plan(const backend::kernel_config&)> plan;
};

class kernel_pd final : public backend::primitive_desc_impl {
 public:
  kernel_pd(backend::primitive_kind kind, const char* name, const primitive_attr& attr,
            std::map<int, memory_desc> mds, kernel_plan plan, key op_key,
            std::shared_ptr<const kernel_tuning> tuning = nullptr)
      : primitive_desc_impl(kind, attr, name),
        mds_(std::move(mds)),
        plan_(std::move(plan)),
        op_key_(std::move(op_key)),
        tuning_(std::move(tuning)) {}

  memory_desc arg_md(int arg) const override;
  void write_op_key(key_writer& w) const override;
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine& eng) const override;
  const kernel_plan& plan() const noexcept { return plan_; }

  // Configurations (kernel_tuning); none without one.
  std::optional<backend::kernel_config> default_config() const override;
  backend::config_space config_candidates() const override;
  result<bool> validate_config(const backend::kernel_config& cfg) const override;
  // A candidate: a copy of this descriptor whose plan is `cfg`'s, compiled.
  std::shared_ptr<const backend::primitive_impl> create_impl_with(
      const engine& eng, const backend::kernel_config& cfg) const override;
  // After finalize(): the plan of the configuration it chose, when that is
  // not the default's (make_kernel_pd calls it).
  void follow_chosen_config();

 protected:
  std::shared_ptr<const backend::primitive_impl> load_impl(
      const engine& eng, const backend::impl_blob& blob) const override;

 private:
  std::map<int, memory_desc> mds_;
  kernel_plan plan_;
  key op_key_;
  std::shared_ptr<const kernel_tuning> tuning_;
};

class kernel_impl final : public backend::primitive_impl {
 public:
  kernel_impl(std::shared_ptr<const kernel_pd> pd, program_binary binary, device_identity made_for,
              std::optional<backend::kernel_config> built_with = std::nullopt)
      : primitive_impl(pd),
        pd_(std::move(pd)),
        binary_(std::move(binary)),
        made_for_(std::move(made_for)),
        built_with_(std::move(built_with)) {}

  void create_resource(const engine& eng, backend::resource_mapper& mapper) const override;
  // Keeps `program`, this impl's binary realized in one context and
  // device, while the impl lives (a cached impl keeps its programs, and so
  // their contexts, as long as it stays in the primitive cache), the
  // max_held_programs latest: each primitive made from the impl afterwards
  // finds it through the engine's program_for instead of loading and
  // building the binary again.
  void hold(std::shared_ptr<const realized_program> program) const;
  static constexpr std::size_t max_held_programs = 4;
  void execute(const backend::exec_ctx& ctx) const override;
  std::vector<std::uint8_t> serialize() const override;
  const program_binary& binary() const noexcept { return binary_; }
  // A tuning candidate's configuration, else the descriptor's.
  std::optional<backend::kernel_config> config() const override {
    return built_with_ ? built_with_ : pd().config();
  }

 private:
  std::shared_ptr<const kernel_pd> pd_;
  program_binary binary_;
  device_identity made_for_;                          // the device the binary was built on
  std::optional<backend::kernel_config> built_with_;  // set for tuning candidates
  mutable mutex programs_mu_;
  // One per context and device this impl has run in (few: a vector).
  mutable std::vector<std::shared_ptr<const realized_program>> programs_
      PRIMCACHE_GUARDED_BY(programs_mu_);
};

// The kernel of one kernel_impl realized in one engine's context, with its
// packing kernel when the plan has one, and the weights this primitive
// packed last when the constant cache did not keep them.
class kernel_resource final : public backend::resource {
 public:
  kernel_resource(const engine& eng, const program_binary& binary, const kernel_plan& plan);
  const realized_kernel& kernel() const noexcept { return kernel_; }
  // Null when the plan has no packing.
  const realized_kernel* packing_kernel() const noexcept { return packing_.get(); }
  const engine& get_engine() const noexcept { return engine_; }
  const packed_weights_slot& last_packed() const noexcept { return last_packed_; }

 private:
  engine engine_;  // keeps the context alive as long as the kernel
  realized_kernel kernel_;
  std::unique_ptr<realized_kernel> packing_;
  packed_weights_slot last_packed_;
};

result<std::shared_ptr<const backend::primitive_desc_impl>> make_kernel_pd(
    backend::primitive_kind kind, const char* name, const primitive_attr& attr,
    const backend::engine_impl& eng, std::map<int, memory_desc> mds, kernel_plan plan,
    key_writer op_key, std::shared_ptr<const kernel_tuning> tuning = nullptr);

inline failure unimplemented(std::string message) {
  return failure{status::unimplemented, std::move(message)};
}

// The cl_mem of execution argument `arg`, or an invalid_arguments error;
// also one when `context` is given and the buffer belongs to another
// context (a kernel may read only buffers of its own).
cl_mem arg_buffer(const backend::exec_ctx& ctx, int arg, const char* what,
                  cl_context context = nullptr);

}  // namespace primcache::ocl_internal
