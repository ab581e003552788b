#include "primcache/persist/sharded_redis_store.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "primcache/base/error.hpp"
#include "redis_connection.hpp"

namespace primcache {
namespace {

constexpr std::string_view schemes[] = {"redis://", "rediss://"};

bool starts_with_scheme(std::string_view s) {
  return std::any_of(std::begin(schemes), std::end(schemes),
                     [&](std::string_view sc) { return s.starts_with(sc); });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::size_t count_schemes(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t at = s.find("://"); at != std::string_view::npos; at = s.find("://", at + 3)) {
    ++n;
  }
  return n;
}

[[noreturn]] void bad_list(std::string_view urls, const std::string& why) {
  throw error(status::invalid_arguments,
              "persistent cache redis URL list '" + redact_redis_url_list(urls) + "': " + why);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

XXH128_hash_t key_hash(std::span<const std::byte> key) {
  return XXH3_128bits(key.data(), key.size());
}

}  // namespace

std::string redact_redis_url_list(std::string_view urls) {
  // Cut before each ',' that is followed (after spaces) by a scheme; each
  // piece is redacted on its own, so every '@' hides what precedes it back
  // to its piece's scheme.
  std::string out;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < urls.size(); ++i) {
    if (urls[i] != ',') continue;
    std::string_view after = urls.substr(i + 1);
    while (!after.empty() && (after.front() == ' ' || after.front() == '\t')) {
      after.remove_prefix(1);
    }
    if (!starts_with_scheme(after)) continue;
    out += redact_redis_url(urls.substr(begin, i - begin));
    out += ',';
    begin = i + 1;
  }
  out += redact_redis_url(urls.substr(begin));
  return out;
}

std::string redis_shard_name(const redis_store_options& o) {
  const bool v6 = o.host.find(':') != std::string::npos;
  return (v6 ? "[" + lower(o.host) + "]" : lower(o.host)) + ":" + std::to_string(o.port);
}

std::vector<redis_store_options> parse_redis_url_list(std::string_view urls,
                                                      redis_store_options base) {
  // One URL: exactly as before lists existed (a ',' in its password stays).
  if (urls.find(',') == std::string_view::npos || count_schemes(urls) <= 1) {
    if (urls.find(',') == std::string_view::npos) return {parse_redis_url(urls, base)};
    try {
      return {parse_redis_url(urls, base)};
    } catch (const error&) {
      // Not one URL with a ',' inside: report it as the list it looks like.
    }
  }
  std::vector<std::string_view> elements;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = urls.find(',', begin);
    elements.push_back(trim(urls.substr(
        begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin)));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  const std::string of = " of " + std::to_string(elements.size());
  std::vector<redis_store_options> out;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const std::string which = "element " + std::to_string(i + 1) + of;
    if (elements[i].empty()) bad_list(urls, which + " is empty");
    if (!starts_with_scheme(elements[i])) {
      bad_list(urls, which + " ('" + redact_redis_url(elements[i]) +
                         "') is not a redis:// URL (write a ',' in a password as %2C)");
    }
    try {
      out.push_back(parse_redis_url(elements[i], base));
    } catch (const error& e) {
      bad_list(urls, which + ": " + e.message());
    }
    std::string name = redis_shard_name(out.back());
    for (std::size_t j = 0; j < names.size(); ++j) {
      if (names[j] == name) {
        bad_list(urls, "elements " + std::to_string(j + 1) + " and " + std::to_string(i + 1) +
                           " name the same server " + name);
      }
    }
    names.push_back(std::move(name));
  }
  return out;
}

struct sharded_redis_store::state {
  std::vector<std::unique_ptr<redis_store>> shards;
  std::vector<std::string> names;
  std::vector<XXH64_hash_t> seeds;  // XXH3-64 of each name

  std::size_t pick(std::span<const std::byte> key) const noexcept {
    const XXH128_hash_t h = key_hash(key);
    unsigned char bytes[16];
    std::memcpy(bytes, &h.high64, 8);
    std::memcpy(bytes + 8, &h.low64, 8);
    std::size_t best = 0;
    XXH64_hash_t best_weight = 0;
    for (std::size_t i = 0; i < seeds.size(); ++i) {
      const XXH64_hash_t w = XXH3_64bits_withSeed(bytes, sizeof bytes, seeds[i]);
      // Ties (2^-64) go to the smaller name, whatever the order of the list.
      if (i == 0 || w > best_weight || (w == best_weight && names[i] < names[best])) {
        best = i;
        best_weight = w;
      }
    }
    return best;
  }
};

sharded_redis_store::sharded_redis_store(std::unique_ptr<state> s) : s_(std::move(s)) {}
sharded_redis_store::~sharded_redis_store() = default;

