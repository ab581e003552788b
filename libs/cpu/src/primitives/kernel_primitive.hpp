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
//     using config = matmul_config;   // to_fields(config) must exist
//     static config default_config(const desc& d, cpu_isa isa);
//     static enumerated_configs<config> candidates(const desc& d, cpu_isa isa);
//     static result<bool> validate(const desc& d, const config& c, cpu_isa isa);
//     static result<config> from_fields(const backend::kernel_config& f);
//     static void execute(const kernel_pd<matmul_traits>& pd, const exec_ctx& ctx,
//                         const kernel* k);  // k null: the reference
//   };
//   return make_kernel_pd<matmul_traits>(attr, eng, jit, std::move(d), nthr, isa);
//
// The key a descriptor writes is its ISA (isa_bound_pd) then the traits'
// op part, under the name jit_name or ref_name: the same bytes whatever the
// kind's traits look like inside. A "jit:" descriptor has a configuration
// (chosen by finalize: the config source's, else the kernel's heuristic),
// compiles with kernel::create(problem, config, isa) and loads blobs with
// kernel::load(problem, config, object); a "ref:" one has none, and its
// blob carries no code.
//
// Thread-safety: descriptors and implementations are immutable once made;
// execute() may run from any number of threads (the kernels allow it).
// Exceptions: create_impl throws primcache::error when the kernel cannot be
// built; execute throws what the traits' execute throws (missing arguments).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/config_space.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/jit_mode.hpp"
#include "primitives/cpu_engine.hpp"

namespace primcache::cpu_internal {

template <class Traits>
class kernel_pd final : public backend::primitive_desc_impl, public isa_bound_pd {
 public:
  using desc_type = typename Traits::desc;
  using config_type = typename Traits::config;

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

  // The reference ("ref:") has no configuration.
  std::optional<backend::kernel_config> default_config() const override {
    if (!jit_) return std::nullopt;
    return to_fields(Traits::default_config(desc_, bound_isa()));
  }
  backend::config_space config_candidates() const override {
    if (!jit_) return {};
    auto space = Traits::candidates(desc_, bound_isa());
    return backend::config_space(space.size(),
                                 [space](std::uint64_t i) { return to_fields(space.at(i)); });
  }
  result<bool> validate_config(const backend::kernel_config& cfg) const override {
    if (!jit_) return primitive_desc_impl::validate_config(cfg);
    auto typed = Traits::from_fields(cfg);
    if (!typed) return typed.why();
    return Traits::validate(desc_, typed.value(), bound_isa());
  }
  std::shared_ptr<const backend::primitive_impl> create_impl_with(
      const engine& eng, const backend::kernel_config& cfg) const override;

  const desc_type& desc() const noexcept { return desc_; }
  const auto& problem() const noexcept { return Traits::problem(desc_); }
  bool jit() const noexcept { return jit_; }

 protected:
  std::shared_ptr<const backend::primitive_impl> load_impl(
      const engine& eng, const backend::impl_blob& blob) const override;

 private:
  // The typed form of a configuration this descriptor validated.
  config_type typed(const backend::kernel_config& cfg) const {
    auto c = Traits::from_fields(cfg);
    if (!c) throw_failure(c.why());
    if (auto ok = Traits::validate(desc_, c.value(), bound_isa()); !ok) throw_failure(ok.why());
    return c.value();
  }

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
  std::optional<backend::kernel_config> config() const override {
    if (!kernel_) return std::nullopt;
    return to_fields(kernel_->config());
  }
  // The reference's blob holds no object code: loading it builds nothing.
  std::vector<std::uint8_t> serialize() const override {
    backend::impl_blob b;
    b.name = pd_->name();
    const auto k = pd_->cache_key().bytes();
    b.key_bytes.assign(k.begin(), k.end());
    b.config = config();
    if (kernel_) {
      b.isa = static_cast<std::int32_t>(kernel_->isa());
      b.object = kernel_->object();
    }
    return b.encode();
  }

