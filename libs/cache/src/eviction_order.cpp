#include "primcache/cache/internal/eviction_order.hpp"

#include <string>

#include "primcache/base/error.hpp"

namespace primcache::cache_internal {
namespace {

// A circular doubly-linked list of hooks. `head_` is where the next victim
// search starts; inserting "at the tail" puts an entry just behind it, the
// last place a search reaches.
class ring {
 public:
  void insert_tail(entry_hook& e) noexcept {
    if (head_ == nullptr) {
      e.order_prev = e.order_next = &e;
      head_ = &e;
      return;
    }
    entry_hook* tail = head_->order_prev;
    e.order_prev = tail;
    e.order_next = head_;
    tail->order_next = &e;
    head_->order_prev = &e;
  }
  void remove(entry_hook& e) noexcept {
    if (e.order_next == &e) {
      head_ = nullptr;
    } else {
      if (head_ == &e) head_ = e.order_next;
      e.order_prev->order_next = e.order_next;
      e.order_next->order_prev = e.order_prev;
    }
    e.order_prev = e.order_next = nullptr;
  }
  entry_hook* head() const noexcept { return head_; }
  void advance() noexcept { head_ = head_->order_next; }

 private:
  entry_hook* head_ = nullptr;
};

// LRU by CLOCK (second chance). Hits set `referenced`; the hand clears set
// bits as it passes and stops at the first clear one. New entries start
// clear, so an entry touched since the hand last passed it outlives every
// untouched one. Each step past a set bit consumes a bit some hit set, so
// eviction is amortized O(1).
class clock_order final : public eviction_order {
 public:
  void insert(entry_hook& e) noexcept override {
    e.referenced.store(false, std::memory_order_relaxed);
    ring_.insert_tail(e);
  }
  void remove(entry_hook& e) noexcept override { ring_.remove(e); }
  entry_hook* victim() noexcept override {
    if (ring_.head() == nullptr) return nullptr;
    while (ring_.head()->referenced.load(std::memory_order_relaxed)) {
      ring_.head()->referenced.store(false, std::memory_order_relaxed);
      ring_.advance();
    }
    return ring_.head();
  }
  bool evicts_to_admit() const noexcept override { return true; }

 private:
  ring ring_;
};

// Refuses to evict for admission; a shrinking capacity takes the oldest.
class no_evict_order final : public eviction_order {
 public:
  void insert(entry_hook& e) noexcept override { ring_.insert_tail(e); }
  void remove(entry_hook& e) noexcept override { ring_.remove(e); }
  entry_hook* victim() noexcept override { return ring_.head(); }
  bool evicts_to_admit() const noexcept override { return false; }

 private:
  ring ring_;
};

}  // namespace

eviction_order::~eviction_order() = default;

std::unique_ptr<eviction_order> make_eviction_order(cache_policy policy) {
  switch (policy) {
    case cache_policy::lru: return std::make_unique<clock_order>();
    case cache_policy::no_evict: return std::make_unique<no_evict_order>();
  }
  throw error(status::invalid_arguments,
              "cache policy " + std::to_string(static_cast<int>(policy)) + " does not exist");
}

}  // namespace primcache::cache_internal
