#include "primitives/constant_weights.hpp"

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/runtime/args.h"

namespace primcache::cpu_internal {

constant_tensor_cache& cpu_constant_cache() {
  // The set lives as long as the process; the device's cache as long as it.
  static constant_tensor_cache& cache = constant_caches().device("cpu");
  return cache;
}

namespace {

// Buffers for weights packed for one call (the cache keeps nothing): kept
// for the next such call, so that each call does not pay for fresh pages —
// at 64 MiB, faulting and zeroing them cost five times the kernel. At most
// kMaxKept buffers wait here (one per thread packing at once is enough for
// the usual one or two callers); the rest are freed.
class packing_buffer_pool {
 public:
  static packing_buffer_pool& instance() {
    // Never destroyed: buffers may come back from static destructors.
    static auto* pool = new packing_buffer_pool;
    return *pool;
  }

  std::shared_ptr<constant_buffer> take(std::size_t bytes) {
    void* reused = nullptr;
    std::size_t capacity = 0;
    {
      lock_guard g(mu_);
      // The smallest kept buffer that fits.
      auto best = kept_.end();
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        if (it->bytes >= bytes && (best == kept_.end() || it->bytes < best->bytes)) best = it;
      }
      if (best != kept_.end()) {
        reused = best->data;
        capacity = best->bytes;
        kept_.erase(best);
      }
    }
    if (reused == nullptr) {
      capacity = round_up(bytes);
      reused = std::aligned_alloc(64, capacity);
      if (reused == nullptr) {
        throw error(status::out_of_memory,
                    "constant weights: no memory for " + std::to_string(bytes) + " packed bytes");
      }
      allocations_.fetch_add(1, std::memory_order_relaxed);
    }
    // constant_buffer allocates through `allocate` in its constructor: hand
    // it the block taken above, and take the block back when it goes.
    try {
      return make_constant_buffer(
          bytes, [reused](std::size_t) { return reused; },
          [this, capacity](void* p, std::size_t) { give_back(p, capacity); });
    } catch (...) {
      give_back(reused, capacity);  // not adopted
      throw;
    }
  }

  std::uint64_t allocations() const noexcept {
    return allocations_.load(std::memory_order_relaxed);
  }

 private:
  static constexpr std::size_t kMaxKept = 2;
  struct block {
    void* data;
    std::size_t bytes;
  };

  static std::size_t round_up(std::size_t n) { return (n + 63) & ~std::size_t{63}; }

  void give_back(void* p, std::size_t bytes) noexcept {
    {
      lock_guard g(mu_);
      if (kept_.size() < kMaxKept) {
        kept_.push_back({p, bytes});  // capacity reserved: cannot throw
        return;
      }
    }
    std::free(p);
  }

  packing_buffer_pool() { kept_.reserve(kMaxKept); }

  mutex mu_;
  std::vector<block> kept_ PRIMCACHE_GUARDED_BY(mu_);
  std::atomic<std::uint64_t> allocations_{0};
};

}  // namespace

std::uint64_t packing_buffer_allocations() noexcept {
  return packing_buffer_pool::instance().allocations();
}

std::shared_ptr<const constant_buffer> packed_constant_weights(const backend::exec_ctx& ctx,
                                                               const char* what, std::size_t bytes,
                                                               const write_packing_fn& packing,
                                                               const pack_fn& pack,
                                                               when_not_kept fallback) {
  const memory* weights = ctx.arg(PRIMCACHE_ARG_WEIGHTS);
  if (weights == nullptr || ctx.arg_ptr(PRIMCACHE_ARG_WEIGHTS) == nullptr) {
    throw error(status::invalid_arguments, std::string(what) + ": argument weights was not passed");
  }
  // The weights' identity is the memory's id, never their address: a freed
  // buffer's address comes back from the next allocation.
  key_writer w;
  packing(w);
  w.str("memory_id").u64(weights->get_id());
  const key k = w.finish();
  const auto* user = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_WEIGHTS));
  const std::string_view key_bytes(reinterpret_cast<const char*>(k.bytes().data()),
                                   k.bytes().size());
  const constant_key ck(cpu_backend_id, key_bytes);
  constant_tensor_cache& cache = cpu_constant_cache();
  if (!cache.would_keep(bytes)) {
    // Disabled, or full under no_evict: whatever is packed now is thrown
    // away after this call. Use a copy kept before, else do without one
    // (the kernel packs as it goes) or pack into a reused buffer.
    if (auto kept = cache.find(ck)) return kept;
    cache.count_refused_miss();
    if (fallback == when_not_kept::decline) return nullptr;
    auto buf = packing_buffer_pool::instance().take(bytes);
    pack(user, buf->data_as<float>());
    return buf;
  }
  auto r = cache.get_or_add(ck, bytes, [&] {
    // Host memory of its own (not the engine's allocate): a cached
    // buffer may outlive every engine handle.
    auto buf = make_constant_buffer(
        bytes, [](std::size_t n) { return std::aligned_alloc(64, (n + 63) & ~std::size_t{63}); },
        [](void* p, std::size_t) { std::free(p); });
    pack(user, buf->data_as<float>());
    return buf;
  });
  if (r.outcome == lookup_outcome::miss) {
    // No one can look this entry up once the id is gone (the memory
    // object's last copy, or set_data_handle): drop it then, instead of
    // keeping it until an eviction. Once per entry and memory id.
    backend::on_data_release(*weights, key_bytes, [ck]() noexcept {
      try {
        cpu_constant_cache().remove_if_exist(ck);
      } catch (...) {
        // Out of memory while removing: the entry stays
        // until an eviction; nothing else is affected.
      }
    });
  }
  return r.value;
}

}  // namespace primcache::cpu_internal
