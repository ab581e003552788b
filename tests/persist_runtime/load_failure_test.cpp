// A store entry whose blob fails to load: erased and replaced only when the
// failure is the entry's (damaged, foreign, refused code); kept, and the
// primitive compiled with nothing written over it, when the failure is this
// process's state (out of memory, a driver or JIT failure), which another
// process sharing the entry (a fleet's Redis) would not see. The blobs are
// the runtime tests' fake backend's (tests/runtime/fake_backend.hpp), whose
// loader fails with the status a case chooses.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cases.hpp"
#include "fake_backend.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using namespace primcache::test;

namespace {

// The fake backend's serializable copy (dims[0] == 19), 19 x width.
primitive_desc serializable_copy(std::int64_t width) {
  return fake::copy_pd(19, width);
}

// Runs the copy on the fake engine and says whether dst came out as src.
bool copies(const primitive& p, std::int64_t width) {
  engine eng(engine_kind::gpu, 0);
  const memory::desc md({19, width}, data_type::f32, format_tag::ab);
  memory src(md, eng), dst(md, eng);
  auto* in = static_cast<float*>(src.get_data_handle());
  auto* out = static_cast<float*>(dst.get_data_handle());
  const std::size_t n = md.size_bytes() / sizeof(float);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = static_cast<float>(i) * 0.5f;
    out[i] = -1.0f;
  }
  p.execute(stream(eng), {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}});
  return std::memcmp(in, out, md.size_bytes()) == 0;
}

// primcache_persistent_cache_load_failures_total{result}: 0 before it is
// registered.
std::uint64_t load_failures_metric(const std::string& result) {
  for (const auto& f : control().list_metrics()) {
    if (f.name != "primcache_persistent_cache_load_failures_total") continue;
    for (const auto& s : f.samples) {
      for (const auto& [k, v] : s.labels) {
        if (k == "result" && v == result) return static_cast<std::uint64_t>(s.value);
      }
    }
  }
  return 0;
}

std::uint64_t extra(const cache_info& info, const std::string& name) {
  for (const auto& [k, v] : info.extra) {
    if (k == name) return v;
  }
  FAIL("no extra stat " << name);
  return 0;
}

bool same(const std::optional<std::vector<std::byte>>& a, const std::vector<std::byte>& b) {
  return a && std::equal(a->begin(), a->end(), b.begin(), b.end());
}

// A directory store that counts the runtime's erasures.
class erase_counting_store final : public blob_store {
 public:
  explicit erase_counting_store(std::shared_ptr<blob_store> s) : store_(std::move(s)) {}
  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override {
    return store_->get(key);
  }
  put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) override {
    return store_->put(key, payload);
  }
  bool erase(std::span<const std::byte> key) override {
    erasures.fetch_add(1);
    return store_->erase(key);
  }
  std::uint64_t size() const override { return store_->size(); }
  std::uint64_t capacity() const override { return store_->capacity(); }
  void set_capacity(std::uint64_t megabytes) override { store_->set_capacity(megabytes); }
  void clear() override { store_->clear(); }
  blob_store_stats stats() const override { return store_->stats(); }
  bool read_only() const noexcept override { return store_->read_only(); }
  std::string describe() const override { return store_->describe(); }

  std::atomic<int> erasures{0};

 private:
  std::shared_ptr<blob_store> store_;
};

// Sets the fake loader's failure for a scope.
struct loader_fails {
  explicit loader_fails(int how) { fake::load_failure.store(how); }
  ~loader_fails() { fake::load_failure.store(0); }
  loader_fails(const loader_fails&) = delete;
  loader_fails& operator=(const loader_fails&) = delete;
};

// Compiles pd with a store attached and waits for its blob to be stored;
// returns that blob.
std::vector<std::byte> stored_blob(const primitive_desc& pd) {
  empty_primitive_cache();
  const auto before = get_persistent_cache_stats();
  { const primitive fresh(pd); }
  flush_persistent_cache_writes();
  REQUIRE(get_persistent_cache_stats().writes_stored == before.writes_stored + 1);
  const std::vector<std::uint8_t> id = pd.cache_blob_id();
  auto blob = get_persistent_cache()->get(std::as_bytes(std::span(id)));
  REQUIRE(blob);
  return *blob;
}

