// kernels/conv_schedule.hpp — how a convolution's work items are shared
// among the shares of one parallel region.
//
// Each share has a home range of the items (balance(items, home, shares),
// the split a static schedule would give it), takes chunks from its front
// while any are left, then takes chunks from the back of the other ranges
// still unfinished. So a share whose thread starts late (a worker woken
// from sleep, or descheduled on a loaded machine) loses only the items the
// others have already taken instead of leaving the region waiting for all
// of its range, and the caller, running every share inline when no worker
// comes, still runs every item once. Which items a share runs changes
// nothing in any output: every item writes its own outputs, each summed in
// the kernel's fixed order.
//
// conv_home_for_this_thread picks a share's home so that the same thread
// gets the same home in every region of a kernel (the calling thread home
// 0, a worker a home from its ordinal): an item then runs on the core whose
// caches the previous execution left its rows and outputs in, which a
// schedule by share index (whichever thread claims a share first) does not
// give.
//
//   conv_item_schedule s(items, nthr, conv_chunk_for(items, nthr, item_fmas));
//   pool.parallel_for(nthr, [&](int ithr, int n) {
//     const int home = s.claim_home(conv_home_for_this_thread(caller, n), ithr);
//     for (range r = s.next(home); r.begin < r.end; r = s.next(home)) run(r);
//   });
//
// Thread-safety: next() and claim_home() may be called from any number of
// threads at once (lock-free). Exceptions: the constructor may throw
// std::bad_alloc (more than 8 shares).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "primcache/runtime/thread_pool.hpp"

namespace primcache::cpu_internal {

class conv_item_schedule {
 public:
  // `items` < 2^31 (the kernel falls back to balance() above), shares >= 1,
  // chunk >= 1.
  conv_item_schedule(std::int64_t items, int shares, std::int64_t chunk)
      : shares_(std::max(shares, 1)),
        chunk_(std::max<std::int64_t>(chunk, 1)),
        heap_(shares_ > kInlineShares ? new slot[static_cast<std::size_t>(shares_)] : nullptr),
        ranges_(heap_ ? heap_.get() : inline_) {
    for (int i = 0; i < shares_; ++i) {
      const range r = balance(items, i, shares_);
      ranges_[static_cast<std::size_t>(i)].be.store(pack(r.begin, r.end),
                                                    std::memory_order_relaxed);
    }
  }

  // Share i's home is [bounds[i], bounds[i + 1]) (a conv_walk's cells:
  // bounds ascending, the last < 2^31); shares = bounds.size() - 1 >= 1.
  conv_item_schedule(const std::vector<std::int64_t>& bounds, std::int64_t chunk)
      : shares_(std::max(static_cast<int>(bounds.size()) - 1, 1)),
        chunk_(std::max<std::int64_t>(chunk, 1)),
        heap_(shares_ > kInlineShares ? new slot[static_cast<std::size_t>(shares_)] : nullptr),
        ranges_(heap_ ? heap_.get() : inline_) {
    for (int i = 0; i < shares_; ++i) {
      const auto at = static_cast<std::size_t>(i);
      const std::int64_t b = at + 1 < bounds.size() ? bounds[at] : 0;
      const std::int64_t e = at + 1 < bounds.size() ? bounds[at + 1] : 0;
      ranges_[at].be.store(pack(b, e), std::memory_order_relaxed);
    }
  }

  // ranges_ may point into the object itself.
  conv_item_schedule(const conv_item_schedule&) = delete;
  conv_item_schedule& operator=(const conv_item_schedule&) = delete;

  int shares() const noexcept { return shares_; }

  // The home of a share that prefers `preferred`: that one if no share has
  // it yet, else the lowest one free, else `fallback` (every home taken:
  // the share only helps with what is left). Homes past 63 are not
  // tracked: `preferred` is returned.
  int claim_home(int preferred, int fallback) noexcept {
    preferred = std::clamp(preferred, 0, shares_ - 1);
    if (shares_ > 64) return preferred;
    const std::uint64_t bit = std::uint64_t{1} << preferred;
    std::uint64_t was = homes_.fetch_or(bit, std::memory_order_relaxed);
    if ((was & bit) == 0) return preferred;
    const std::uint64_t all = shares_ == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << shares_) - 1;
    while ((was & all) != all) {
      const int free = std::countr_zero(~was);
      const std::uint64_t b = std::uint64_t{1} << free;
      was = homes_.fetch_or(b, std::memory_order_relaxed);
      if ((was & b) == 0) return free;
    }
    return std::clamp(fallback, 0, shares_ - 1);
  }

