// primitives/kernel_primitive.hpp — the primitive descriptor and
// implementation of every kernel-backed CPU primitive kind: a descriptor that
// holds the kernel's problem and the ISA it binds, and an implementation that
// runs either the generated kernel ("jit:<kind>") or the kernel's reference
// ("ref:<kind>"). What differs between kinds lives in a traits class:
//
//   struct matmul_traits {
//     using desc = matmul_desc;        // what the descriptor keeps (op, problem, ...)
//     using kernel = matmul_kernel;
//     static constexpr primitive_kind kind = primitive_kind::matmul;
//     static constexpr const char* jit_name = "jit:matmul";
//     static constexpr const char* ref_name = "ref:matmul";
//     static const matmul_problem& problem(const desc& d);
//     static memory_desc arg_md(const desc& d, int arg);
//     static void write_op_key(const desc& d, key_writer& w);  // after the ISA
//     static std::unique_ptr<kernel> create_kernel(const desc& d, cpu_isa isa);  // throws
//     static void execute(const kernel_pd<matmul_traits>& pd, const exec_ctx& ctx,
//                         const kernel* k);  // k null: the reference
//   };
//   return make_kernel_pd<matmul_traits>(attr, eng, jit, std::move(d), nthr, isa);
//
// The key a descriptor writes is its ISA (isa_bound_pd) then the traits'
// op part, under the name jit_name or ref_name: the same bytes whatever the
// kind's traits look like inside.
//
// Thread-safety: descriptors and implementations are immutable once made;
// execute() may run from any number of threads (the kernels allow it).
// Exceptions: create_impl throws primcache::error when the kernel cannot be
// built; execute throws what the traits' execute throws (missing arguments).
#pragma once

#include <memory>
#include <utility>

#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primitives/cpu_engine.hpp"

namespace primcache::cpu_internal {

template <class Traits>
class kernel_pd final : public backend::primitive_desc_impl, public isa_bound_pd {
 public:
  using desc_type = typename Traits::desc;

  kernel_pd(const primitive_attr& attr, bool jit, desc_type d, cpu_isa isa)
      : primitive_desc_impl(Traits::kind, attr, jit ? Traits::jit_name : Traits::ref_name),
        isa_bound_pd(isa),
        jit_(jit),
        desc_(std::move(d)) {}

  memory_desc arg_md(int arg) const override { return Traits::arg_md(desc_, arg); }
  void write_op_key(key_writer& w) const override {
    write_isa_key(w);
    Traits::write_op_key(desc_, w);
  }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine& eng) const override;

  const desc_type& desc() const noexcept { return desc_; }
  const auto& problem() const noexcept { return Traits::problem(desc_); }

 private:
  bool jit_;
  desc_type desc_;
};

template <class Traits>
class kernel_impl final : public backend::primitive_impl {
 public:
  using kernel_type = typename Traits::kernel;

  // A null kernel runs the reference.
  kernel_impl(std::shared_ptr<const kernel_pd<Traits>> pd, std::unique_ptr<kernel_type> kernel)
      : primitive_impl(pd), pd_(std::move(pd)), kernel_(std::move(kernel)) {}

  std::size_t scratchpad_bytes() const override {
    return kernel_ ? kernel_->scratchpad_bytes() : 0;
  }
  void execute(const backend::exec_ctx& ctx) const override {
    Traits::execute(*pd_, ctx, kernel_.get());
  }

 private:
  std::shared_ptr<const kernel_pd<Traits>> pd_;
  std::unique_ptr<kernel_type> kernel_;
};

template <class Traits>
std::shared_ptr<const backend::primitive_impl> kernel_pd<Traits>::create_impl(const engine&) const {
  auto self = std::static_pointer_cast<const kernel_pd>(shared_from_this());
  if (!jit_) return std::make_shared<const kernel_impl<Traits>>(self, nullptr);
  return std::make_shared<const kernel_impl<Traits>>(self,
                                                     Traits::create_kernel(desc_, bound_isa()));
}

// The descriptor of an accepted problem, finalized for this engine and
// thread count.
template <class Traits>
result<std::shared_ptr<const backend::primitive_desc_impl>> make_kernel_pd(
    const primitive_attr& attr, const backend::engine_impl& eng, bool jit, typename Traits::desc d,
    int nthr, cpu_isa isa) {
  auto pd = std::make_shared<kernel_pd<Traits>>(attr, jit, std::move(d), isa);
  pd->finalize(eng, nthr);
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

// The kernel for a problem with the heuristic's configuration at `isa`, or
// the failure as a primcache::error.
template <class Kernel, class Problem, class DefaultConfig>
std::unique_ptr<Kernel> create_default_kernel(const Problem& p, cpu_isa isa,
                                              DefaultConfig default_config) {
  auto kernel = Kernel::create(p, default_config(p, isa), isa);
  if (!kernel) throw_failure(kernel.why());
  return std::move(kernel).value();
}

}  // namespace primcache::cpu_internal
