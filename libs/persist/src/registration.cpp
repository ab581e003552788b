#include "primcache/persist/registration.hpp"

#include <string>
#include <utility>
#include <vector>

namespace primcache {
namespace persist_internal {

// What control sees of a blob store: capacity and size in MB, the bytes as
// weight, the store's own counters as extra stats.
class control_view {
 public:
  explicit control_view(blob_store& store) noexcept : store_(store) {}

  std::uint64_t capacity() const { return store_.capacity(); }
  void set_capacity(std::uint64_t megabytes) { store_.set_capacity(megabytes); }
  std::uint64_t size() const { return (store_.size() + (std::uint64_t{1} << 20) - 1) >> 20; }
  std::uint64_t weight() const { return store_.size(); }
  cache_counters stats() const {
    blob_store_stats s = store_.stats();
    cache_counters c;
    c.hits = s.hits;
    c.misses = s.misses;
    c.evictions = s.evictions;
    c.refusals = s.refusals;
    c.failures = s.errors;
    return c;
  }
  void clear() { store_.clear(); }
  extra_stat_list extra_stats() const {
    blob_store_stats s = store_.stats();
    extra_stat_list out{{"writes", s.writes},
                        {"corrupt_entries", s.corrupt_entries},
                        {"errors", s.errors},
                        {"refusals", s.refusals},
                        {"bytes_read", s.bytes_read},
                        {"bytes_written", s.bytes_written},
                        {"read_only", store_.read_only() ? 1 : 0},
                        {"remote_hits", s.remote_hits},
                        {"remote_errors", s.remote_errors},
                        {"timeouts", s.timeouts},
                        {"breaker_state", s.breaker_state},
                        {"breaker_opens", s.breaker_opens},
                        {"breaker_rejections", s.breaker_rejections},
                        {"dropped_writes", s.dropped_writes}};
    // A sharded remote tier: each shard's own counters and breaker, as
    // shard<i>_<stat> (i from 0, in the order of the URL list).
    const std::vector<blob_store_shard> shards = store_.shards();
    if (!shards.empty()) out.emplace_back("shards", shards.size());
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const blob_store_stats& h = shards[i].stats;
      const std::string p = "shard" + std::to_string(i) + "_";
      for (const auto& [name, value] : {std::pair<const char*, std::uint64_t>{"hits", h.hits},
                                        {"misses", h.misses},
                                        {"writes", h.writes},
                                        {"bytes", h.bytes},
                                        {"remote_errors", h.remote_errors},
                                        {"timeouts", h.timeouts},
                                        {"breaker_state", h.breaker_state},
                                        {"breaker_opens", h.breaker_opens},
                                        {"breaker_rejections", h.breaker_rejections}}) {
        out.emplace_back(p + name, value);
      }
    }
    return out;
  }

 private:
  blob_store& store_;
};

}  // namespace persist_internal

blob_store_registration::blob_store_registration() noexcept = default;
blob_store_registration::blob_store_registration(blob_store_registration&&) noexcept = default;
blob_store_registration& blob_store_registration::operator=(
    blob_store_registration&& other) noexcept {
  if (this != &other) {
    registration_.reset();  // before the view it borrows goes
    view_ = std::move(other.view_);
    registration_ = std::move(other.registration_);
  }
  return *this;
}
blob_store_registration::~blob_store_registration() = default;

void blob_store_registration::reset() noexcept {
  registration_.reset();
  view_.reset();
}

blob_store_registration register_blob_store(blob_store& store, std::string_view name,
                                            control_registry& registry) {
  blob_store_registration out;
  out.view_ = std::make_unique<persist_internal::control_view>(store);
  out.registration_ = registry.register_cache(name, *out.view_, capacity_unit::megabytes);
  return out;
}

}  // namespace primcache
