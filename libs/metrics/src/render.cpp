#include "primcache/metrics/render.hpp"

#include <prometheus/text_serializer.h>

#include "primcache/metrics/control_collector.hpp"

namespace primcache {

std::string render_metrics(const control_registry& registry) {
  return prometheus::TextSerializer().Serialize(control_collector(registry).Collect());
}

}  // namespace primcache