  // The next chunk for the share at `home`: from the front of its range,
  // else from the back of another's (the nearest after it first). Empty
  // (begin == end) when every item is taken.
  range next(int home) noexcept {
    home = std::clamp(home, 0, shares_ - 1);
    if (const range r = take(home, true); r.begin < r.end) return r;
    for (int i = 1; i < shares_; ++i) {
      if (const range r = take((home + i) % shares_, false); r.begin < r.end) return r;
    }
    return {0, 0};
  }

 private:
  struct alignas(64) slot {
    std::atomic<std::uint64_t> be{0};  // begin << 32 | end
  };
  static std::uint64_t pack(std::int64_t b, std::int64_t e) noexcept {
    return static_cast<std::uint64_t>(b) << 32 | static_cast<std::uint64_t>(e);
  }

  range take(int i, bool front) noexcept {
    std::atomic<std::uint64_t>& be = ranges_[static_cast<std::size_t>(i)].be;
    std::uint64_t v = be.load(std::memory_order_relaxed);
    for (;;) {
      const auto b = static_cast<std::int64_t>(v >> 32);
      const auto e = static_cast<std::int64_t>(v & 0xffffffffu);
      if (b >= e) return {0, 0};
      const range r = front ? range{b, std::min(b + chunk_, e)} : range{std::max(e - chunk_, b), e};
      const std::uint64_t rest = front ? pack(r.end, e) : pack(b, r.begin);
      if (be.compare_exchange_weak(v, rest, std::memory_order_relaxed)) return r;
    }
  }

  int shares_;
  std::int64_t chunk_;
  // Up to kInlineShares ranges live in the schedule itself (on the
  // executing thread's stack): no allocation per execution on the usual
  // thread counts.
  static constexpr int kInlineShares = 8;
  slot inline_[kInlineShares];
  std::unique_ptr<slot[]> heap_;
  slot* ranges_;
  std::atomic<std::uint64_t> homes_{0};
};

// The fewest vector multiply-adds a chunk of items holds (conv_chunk_for):
// 4096 by default. A measuring hook (dw_object_ab --threads, the tests) may
// change it; the library never does.
inline std::atomic<std::int64_t> conv_chunk_min_fmas{4096};

// Items per chunk: about a sixteenth of a home range (items / shares), and
// at least enough items of `item_fmas` vector multiply-adds each for
// conv_chunk_min_fmas, but no more than a home range. Each chunk pays a
// call of the generated function (its set-up: the first item's indices,
// the bias, the pointers) and a claim on a range that another share may be
// claiming from at the same moment. On items of a few hundred
// multiply-adds (a row of a small depthwise convolution) a sixteenth of a
// home range is a chunk of well under a microsecond, and those costs took
// 5-10% of a 2-thread execution (docs/PERFORMANCE.md, "Chunks of work, not
// of items").
inline std::int64_t conv_chunk_for(std::int64_t items, int shares, std::int64_t item_fmas) {
  const std::int64_t n = std::max(shares, 1);
  const std::int64_t home = std::max<std::int64_t>(1, (items + n - 1) / n);
  const std::int64_t per_item = std::max<std::int64_t>(item_fmas, 1);
  const std::int64_t for_work =
      (conv_chunk_min_fmas.load(std::memory_order_relaxed) + per_item - 1) / per_item;
  return std::clamp<std::int64_t>(std::max(items / (n * 16), for_work), 1, home);
}

// The home a share running on this thread prefers: 0 on `caller` (the
// thread that started the region), else 1 + this thread's ordinal (the
// order in which threads first asked) modulo shares - 1.
inline int conv_home_for_this_thread(std::thread::id caller, int shares) {
  if (shares <= 1 || std::this_thread::get_id() == caller) return 0;
  static std::atomic<int> next_ordinal{0};
  thread_local const int ordinal = next_ordinal.fetch_add(1, std::memory_order_relaxed);
  return 1 + ordinal % (shares - 1);
}

}  // namespace primcache::cpu_internal
