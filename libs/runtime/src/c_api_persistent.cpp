// The C API of the persistent cache (primcache_persistent.h).
#include <new>
#include <string>
#include <string_view>

#include "c_api_guard.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/primcache.h"

namespace {

using primcache::runtime_internal::c_api_guarded;

}  // namespace

extern "C" {

pc_status_t pc_set_persistent_cache_dir(const char* dir, int64_t capacity_mb) {
  return c_api_guarded([&] {
    using primcache::error;
    using primcache::status;
    if (dir == nullptr || *dir == '\0') {
      throw error(status::invalid_arguments, "the persistent cache directory is NULL or empty");
    }
    if (capacity_mb < 0) {
      throw error(status::invalid_arguments,
                  "persistent cache capacity " + std::to_string(capacity_mb) + " MB is negative");
    }
    // Opened before anything is detached: a directory that is refused
    // leaves the attached store in place.
    auto store = primcache::open_persistent_cache_dir(dir, static_cast<std::uint64_t>(capacity_mb));
    primcache::set_persistent_cache(std::move(store));
  });
}

pc_status_t pc_detach_persistent_cache(void) {
  return c_api_guarded([] { primcache::detach_persistent_cache(); });
}

pc_status_t pc_flush_persistent_cache(void) {
  return c_api_guarded([] { primcache::flush_persistent_cache_writes(); });
}

}  // extern "C"
