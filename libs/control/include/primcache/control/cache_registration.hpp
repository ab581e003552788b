// primcache/control/cache_registration.hpp — the owner's side of a registered
// cache: while it lives, the cache is listed and reachable by name.
//
// Destroying (or reset()) the registration unregisters the cache and waits
// for calls the registry is making into it on other threads; when it returns,
// the registry will never call the object again, so the object may then be
// destroyed. Declare the registration after the cache it names, so that it is
// destroyed first:
//
//   class engine_caches {
//     my_cache cache_;
//     primcache::cache_registration reg_ =
//         primcache::register_cache("primitive", cache_, primcache::capacity_unit::entries);
//   };
//
// Do not unregister while holding a lock that the cache's members take: a call
// in flight on another thread could need it, and the unregistration waits for
// that call. A member of the cache may unregister the cache itself (the wait
// does not count calls on the unregistering thread).
//
// Thread-safety: one registration is one owner's object (not shared between
// threads without synchronization); different registrations may be created
// and destroyed concurrently. Exceptions: none (moves and reset are noexcept).
#pragma once

#include <memory>
#include <string>

#include "primcache/base/export.hpp"
#include "primcache/control/cache_handle.hpp"

namespace primcache {

class control_registry;

namespace control_internal {
class cache_entry;
class registry_state;
}  // namespace control_internal

class PRIMCACHE_API cache_registration {
 public:
  // Registers nothing.
  cache_registration() noexcept = default;
  cache_registration(cache_registration&& other) noexcept = default;
  // Unregisters what this registration held first.
  cache_registration& operator=(cache_registration&& other) noexcept;
  cache_registration(const cache_registration&) = delete;
  cache_registration& operator=(const cache_registration&) = delete;
  ~cache_registration();

  // Unregisters now (see above); afterwards the registration is empty.
  void reset() noexcept;

  // False when empty: default-constructed, moved from or reset.
  explicit operator bool() const noexcept { return entry_ != nullptr; }
  // Precondition: not empty.
  const std::string& name() const noexcept;
  // A handle to the registered cache. Precondition: not empty.
  cache_handle handle() const noexcept;

 private:
  friend class control_registry;
  cache_registration(std::shared_ptr<control_internal::registry_state> registry,
                     std::shared_ptr<control_internal::cache_entry> entry) noexcept;

  std::shared_ptr<control_internal::registry_state> registry_;
  std::shared_ptr<control_internal::cache_entry> entry_;
};

}  // namespace primcache
