#include "primcache/admin/handle_request.hpp"

#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "handlers.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/names.hpp"
#include "primcache_console_assets.hpp"

namespace primcache {

using admin_internal::http::field;
using http_status = boost::beast::http::status;
using admin_internal::http::verb;

admin_response admin_error(const admin_request& request, http_status code,
                           const std::string& message) {
  boost::json::object body;
  body["error"] = message;
  admin_response res{code, request.version()};
  res.set(field::content_type, "application/json");
  res.set(field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.keep_alive(request.keep_alive());
  res.body() = boost::json::serialize(body);
  res.prepare_payload();
  return res;
}

namespace admin_internal {
namespace {

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 1;  // past the leading '/'
  while (i <= path.size()) {
    const std::size_t j = path.find('/', i);
    const std::size_t end = j == std::string_view::npos ? path.size() : j;
    out.push_back(path.substr(i, end - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

// Whether `segments` fit `pattern`; sets `name` to the {name} segment.
bool matches(const route& r, const std::vector<std::string_view>& segments,
             std::string_view& name) {
  if (r.pattern.size() != segments.size()) return false;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (r.pattern[i] == "{name}") {
      name = segments[i];
    } else if (r.pattern[i] != segments[i]) {
      return false;
    }
  }
  return true;
}

admin_response asset(const admin_request& req, std::string_view path) {
  if (path == "/index.html") path = "/";
  for (const auto& a : console_assets()) {
    if (a.path != path) continue;
    admin_response res{http_status::ok, req.version()};
    res.set(field::content_type, std::string(a.content_type));
    res.set(field::cache_control, path == "/" ? "no-store" : "max-age=3600");
    res.set("X-Content-Type-Options", "nosniff");
    res.set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'");
    res.keep_alive(req.keep_alive());
    if (req.method() != verb::head) res.body() = std::string(a.body);
    res.prepare_payload();
    if (req.method() == verb::head) res.content_length(a.body.size());
    return res;
  }
  return admin_error(req, http_status::not_found, "no such page: " + std::string(path));
}

http_status status_of(primcache::status s) {
  switch (s) {
    case primcache::status::not_found: return http_status::not_found;
    case primcache::status::invalid_arguments:
    case primcache::status::already_exists: return http_status::bad_request;
    case primcache::status::permission_denied: return http_status::forbidden;
    default: return http_status::internal_server_error;
  }
}

// Printable ASCII of at most 200 bytes, for error messages.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

admin_response dispatch(const admin_request& req, const admin_context& ctx) {
  const std::string_view target(req.target().data(), req.target().size());
  if (target.empty() || target.front() != '/') {
    return admin_error(req, http_status::bad_request, "the request target must be a path");
  }
  const std::size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
  const auto segments = split_path(path);

  std::string allowed;
  for (const route& r : routes()) {
    std::string_view name;
    if (!matches(r, segments, name)) continue;
    if (r.method != req.method()) {
      if (!allowed.empty()) allowed += ", ";
      allowed += std::string(http::to_string(r.method));
      continue;
    }
    // Authentication first: an unauthenticated POST learns nothing, not even
    // which names are valid.
    if (r.mutating) {
      const auto auth = req.find(field::authorization);
      if (auth == req.end()) {
        admin_response res =
            admin_error(req, http_status::unauthorized,
                        "this request changes state and needs Authorization: Bearer <token>");
        res.set(field::www_authenticate, "Bearer");
        return res;
      }
      const std::string_view value(auth->value().data(), auth->value().size());
      constexpr std::string_view scheme = "Bearer ";
      if (value.substr(0, scheme.size()) != scheme ||
          !token_matches(value.substr(scheme.size()), ctx.token)) {
        admin_response res =
            admin_error(req, http_status::unauthorized, "the bearer token is wrong");
        res.set(field::www_authenticate, "Bearer error=\"invalid_token\"");
        return res;
      }
    }
    if (!name.empty() && !is_valid_control_name(name)) {
      return admin_error(req, http_status::not_found, "'" + shown(name) + "' is not a valid name");
    }
    control_registry& registry = ctx.registry != nullptr ? *ctx.registry : control();
    return r.run(call{req, ctx, registry, name, query});
  }
  if (!allowed.empty()) {
    admin_response res = admin_error(req, http_status::method_not_allowed,
                                     std::string(http::to_string(req.method())) +
                                         " is not allowed on " + shown(path) + "; use " + allowed);
    res.set(field::allow, allowed);
    return res;
  }
  if (path == "/" || path == "/index.html" || path.starts_with("/assets/")) {
    if (req.method() != verb::get && req.method() != verb::head) {
      admin_response res =
          admin_error(req, http_status::method_not_allowed, "the console is read with GET");
      res.set(field::allow, "GET, HEAD");
      return res;
    }
    return asset(req, path);
  }
  return admin_error(req, http_status::not_found, "no route for " + shown(path));
}

}  // namespace
}  // namespace admin_internal

admin_response handle_request(const admin_request& request, const admin_context& context) {
  try {
    return admin_internal::dispatch(request, context);
  } catch (const error& e) {
    return admin_error(request, admin_internal::status_of(e.code()), e.message());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    return admin_error(request, http_status::internal_server_error, e.what());
  }
}

}  // namespace primcache
