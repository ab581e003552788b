#include "handlers.hpp"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "primcache/base/error.hpp"
#include "primcache/base/json_keys.hpp"
#include "primcache/metrics/render.hpp"

namespace primcache::admin_internal {

using http::field;
using http::status;
using http::verb;
namespace json = boost::json;

admin_response json_response(const admin_request& request, std::string body) {
  admin_response res{status::ok, request.version()};
  res.set(field::content_type, "application/json");
  res.set(field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.keep_alive(request.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

namespace {

// A refusal the handler reports as a 4xx; caught by reply().
struct refusal {
  status code;
  std::string message;
};

json::object cache_json(const cache_info& c) {
  json::object o;
  o["name"] = c.name;
  o["unit"] = std::string(to_string(c.unit));
  o["capacity"] = c.capacity;
  o["size"] = c.size;
  if (c.weight_bytes) {
    o["weight_bytes"] = *c.weight_bytes;
  } else {
    o["weight_bytes"] = nullptr;
  }
  o["stats"] = json::object{{"hits", c.stats.hits},
                            {"misses", c.stats.misses},
                            {"waits", c.stats.waits},
                            {"evictions", c.stats.evictions},
                            {"failures", c.stats.failures}};
  json::object extra;
  for (const auto& [k, v] : c.extra) extra[k] = v;
  o["extra"] = std::move(extra);
  return o;
}

json::value setting_value_json(const setting_value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return json::string(std::get<std::string>(v));
}

json::object setting_json(const setting_info& s) {
  json::object o;
  o["name"] = s.name;
  o["description"] = s.description;
  o["type"] = to_string(s.type);
  o["value"] = setting_value_json(s.value);
  if (s.type == setting_type::enumeration) {
    json::array choices;
    for (const auto& c : s.choices) choices.emplace_back(c);
    o["choices"] = std::move(choices);
  }
  if (s.type == setting_type::integer) {
    o["min"] = s.min;
    o["max"] = s.max;
  }
  return o;
}

json::object switch_json(const switch_info& s) {
  return json::object{
      {"name", s.name}, {"description", s.description}, {"on", s.on}, {"initial", s.initial}};
}

json::object event_json(const control_event& e) {
  return json::object{
      {"seq", e.seq},       {"time_unix_ms", e.time_unix_ms}, {"kind", e.kind},    {"name", e.name},
      {"source", e.source}, {"duration_ms", e.duration_ms},   {"detail", e.detail}};
}

// The request body as a JSON object holding `key`.
json::value body_field(const call& c, const char* key) {
  boost::system::error_code ec;
  json::value v = json::parse(c.request.body(), ec);
  if (ec) throw refusal{status::bad_request, "the body is not valid JSON: " + ec.message()};
  // Boost.JSON keeps the last of a key given twice: which one the sender
  // meant is not ours to guess.
  if (const auto d = find_duplicate_json_key(c.request.body())) {
    throw refusal{status::bad_request,
                  "the body has the key \"" + d->key + "\" twice" +
                      (d->object_pointer.empty() ? "" : " (in " + d->object_pointer + ")")};
  }
  const json::object* o = v.if_object();
  if (o == nullptr) throw refusal{status::bad_request, "the body must be a JSON object"};
  const json::value* f = o->if_contains(key);
  if (f == nullptr) {
    throw refusal{status::bad_request, std::string("the body has no \"") + key + "\" field"};
  }
  return *f;
}

template <typename F>
admin_response reply(const call& c, F&& f) {
  try {
    return json_response(c.request, json::serialize(f()));
  } catch (const refusal& r) {
    return admin_error(c.request, r.code, r.message);
  }
}

admin_response get_healthz(const call& c) {
  return reply(c, [&] {
    std::string version = "unknown";
    for (const auto& info : c.registry.list_info()) {
      if (info.name != "build") continue;
      for (const auto& [k, v] : info.labels) {
        if (k == "version") version = v;
      }
    }
    const std::chrono::duration<double> up = std::chrono::steady_clock::now() - c.context.started;
    return json::object{{"status", "ok"}, {"version", version}, {"uptime_seconds", up.count()}};
  });
}

admin_response get_metrics(const call& c) {
  admin_response res{status::ok, c.request.version()};
  res.set(field::content_type, std::string(metrics_content_type));
  res.set(field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.keep_alive(c.request.keep_alive());
  res.body() = render_metrics(c.registry);
  res.prepare_payload();
  return res;
}

admin_response get_caches(const call& c) {
  return reply(c, [&] {
    json::array caches;
    for (const auto& info : c.registry.list_caches()) caches.push_back(cache_json(info));
    return json::object{{"caches", std::move(caches)}};
  });
}

admin_response get_cache(const call& c) {
  return reply(c, [&] { return cache_json(c.registry.find_cache(c.name).info()); });
}

// The body's "capacity": an integer 0 ... admin_max_capacity, else a 400
// saying which.
std::uint64_t capacity_field(const call& c) {
  const json::value v = body_field(c, "capacity");
  std::uint64_t capacity = 0;
  if (const auto* i = v.if_int64()) {
    if (*i < 0) {
      throw refusal{status::bad_request,
                    "capacity " + std::to_string(*i) + " is negative; it must be >= 0"};
    }
    capacity = static_cast<std::uint64_t>(*i);
  } else if (const auto* u = v.if_uint64()) {
    capacity = *u;
  } else {
    throw refusal{status::bad_request, "capacity must be an integer; got " + json::serialize(v)};
  }
  if (capacity > admin_max_capacity) {
    throw refusal{status::bad_request, "capacity " + std::to_string(capacity) +
                                           " is out of range; the largest is 2^53 (" +
                                           std::to_string(admin_max_capacity) + ")"};
  }
  return capacity;
}

admin_response post_capacity(const call& c) {
  return reply(c, [&] {
    const cache_handle cache = c.registry.find_cache(c.name);  // 404 before the body's checks
    cache.set_capacity(capacity_field(c));
    return cache_json(cache.info());
  });
}

// What the capacity would drop, as the cache tells (control's
// preview_capacity); changes nothing. Caches without a preview answer
// "known": false with nulls, and the reader estimates.
admin_response post_capacity_preview(const call& c) {
  return reply(c, [&] {
    const cache_handle cache = c.registry.find_cache(c.name);  // 404 before the body's checks
    const std::uint64_t capacity = capacity_field(c);
    const std::optional<capacity_preview> p = cache.preview_capacity(capacity);
    const cache_info now = cache.info();
    json::object o{{"name", now.name},         {"unit", std::string(to_string(now.unit))},
                   {"capacity", now.capacity}, {"size", now.size},
                   {"new_capacity", capacity}, {"known", p.has_value()}};
    if (p) {
      o["flushes"] = p->flushes;
      o["entries"] = p->entries;
      o["bytes"] = p->bytes;
    } else {
      o["flushes"] = nullptr;
      o["entries"] = nullptr;
      o["bytes"] = nullptr;
    }
    return o;
  });
}

admin_response post_flush(const call& c) {
  return reply(c, [&] {
    const cache_handle cache = c.registry.find_cache(c.name);
    const std::uint64_t before = cache.size();
    cache.flush();
    return json::object{{"flushed_entries", before}, {"cache", cache_json(cache.info())}};
  });
}

admin_response get_switches(const call& c) {
  return reply(c, [&] {
    json::array out;
    for (const auto& s : c.registry.list_switches()) out.push_back(switch_json(s));
    return json::object{{"switches", std::move(out)}};
  });
}

admin_response post_switch(const call& c) {
  return reply(c, [&] {
    (void)c.registry.get_switch(c.name);  // 404 before the body's checks
    const json::value v = body_field(c, "on");
    if (!v.is_bool()) throw refusal{status::bad_request, "\"on\" must be true or false"};
    c.registry.set_switch(c.name, v.get_bool());
    for (const auto& s : c.registry.list_switches()) {
      if (s.name == c.name) return switch_json(s);
    }
    throw error(primcache::status::not_found, "switch '" + std::string(c.name) + "' is gone");
  });
}

admin_response get_settings(const call& c) {
  return reply(c, [&] {
    json::array out;
    for (const auto& s : c.registry.list_settings()) out.push_back(setting_json(s));
    return json::object{{"settings", std::move(out)}};
  });
}

admin_response post_setting(const call& c) {
  return reply(c, [&] {
    (void)c.registry.get_setting(c.name);  // 404 before the body's checks
    const json::value v = body_field(c, "value");
    setting_value value;
    if (const auto* i = v.if_int64()) {
      value = *i;
    } else if (v.is_uint64()) {
      throw refusal{status::bad_request, "value " + json::serialize(v) + " is out of range"};
    } else if (const auto* b = v.if_bool()) {
      value = *b;
    } else if (const auto* s = v.if_string()) {
      value = std::string(s->data(), s->size());
    } else {
      throw refusal{status::bad_request,
                    "value must be an integer, a boolean or a string; got " + json::serialize(v)};
    }
    c.registry.set_setting(c.name, value);
    return setting_json(c.registry.get_setting(c.name));
  });
}

admin_response get_events(const call& c) {
  return reply(c, [&] {
    std::uint64_t since = 0;
    std::string_view q = c.query;
    while (!q.empty()) {
      const std::size_t amp = q.find('&');
      const std::string_view pair = q.substr(0, amp);
      q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
      if (!pair.starts_with("since=")) continue;
      const std::string_view n = pair.substr(6);
      const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), since);
      if (n.empty() || ec != std::errc() || end != n.data() + n.size()) {
        throw refusal{status::bad_request, "since must be a non-negative integer"};
      }
    }
    const event_page page = c.registry.events_since(since);
    json::array events;
    for (const auto& e : page.events) events.push_back(event_json(e));
    return json::object{{"events", std::move(events)}, {"next", page.next}};
  });
}

const route table[] = {
    {verb::get, {"healthz"}, false, get_healthz},
    {verb::get, {"metrics"}, false, get_metrics},
    {verb::get, {"api", "v1", "caches"}, false, get_caches},
    {verb::get, {"api", "v1", "caches", "{name}"}, false, get_cache},
    {verb::post, {"api", "v1", "caches", "{name}", "capacity"}, true, post_capacity},
    {verb::post,
     {"api", "v1", "caches", "{name}", "capacity", "preview"},
     true,
     post_capacity_preview},
    {verb::post, {"api", "v1", "caches", "{name}", "flush"}, true, post_flush},
    {verb::get, {"api", "v1", "switches"}, false, get_switches},
    {verb::post, {"api", "v1", "switches", "{name}"}, true, post_switch},
    {verb::get, {"api", "v1", "settings"}, false, get_settings},
    {verb::post, {"api", "v1", "settings", "{name}"}, true, post_setting},
    {verb::get, {"api", "v1", "events"}, false, get_events},
};

}  // namespace

std::span<const route> routes() {
  return table;
}

}  // namespace primcache::admin_internal
