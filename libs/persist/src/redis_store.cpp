#include "primcache/persist/redis_store.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <utility>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "redis_connection.hpp"

namespace primcache {
namespace {

using persist_internal::io_failure;
using persist_internal::io_outcome;
using persist_internal::max_value_bytes;
using persist_internal::redis_connection;
using persist_internal::redis_reply;
using persist_internal::steady;

constexpr std::string_view url_form =
    "redis[s]://[[USER]:PASSWORD@]HOST[:PORT]/PREFIX[?NAME=VALUE&...]";

}  // namespace

// Anything up to the last '@' is credentials: neither the host, the prefix
// nor a parameter may hold one.
std::string redact_redis_url(std::string_view url) {
  const std::size_t at = url.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  const std::size_t scheme = url.find("://");
  const std::size_t begin = scheme != std::string_view::npos && scheme < at ? scheme + 3 : 0;
  return std::string(url.substr(0, begin)) + "***" + std::string(url.substr(at));
}

namespace {

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
  throw error(status::invalid_arguments, "persistent cache redis URL '" + redact_redis_url(url) +
                                             "': " + why + " (expected " + std::string(url_form) +
                                             ")");
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX-decodes a user name or password; false on a bad escape.
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

bool prefix_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '/' || c == '-';
}

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-';
}

std::string check_prefix(std::string_view p) {
  if (p.empty()) return "the prefix is empty";
  if (p.size() > 200) return "the prefix is longer than 200 characters";
  for (char c : p) {
    if (!prefix_char(c)) {
      return std::string("the prefix has '") + c + "' (allowed: A-Z a-z 0-9 _ . : / -)";
    }
  }
  return {};
}

std::string_view as_view(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::uint64_t megabytes_to_bytes(std::uint64_t m) {
  return m > (UINT64_MAX >> 20) ? UINT64_MAX : m << 20;
}

}  // namespace

