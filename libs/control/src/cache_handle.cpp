#include "primcache/control/cache_handle.hpp"

#include <algorithm>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/control/cache_registration.hpp"
#include "primcache/control/names.hpp"
#include "registry_state.hpp"

namespace primcache {
namespace {

using control_internal::cache_entry;
using control_internal::cache_ops;

[[noreturn]] void throw_unregistered(const cache_entry& e) {
  throw error(status::not_found,
              "cache " + control_internal::quoted(e.name()) + " is no longer registered");
}

// Runs f(ops) in the cache, or throws not_found once it is unregistered.
template <typename F>
void call_or_throw(cache_entry& e, F&& f) {
  if (!e.call(std::forward<F>(f))) throw_unregistered(e);
}

}  // namespace

namespace control_internal {

extra_stat_list checked_extras(extra_stat_list extras) {
  std::erase_if(extras, [](const auto& e) { return !is_valid_control_name(e.first); });
  std::sort(extras.begin(), extras.end());
  return extras;
}

void read_info(const cache_ops& ops, cache_info& out) {
  out.capacity = ops.capacity(ops.object);
  out.size = ops.size(ops.object);
  out.stats = ops.stats(ops.object);
  if (ops.weight != nullptr) out.weight_bytes = ops.weight(ops.object);
  if (ops.extra_stats != nullptr) out.extra = checked_extras(ops.extra_stats(ops.object));
}

}  // namespace control_internal

cache_handle::cache_handle(std::shared_ptr<cache_entry> entry) noexcept
    : entry_(std::move(entry)) {}

const std::string& cache_handle::name() const noexcept {
  return entry_->name();
}

capacity_unit cache_handle::unit() const noexcept {
  return entry_->unit();
}

std::uint64_t cache_handle::capacity() const {
  std::uint64_t out = 0;
  call_or_throw(*entry_, [&](const cache_ops& ops) { out = ops.capacity(ops.object); });
  return out;
}

std::uint64_t cache_handle::size() const {
  std::uint64_t out = 0;
  call_or_throw(*entry_, [&](const cache_ops& ops) { out = ops.size(ops.object); });
  return out;
}

cache_counters cache_handle::stats() const {
  cache_counters out;
  call_or_throw(*entry_, [&](const cache_ops& ops) { out = ops.stats(ops.object); });
  return out;
}

cache_info cache_handle::info() const {
  cache_info out{entry_->name(), entry_->unit()};
  call_or_throw(*entry_, [&](const cache_ops& ops) { control_internal::read_info(ops, out); });
  return out;
}

std::optional<std::uint64_t> cache_handle::weight() const {
  std::optional<std::uint64_t> out;
  call_or_throw(*entry_, [&](const cache_ops& ops) {
    if (ops.weight != nullptr) out = ops.weight(ops.object);
  });
  return out;
}

extra_stat_list cache_handle::extra_stats() const {
  extra_stat_list out;
  call_or_throw(*entry_, [&](const cache_ops& ops) {
    if (ops.extra_stats != nullptr)
      out = control_internal::checked_extras(ops.extra_stats(ops.object));
  });
  return out;
}

void cache_handle::set_capacity(std::uint64_t capacity) const {
  call_or_throw(*entry_, [&](const cache_ops& ops) { ops.set_capacity(ops.object, capacity); });
}

std::optional<capacity_preview> cache_handle::preview_capacity(std::uint64_t capacity) const {
  std::optional<capacity_preview> out;
  call_or_throw(*entry_, [&](const cache_ops& ops) {
    if (ops.preview_capacity != nullptr) out = ops.preview_capacity(ops.object, capacity);
  });
  return out;
}

void cache_handle::flush() const {
  call_or_throw(*entry_, [&](const cache_ops& ops) { ops.clear(ops.object); });
}

cache_registration::cache_registration(std::shared_ptr<control_internal::registry_state> registry,
                                       std::shared_ptr<cache_entry> entry) noexcept
    : registry_(std::move(registry)), entry_(std::move(entry)) {}

cache_registration& cache_registration::operator=(cache_registration&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::move(other.registry_);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

cache_registration::~cache_registration() {
  reset();
}

void cache_registration::reset() noexcept {
  if (entry_ == nullptr) return;
  registry_->unregister(entry_);
  entry_.reset();
  registry_.reset();
}

const std::string& cache_registration::name() const noexcept {
  return entry_->name();
}

cache_handle cache_registration::handle() const noexcept {
  return cache_handle(entry_);
}

}  // namespace primcache
