// primcache/metrics/render.hpp — the Prometheus text exposition (format
// 0.0.4) of a control_registry, as the admin server's GET /metrics serves it.
//
//   std::string body = primcache::render_metrics(primcache::control());
//   // response header: Content-Type: primcache::metrics_content_type
//
// Thread-safety: may be called from any thread at once. Exceptions:
// std::bad_alloc.
#pragma once

#include <string>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

class control_registry;

inline constexpr std::string_view metrics_content_type = "text/plain; version=0.0.4";

// control_collector(registry).Collect() through prometheus::TextSerializer.
PRIMCACHE_API std::string render_metrics(const control_registry& registry);

}  // namespace primcache