redis_store_options parse_redis_url(std::string_view url, redis_store_options base) {
  const bool tls = url.starts_with("rediss://");
  if (!tls && !url.starts_with("redis://")) bad_url(url, "the scheme is not redis:// or rediss://");
  std::string_view rest = url.substr(tls ? 9 : 8);
  // Credentials: everything up to the last '@' ([USER]:PASSWORD, %XX-escaped).
  std::string user, password;
  bool has_credentials = false;
  if (std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const std::size_t colon = credentials.find(':');
    if (colon == std::string_view::npos) {
      bad_url(url, "the credentials have no ':' before the password ([USER]:PASSWORD@)");
    }
    if (!percent_decode(credentials.substr(0, colon), user) ||
        !percent_decode(credentials.substr(colon + 1), password)) {
      bad_url(url, "the credentials have a bad %XX escape");
    }
    if (password.empty()) bad_url(url, "the password is empty");
    has_credentials = true;
  }
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) bad_url(url, "there is no /PREFIX");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = rest.substr(slash + 1);
  std::string_view query;
  if (std::size_t q = path.find('?'); q != std::string_view::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
    if (query.empty()) bad_url(url, "the query after '?' is empty");
  }
  // Host, and the port after the last ':' (outside brackets).
  std::string_view host = authority;
  std::string_view port_text;
  if (authority.starts_with('[')) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) bad_url(url, "an IPv6 host lacks its ']'");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad_url(url, "unexpected characters after the IPv6 host");
      port_text = after.substr(1);
      if (port_text.empty()) bad_url(url, "the port is empty");
    }
    if (host.empty()) bad_url(url, "the host is empty");
    for (char c : host) {
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) {
        bad_url(url, "the IPv6 host has '" + std::string(1, c) + "'");
      }
    }
  } else {
    if (std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) bad_url(url, "the port is empty");
    }
    if (host.empty()) bad_url(url, "the host is empty");
    for (char c : host) {
      if (!host_char(c)) bad_url(url, "the host has '" + std::string(1, c) + "'");
    }
  }
  int port = 6379;
  if (!port_text.empty()) {
    result<std::int64_t> p = parse_int(port_text, 1, 65535);
    if (!p) bad_url(url, "the port '" + std::string(port_text) + "' is not in 1-65535");
    port = static_cast<int>(p.value());
  }
  if (std::string why = check_prefix(path); !why.empty()) bad_url(url, why);

  redis_store_options out = std::move(base);
  out.tls = tls;
  out.host = std::string(host);
  out.port = port;
  out.prefix = std::string(path);
  if (has_credentials) {
    out.username = std::move(user);
    out.password = std::move(password);
  }

  std::vector<std::string_view> seen;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (amp != std::string_view::npos && query.empty()) bad_url(url, "the query ends with '&'");
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      bad_url(url, "the parameter '" + std::string(item) + "' is not NAME=VALUE");
    }
    std::string_view name = item.substr(0, eq);
    std::string_view value = item.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      bad_url(url, "the parameter " + std::string(name) + " is given twice");
    }
    seen.push_back(name);
    auto number = [&](std::int64_t lo, std::int64_t hi) {
      result<std::int64_t> v = parse_int(value, lo, hi);
      if (!v) {
        bad_url(url, "the parameter " + std::string(name) + "='" + std::string(value) +
                         "' is not an integer in " + std::to_string(lo) + "-" + std::to_string(hi));
      }
      return v.value();
    };
    if (name == "ttl") {
      out.ttl_seconds = static_cast<std::uint32_t>(number(0, INT32_MAX));
    } else if (name == "connect_timeout_ms") {
      out.connect_timeout = std::chrono::milliseconds(number(1, 60000));
    } else if (name == "command_timeout_ms") {
      out.command_timeout = std::chrono::milliseconds(number(1, 60000));
    } else if (name == "reply_spin_us") {
      out.reply_spin = std::chrono::microseconds(number(0, 100000));
    } else if (name == "breaker_failures") {
      out.breaker.failure_threshold = static_cast<std::uint32_t>(number(1, 1000));
    } else if (name == "breaker_cool_down_ms") {
      out.breaker.cool_down = std::chrono::milliseconds(number(1, 3600000));
    } else if (name == "tls_ca_file" || name == "tls_cert_file" || name == "tls_key_file" ||
               name == "tls_server_name") {
      if (!tls) bad_url(url, "the parameter " + std::string(name) + " needs rediss://");
      std::string text;
      if (!percent_decode(value, text) || text.empty() || text.find('\0') != std::string::npos) {
        bad_url(url, "the parameter " + std::string(name) + " is empty or has a bad %XX escape");
      }
      (name == "tls_ca_file"     ? out.tls_ca_file
       : name == "tls_cert_file" ? out.tls_cert_file
       : name == "tls_key_file"  ? out.tls_key_file
                                 : out.tls_server_name) = std::move(text);
    } else {
      bad_url(url, "unknown parameter " + std::string(name) +
                       " (known: ttl, connect_timeout_ms, command_timeout_ms, reply_spin_us, "
                       "breaker_failures, "
                       "breaker_cool_down_ms; with rediss://: tls_ca_file, tls_cert_file, "
                       "tls_key_file, tls_server_name)");
    }
  }
  return out;
}

struct redis_store::state {
  redis_store_options options;
  std::vector<persist_internal::socket_address> addresses;
  std::unique_ptr<persist_internal::tls_context> tls;  // rediss://
  persist_internal::tls_peer peer;                     // context: tls.get()
  std::atomic<std::uint64_t> capacity_mb{0};
  circuit_breaker breaker;

  mutex pool_mu;
  std::vector<std::unique_ptr<redis_connection>> idle PRIMCACHE_GUARDED_BY(pool_mu);

  std::atomic<std::uint64_t> hits{0}, misses{0}, writes{0}, bytes_read{0}, bytes_written{0},
      corrupt{0}, refusals{0}, remote_errors{0}, timeouts{0};

  explicit state(const redis_store_options& o) : options(o), breaker(o.breaker) {}

  std::string where() const {
    return std::string(options.tls ? "rediss " : "redis ") + options.host + ":" +
           std::to_string(options.port) + "/" + options.prefix;
  }

  std::unique_ptr<redis_connection> take_idle() PRIMCACHE_EXCLUDES(pool_mu) {
    lock_guard g(pool_mu);
    if (idle.empty()) return nullptr;
    std::unique_ptr<redis_connection> c = std::move(idle.back());
    idle.pop_back();
    return c;
  }

  void give_back(std::unique_ptr<redis_connection> c) PRIMCACHE_EXCLUDES(pool_mu) {
    lock_guard g(pool_mu);
    if (idle.size() < options.max_idle_connections) idle.push_back(std::move(c));
    // else: closed here (c's destructor)
  }

