#include "primcache/const_cache/eviction_subscription.hpp"

#include <algorithm>
#include <new>
#include <utility>
#include <vector>

#include "fork_handlers.hpp"
#include "listener_list.hpp"

namespace primcache {
namespace const_cache_internal {
namespace {

// The innermost deferred_notifications of this thread, if any.
thread_local deferred_notifications* collecting = nullptr;

}  // namespace

deferred_notifications::deferred_notifications(listener_list& list) noexcept
    : list_(list), outer_(collecting) {
  collecting = this;
}

deferred_notifications::~deferred_notifications() {
  // Ended first: what the callbacks cause is delivered at once.
  collecting = outer_;
  deliver();
}

void deferred_notifications::deliver() noexcept {
  std::vector<pending> now;
  now.swap(pending_);
  for (pending& p : now) {
    list_.notify(p.key, p.buffer.get(), p.reason);
    p.buffer.reset();  // the cache's hold on it ends with its notification
  }
}

listener_list::listener_list() {
  fork_handlers::add(*this);
}

listener_list::~listener_list() {
  fork_handlers::remove(*this);
}

eviction_subscription listener_list::add(constant_tensor_cache::eviction_callback callback) {
  auto l = std::make_shared<listener>(std::move(callback));
  {
    lock_guard<mutex> guard(mutex_);
    auto next = std::make_shared<std::vector<std::shared_ptr<listener>>>();
    if (listeners_) *next = *listeners_;
    next->push_back(l);
    listeners_ = std::move(next);
  }
  return eviction_subscription(shared_from_this(), std::move(l));
}

void listener_list::remove(const std::shared_ptr<listener>& l) noexcept {
  // Deactivated first: from here on it is never called, whether or not the
  // copy below can be made.
  l->deactivate();
  try {
    lock_guard<mutex> guard(mutex_);
    if (!listeners_) return;
    auto next = std::make_shared<std::vector<std::shared_ptr<listener>>>(*listeners_);
    next->erase(std::remove(next->begin(), next->end(), l), next->end());
    listeners_ = std::move(next);
  } catch (const std::bad_alloc&) {
    // The inactive listener stays listed (and silent) until a later removal.
  }
}

void listener_list::notify(const constant_key& key, const constant_buffer* buffer,
                           eviction_reason reason) noexcept {
  snapshot current;
  {
    lock_guard<mutex> guard(mutex_);
    current = listeners_;
  }
  if (!current) return;
  for (const auto& l : *current) l->call(key, buffer, reason);
}

void listener_list::evicted(const constant_key& key,
                            const constant_tensor_cache::buffer_ptr* buffer,
                            eviction_reason reason) noexcept {
  const constant_buffer* raw = buffer != nullptr ? buffer->get() : nullptr;
  if (deferred_notifications* d = collecting; d != nullptr && &d->list_ == this) {
    try {
      d->pending_.push_back({key, buffer != nullptr ? *buffer : nullptr, reason});
      return;
    } catch (...) {
      // Out of memory (copying the key or growing the vector): delivered
      // now, in order, under the caller's lock.
      d->deliver();
    }
  }
  notify(key, raw, reason);
}

}  // namespace const_cache_internal

eviction_subscription& eviction_subscription::operator=(eviction_subscription&& other) noexcept {
  if (this != &other) {
    reset();
    list_ = std::move(other.list_);
    listener_ = std::move(other.listener_);
  }
  return *this;
}

eviction_subscription::~eviction_subscription() {
  reset();
}

void eviction_subscription::reset() noexcept {
  if (listener_) list_->remove(listener_);
  listener_.reset();
  list_.reset();
}

}  // namespace primcache