 private:
  std::shared_ptr<const kernel_pd<Traits>> pd_;
  std::unique_ptr<kernel_type> kernel_;
};

template <class Traits>
std::shared_ptr<const backend::primitive_impl> kernel_pd<Traits>::create_impl(
    const engine& eng) const {
  if (!jit_) {
    auto self = std::static_pointer_cast<const kernel_pd>(shared_from_this());
    return std::make_shared<const kernel_impl<Traits>>(self, nullptr);
  }
  // Tiered mode: generic code now, the specialized kernel in the background
  // (tiered/tiered_impl.hpp), for kinds that have a generic kernel and
  // problems it takes; otherwise the specialized kernel is compiled here.
  if constexpr (requires { typename Traits::generic_kernel; }) {
    if (get_jit_mode() == jit_mode::tiered) {
      auto self = std::static_pointer_cast<const kernel_pd>(shared_from_this());
      if (auto tiered = Traits::create_tiered(self, typed(*config()), bound_isa())) return tiered;
    }
  }
  return create_impl_with(eng, *config());
}

template <class Traits>
std::shared_ptr<const backend::primitive_impl> kernel_pd<Traits>::create_impl_with(
    const engine&, const backend::kernel_config& cfg) const {
  if (!jit_) {
    throw error(status::unimplemented, std::string(name()) + " has no kernel configurations");
  }
  auto self = std::static_pointer_cast<const kernel_pd>(shared_from_this());
  auto kernel = Traits::kernel::create(problem(), typed(cfg), bound_isa());
  if (!kernel) throw_failure(kernel.why());
  return std::make_shared<const kernel_impl<Traits>>(self, std::move(kernel).value());
}

template <class Traits>
std::shared_ptr<const backend::primitive_impl> kernel_pd<Traits>::load_impl(
    const engine&, const backend::impl_blob& blob) const {
  auto self = std::static_pointer_cast<const kernel_pd>(shared_from_this());
  const std::string who = std::string(name()) + " from a blob";
  if (!jit_) {
    if (!blob.object.empty() || blob.isa != -1) {
      throw error(status::corrupt_data, who + ": a reference's blob holds no object code");
    }
    return std::make_shared<const kernel_impl<Traits>>(self, nullptr);
  }
  if (blob.isa != static_cast<std::int32_t>(bound_isa())) {
    const bool known = blob.isa >= 0 && blob.isa <= static_cast<int>(cpu_isa::avx512_core_fp16);
    throw error(status::invalid_arguments,
                who + ": the code was built for " +
                    (known ? std::string(to_string(static_cast<cpu_isa>(blob.isa)))
                           : "ISA " + std::to_string(blob.isa)) +
                    ", this descriptor builds for " + std::string(to_string(bound_isa())));
  }
  // The configuration equals config() (create_impl_from_blob checked it).
  // Accepted up to the descriptor's ISA, not the cap now: a cap lowered since
  // the descriptor was made does not refuse its fresh code either, and a
  // refusal here would erase an entry other processes load.
  auto kernel = Traits::kernel::load(problem(), typed(*blob.config), blob.object, bound_isa());
  if (!kernel) throw error(kernel.why().code, who + ": " + kernel.why().message);
  if (kernel.value()->isa() != bound_isa()) {
    throw error(status::corrupt_data, who + ": the object records " +
                                          std::string(to_string(kernel.value()->isa())) +
                                          ", the blob says " + std::string(to_string(bound_isa())));
  }
  return std::make_shared<const kernel_impl<Traits>>(self, std::move(kernel).value());
}

// The descriptor of an accepted problem, finalized for this engine and
// thread count; with `forced`, finalized with that configuration (a
// composing implementation's, see finalize_with_config), failing
// (invalid_arguments) when the descriptor does not validate it.
template <class Traits>
result<std::shared_ptr<const backend::primitive_desc_impl>> make_kernel_pd(
    const primitive_attr& attr, const backend::engine_impl& eng, bool jit, typename Traits::desc d,
    int nthr, cpu_isa isa, const backend::kernel_config* forced = nullptr) {
  auto pd = std::make_shared<kernel_pd<Traits>>(attr, jit, std::move(d), isa);
  if (forced == nullptr) {
    pd->finalize(eng, nthr);
  } else {
    try {
      pd->finalize_with_config(eng, nthr, *forced);
    } catch (const error& e) {
      return failure{e.code(), e.message()};
    }
  }
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

}  // namespace primcache::cpu_internal
