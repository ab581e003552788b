// primcache/control/metric.hpp — named counters, gauges and histograms that
// libraries record and metrics exports, read at scrape time.
//
// A series is a metric name plus fixed label values. control_registry's
// counter(), gauge() and histogram() create a series on first call and return
// the same series on every later call with the same name and labels, so a
// library asks once (at start, or in a function-local static) and keeps the
// handle; recording through the handle never locks and never allocates:
//
//   // once (the runtime, for each engine kind and source it will report):
//   static primcache::metric_histogram compile_seconds = primcache::control().histogram(
//       "primcache_primitive_create_seconds", "Time to create a primitive, by source",
//       {{"engine", "cpu"}, {"source", "compile"}});
//   static primcache::metric_counter matmuls = primcache::control().counter(
//       "primcache_primitive_executions_total", "Primitive executions", {{"kind", "matmul"}});
//   // on the creation path / execution path:
//   compile_seconds.observe(1.2e-3);   // seconds
//   matmuls.add();                     // one relaxed fetch_add on this thread's shard
//
// A series exists (and is exported, as 0) from its first registration, so
// register every series you will report at start.
//
// Counters and histograms are sharded: each thread adds to one of
// metric_shards cache-line-sized cells with relaxed atomics, and a scrape sums
// the shards. A gauge is one atomic double (set/add). Relaxed order suffices:
// the values are statistics, read without any ordering against other data.
//
// Names: metric and label names are [a-z_][a-z0-9_]* (the Prometheus rules
// within control's [a-z0-9_.-]); label values and help texts are any UTF-8
// text. A label value or help text that is not valid UTF-8 (a stray or
// missing continuation byte, an overlong form, a surrogate, a code point past
// U+10FFFF: Latin-1 "r\xe9sum\xe9", say) throws error(invalid_arguments)
// naming the metric and the label, and registers nothing: the exposition
// would otherwise fail to parse as a whole (set_info's values likewise). One
// name has one kind, one label-name set and (histograms) one bucket list:
// asking again with another kind throws error(already_exists), with other
// label names or buckets error(invalid_arguments). The help text is the
// first registration's; metrics escapes it for the exposition.
//
// Thread-safety: handles may be copied and used from any thread at once;
// a default-constructed handle records nothing. Exceptions: registration
// throws primcache::error as above; recording never throws.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "primcache/base/export.hpp"

namespace primcache {

// (name, value) pairs; stored sorted by name.
using metric_labels = std::vector<std::pair<std::string, std::string>>;

enum class metric_kind : int { counter = 0, gauge = 1, histogram = 2 };

// "counter", "gauge", "histogram".
PRIMCACHE_API const char* to_string(metric_kind kind) noexcept;

// Upper bounds in seconds from 10 µs to 10 s, for creation times.
PRIMCACHE_API std::vector<double> default_latency_buckets();

namespace control_internal {

inline constexpr std::size_t metric_shards = 16;

// The shard this thread records into: threads are numbered in the order they
// first record, so neighbouring threads use different cells.
inline std::size_t metric_shard() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t shard =
      next.fetch_add(1, std::memory_order_relaxed) % metric_shards;
  return shard;
}

struct alignas(64) counter_cell {
  std::atomic<std::uint64_t> value{0};
};
struct counter_series {
  counter_cell cells[metric_shards];
};
struct gauge_series {
  std::atomic<double> value{0.0};
};
class histogram_series;

}  // namespace control_internal

class PRIMCACHE_API metric_counter {
 public:
  metric_counter() noexcept = default;
  void add(std::uint64_t n = 1) const noexcept {
    if (cells_ != nullptr) {
      cells_->cells[control_internal::metric_shard()].value.fetch_add(n, std::memory_order_relaxed);
    }
  }
  // The sum over shards now (a scrape's reading).
  std::uint64_t value() const noexcept;

 private:
  friend class control_registry;
  explicit metric_counter(std::shared_ptr<control_internal::counter_series> s) noexcept
      : series_(std::move(s)), cells_(series_.get()) {}
  std::shared_ptr<control_internal::counter_series> series_;
  control_internal::counter_series* cells_ = nullptr;
};

class PRIMCACHE_API metric_gauge {
 public:
  metric_gauge() noexcept = default;
  void set(double v) const noexcept {
    if (cell_ != nullptr) cell_->value.store(v, std::memory_order_relaxed);
  }
  void add(double d) const noexcept {
    if (cell_ != nullptr) cell_->value.fetch_add(d, std::memory_order_relaxed);
  }
  double value() const noexcept {
    return cell_ != nullptr ? cell_->value.load(std::memory_order_relaxed) : 0.0;
  }

 private:
  friend class control_registry;
  explicit metric_gauge(std::shared_ptr<control_internal::gauge_series> s) noexcept
      : series_(std::move(s)), cell_(series_.get()) {}
  std::shared_ptr<control_internal::gauge_series> series_;
  control_internal::gauge_series* cell_ = nullptr;
};

class PRIMCACHE_API metric_histogram {
 public:
  metric_histogram() noexcept = default;
  // Counts v in the first bucket whose upper bound is >= v (+Inf past the
  // last) and adds it to the sum. NaN is ignored.
  void observe(double v) const noexcept;

 private:
  friend class control_registry;
  explicit metric_histogram(std::shared_ptr<control_internal::histogram_series> s) noexcept
      : series_(std::move(s)) {}
  std::shared_ptr<control_internal::histogram_series> series_;
};

// One series at one scrape.
struct metric_sample {
  metric_labels labels;
  double value = 0.0;  // counter, gauge
  // histogram: cumulative counts for each upper bound of the family, then
  // +Inf (== count); and the sum of observed values.
  std::vector<std::uint64_t> cumulative_counts;
  std::uint64_t count = 0;
  double sum = 0.0;
};

// One metric name and its series (list_metrics), series ordered by labels.
struct metric_family_info {
  std::string name;
  std::string help;
  metric_kind kind = metric_kind::counter;
  std::vector<double> buckets;  // histogram upper bounds, ascending, finite
  std::vector<metric_sample> samples;
};

}  // namespace primcache
