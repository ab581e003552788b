#include "primcache/control/metric.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/base/utf8.hpp"
#include "registry_state.hpp"

namespace primcache {

using control_internal::histogram_series;
using control_internal::metric_family;
using control_internal::metric_series;
using control_internal::quoted;

const char* to_string(metric_kind kind) noexcept {
  switch (kind) {
    case metric_kind::counter: return "counter";
    case metric_kind::gauge: return "gauge";
    case metric_kind::histogram: return "histogram";
  }
  return "unknown";
}

std::vector<double> default_latency_buckets() {
  return {1e-5,   5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
          2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1.0,  2.5,    5.0,  10.0};
}

std::uint64_t metric_counter::value() const noexcept {
  if (cells_ == nullptr) return 0;
  std::uint64_t sum = 0;
  for (const auto& c : cells_->cells) sum += c.value.load(std::memory_order_relaxed);
  return sum;
}

void metric_histogram::observe(double v) const noexcept {
  if (series_ != nullptr) series_->observe(v);
}

namespace control_internal {

histogram_series::histogram_series(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (auto& s : shards_) {
    s.counts = std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1);
    for (std::size_t i = 0; i <= bounds_.size(); ++i) s.counts[i].store(0);
  }
}

void histogram_series::observe(double v) noexcept {
  if (std::isnan(v)) return;
  const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                               bounds_.begin());
  shard& s = shards_[metric_shard()];
  s.counts[bucket].fetch_add(1, std::memory_order_relaxed);
  s.sum.fetch_add(v, std::memory_order_relaxed);
}

void histogram_series::read(std::vector<std::uint64_t>& cumulative, std::uint64_t& count,
                            double& sum) const {
  cumulative.assign(bounds_.size() + 1, 0);
  sum = 0.0;
  for (const auto& s : shards_) {
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative[i] += s.counts[i].load(std::memory_order_relaxed);
    }
    sum += s.sum.load(std::memory_order_relaxed);
  }
  for (std::size_t i = 1; i < cumulative.size(); ++i) cumulative[i] += cumulative[i - 1];
  count = cumulative.back();
}

namespace {

bool metric_char(char c, bool first) noexcept {
  return (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}

// Label values and help texts reach the Prometheus exposition as they are;
// one that is not UTF-8 would make the whole scrape unparseable, so it is
// refused before anything is registered. Throws error(invalid_arguments)
// naming `what` ("metric", "info") `name` and `label` (empty: the help text).
void check_utf8(std::string_view text, std::string_view what, std::string_view name,
                std::string_view label) {
  const std::size_t at = invalid_utf8_at(text);
  if (at == std::string_view::npos) return;
  constexpr std::size_t shown = 64;
  std::string subject = std::string(what) + " " + quoted(name);
  subject += label.empty() ? " help text " : " label " + quoted(label) + " value ";
  throw error(status::invalid_arguments,
              subject + quoted(text.substr(0, shown)) + (text.size() > shown ? "..." : "") +
                  " is not valid UTF-8 (at byte " + std::to_string(at) + ")");
}

}  // namespace

void check_metric_name(std::string_view what, std::string_view name) {
  bool ok = !name.empty() && name.size() <= 200;
  for (std::size_t i = 0; ok && i < name.size(); ++i) ok = metric_char(name[i], i == 0);
  if (!ok) {
    throw error(status::invalid_arguments, std::string(what) + " name " + quoted(name) +
                                               " is not a metric name ([a-z_][a-z0-9_]*)");
  }
}

}  // namespace control_internal

