// tiered/tiered_impl.hpp — the implementation of a kernel-backed CPU
// primitive created in tiered mode (primcache/runtime/jit_mode.hpp): it runs
// the shape-generic kernel built into the library until the specialized
// kernel, compiled on the background pool (background_compiler.hpp), is
// installed.
//
//   // in a kind's traits (matmul_impl.cpp):
//   using generic_kernel = generic_matmul_kernel;   // create(problem, config, isa)
//   static std::shared_ptr<const backend::primitive_impl> create_tiered(
//       std::shared_ptr<const kernel_pd<matmul_traits>> pd, const config& c, cpu_isa isa) {
//     return make_tiered_impl<matmul_traits>(std::move(pd), c, isa);  // null: create it sync
//   }
//
// The swap: the background job compiles Traits::kernel::create(problem,
// config, isa) — exactly what a synchronous creation compiles — stores it in
// the impl's slot, then publishes its address with a release store. Each
// execution loads that address once (acquire) and runs the kernel it found
// from start to end, so executions already running when the specialized
// kernel arrives finish on the generic one. Neither kernel is ever freed
// while the impl lives. Results are bit-identical across the swap (the
// generic kernel accumulates as the specialized one does), so a caller sees
// nothing but the speed change.
//
// Lifetime: the job holds only a weak reference to the slot; an impl that
// is evicted and dropped before its job runs costs no compilation, and one
// dropped during its compilation installs nothing (the fresh code is freed
// with the job). serialize() waits for the specialized kernel — and
// compiles it on its caller's thread when it is still queued, or was
// dropped by the pool's stop at exit while the main thread's exit still
// waits (the persistent cache's writer serializes then): blobs, and the
// persistent cache, hold only specialized code. A failed specialization is
// reported under PRIMCACHE_VERBOSE and counted in
// primcache_jit_specialization_failures_total.
//
// Thread-safety: as kernel_impl (kernel_primitive.hpp); the slot's kernel is
// written once, before its address is published. Exceptions: execute throws
// what the traits' execute throws; serialize throws error(runtime_error)
// when the specialized compilation failed, or was dropped at exit too late
// to run.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/runtime/backend/verbose.hpp"
#include "primitives/kernel_primitive.hpp"
#include "tiered/background_compiler.hpp"

namespace primcache::cpu_internal {

template <class Traits>
class tiered_kernel_impl final : public backend::primitive_impl {
 public:
  using kernel_type = typename Traits::kernel;
  using generic_type = typename Traits::generic_kernel;
  using config_type = typename Traits::config;

  // Shared by the impl and (weakly) its job.
  struct slot {
    std::atomic<const kernel_type*> installed{nullptr};
    std::unique_ptr<kernel_type> kernel;  // written once, before `installed`
    mutex mu;
    std::optional<std::string> failure PRIMCACHE_GUARDED_BY(mu);
  };

  tiered_kernel_impl(std::shared_ptr<const kernel_pd<Traits>> pd,
                     std::unique_ptr<generic_type> generic, std::size_t specialized_scratch)
      : primitive_impl(pd),
        pd_(std::move(pd)),
        generic_(std::move(generic)),
        scratch_(std::max(generic_->scratchpad_bytes(), specialized_scratch)),
        slot_(std::make_shared<slot>()) {}