// Creates pd with an empty primitive cache: its entry loads (nothing is
// compiled), and the primitive copies.
void check_loads_without_compiling(const primitive_desc& pd, std::int64_t width) {
  empty_primitive_cache();
  const int creations_before = fake::creations.load();
  const primitive loaded(pd);
  CHECK(fake::creations.load() == creations_before);
  CHECK(copies(loaded, width));
}

}  // namespace

TEST_CASE("a blob that fails to load for a reason outside it keeps its entry, and is compiled",
          "[persistent][load_failed]") {
  temp_dir dir;
  detach_at_end detach;
  auto store = std::make_shared<erase_counting_store>(open_persistent_cache_dir(dir.path(), 64));
  set_persistent_cache(store);
  // Each failure its own primitive, so that its entry is fresh.
  const auto [how, width, what] = GENERATE(table<int, std::int64_t, const char*>(
      {{static_cast<int>(status::out_of_memory), 31, "out_of_memory"},
       {static_cast<int>(status::runtime_error), 32, "runtime_error (a driver or JIT failure)"},
       {-1, 33, "std::bad_alloc"},
       {-3, 34, "std::runtime_error (an exception that is not primcache's)"}}));
  INFO(what);
  const primitive_desc pd = serializable_copy(width);
  const std::vector<std::byte> entry = stored_blob(pd);
  const std::vector<std::uint8_t> id = pd.cache_blob_id();
  const int erasures_before = store->erasures.load();

  empty_primitive_cache();
  const auto before = get_persistent_cache_stats();
  const auto view_before = control().find_cache("persistent").info();
  const std::uint64_t kept_before = load_failures_metric("kept");
  const int loads_before = fake::loads.load();
  const int creations_before = fake::creations.load();
  {
    loader_fails fails(how);
    const primitive p(pd);  // the caller still gets a primitive
    CHECK(fake::loads.load() == loads_before + 1);
    CHECK(fake::creations.load() == creations_before + 1);  // compiled
    CHECK(copies(p, width));
  }
  const auto after = get_persistent_cache_stats();
  CHECK(after.load_failed == before.load_failed + 1);
  CHECK(after.rejected == before.rejected);
  CHECK(after.hits == before.hits);
  CHECK(after.misses == before.misses + 1);
  // Nothing queued over the good entry.
  CHECK(after.writes_queued == before.writes_queued);
  CHECK(load_failures_metric("kept") == kept_before + 1);
  // control: a miss, not a hit, and no corrupt entry.
  const auto view_after = control().find_cache("persistent").info();
  CHECK(view_after.stats.hits == view_before.stats.hits);
  CHECK(view_after.stats.misses == view_before.stats.misses + 1);
  CHECK(extra(view_after, "corrupt_entries") == extra(view_before, "corrupt_entries"));
  flush_persistent_cache_writes();
  CHECK(get_persistent_cache_stats().writes_stored == before.writes_stored);
  // The entry was never erased, and is there as it was.
  CHECK(store->erasures.load() == erasures_before);
  CHECK(same(store->get(std::as_bytes(std::span(id))), entry));

  // A process whose loader works (the next one, or this one once memory is
  // back) loads it: nothing compiled.
  check_loads_without_compiling(pd, width);
  CHECK(get_persistent_cache_stats().hits == after.hits + 1);
}