namespace {

// The family for `name`, created on first use; checks kind, labels and
// buckets against an existing one. Returns the series for the label values.
metric_series& get_series(control_internal::registry_state& st, std::string_view name,
                          std::string_view help, metric_kind kind, const metric_labels& labels,
                          std::vector<double> buckets) PRIMCACHE_REQUIRES(st.mu) {
  control_internal::check_metric_name("metric", name);
  control_internal::check_utf8(help, "metric", name, "");
  metric_labels sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> names;
  std::vector<std::string> values;
  for (const auto& [k, v] : sorted) {
    control_internal::check_metric_name("label", k);
    if (k == "le" || (!names.empty() && names.back() == k)) {
      throw error(status::invalid_arguments,
                  "metric " + quoted(name) + " has label " + quoted(k) + " twice or reserved");
    }
    control_internal::check_utf8(v, "metric", name, k);
    names.push_back(k);
    values.push_back(v);
  }
  auto it = st.metrics.find(name);
  if (it == st.metrics.end()) {
    metric_family f;
    f.help = std::string(help);
    f.kind = kind;
    f.label_names = names;
    f.buckets = std::move(buckets);
    it = st.metrics.emplace(std::string(name), std::move(f)).first;
  } else {
    metric_family& f = it->second;
    if (f.kind != kind) {
      throw error(status::already_exists, "metric " + quoted(name) + " is a " + to_string(f.kind) +
                                              ", not a " + to_string(kind));
    }
    if (f.label_names != names) {
      throw error(status::invalid_arguments,
                  "metric " + quoted(name) + " was registered with other label names");
    }
    if (kind == metric_kind::histogram && f.buckets != buckets) {
      throw error(status::invalid_arguments,
                  "histogram " + quoted(name) + " was registered with other buckets");
    }
  }
  metric_family& f = it->second;
  metric_series& s = f.series[values];
  switch (kind) {
    case metric_kind::counter:
      if (!s.counter) s.counter = std::make_shared<control_internal::counter_series>();
      break;
    case metric_kind::gauge:
      if (!s.gauge) s.gauge = std::make_shared<control_internal::gauge_series>();
      break;
    case metric_kind::histogram:
      if (!s.histogram) s.histogram = std::make_shared<histogram_series>(f.buckets);
      break;
  }
  return s;
}

}  // namespace

metric_counter control_registry::counter(std::string_view name, std::string_view help,
                                         const metric_labels& labels) {
  lock_guard g(state_->mu);
  return metric_counter(get_series(*state_, name, help, metric_kind::counter, labels, {}).counter);
}

metric_gauge control_registry::gauge(std::string_view name, std::string_view help,
                                     const metric_labels& labels) {
  lock_guard g(state_->mu);
  return metric_gauge(get_series(*state_, name, help, metric_kind::gauge, labels, {}).gauge);
}

metric_histogram control_registry::histogram(std::string_view name, std::string_view help,
                                             const metric_labels& labels,
                                             std::vector<double> buckets) {
  if (buckets.empty()) buckets = default_latency_buckets();
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i]) || (i > 0 && buckets[i] <= buckets[i - 1])) {
      throw error(status::invalid_arguments,
                  "histogram " + quoted(name) + ": buckets must be finite and ascending");
    }
  }
  lock_guard g(state_->mu);
  return metric_histogram(
      get_series(*state_, name, help, metric_kind::histogram, labels, std::move(buckets))
          .histogram);
}

std::vector<metric_family_info> control_registry::list_metrics() const {
  shared_lock_guard g(state_->mu);
  std::vector<metric_family_info> out;
  out.reserve(state_->metrics.size());
  for (const auto& [name, f] : state_->metrics) {
    metric_family_info info{name, f.help, f.kind, f.buckets, {}};
    info.samples.reserve(f.series.size());
    for (const auto& [values, s] : f.series) {
      metric_sample sample;
      for (std::size_t i = 0; i < values.size(); ++i) {
        sample.labels.emplace_back(f.label_names[i], values[i]);
      }
      switch (f.kind) {
        case metric_kind::counter:
          sample.value = static_cast<double>(metric_counter(s.counter).value());
          break;
        case metric_kind::gauge:
          sample.value = s.gauge->value.load(std::memory_order_relaxed);
          break;
        case metric_kind::histogram:
          s.histogram->read(sample.cumulative_counts, sample.count, sample.sum);
          break;
      }
      info.samples.push_back(std::move(sample));
    }
    out.push_back(std::move(info));
  }
  return out;
}

void control_registry::set_info(std::string_view name, std::string_view key,
                                std::string_view value) {
  control_internal::check_metric_name("info", name);
  control_internal::check_metric_name("info label", key);
  control_internal::check_utf8(value, "info", name, key);
  lock_guard g(state_->mu);
  state_->info[std::string(name)][std::string(key)] = std::string(value);
}

std::vector<info_labels> control_registry::list_info() const {
  shared_lock_guard g(state_->mu);
  std::vector<info_labels> out;
  for (const auto& [name, labels] : state_->info) {
    info_labels i{name, {}};
    for (const auto& [k, v] : labels) i.labels.emplace_back(k, v);
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace primcache
