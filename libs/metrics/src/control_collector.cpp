#include "primcache/metrics/control_collector.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "primcache/control/registry.hpp"

namespace primcache {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric sample(std::vector<ClientMetric::Label> labels, MetricType type, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return m;
}

double capacity_value(std::uint64_t capacity) {
  return capacity == unlimited_capacity ? std::numeric_limits<double>::infinity()
                                        : static_cast<double>(capacity);
}

// The bytes a cache holds: weight() when it has one, else its size when the
// unit is bytes or MB; nothing for caches counted in entries.
bool weight_of(const cache_info& c, double& out) {
  if (c.weight_bytes) {
    out = static_cast<double>(*c.weight_bytes);
    return true;
  }
  if (c.unit == capacity_unit::bytes) {
    out = static_cast<double>(c.size);
    return true;
  }
  if (c.unit == capacity_unit::megabytes) {
    out = static_cast<double>(c.size) * 1048576.0;
    return true;
  }
  return false;
}

void cache_families(const control_registry& registry, std::vector<MetricFamily>& out) {
  std::vector<cache_info> caches;
  try {
    caches = registry.list_caches();
  } catch (...) {
    // A cache's member threw: this scrape has no cache series (declared empty below).
    caches.clear();
  }
  MetricFamily requests{"primcache_cache_requests_total",
                        "Lookups in each registered cache by result: hit, miss (this lookup "
                        "created the value) or wait (waited for another thread's creation).",
                        MetricType::Counter,
                        {}};
  MetricFamily evictions{"primcache_cache_evictions_total",
                         "Entries removed to respect the capacity.",
                         MetricType::Counter,
                         {}};
  MetricFamily failures{
      "primcache_cache_failures_total", "Creations that failed.", MetricType::Counter, {}};
  MetricFamily refusals{"primcache_cache_refusals_total",
                        "Created values the cache's policy did not keep.",
                        MetricType::Counter,
                        {}};
  MetricFamily creation{"primcache_cache_creation_seconds_total",
                        "Time spent creating values on misses, in seconds.",
                        MetricType::Counter,
                        {}};
  MetricFamily entries{"primcache_cache_entries",
                       "Entries held, for caches whose capacity counts entries.",
                       MetricType::Gauge,
                       {}};
  MetricFamily size{
      "primcache_cache_size", "Current size in the cache's capacity unit.", MetricType::Gauge, {}};
  MetricFamily weight{"primcache_cache_weight_bytes",
                      "Bytes held, for caches that are weighed.",
                      MetricType::Gauge,
                      {}};
  MetricFamily capacity{"primcache_cache_capacity",
                        "Capacity in the unit named by the unit label (+Inf: unlimited).",
                        MetricType::Gauge,
                        {}};
  MetricFamily extra{"primcache_cache_extra",
                     "A cache's own extra statistics, by name (stat label).",
                     MetricType::Gauge,
                     {}};
  for (const cache_info& c : caches) {
    const ClientMetric::Label cache{"cache", c.name};
    const auto& s = c.stats;
    requests.metric.push_back(
        sample({cache, {"result", "hit"}}, MetricType::Counter, static_cast<double>(s.hits)));
    requests.metric.push_back(
        sample({cache, {"result", "miss"}}, MetricType::Counter, static_cast<double>(s.misses)));
    requests.metric.push_back(
        sample({cache, {"result", "wait"}}, MetricType::Counter, static_cast<double>(s.waits)));
    evictions.metric.push_back(
        sample({cache}, MetricType::Counter, static_cast<double>(s.evictions)));
    failures.metric.push_back(
        sample({cache}, MetricType::Counter, static_cast<double>(s.failures)));
    refusals.metric.push_back(
        sample({cache}, MetricType::Counter, static_cast<double>(s.refusals)));
    creation.metric.push_back(
        sample({cache}, MetricType::Counter, static_cast<double>(s.creation_ns_total) * 1e-9));
    if (c.unit == capacity_unit::entries) {
      entries.metric.push_back(sample({cache}, MetricType::Gauge, static_cast<double>(c.size)));
    }
    const ClientMetric::Label unit{"unit", std::string(to_string(c.unit))};
    size.metric.push_back(sample({cache, unit}, MetricType::Gauge, static_cast<double>(c.size)));
    double bytes = 0;
    if (weight_of(c, bytes)) weight.metric.push_back(sample({cache}, MetricType::Gauge, bytes));
    capacity.metric.push_back(sample({cache, unit}, MetricType::Gauge, capacity_value(c.capacity)));
    for (const auto& [name, value] : c.extra) {
      extra.metric.push_back(
          sample({cache, {"stat", name}}, MetricType::Gauge, static_cast<double>(value)));
    }
  }
  for (auto* f : {&requests, &evictions, &failures, &refusals, &creation, &entries, &size, &weight,
                  &capacity, &extra}) {
    out.push_back(std::move(*f));
  }
}

// `help` as a HELP line of the text format (0.0.4) holds it: a backslash as
// \\, a newline as \n. prometheus-cpp 1.0.1's TextSerializer writes help
// verbatim (it escapes label values only), and control accepts any UTF-8 help
// text, so without this one help text with either would end its line early or
// start an escape the format lacks, and the whole scrape would fail to parse.
std::string escaped_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void registered_families(const control_registry& registry, std::set<std::string>& taken,
                         std::vector<MetricFamily>& out) {
  for (const metric_family_info& f : registry.list_metrics()) {
    if (!taken.insert(f.name).second) continue;  // a built-in name wins
    MetricFamily fam{
        f.name, f.help.empty() ? f.name : escaped_help(f.help), MetricType::Counter, {}};
    switch (f.kind) {
      case metric_kind::counter: fam.type = MetricType::Counter; break;
      case metric_kind::gauge: fam.type = MetricType::Gauge; break;
      case metric_kind::histogram: fam.type = MetricType::Histogram; break;
    }
    for (const metric_sample& s : f.samples) {
      ClientMetric m;
      for (const auto& [k, v] : s.labels) m.label.push_back({k, v});
      if (f.kind == metric_kind::counter) {
        m.counter.value = s.value;
      } else if (f.kind == metric_kind::gauge) {
        m.gauge.value = s.value;
      } else {
        m.histogram.sample_count = s.count;
        m.histogram.sample_sum = s.sum;
        for (std::size_t i = 0; i < s.cumulative_counts.size(); ++i) {
          const double bound =
              i < f.buckets.size() ? f.buckets[i] : std::numeric_limits<double>::infinity();
          m.histogram.bucket.push_back({s.cumulative_counts[i], bound});
        }
      }
      fam.metric.push_back(std::move(m));
    }
    out.push_back(std::move(fam));
  }
}

}  // namespace