TEST_CASE("a blob that fails to load because of what it holds is erased, compiled and replaced",
          "[persistent][load_failed]") {
  temp_dir dir;
  detach_at_end detach;
  auto store = std::make_shared<erase_counting_store>(open_persistent_cache_dir(dir.path(), 64));
  set_persistent_cache(store);
  // The statuses a blob loader gives for the blob's own faults: altered or
  // truncated bytes; another descriptor's, device's or ISA's blob, or code
  // the driver refuses; a format this build does not read; code missing a
  // symbol; code calling what kernels may not; a size or index read from
  // the bytes that the standard library refuses (std::logic_error).
  const auto [how, width, what] = GENERATE(table<int, std::int64_t, const char*>(
      {{static_cast<int>(status::corrupt_data), 41, "corrupt_data"},
       {static_cast<int>(status::invalid_arguments), 42, "invalid_arguments"},
       {static_cast<int>(status::unimplemented), 43, "unimplemented"},
       {static_cast<int>(status::not_found), 44, "not_found"},
       {static_cast<int>(status::permission_denied), 45, "permission_denied"},
       {-2, 46, "std::length_error"}}));
  INFO(what);
  const primitive_desc pd = serializable_copy(width);
  const std::vector<std::byte> entry = stored_blob(pd);
  const std::vector<std::uint8_t> id = pd.cache_blob_id();
  const int erasures_before = store->erasures.load();
  empty_primitive_cache();
  const auto before = get_persistent_cache_stats();
  const auto view_before = control().find_cache("persistent").info();
  const std::uint64_t rejected_before = load_failures_metric("rejected");
  const int creations_before = fake::creations.load();
  {
    loader_fails fails(static_cast<int>(how));
    const primitive p(pd);
    CHECK(fake::creations.load() == creations_before + 1);
    CHECK(copies(p, width));
  }
  const auto after = get_persistent_cache_stats();
  CHECK(after.rejected == before.rejected + 1);
  CHECK(after.load_failed == before.load_failed);
  CHECK(after.hits == before.hits);
  CHECK(after.writes_queued == before.writes_queued + 1);
  CHECK(load_failures_metric("rejected") == rejected_before + 1);
  const auto view_after = control().find_cache("persistent").info();
  CHECK(extra(view_after, "corrupt_entries") == extra(view_before, "corrupt_entries") + 1);
  CHECK(view_after.stats.hits == view_before.stats.hits);
  // Erased, and the compiled primitive's blob written in its place (a put
  // over the old entry would have found it there: writes_exists).
  CHECK(store->erasures.load() == erasures_before + 1);
  flush_persistent_cache_writes();
  CHECK(get_persistent_cache_stats().writes_stored == before.writes_stored + 1);
  CHECK(get_persistent_cache_stats().writes_exists == before.writes_exists);
  CHECK(same(store->get(std::as_bytes(std::span(id))), entry));
  check_loads_without_compiling(pd, width);
}

// A rejected entry is erased only once its replacement compiled: when this
// process cannot compile either (an OpenCL driver that cannot write its own
// cache directory refuses a binary and the source alike, with the status it
// gives a bad binary), the failure is this process's, and the fleet's entry
// stays. Before, it was erased first: every member lost the kernel.
TEST_CASE("a rejected entry stays when this process cannot compile its replacement",
          "[persistent][load_failed]") {
  temp_dir dir;
  detach_at_end detach;
  auto store = std::make_shared<erase_counting_store>(open_persistent_cache_dir(dir.path(), 64));
  set_persistent_cache(store);
  const primitive_desc pd = serializable_copy(47);
  const std::vector<std::byte> entry = stored_blob(pd);
  const std::vector<std::uint8_t> id = pd.cache_blob_id();
  const int erasures_before = store->erasures.load();
  empty_primitive_cache();
  const auto before = get_persistent_cache_stats();
  {
    loader_fails fails(static_cast<int>(status::invalid_arguments));  // "the driver refuses it"
    fake::create_fails.store(true);
    CHECK_THROWS_WITH(primitive(pd), Catch::Contains("fake compiler failed as told"));
    fake::create_fails.store(false);
  }
  const auto after = get_persistent_cache_stats();
  CHECK(after.rejected == before.rejected + 1);
  CHECK(after.writes_queued == before.writes_queued);
  CHECK(store->erasures.load() == erasures_before);
  CHECK(same(store->get(std::as_bytes(std::span(id))), entry));
  // Once the loader works again, it loads: nothing compiled.
  check_loads_without_compiling(pd, 47);
}

// Run alone with PRIMCACHE_VERBOSE=1 (CMakeLists.txt), which checks the
// lines: each failure has its own, with the status.
TEST_CASE("verbose output tells a kept entry's load failure from a rejected entry",
          "[.verbose_load_failed]") {
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(open_persistent_cache_dir(dir.path(), 64));
  const primitive_desc pd = serializable_copy(51);
  stored_blob(pd);
  empty_primitive_cache();
  {
    loader_fails fails(static_cast<int>(status::out_of_memory));
    const primitive p(pd);
  }
  empty_primitive_cache();
  {
    loader_fails fails(static_cast<int>(status::corrupt_data));
    const primitive p(pd);
  }
}
