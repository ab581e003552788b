#include "primcache/control/registry.hpp"

#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/control/names.hpp"
#include "registry_state.hpp"

namespace primcache {

using control_internal::cache_entry;
using control_internal::quoted;
using control_internal::switch_entry;

namespace control_internal {

void registry_state::unregister(const std::shared_ptr<cache_entry>& entry) noexcept {
  {
    lock_guard g(mu);
    auto it = caches.find(entry->name());
    if (it != caches.end() && it->second == entry) caches.erase(it);
  }
  // Outside mu: the wait may be long, and lookups of other caches go on.
  entry->retire();
}

void registry_state::unregister(const std::shared_ptr<switch_entry>& entry) noexcept {
  lock_guard g(mu);
  auto it = switches.find(entry->name);
  if (it != switches.end() && it->second == entry) switches.erase(it);
}

}  // namespace control_internal

control_registry::control_registry()
    : state_(std::make_shared<control_internal::registry_state>()) {
  set_info("build", "version", PRIMCACHE_VERSION);
  set_info("build", "llvm", "unknown");
  set_info("build", "isa", "unknown");
}

control_registry::~control_registry() = default;

cache_registration control_registry::register_cache_ops(std::string_view name, capacity_unit unit,
                                                        const control_internal::cache_ops& ops) {
  check_control_name("cache", name);
  auto entry = std::make_shared<cache_entry>(std::string(name), unit, ops);
  {
    lock_guard g(state_->mu);
    if (!state_->caches.try_emplace(entry->name(), entry).second) {
      throw error(status::already_exists, "cache " + quoted(name) + " is already registered");
    }
  }
  return cache_registration(state_, std::move(entry));
}

cache_handle control_registry::find_cache(std::string_view name) const {
  shared_lock_guard g(state_->mu);
  auto it = state_->caches.find(name);
  if (it == state_->caches.end()) {
    throw error(status::not_found, "cache " + quoted(name) + " is not registered");
  }
  return cache_handle(it->second);
}

std::vector<cache_info> control_registry::list_caches() const {
  std::vector<std::shared_ptr<cache_entry>> entries;
  {
    shared_lock_guard g(state_->mu);
    entries.reserve(state_->caches.size());
    for (const auto& [name, entry] : state_->caches) entries.push_back(entry);
  }
  // The caches are called without the map lock, each within its own entry.
  std::vector<cache_info> out;
  out.reserve(entries.size());
  for (const auto& entry : entries) {
    cache_info info{entry->name(), entry->unit()};
    const bool live = entry->call(
        [&](const control_internal::cache_ops& ops) { control_internal::read_info(ops, info); });
    if (live) out.push_back(std::move(info));
  }
  return out;
}

void control_registry::set_capacity(std::string_view name, std::uint64_t capacity) {
  find_cache(name).set_capacity(capacity);
}

void control_registry::flush(std::string_view name) {
  find_cache(name).flush();
}

switch_registration control_registry::register_switch(std::string_view name,
                                                      std::string_view description, bool initial) {
  check_control_name("switch", name);
  auto entry = std::make_shared<switch_entry>(std::string(name), std::string(description), initial);
  {
    lock_guard g(state_->mu);
    if (!state_->switches.try_emplace(entry->name, entry).second) {
      throw error(status::already_exists, "switch " + quoted(name) + " is already registered");
    }
  }
  return switch_registration(state_, std::move(entry));
}

namespace {
[[noreturn]] void throw_no_switch(std::string_view name) {
  throw error(status::not_found, "switch " + quoted(name) + " is not registered");
}
}  // namespace

void control_registry::set_switch(std::string_view name, bool on) {
  shared_lock_guard g(state_->mu);
  auto it = state_->switches.find(name);
  if (it == state_->switches.end()) throw_no_switch(name);
  it->second->state.store(on, std::memory_order_release);
}

bool control_registry::get_switch(std::string_view name) const {
  shared_lock_guard g(state_->mu);
  auto it = state_->switches.find(name);
  if (it == state_->switches.end()) throw_no_switch(name);
  return it->second->state.load(std::memory_order_acquire);
}

std::vector<switch_info> control_registry::list_switches() const {
  shared_lock_guard g(state_->mu);
  std::vector<switch_info> out;
  out.reserve(state_->switches.size());
  for (const auto& [name, entry] : state_->switches) {
    out.push_back({entry->name, entry->description, entry->state.load(std::memory_order_acquire),
                   entry->initial});
  }
  return out;
}

control_registry& control() {
  static control_registry* registry = new control_registry;  // never destroyed: usable during exit
  return *registry;
}

}  // namespace primcache