std::unique_ptr<sharded_redis_store> sharded_redis_store::open(
    std::vector<redis_store_options> shards) {
  if (shards.empty()) {
    throw error(status::invalid_arguments, "sharded redis store: no shard is given");
  }
  auto s = std::make_unique<state>();
  std::vector<std::vector<persist_internal::socket_address>> resolved;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    std::string name = redis_shard_name(shards[i]);
    for (std::size_t j = 0; j < s->names.size(); ++j) {
      if (s->names[j] == name) {
        throw error(status::invalid_arguments,
                    "sharded redis store: shards " + std::to_string(j + 1) + " and " +
                        std::to_string(i + 1) + " name the same server " + name);
      }
    }
    s->shards.push_back(redis_store::open(shards[i]));  // checks and resolves
    std::string why;
    resolved.push_back(persist_internal::resolve(shards[i].host, shards[i].port, why));
    for (std::size_t j = 0; j < i; ++j) {
      for (const auto& a : resolved[i]) {
        for (const auto& b : resolved[j]) {
          if (a.len == b.len && std::memcmp(&a.addr, &b.addr, a.len) == 0) {
            throw error(status::invalid_arguments, "sharded redis store: shards " +
                                                       std::to_string(j + 1) + " (" + s->names[j] +
                                                       ") and " + std::to_string(i + 1) + " (" +
                                                       name + ") resolve to the same server");
          }
        }
      }
    }
    s->seeds.push_back(XXH3_64bits(name.data(), name.size()));
    s->names.push_back(std::move(name));
  }
  return std::unique_ptr<sharded_redis_store>(new sharded_redis_store(std::move(s)));
}

std::size_t sharded_redis_store::shard_of(std::span<const std::byte> key) const noexcept {
  return s_->pick(key);
}

std::size_t sharded_redis_store::shard_count() const noexcept {
  return s_->shards.size();
}

const std::string& sharded_redis_store::shard_name(std::size_t i) const {
  return s_->names.at(i);
}

redis_store& sharded_redis_store::shard(std::size_t i) {
  return *s_->shards.at(i);
}

std::optional<std::vector<std::byte>> sharded_redis_store::get(std::span<const std::byte> key) {
  return s_->shards[s_->pick(key)]->get(key);
}

put_result sharded_redis_store::put(std::span<const std::byte> key,
                                    std::span<const std::byte> payload) {
  return s_->shards[s_->pick(key)]->put(key, payload);
}

bool sharded_redis_store::erase(std::span<const std::byte> key) {
  return s_->shards[s_->pick(key)]->erase(key);
}

std::uint64_t sharded_redis_store::size() const {
  std::uint64_t total = 0;
  for (const auto& sh : s_->shards) total += sh->size();
  return total;
}

std::uint64_t sharded_redis_store::capacity() const {
  return s_->shards.front()->capacity();
}

void sharded_redis_store::set_capacity(std::uint64_t megabytes) {
  for (const auto& sh : s_->shards) sh->set_capacity(megabytes);
}

void sharded_redis_store::clear() {
  if (read_only()) {
    throw error(status::permission_denied, describe() + " is read-only: it cannot be cleared");
  }
  std::string failed;
  for (const auto& sh : s_->shards) {
    try {
      sh->clear();
    } catch (const error& e) {
      failed += (failed.empty() ? "" : "; ") + e.message();
    }
  }
  if (!failed.empty()) {
    throw error(status::runtime_error,
                "sharded redis store: cleared the shards that answered, "
                "not these: " +
                    failed);
  }
}

blob_store_stats sharded_redis_store::stats() const {
  blob_store_stats out;
  std::size_t open = 0, closed = 0;
  for (const auto& sh : s_->shards) {
    const blob_store_stats s = sh->stats();
    out.hits += s.hits;
    out.misses += s.misses;
    out.writes += s.writes;
    out.bytes += s.bytes;
    out.bytes_read += s.bytes_read;
    out.bytes_written += s.bytes_written;
    out.evictions += s.evictions;
    out.corrupt_entries += s.corrupt_entries;
    out.errors += s.errors;
    out.refusals += s.refusals;
    out.remote_hits += s.remote_hits;
    out.remote_errors += s.remote_errors;
    out.timeouts += s.timeouts;
    out.breaker_opens += s.breaker_opens;
    out.breaker_rejections += s.breaker_rejections;
    out.dropped_writes += s.dropped_writes;
    if (s.breaker_state == static_cast<std::uint64_t>(breaker_state::open)) ++open;
    if (s.breaker_state == static_cast<std::uint64_t>(breaker_state::closed)) ++closed;
  }
  const std::size_t n = s_->shards.size();
  out.breaker_state = static_cast<std::uint64_t>(closed == n ? breaker_state::closed
                                                 : open == n ? breaker_state::open
                                                             : breaker_state::half_open);
  return out;
}

bool sharded_redis_store::read_only() const noexcept {
  return s_->shards.front()->read_only();
}

std::string sharded_redis_store::describe() const {
  std::string out = "sharded redis [";
  for (std::size_t i = 0; i < s_->shards.size(); ++i) {
    out += (i ? ", " : "") + s_->shards[i]->describe();
  }
  return out + "]";
}

std::vector<blob_store_shard> sharded_redis_store::shards() const {
  std::vector<blob_store_shard> out;
  out.reserve(s_->shards.size());
  for (const auto& sh : s_->shards) out.push_back({sh->describe(), sh->stats()});
  return out;
}

}  // namespace primcache
