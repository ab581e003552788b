// primcache/metrics/control_collector.hpp — a prometheus-cpp Collectable that
// reads a control_registry at scrape time.
//
// Nothing is recorded on any hot path: every value is read when Collect()
// runs, from the caches' own counters, control's sharded metrics, switches,
// settings and info labels, and /proc for the process. The series and their
// meaning are listed in docs/metrics.md; they are stable. Registered help
// texts come escaped for the text format (backslash as \\, newline as \n),
// since prometheus-cpp's TextSerializer writes help verbatim; label values
// are left to the serializer, which escapes them.
//
//   primcache::control_collector collector;                 // primcache::control()
//   std::vector<prometheus::MetricFamily> families = collector.Collect();
//   // or, with prometheus-cpp's Exposer: exposer.RegisterCollectable(ptr);
//
// Thread-safety: Collect() may be called from any thread at once. The
// registry must outlive the collector. Exceptions: std::bad_alloc; when a
// cache's member throws during a scrape, that scrape has no cache series (the
// families are still declared) and the rest is exported.
#pragma once

#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "primcache/base/export.hpp"

namespace primcache {

class control_registry;

class PRIMCACHE_API control_collector : public prometheus::Collectable {
 public:
  // Reads primcache::control().
  control_collector();
  explicit control_collector(const control_registry& registry) noexcept;

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const control_registry* registry_;
};

// The process metrics alone (process_cpu_seconds_total, ...), from /proc;
// empty where /proc is not readable.
PRIMCACHE_API std::vector<prometheus::MetricFamily> collect_process_metrics();

}  // namespace primcache
