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
  // `e` becomes the head (the next place a search starts).
  void insert_head(entry_hook& e) noexcept {
    insert_tail(e);
    head_ = &e;
  }
  // `e` goes just before `at` (which is in the ring); when `at` is the head,
  // that is the tail.
  void insert_before(entry_hook& e, entry_hook& at) noexcept {
    e.order_prev = at.order_prev;
    e.order_next = &at;
    at.order_prev->order_next = &e;
    at.order_prev = &e;
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
// eviction is amortized O(1). With `weighed_only` the hand also passes over
// entries of weight 0 (in flight, never touched), one step each; they are
// as many as the creations running at once.
class clock_order final : public eviction_order {
 public:
  void insert(entry_hook& e) noexcept override {
    e.referenced.store(false, std::memory_order_relaxed);
    ring_.insert_tail(e);
  }
  void remove(entry_hook& e) noexcept override { ring_.remove(e); }
  entry_hook* victim(bool weighed_only) noexcept override {
    // The first weightless entry passed since the hand last cleared a bit:
    // meeting it again means a whole turn found nothing to evict.
    const entry_hook* first_passed = nullptr;
    for (entry_hook* e = ring_.head(); e != nullptr; e = ring_.head()) {
      if (e->referenced.load(std::memory_order_relaxed)) {
        e->referenced.store(false, std::memory_order_relaxed);
        first_passed = nullptr;
      } else if (!weighed_only || e->weight != 0) {
        return e;
      } else if (e == first_passed) {
        return nullptr;
      } else if (first_passed == nullptr) {
        first_passed = e;
      }
      ring_.advance();
    }
    return nullptr;
  }
  bool evicts_to_admit() const noexcept override { return true; }

 private:
  ring ring_;
};

// Refuses to evict for admission; a shrinking capacity takes the oldest
// (with `weighed_only`, the oldest of weight > 0: the walk passes over the
// entries in flight, as many as the creations running at once).
class no_evict_order final : public eviction_order {
 public:
  void insert(entry_hook& e) noexcept override { ring_.insert_tail(e); }
  void remove(entry_hook& e) noexcept override { ring_.remove(e); }
  entry_hook* victim(bool weighed_only) noexcept override {
    entry_hook* const head = ring_.head();
    if (!weighed_only || head == nullptr) return head;
    entry_hook* e = head;
    do {
      if (e->weight != 0) return e;
      e = e->order_next;
    } while (e != head);
    return nullptr;
  }
  bool evicts_to_admit() const noexcept override { return false; }

 private:
  ring ring_;
};

// Cost-aware: entries sorted by creation time per unit of weight, cheapest
// at the head, so victim() is O(1). Entries in flight (weight 0, cost not yet
// known) sit at the expensive end: evicting them frees no weight. insert()
// walks from the head to the entry's place, O(entries); it runs on misses
// only (twice per creation, which costs far more), never on hits.
class cost_order final : public eviction_order {
 public:
  void insert(entry_hook& e) noexcept override {
    entry_hook* head = ring_.head();
    if (head == nullptr) {
      ring_.insert_tail(e);
      return;
    }
    // The first entry strictly more expensive than e: e goes just before it,
    // after its equals (the oldest of equals stays nearest the head).
    entry_hook* at = head;
    do {
      if (cheaper(e, *at)) break;
      at = at->order_next;
    } while (at != head);
    if (at == head && cheaper(e, *head)) {
      ring_.insert_head(e);
    } else {
      ring_.insert_before(e, *at);
    }
  }
  void remove(entry_hook& e) noexcept override { ring_.remove(e); }
  // Entries of weight 0 sit at the tail: when the head weighs 0, all do.
  entry_hook* victim(bool weighed_only) noexcept override {
    entry_hook* const head = ring_.head();
    if (weighed_only && head != nullptr && head->weight == 0) return nullptr;
    return head;
  }
  bool evicts_to_admit() const noexcept override { return true; }

 private:
  // a.cost / a.weight < b.cost / b.weight, without division or overflow; an
  // entry of weight 0 (in flight) is the most expensive of all.
  static bool cheaper(const entry_hook& a, const entry_hook& b) noexcept {
    if (a.weight == 0) return false;
    if (b.weight == 0) return true;
    // 64 x 64 bits: exact in 128 (a GCC and Clang extension).
    __extension__ typedef unsigned __int128 wide;
    return static_cast<wide>(a.cost_ns) * b.weight < static_cast<wide>(b.cost_ns) * a.weight;
  }

  ring ring_;
};

}  // namespace

eviction_order::~eviction_order() = default;

std::unique_ptr<eviction_order> make_eviction_order(cache_policy policy) {
  switch (policy) {
    case cache_policy::lru: return std::make_unique<clock_order>();
    case cache_policy::no_evict: return std::make_unique<no_evict_order>();
    case cache_policy::cost: return std::make_unique<cost_order>();
  }
  throw error(status::invalid_arguments,
              "cache policy " + std::to_string(static_cast<int>(policy)) + " does not exist");
}

}  // namespace primcache::cache_internal