control_collector::control_collector() : registry_(&control()) {}

control_collector::control_collector(const control_registry& registry) noexcept
    : registry_(&registry) {}

std::vector<MetricFamily> control_collector::Collect() const {
  std::vector<MetricFamily> out;
  cache_families(*registry_, out);

  MetricFamily switches{
      "primcache_switch", "Registered switches: 1 on, 0 off.", MetricType::Gauge, {}};
  for (const switch_info& s : registry_->list_switches()) {
    switches.metric.push_back(sample({{"name", s.name}}, MetricType::Gauge, s.on ? 1.0 : 0.0));
  }
  out.push_back(std::move(switches));

  MetricFamily settings{"primcache_setting",
                        "Registered int and bool settings' current values (bool: 1 true).",
                        MetricType::Gauge,
                        {}};
  for (const setting_info& s : registry_->list_settings()) {
    if (const auto* i = std::get_if<std::int64_t>(&s.value)) {
      settings.metric.push_back(
          sample({{"name", s.name}}, MetricType::Gauge, static_cast<double>(*i)));
    } else if (const auto* b = std::get_if<bool>(&s.value)) {
      settings.metric.push_back(sample({{"name", s.name}}, MetricType::Gauge, *b ? 1.0 : 0.0));
    }
  }
  out.push_back(std::move(settings));

  for (const info_labels& info : registry_->list_info()) {
    MetricFamily f{"primcache_" + info.name + "_info",
                   "Information about the " + info.name + " (value always 1).",
                   MetricType::Gauge,
                   {}};
    std::vector<ClientMetric::Label> labels;
    for (const auto& [k, v] : info.labels) labels.push_back({k, v});
    f.metric.push_back(sample(std::move(labels), MetricType::Gauge, 1.0));
    out.push_back(std::move(f));
  }

  std::set<std::string> taken;
  for (const auto& f : out) taken.insert(f.name);
  auto process = collect_process_metrics();
  for (const auto& f : process) taken.insert(f.name);
  registered_families(*registry_, taken, out);
  // The runtime's families are declared even before it registers a series,
  // so dashboards and alerts find them in any process.
  if (taken.insert("primcache_primitive_create_seconds").second) {
    out.push_back({"primcache_primitive_create_seconds",
                   "Time to create a primitive, by engine kind and source (memory, compile).",
                   MetricType::Histogram,
                   {}});
  }
  if (taken.insert("primcache_primitive_executions_total").second) {
    out.push_back({"primcache_primitive_executions_total",
                   "Primitive executions, by kind.",
                   MetricType::Counter,
                   {}});
  }
  for (auto& f : process) out.push_back(std::move(f));
  return out;
}

}  // namespace primcache
