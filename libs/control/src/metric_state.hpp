// The registry's private metric state: histogram series and the families
// that own every series, guarded by registry_state::mu.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "primcache/control/metric.hpp"

namespace primcache::control_internal {

// Per shard: one count per bucket (the last is +Inf) and the sum, each shard
// on its own cache lines. Counts are per bucket, made cumulative at scrape.
class histogram_series {
 public:
  explicit histogram_series(std::vector<double> bounds);

  void observe(double v) noexcept;
  // Cumulative counts (bounds then +Inf), total count and sum.
  void read(std::vector<std::uint64_t>& cumulative, std::uint64_t& count, double& sum) const;

 private:
  struct alignas(64) shard {
    std::atomic<double> sum{0.0};
    std::unique_ptr<std::atomic<std::uint64_t>[]> counts;
  };
  const std::vector<double> bounds_;
  shard shards_[metric_shards];
};

struct metric_series {
  std::shared_ptr<counter_series> counter;
  std::shared_ptr<gauge_series> gauge;
  std::shared_ptr<histogram_series> histogram;
};

struct metric_family {
  std::string help;
  metric_kind kind = metric_kind::counter;
  std::vector<std::string> label_names;  // sorted
  std::vector<double> buckets;
  // Keyed by the label values in label_names' order.
  std::map<std::vector<std::string>, metric_series> series;
};

}  // namespace primcache::control_internal
