#include <catch2/catch.hpp>
#include <thread>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "fake_backend.hpp"
#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;

namespace {
// Each test starts from an empty cache of the default capacity.
struct fresh_cache {
  fresh_cache() {
    set_primitive_cache_capacity(0);
    set_primitive_cache_capacity(1024);
  }
  ~fresh_cache() { set_primitive_cache_capacity(1024); }
};
}  // namespace

TEST_CASE("creating the same primitive twice compiles once and shares the impl",
          "[runtime][primitive_cache]") {
  fresh_cache guard;
  const int before = fake::creations.load();
  auto pd = fake::copy_pd(3);
  CHECK_FALSE(primitive_cache_contains(pd));
  reorder first(pd);
  CHECK(first.creation_outcome() == lookup_outcome::miss);
  CHECK(primitive_cache_contains(pd));
  reorder second(fake::copy_pd(3));  // a new descriptor with equal fields
  CHECK(second.creation_outcome() == lookup_outcome::hit);
  CHECK(fake::creations.load() == before + 1);
  CHECK(get_primitive_cache_size() == 1);

  SECTION("and the cached primitive executes") {
    engine eng(engine_kind::gpu, 0);
    memory src(pd.src_desc(), eng), dst(pd.dst_desc(), eng);
    auto* s = static_cast<float*>(src.get_data_handle());
    for (int i = 0; i < 12; ++i) s[i] = static_cast<float>(i);
    second.execute(stream(eng), src, dst);
    auto* d = static_cast<float*>(dst.get_data_handle());
    CHECK(std::equal(s, s + 12, d));
  }
}

TEST_CASE("different shapes, engines and attributes make different keys",
          "[runtime][primitive_cache]") {
  fresh_cache guard;
  reorder(fake::copy_pd(3, 4));
  reorder(fake::copy_pd(3, 5));
  engine other(engine_kind::gpu, 1);
  memory::desc md({3, 4}, data_type::f32, format_tag::ab);
  reorder(reorder::primitive_desc(other, md, other, md));
  CHECK(get_primitive_cache_size() == 3);
}

TEST_CASE("capacity changes take effect at once", "[runtime][primitive_cache]") {
  fresh_cache guard;
  for (int i = 1; i <= 5; ++i) reorder(fake::copy_pd(i + 20));
  CHECK(get_primitive_cache_size() == 5);

  SECTION("shrinking evicts the least recently used") {
    reorder(fake::copy_pd(21));  // touch the oldest: it survives
    set_primitive_cache_capacity(2);
    CHECK(get_primitive_cache_capacity() == 2);
    CHECK(get_primitive_cache_size() == 2);
    CHECK(primitive_cache_contains(fake::copy_pd(21)));
    CHECK(primitive_cache_contains(fake::copy_pd(25)));
    CHECK_FALSE(primitive_cache_contains(fake::copy_pd(22)));
  }
  SECTION("capacity 0 clears and disables the cache") {
    set_primitive_cache_capacity(0);
    CHECK(get_primitive_cache_size() == 0);
    const int before = fake::creations.load();
    reorder a(fake::copy_pd(30));
    reorder b(fake::copy_pd(30));
    CHECK(a.creation_outcome() == lookup_outcome::miss);
    CHECK(b.creation_outcome() == lookup_outcome::miss);
    CHECK(fake::creations.load() == before + 2);
  }
  SECTION("negative capacities are refused and change nothing") {
    CHECK_THROWS_MATCHES(
        set_primitive_cache_capacity(-1), error,
        Catch::Matchers::Message("invalid_arguments: primitive cache capacity -1 is negative"));
    CHECK(get_primitive_cache_capacity() == 1024);
  }
  SECTION("evicted impls stay usable by primitives that hold them") {
    reorder held(fake::copy_pd(23));
    set_primitive_cache_capacity(0);
    engine eng(engine_kind::gpu, 0);
    memory src(held.get_primitive_desc().src_desc(), eng);
    memory dst(held.get_primitive_desc().dst_desc(), eng);
    CHECK_NOTHROW(held.execute(stream(eng), src, dst));
  }
}