  std::size_t scratchpad_bytes() const override { return scratch_; }
  void execute(const backend::exec_ctx& ctx) const override {
    // Acquire: the kernel object was complete before its address was stored.
    if (const kernel_type* k = slot_->installed.load(std::memory_order_acquire)) {
      Traits::execute(*pd_, ctx, k);
    } else {
      Traits::execute(*pd_, ctx, generic_.get());
    }
  }
  bool specialized() const override {
    return slot_->installed.load(std::memory_order_acquire) != nullptr;
  }
  bool created_tiered() const override { return true; }
  void wait_until_specialized() const override {
    if (!specialized()) job_->wait();
  }
  std::vector<std::uint8_t> serialize() const override {
    // Compiles here what is still queued, or was dropped at exit while the
    // main thread's exit still lets it (background_compiler.hpp): the
    // persistent cache's writer serializes during the exit too, after the
    // pool stopped.
    if (!specialized()) job_->complete();
    const kernel_type* k = slot_->installed.load(std::memory_order_acquire);
    if (k == nullptr) {
      std::string why = "its compilation was dropped at exit";
      {
        lock_guard guard(slot_->mu);
        if (slot_->failure) why = *slot_->failure;
      }
      throw error(status::runtime_error,
                  std::string(pd_->name()) + " has no specialized code to serialize: " + why);
    }
    backend::impl_blob b;
    b.name = pd_->name();
    const auto key = pd_->cache_key().bytes();
    b.key_bytes.assign(key.begin(), key.end());
    b.config = pd_->config();
    b.isa = static_cast<std::int32_t>(k->isa());
    b.object = k->object();
    return b.encode();
  }

  const generic_type& generic() const noexcept { return *generic_; }
  // Submits the specialized compilation (make_tiered_impl does, once); false
  // when the pool refuses it (exiting).
  bool start(const config_type& cfg, cpu_isa isa) {
    std::weak_ptr<slot> weak = slot_;
    auto problem = pd_->problem();
    std::string what = std::string(to_string(Traits::kind)) + "," + pd_->name();
    job_ = background_job::make([weak, problem, cfg, isa, what] {
      // The impl is gone: nothing to compile for. Or the code is in: a fork
      // child runs again a job whose run the fork cut short (on a thread
      // the child does not have), which may have installed it already.
      if (auto s = weak.lock(); !s || s->installed.load(std::memory_order_acquire) != nullptr) {
        return;
      }
      const auto start = std::chrono::steady_clock::now();
      auto made = kernel_type::create(problem, cfg, isa);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::shared_ptr<slot> s = weak.lock();
      if (!s) return;  // dropped while compiling: the fresh code goes with `made`
      if (!made) {
        {
          lock_guard guard(s->mu);
          s->failure = made.why().message;
        }
        background_compiler::instance().count_failure();
        if (backend::verbose_level() >= 1) {
          backend::verbose_print("primcache_verbose,specialize_failed," + what + "," +
                                 made.why().message);
        }
        return;
      }
      if (s->installed.load(std::memory_order_acquire) != nullptr) return;  // as above
      s->kernel = std::move(made).value();
      // Release: publishes the complete kernel to executions (acquire).
      s->installed.store(s->kernel.get(), std::memory_order_release);
      if (backend::verbose_level() >= 1) {
        char time[32];
        std::snprintf(time, sizeof time, "%.3f", ms);
        backend::verbose_print("primcache_verbose,specialized," + what + "," + time);
      }
    });
    return background_compiler::instance().submit(job_);
  }

 private:
  std::shared_ptr<const kernel_pd<Traits>> pd_;
  std::unique_ptr<generic_type> generic_;
  std::size_t scratch_;
  std::shared_ptr<slot> slot_;
  std::shared_ptr<background_job> job_;  // set by start(), before the impl is shared
};

// A tiered impl of `pd` whose specialized kernel builds with `cfg` at `isa`,
// or null when the kind's generic kernel declines this problem (the caller
// then compiles synchronously) or the pool refuses work (exiting).
template <class Traits>
std::shared_ptr<const backend::primitive_impl> make_tiered_impl(
    std::shared_ptr<const kernel_pd<Traits>> pd, const typename Traits::config& cfg, cpu_isa isa) {
  auto generic = Traits::generic_kernel::create(pd->problem(), cfg, isa);
  if (!generic) return nullptr;
  const std::size_t specialized_scratch = Traits::specialized_scratchpad_bytes(cfg);
  auto impl = std::make_shared<tiered_kernel_impl<Traits>>(pd, std::move(generic).value(),
                                                           specialized_scratch);
  if (!impl->start(cfg, isa)) return nullptr;
  return impl;
}

}  // namespace primcache::cpu_internal