  void drop_idle() PRIMCACHE_EXCLUDES(pool_mu) {
    std::vector<std::unique_ptr<redis_connection>> old;
    {
      lock_guard g(pool_mu);
      old.swap(idle);
    }
    // closed here, outside the lock
  }

  enum class outcome { ok, rejected, failed };

  // Runs one command under the breaker and the deadline `until`; `out` is
  // the reply when ok. Error replies are failures (counted) that do not
  // count against the breaker; `why` says what went wrong.
  outcome call(std::initializer_list<std::string_view> argv, steady::time_point until,
               redis_reply& out, std::string& why) {
    return call(std::span<const std::string_view>(argv.begin(), argv.size()), until, out, why);
  }
  outcome call(std::span<const std::string_view> args, steady::time_point until, redis_reply& out,
               std::string& why) {
    circuit_breaker::ticket t = breaker.try_acquire();
    if (!t) {
      why = where() + " is not asked: its circuit breaker is open after " +
            std::to_string(options.breaker.failure_threshold) + " failures in a row";
      return outcome::rejected;
    }
    for (int attempt = 0;; ++attempt) {
      std::unique_ptr<redis_connection> c = take_idle();
      const bool reused = c != nullptr;
      io_outcome io;
      bool refused = false;
      if (!c) {
        c = redis_connection::connect(
            addresses, std::min(until, steady::now() + options.connect_timeout), io, peer);
        if (c) c->set_reply_spin(options.reply_spin);
        if (c && !options.password.empty()) io = authenticate(*c, until, out, refused);
      }
      if (c && io.ok() && !refused) io = c->command(args, until, out);
      if (io.ok() && refused) {
        // The server answered AUTH at once, with an error: no breaker trip,
        // and the connection is not kept (it is not authenticated).
        breaker.report(t, true);
        remote_errors.fetch_add(1, std::memory_order_relaxed);
        why = where() + ": AUTH refused: " + std::string(out.str);
        return outcome::failed;
      }
      if (io.ok()) {
        give_back(std::move(c));
        breaker.report(t, true);
        if (out.type == redis_reply::kind::error) {
          remote_errors.fetch_add(1, std::memory_order_relaxed);
          why = where() + ": " + std::string(out.str);
          return outcome::failed;
        }
        return outcome::ok;
      }
      c.reset();
      drop_idle();  // after a restart every pooled connection is stale
      if (reused && attempt == 0 && io.failure == io_failure::closed && steady::now() < until) {
        continue;  // a stale pooled connection: once more on a fresh one
      }
      remote_errors.fetch_add(1, std::memory_order_relaxed);
      if (io.failure == io_failure::timeout) timeouts.fetch_add(1, std::memory_order_relaxed);
      breaker.report(t, false);
      why = where() + ": " + io.message;
      return outcome::failed;
    }
  }

  steady::time_point deadline() const {
    return steady::now() + options.connect_timeout + options.command_timeout;
  }

  // AUTH [USER] PASSWORD on a fresh connection; `refused` when the server
  // answered with an error (a wrong password, or none configured there).
  io_outcome authenticate(redis_connection& c, steady::time_point until, redis_reply& reply,
                          bool& refused) {
    io_outcome io =
        options.username.empty()
            ? c.command(std::initializer_list<std::string_view>{"AUTH", options.password}, until,
                        reply)
            : c.command(std::initializer_list<std::string_view>{"AUTH", options.username,
                                                                options.password},
                        until, reply);
    refused = io.ok() && reply.type == redis_reply::kind::error;
    return io;
  }

  // size(): one walker at a time (who set `walking`); the figure and the
  // walk's resumable position are guarded by size_mu, held only between
  // round trips, never during one.
  std::atomic<bool> walking{false};
  std::atomic<bool> stale{true};  // this store put, erased or cleared since the walk began
  mutex size_mu;
  std::uint64_t figure PRIMCACHE_GUARDED_BY(size_mu) = 0;
  bool have_figure PRIMCACHE_GUARDED_BY(size_mu) = false;
  steady::time_point figure_at PRIMCACHE_GUARDED_BY(size_mu);
  bool walk_started PRIMCACHE_GUARDED_BY(size_mu) = false;
  std::string walk_cursor PRIMCACHE_GUARDED_BY(size_mu);
  std::uint64_t walk_bytes PRIMCACHE_GUARDED_BY(size_mu) = 0;

  std::uint64_t current_figure() PRIMCACHE_EXCLUDES(size_mu) {
    lock_guard g(size_mu);
    return figure;
  }