TEST_CASE("a failed creation reaches the caller and leaves nothing cached",
          "[runtime][primitive_cache]") {
  fresh_cache guard;
  const int before = fake::creations.load();
  auto pd = fake::copy_pd(13);
  CHECK_THROWS_MATCHES(reorder(pd), error,
                       Catch::Matchers::Message("runtime_error: fake compiler failed for 13"));
  CHECK_FALSE(primitive_cache_contains(pd));
  CHECK(get_primitive_cache_size() == 0);
  CHECK_THROWS_AS(reorder(pd), error);  // tried again, not served from the cache
  CHECK(fake::creations.load() == before + 2);
}

TEST_CASE("nested primitives go through the same cache", "[runtime][primitive_cache][nested]") {
  fresh_cache guard;
  reorder outer(fake::copy_pd(7));
  CHECK(outer.creation_outcome() == lookup_outcome::miss);
  CHECK(fake::last_nested_outcome.load() == static_cast<int>(lookup_outcome::miss));
  CHECK(primitive_cache_contains(fake::copy_pd(8)));  // the nested key
  CHECK(get_primitive_cache_size() == 2);

  // Evict the outer impl only: touch the nested one so that it is the most
  // recently used, then shrink to one entry.
  reorder(fake::copy_pd(8));
  set_primitive_cache_capacity(1);
  CHECK(primitive_cache_contains(fake::copy_pd(8)));
  CHECK_FALSE(primitive_cache_contains(fake::copy_pd(7)));
  set_primitive_cache_capacity(1024);
  reorder again(fake::copy_pd(7));
  CHECK(again.creation_outcome() == lookup_outcome::miss);
  CHECK(fake::last_nested_outcome.load() == static_cast<int>(lookup_outcome::hit));
}

TEST_CASE("the primitive cache is registered with control", "[runtime][primitive_cache]") {
  fresh_cache guard;
  reorder(fake::copy_pd(40));
  auto caches = control().list_caches();
  auto it = std::find_if(caches.begin(), caches.end(),
                         [](const auto& c) { return c.name == "primitive"; });
  REQUIRE(it != caches.end());
  CHECK(it->capacity == 1024);
  CHECK(it->size == 1);
  control().set_capacity("primitive", 7);
  CHECK(get_primitive_cache_capacity() == 7);
}

// Run by CTest once per value with PRIMCACHE_PRIMITIVE_CACHE_CAPACITY set
// and PRIMCACHE_TEST_EXPECTED_CAPACITY saying what must come of it.
TEST_CASE("the capacity environment variable is read strictly", "[.][env]") {
  const char* expected = std::getenv("PRIMCACHE_TEST_EXPECTED_CAPACITY");
  REQUIRE(expected != nullptr);
  CHECK(get_primitive_cache_capacity() == std::atoi(expected));
  const bool malformed = std::atoi(expected) == 1024;
  auto reports = env_reports();
  const bool reported = std::any_of(reports.begin(), reports.end(), [](const std::string& m) {
    return m.find("PRIMCACHE_PRIMITIVE_CACHE_CAPACITY") != std::string::npos;
  });
  CHECK(reported == malformed);
  // The API wins over the environment.
  set_primitive_cache_capacity(5);
  CHECK(get_primitive_cache_capacity() == 5);
}

