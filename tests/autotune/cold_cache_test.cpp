#include "primcache/autotune/cold_cache.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

#include "fake_clock.hpp"
#include "primcache/autotune/tuner.hpp"
#include "support/allocation_counter.hpp"

using namespace primcache;
using primcache::autotune_test::fake_clock;
using primcache::autotune_test::fake_options;
using primcache::autotune_test::scripted_candidates;

TEST_CASE("the cold cache is larger than the last-level cache", "[autotune][cold_cache]") {
  const std::size_t llc = last_level_cache_bytes();
  CHECK(llc >= 64 * 1024);
  cold_cache c;
  CHECK(c.bytes() >= std::min<std::size_t>(2 * llc, std::size_t{128} << 20));
  // Bounded whatever the host reports (this VM's sysconf says 508 MiB).
  CHECK(c.bytes() <= std::size_t{128} << 20);
  CHECK(c.bytes() == cold_cache_bytes_for(llc));
  CHECK(c.flushes() == 0);
  c.flush();
  c.flush();
  CHECK(c.flushes() == 2);
}

TEST_CASE("a cold cache of a chosen size", "[autotune][cold_cache]") {
  cold_cache c(1 << 20);
  CHECK(c.bytes() == (1u << 20));
  c.flush();
  CHECK(c.flushes() == 1);
  cold_cache tiny(1);
  CHECK(tiny.bytes() == 64);  // at least one line
  tiny.flush();
}

TEST_CASE("a default flush is twice the last-level cache, at most 128 MiB",
          "[autotune][cold_cache]") {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  CHECK(max_cold_cache_bytes == 128 * MiB);
  CHECK(cold_cache_bytes_for(32 * MiB) == 64 * MiB);
  CHECK(cold_cache_bytes_for(1 * MiB) == 2 * MiB);
  CHECK(cold_cache_bytes_for(64 * MiB) == 128 * MiB);
  CHECK(cold_cache_bytes_for(96 * MiB) == 128 * MiB);  // 3D V-Cache: still more than the cache
  // What this VM's sysconf reports (CPUID as the hypervisor fills it).
  CHECK(cold_cache_bytes_for(532676608) == 128 * MiB);
  CHECK(cold_cache_bytes_for(~std::size_t{0}) == 128 * MiB);  // no overflow
  CHECK(cold_cache_bytes_for(0) == 64 * MiB);                 // unknown: 32 MiB
  CHECK(cold_cache_bytes_for(1) == 64);                       // one line at least
}

namespace {

// A sysfs-like cache tree: index<i>/{level,type,size}.
struct fake_cache_dir {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("primcache-cold-cache-" + std::to_string(::getpid()));
  fake_cache_dir() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~fake_cache_dir() { std::filesystem::remove_all(dir); }
  fake_cache_dir(const fake_cache_dir&) = delete;
  fake_cache_dir& operator=(const fake_cache_dir&) = delete;
  void add(int index, const char* level, const char* type, const char* size) const {
    const std::filesystem::path d = dir / ("index" + std::to_string(index));
    std::filesystem::create_directories(d);
    std::ofstream(d / "level") << level << "\n";
    std::ofstream(d / "type") << type << "\n";
    std::ofstream(d / "size") << size << "\n";
  }
};

}  // namespace

TEST_CASE("the last-level cache is the highest data or unified level sysfs describes",
          "[autotune][cold_cache]") {
  const fake_cache_dir f;
  CHECK(sysfs_last_level_cache_bytes(f.dir.string()) == 0);  // none described
  CHECK(sysfs_last_level_cache_bytes((f.dir / "missing").string()) == 0);
  f.add(0, "1", "Data", "48K");
  f.add(1, "1", "Instruction", "32K");
  CHECK(sysfs_last_level_cache_bytes(f.dir.string()) == 48 * 1024);
  f.add(2, "2", "Unified", "1024K");
  CHECK(sysfs_last_level_cache_bytes(f.dir.string()) == 1024 * 1024);
  f.add(3, "3", "Unified", "32768K");
  CHECK(sysfs_last_level_cache_bytes(f.dir.string()) == 32 * 1024 * 1024);
  // An instruction cache never counts, however large; a malformed entry
  // is skipped.
  f.add(4, "4", "Instruction", "1G");
  f.add(5, "5", "Unified", "lots");
  CHECK(sysfs_last_level_cache_bytes(f.dir.string()) == 32 * 1024 * 1024);
}

#if PRIMCACHE_TEST_REPLACES_NEW
TEST_CASE("tunings flush through one buffer, allocated once per process",
          "[autotune][cold_cache]") {
  fake_clock clk;
  // The heap allocations of one tune() of two candidates, with the default
  // flusher (cold) or none.
  auto allocations = [&](bool cold) {
    scripted_candidates s(clk, {{1000}, {900}});
    const tuning_callbacks cb = s.callbacks();
    tune_options o = fake_options(clk);
    o.cold_cache = cold;
    o.runs = 2;
    o.confirm = false;
    const primcache_test::allocation_scope scope;
    tune(cb, o);
    return scope.count();
  };
  allocations(true);  // the process's first flusher may allocate its buffer
  const std::size_t cold = allocations(true);
  CHECK(allocations(true) == cold);
  // Flushing allocates nothing: a cold tuning allocates what a warm one does.
  CHECK(cold == allocations(false));
}
#endif