  bool figure_fresh() PRIMCACHE_EXCLUDES(size_mu) {
    lock_guard g(size_mu);
    return have_figure && !stale.load(std::memory_order_acquire) &&
           steady::now() - figure_at < options.size_refresh;
  }

  // One SCAN batch per round trip: the cursor, and the summed lengths of the
  // string values under keys of an entry's length (PREFIX:<32 hex>); other
  // types are skipped.
  static constexpr std::string_view walk_script =
      "local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3]) "
      "local n = tonumber(ARGV[4]) local b = 0 "
      "for _, k in ipairs(r[2]) do if #k == n then "
      "local l = redis.pcall('STRLEN', k) if type(l) == 'number' then b = b + l end "
      "end end return {r[1], b}";

  // Walks (or resumes the walk) until it completes or `budget_end` passes;
  // called by the one walker. A failed round trip abandons the walk (the
  // next one starts over: a cursor may not survive a server restart).
  void walk(steady::time_point budget_end) PRIMCACHE_EXCLUDES(size_mu) {
    std::string cursor = "0";
    std::uint64_t bytes = 0;
    {
      lock_guard g(size_mu);
      if (walk_started) {
        cursor = walk_cursor;
        bytes = walk_bytes;
      } else {
        walk_started = true;
        stale.store(false, std::memory_order_release);
      }
    }
    const std::string pattern = options.prefix + ":*";
    const std::string key_length = std::to_string(options.prefix.size() + 1 + 32);
    for (;;) {
      redis_reply r;
      std::string why;
      const bool ok = call({"EVAL", walk_script, "0", cursor, pattern, "1000", key_length},
                           deadline(), r, why) == outcome::ok &&
                      r.type == redis_reply::kind::array && r.elements.size() == 2 &&
                      r.elements[0].type == redis_reply::kind::string &&
                      r.elements[1].type == redis_reply::kind::integer &&
                      r.elements[1].integer >= 0;
      lock_guard g(size_mu);
      if (!ok) {
        walk_started = false;
        return;
      }
      cursor = std::string(r.elements[0].str);
      bytes += static_cast<std::uint64_t>(r.elements[1].integer);
      if (cursor == "0") {
        figure = bytes;
        have_figure = true;
        figure_at = steady::now();
        walk_started = false;
        return;
      }
      if (steady::now() >= budget_end) {
        walk_cursor = cursor;
        walk_bytes = bytes;
        return;
      }
    }
  }
};

redis_store::redis_store(std::unique_ptr<state> s) : s_(std::move(s)) {}
redis_store::~redis_store() = default;

std::unique_ptr<redis_store> redis_store::open(redis_store_options options) {
  if (options.host.empty())
    throw error(status::invalid_arguments, "redis store: the host is empty");
  if (options.port < 1 || options.port > 65535) {
    throw error(status::invalid_arguments,
                "redis store: the port " + std::to_string(options.port) + " is not in 1-65535");
  }
  if (std::string why = check_prefix(options.prefix); !why.empty()) {
    throw error(status::invalid_arguments, "redis store: " + why);
  }
  if (options.connect_timeout.count() <= 0 || options.command_timeout.count() <= 0) {
    throw error(status::invalid_arguments, "redis store: timeouts must be positive");
  }
  const bool tls_files = !options.tls_ca_file.empty() || !options.tls_cert_file.empty() ||
                         !options.tls_key_file.empty() || !options.tls_server_name.empty();
  if (!options.tls && tls_files) {
    throw error(status::invalid_arguments,
                "redis store: TLS files or a TLS server name are given without tls (rediss://)");
  }
  auto s = std::make_unique<state>(options);
  s->capacity_mb.store(options.capacity_mb);
  if (options.tls) {
    s->tls = std::make_unique<persist_internal::tls_context>(
        options.tls_ca_file, options.tls_cert_file, options.tls_key_file);
    s->peer.context = s->tls.get();
    s->peer.name = options.tls_server_name.empty() ? options.host : options.tls_server_name;
  }
  std::string why;
  s->addresses = persist_internal::resolve(options.host, options.port, why);
  if (s->addresses.empty()) {
    throw error(status::not_found,
                "redis store: the host " + options.host + " does not resolve: " + why);
  }
  return std::unique_ptr<redis_store>(new redis_store(std::move(s)));
}

std::string redis_store::redis_key(std::span<const std::byte> key) const {
  const XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return s_->options.prefix + ":" + hex;
}

