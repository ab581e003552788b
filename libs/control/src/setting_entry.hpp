// One registered setting: its spec, its value and the lock that serializes
// setters (see setting.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "primcache/base/thread_annotations.hpp"
#include "primcache/control/setting.hpp"

namespace primcache::control_internal {

class setting_entry {
 public:
  // Throws error(invalid_arguments) when the spec's initial value fails.
  explicit setting_entry(setting_spec spec);

  const std::string& name() const noexcept { return spec_.name; }
  // Checks and stores, then calls on_change; see setting.hpp.
  void set(const setting_value& v) PRIMCACHE_EXCLUDES(set_mu_, value_mu_);
  setting_value value() const PRIMCACHE_EXCLUDES(value_mu_);
  setting_info info() const PRIMCACHE_EXCLUDES(value_mu_);
  // integer and boolean values, mirrored for lock-free reads.
  std::int64_t scalar() const noexcept { return scalar_.load(std::memory_order_acquire); }

  // fork() (registry_state::lock_for_fork): the value lock is held across
  // the fork. The setter lock is not (a setter runs user code, which may
  // take long or fork itself): in the child, a setter lock a vanished
  // thread held is made anew.
  void lock_for_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { value_mu_.lock(); }
  void unlock_after_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { value_mu_.unlock(); }
  void reset_in_child() noexcept PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

 private:
  // "" when v passes every check, else the message.
  std::string check(const setting_value& v) const;
  void store(const setting_value& v) PRIMCACHE_EXCLUDES(value_mu_);

  const setting_spec spec_;
  mutex set_mu_;  // held by one setter for check, store and on_change
  mutable mutex value_mu_;
  setting_value value_ PRIMCACHE_GUARDED_BY(value_mu_);
  std::atomic<std::int64_t> scalar_{0};
};

}  // namespace primcache::control_internal
