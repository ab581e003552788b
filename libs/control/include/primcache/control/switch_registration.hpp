// primcache/control/switch_registration.hpp — named boolean switches an
// operator may flip (tuning on/off), and the owner's side of one.
//
// A library registers a switch with a description and an initial state and
// keeps the registration; on its hot path it reads on(), a single atomic
// load. The admin server and tests flip it by name through the registry.
//
//   primcache::switch_registration tune_ =
//       primcache::register_switch("tune", "measure kernel configurations", false);
//   if (tune_.on()) { ... }                                 // owner, lock-free
//   primcache::control().set_switch("tune", true);         // operator
//
// Memory order: set_switch stores with release and on() loads with acquire,
// so what a thread wrote before flipping a switch is visible to an owner that
// sees the new state (on x86 the load costs the same as a relaxed one).
//
// Destroying the registration (or reset()) unregisters the switch; later
// lookups by name fail with not_found.
//
// Thread-safety: on() and set() may be called from any thread at once;
// moving, reset and destruction are the owner's. Exceptions: none.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "primcache/base/export.hpp"

namespace primcache {

class control_registry;

namespace control_internal {
class registry_state;
struct switch_entry;
}  // namespace control_internal

// One registered switch at one moment (list_switches).
struct switch_info {
  std::string name;
  std::string description;
  bool on = false;
  bool initial = false;  // the state it was registered with
};

class PRIMCACHE_API switch_registration {
 public:
  switch_registration() noexcept = default;
  switch_registration(switch_registration&& other) noexcept;
  switch_registration& operator=(switch_registration&& other) noexcept;
  switch_registration(const switch_registration&) = delete;
  switch_registration& operator=(const switch_registration&) = delete;
  ~switch_registration();

  // The switch's state; false when empty.
  bool on() const noexcept { return state_ != nullptr && state_->load(std::memory_order_acquire); }
  // Sets the state, as control().set_switch(name(), on) would. Precondition:
  // not empty.
  void set(bool on) noexcept { state_->store(on, std::memory_order_release); }

  void reset() noexcept;
  explicit operator bool() const noexcept { return entry_ != nullptr; }
  // Precondition: not empty.
  const std::string& name() const noexcept;

 private:
  friend class control_registry;
  switch_registration(std::shared_ptr<control_internal::registry_state> registry,
                      std::shared_ptr<control_internal::switch_entry> entry) noexcept;

  std::shared_ptr<control_internal::registry_state> registry_;
  std::shared_ptr<control_internal::switch_entry> entry_;
  // Points into *entry_, kept here so on() needs no call into the library.
  std::atomic<bool>* state_ = nullptr;
};

}  // namespace primcache
