// The admin API's handlers and the route table that names them (private).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/admin/handle_request.hpp"
#include "primcache/control/registry.hpp"

namespace primcache::admin_internal {

namespace http = boost::beast::http;

// What a handler gets: the request, the context, the registry and the
// {name} segment of the path (empty for routes without one).
struct call {
  const admin_request& request;
  const admin_context& context;
  control_registry& registry;
  std::string_view name;
  std::string_view query;
};

using handler = admin_response (*)(const call&);

struct route {
  http::verb method;
  // Segments of the path; "{name}" matches one control name.
  std::vector<std::string_view> pattern;
  bool mutating;  // needs the bearer token
  handler run;
};

// Every route of the API, in docs/admin.md's order.
std::span<const route> routes();

admin_response json_response(const admin_request& request, std::string body);

// True when `given` is the token; compares in time independent of where they
// differ (the length is not secret).
bool token_matches(std::string_view given, std::string_view token) noexcept;

}  // namespace primcache::admin_internal