std::optional<std::vector<std::byte>> redis_store::get(std::span<const std::byte> key) {
  state& s = *s_;
  const std::string rkey = redis_key(key);
  redis_reply r;
  std::string why;
  const state::outcome got = s.call({"GET", rkey}, s.deadline(), r, why);
  // A bad value: counted, and deleted unless the store is read-only by
  // `eval` (a script that deletes only what is still bad, so a good value
  // put since stays), as a call with a deadline of its own: the delete of a
  // value that does not decode sends the value back, which takes about as
  // long as the GET took, so within what the GET left it would time out on
  // a healthy server — a timeout and a breaker failure for each bad value
  // read (every unsigned entry, for a member just given the fleet key).
  // Returns whether it asked for the delete.
  auto drop_bad_value = [&](std::initializer_list<std::string_view> eval) {
    s.corrupt.fetch_add(1, std::memory_order_relaxed);
    s.misses.fetch_add(1, std::memory_order_relaxed);
    if (s.options.read_only) return false;
    redis_reply ignored;
    s.call(eval, s.deadline(), ignored, why);
    return true;
  };
  if (got == state::outcome::failed && r.type == redis_reply::kind::error &&
      r.str.starts_with("WRONGTYPE")) {
    // A list, hash, ... under an entry's key is a bad value too (the error
    // reply is counted in remote_errors as well), and worse left there:
    // SET NX finds the key taken, so every put would say `exists` and no
    // member could ever store this entry.
    static constexpr std::string_view del_if_not_string =
        "if redis.call('TYPE', KEYS[1]).ok ~= 'string' then "
        "return redis.call('DEL', KEYS[1]) end return 0";
    drop_bad_value({"EVAL", del_if_not_string, "1", rkey});
    return std::nullopt;
  }
  if (got != state::outcome::ok || r.type != redis_reply::kind::string) {
    s.misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  decoded_entry d =
      decode_entry(s.options.format, key, std::as_bytes(std::span(r.str.data(), r.str.size())));
  if (d.ok()) {
    s.hits.fetch_add(1, std::memory_order_relaxed);
    s.bytes_read.fetch_add(d.payload.size(), std::memory_order_relaxed);
    return std::move(d.payload);
  }
  static constexpr std::string_view del_if_same =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
      "return 0";
  if (drop_bad_value({"EVAL", del_if_same, "1", rkey, r.str})) {
    s.stale.store(true, std::memory_order_release);
  }
  return std::nullopt;
}

put_result redis_store::put(std::span<const std::byte> key, std::span<const std::byte> payload) {
  state& s = *s_;
  if (s.options.read_only) {
    s.refusals.fetch_add(1, std::memory_order_relaxed);
    return {put_status::read_only, s.where() + " is read-only"};
  }
  // Bounds first: an entry refused is never copied. A value over the reply
  // bound could be stored (with a raised proto-max-bulk-len) but never read
  // back: every member's get would fail on it, whatever its capacity.
  const std::uint64_t encoded_size =
      encoded_entry_size(s.options.format, key.size(), payload.size());
  if (encoded_size > max_value_bytes) {
    s.refusals.fetch_add(1, std::memory_order_relaxed);
    return {put_status::too_large, "an entry of " + std::to_string(encoded_size) +
                                       " bytes exceeds the largest entry a store keeps (" +
                                       std::to_string(max_value_bytes >> 20) + " MB)"};
  }
  if (encoded_size > megabytes_to_bytes(s.capacity_mb.load())) {
    s.refusals.fetch_add(1, std::memory_order_relaxed);
    return {put_status::too_large, "an entry of " + std::to_string(encoded_size) +
                                       " bytes exceeds the capacity of " +
                                       std::to_string(s.capacity_mb.load()) + " MB"};
  }
  const std::vector<std::byte> encoded = encode_entry(s.options.format, key, payload);
  const std::string rkey = redis_key(key);
  const std::string ttl = std::to_string(s.options.ttl_seconds);
  redis_reply r;
  std::string why;
  state::outcome o =
      s.options.ttl_seconds > 0
          ? s.call({"SET", rkey, as_view(encoded), "NX", "EX", ttl}, s.deadline(), r, why)
          : s.call({"SET", rkey, as_view(encoded), "NX"}, s.deadline(), r, why);
  if (o != state::outcome::ok) return {put_status::failed, why};
  if (r.type == redis_reply::kind::nil) return {put_status::exists, {}};
  s.writes.fetch_add(1, std::memory_order_relaxed);
  s.bytes_written.fetch_add(encoded.size(), std::memory_order_relaxed);
  s.stale.store(true, std::memory_order_release);
  return {put_status::stored, {}};
}

bool redis_store::erase(std::span<const std::byte> key) {
  state& s = *s_;
  if (s.options.read_only) return false;
  redis_reply r;
  std::string why;
  if (s.call({"DEL", redis_key(key)}, s.deadline(), r, why) != state::outcome::ok) return false;
  const bool erased = r.type == redis_reply::kind::integer && r.integer > 0;
  if (erased) s.stale.store(true, std::memory_order_release);
  return erased;
}

std::uint64_t redis_store::size() const {
  state& s = *s_;
  if (s.figure_fresh()) return s.current_figure();
  if (s.walking.exchange(true, std::memory_order_acquire)) {
    return s.current_figure();  // another caller walks: its figure, or the last one
  }
  s.walk(steady::now() + s.options.size_walk_budget);
  s.walking.store(false, std::memory_order_release);
  return s.current_figure();
}

std::uint64_t redis_store::capacity() const {
  return s_->capacity_mb.load();
}

void redis_store::set_capacity(std::uint64_t megabytes) {
  s_->capacity_mb.store(megabytes);
}

void redis_store::clear() {
  state& s = *s_;
  if (s.options.read_only) {
    throw error(status::permission_denied, s.where() + " is read-only: it cannot be cleared");
  }
  const std::string pattern = s.options.prefix + ":*";
  std::string cursor = "0";
  s.stale.store(true, std::memory_order_release);
  do {
    redis_reply r;
    std::string why;
    if (s.call({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, s.deadline(), r, why) !=
        state::outcome::ok) {
      throw error(status::runtime_error, "cannot clear " + s.where() + ": " + why);
    }
    // As walk() checks it: a cursor read from anything but a string is ""
    // (an integer's str is empty), never "0", and the loop would not end.
    const auto is_string = [](const redis_reply& e) { return e.type == redis_reply::kind::string; };
    if (r.type != redis_reply::kind::array || r.elements.size() != 2 || !is_string(r.elements[0]) ||
        r.elements[1].type != redis_reply::kind::array ||
        !std::all_of(r.elements[1].elements.begin(), r.elements[1].elements.end(), is_string)) {
      throw error(status::runtime_error,
                  "cannot clear " + s.where() + ": SCAN answered something else than a cursor");
    }
    cursor = std::string(r.elements[0].str);
    const std::vector<redis_reply>& keys = r.elements[1].elements;
    if (keys.empty()) continue;
    std::vector<std::string_view> unlink{"UNLINK"};
    for (const redis_reply& k : keys) unlink.push_back(k.str);
    redis_reply ignored;
    if (s.call(unlink, s.deadline(), ignored, why) != state::outcome::ok) {
      throw error(status::runtime_error, "cannot clear " + s.where() + ": " + why);
    }
  } while (cursor != "0");
}

blob_store_stats redis_store::stats() const {
  const state& s = *s_;
  blob_store_stats out;
  out.hits = s.hits.load(std::memory_order_relaxed);
  out.misses = s.misses.load(std::memory_order_relaxed);
  out.writes = s.writes.load(std::memory_order_relaxed);
  out.bytes = s_->current_figure();
  out.bytes_read = s.bytes_read.load(std::memory_order_relaxed);
  out.bytes_written = s.bytes_written.load(std::memory_order_relaxed);
  out.corrupt_entries = s.corrupt.load(std::memory_order_relaxed);
  out.refusals = s.refusals.load(std::memory_order_relaxed);
  out.remote_errors = s.remote_errors.load(std::memory_order_relaxed);
  out.errors = out.remote_errors;
  out.timeouts = s.timeouts.load(std::memory_order_relaxed);
  out.breaker_state = static_cast<std::uint64_t>(s.breaker.state());
  out.breaker_opens = s.breaker.opens();
  out.breaker_rejections = s.breaker.rejections();
  return out;
}

bool redis_store::read_only() const noexcept {
  return s_->options.read_only;
}

std::string redis_store::describe() const {
  return std::string(s_->options.read_only ? "read-only " : "") + s_->where();
}

breaker_state redis_store::breaker() const {
  return s_->breaker.state();
}

}  // namespace primcache