TEST_CASE("accepted primitive descriptors are reused until the registry changes",
          "[runtime][primitive_cache][primitive_desc]") {
  fresh_cache guard;
  auto a = fake::copy_pd(55), b = fake::copy_pd(55);
  CHECK(backend::impl_ptr_of(a) ==
        backend::impl_ptr_of(b));  // the second creation skipped acceptance
  CHECK(a.impl_info_str() == "fake:copy");

  SECTION("a newly registered implementation is not hidden by cached descriptors") {
    backend::register_implementation(
        {"fake:copy_first", engine_kind::gpu, backend::primitive_kind::reorder, 20,
         [](const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng)
             -> result<std::shared_ptr<const backend::primitive_desc_impl>> {
           const auto& r = std::get<backend::reorder_op>(op);
           if (r.src.dims()[0] != 56) return failure{status::unimplemented, "only 56 rows"};
           return fake::copy_pd_impl_for(attr, r, eng, "fake:copy_first");
         }});
    CHECK(fake::copy_pd(56).impl_info_str() == "fake:copy_first");
    CHECK(fake::copy_pd(55).impl_info_str() == "fake:copy");
    CHECK(backend::impl_ptr_of(fake::copy_pd(55)) != backend::impl_ptr_of(a));  // looked up afresh
  }
  SECTION("capacity 0 disables it with the primitive cache") {
    set_primitive_cache_capacity(0);
    CHECK(backend::impl_ptr_of(fake::copy_pd(57)) != backend::impl_ptr_of(fake::copy_pd(57)));
  }
  SECTION("it is registered with control") {
    auto caches = control().list_caches();
    CHECK(std::any_of(caches.begin(), caches.end(),
                      [](const auto& c) { return c.name == "primitive_desc" && c.size >= 1; }));
  }
}

TEST_CASE("a capacity set above INT_MAX through control reads back as INT_MAX, not truncated",
          "[runtime][primitive_cache][control]") {
  fresh_cache guard;
  control().set_capacity("primitive", std::uint64_t{1} << 33);  // would truncate to 0
  CHECK(get_primitive_cache_capacity() == std::numeric_limits<int>::max());
  control().set_capacity("primitive", (std::uint64_t{1} << 32) + 7);  // would truncate to 7
  CHECK(get_primitive_cache_capacity() == std::numeric_limits<int>::max());
}

namespace {
// The sample of `family` whose labels include every `label=value` given,
// read now.
metric_sample sample_of(const std::string& family,
                        const std::vector<std::pair<std::string, std::string>>& want) {
  for (const metric_family_info& f : control().list_metrics()) {
    if (f.name != family) continue;
    for (const metric_sample& s : f.samples) {
      const bool all = std::all_of(want.begin(), want.end(), [&](const auto& w) {
        return std::find(s.labels.begin(), s.labels.end(), w) != s.labels.end();
      });
      if (all) return s;
    }
  }
  FAIL("no series " << family << " with the labels asked for");
  return {};
}
metric_sample sample_of(const std::string& family, const std::string& label,
                        const std::string& value) {
  return sample_of(family, {{label, value}});
}
}  // namespace

TEST_CASE("the runtime records creations and executions in control for metrics",
          "[runtime][primitive_cache][metrics]") {
  fresh_cache guard;
  fake::install();
  reorder warm(fake::copy_pd(61));  // the series exist once the runtime is used
  const auto created =
      sample_of("primcache_primitive_create_seconds", {{"engine", "gpu"}, {"source", "compile"}})
          .count;
  const auto executed = sample_of("primcache_primitive_executions_total", "kind", "reorder").value;
  const auto since = control().events_since(0).next;

  reorder compiled(fake::copy_pd(62));  // a miss: compiled and timed
  reorder hit(fake::copy_pd(62));       // a hit: not timed
  CHECK(sample_of("primcache_primitive_create_seconds", {{"engine", "gpu"}, {"source", "compile"}})
            .count == created + 1);

  engine eng(engine_kind::gpu, 0);
  memory src(fake::copy_pd(62).src_desc(), eng), dst(fake::copy_pd(62).dst_desc(), eng);
  compiled.execute(stream(eng), src, dst);
  hit.execute(stream(eng), src, dst);
  CHECK(sample_of("primcache_primitive_executions_total", "kind", "reorder").value == executed + 2);
  CHECK(sample_of("primcache_primitive_executions_total", "kind", "matmul").value >= 0);

  const event_page page = control().events_since(since);
  REQUIRE(page.events.size() == 1);
  CHECK(page.events[0].kind == "create");
  CHECK(page.events[0].name == "reorder");
  CHECK(page.events[0].source == "compile");
  CHECK(page.events[0].detail.find("fake:copy") != std::string::npos);

  SECTION("build information names the version, LLVM and the build identity") {
    bool found = false;
    for (const info_labels& info : control().list_info()) {
      if (info.name != "build") continue;
      for (const auto& [k, v] : info.labels) {
        if (k == "build_identity") found = v == version().build_identity;
      }
    }
    CHECK(found);
  }
}

TEST_CASE("a descriptor accepted while a setting changed is not filed under the old setting",
          "[runtime][primitive_desc][isa]") {
  fake::install();
  // The first acceptance changes the engine's identity setting midway (as a
  // concurrent set_max_cpu_isa would): that descriptor must not be cached
  // under the key made before the change; creation starts over.
  auto first = fake::copy_pd(17);
  CHECK(fake::factory_calls_17.load() == 2);
  auto again = fake::copy_pd(17);  // the settings now match: a pd-cache hit
  CHECK(fake::factory_calls_17.load() == 2);
  CHECK(backend::impl_ptr_of(first) == backend::impl_ptr_of(again));
}

TEST_CASE("the primitive caches count entries and report no weight in bytes",
          "[runtime][primitive_cache][control]") {
  fresh_cache guard;
  reorder r(fake::copy_pd(63));
  const cache_info info = control().find_cache("primitive").info();
  CHECK(info.size >= 1);
  CHECK_FALSE(info.weight_bytes.has_value());
  CHECK_FALSE(control().find_cache("primitive_desc").info().weight_bytes.has_value());
}

TEST_CASE("the default pool's size is a setting operators read and change",
          "[runtime][thread_pool][control]") {
  const int before = get_num_threads();
  set_num_threads(3);
  CHECK(std::get<std::int64_t>(control().get_setting("num_threads").value) == 3);
  control().set_setting("num_threads", std::int64_t{2});
  CHECK(get_num_threads() == 2);
  CHECK_THROWS_AS(control().set_setting("num_threads", std::int64_t{0}), error);
  CHECK(get_num_threads() == 2);
  set_num_threads(before);
  CHECK(std::get<std::int64_t>(control().get_setting("num_threads").value) == before);
}

TEST_CASE("creations served by the primitive cache are timed on one in 64 per thread",
          "[runtime][primitive_cache][metrics]") {
  fresh_cache guard;
  fake::install();
  const std::vector<std::pair<std::string, std::string>> memory_gpu = {{"engine", "gpu"},
                                                                       {"source", "memory"}};
  const std::vector<std::pair<std::string, std::string>> compile_gpu = {{"engine", "gpu"},
                                                                        {"source", "compile"}};
  reorder first(fake::copy_pd(63));  // the miss, before counting
  // A fresh thread: its creation count starts at 0, so exactly 2 of 128
  // hits are sampled, and no compile is recorded. (Catch2 assertions stay
  // on this thread.)
  const auto memory_before = sample_of("primcache_primitive_create_seconds", memory_gpu).count;
  const auto compile_before = sample_of("primcache_primitive_create_seconds", compile_gpu).count;
  int hits = 0;
  std::thread([&] {
    for (int i = 0; i < 128; ++i) {
      reorder hit(fake::copy_pd(63));
      hits += hit.creation_outcome() == lookup_outcome::hit ? 1 : 0;
    }
  }).join();
  CHECK(hits == 128);
  CHECK(sample_of("primcache_primitive_create_seconds", memory_gpu).count == memory_before + 2);
  CHECK(sample_of("primcache_primitive_create_seconds", compile_gpu).count == compile_before);
}
