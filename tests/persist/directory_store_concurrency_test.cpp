// The directory store under contention: threads hammering one store object,
// and 8 processes reading and writing one directory at once. Every value
// read is exactly the one written for its key (no torn reads), the capacity
// holds at the end, size.txt agrees with the entries, and verify() finds
// nothing bad.
//
// Catch2's assertions are not thread-safe: workers record into their own
// counters, the main thread asserts after joining them (or after waiting for
// the child processes).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/persist/directory_store.hpp"

using primcache::directory_store;
using primcache::put_status;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::temp_dir;

namespace {

constexpr std::uint64_t capacity_mb = 1;
constexpr int key_count = 48;

primcache::directory_store_options options_for(const std::string& path) {
  primcache::directory_store_options o;
  o.path = path;
  o.capacity_mb = capacity_mb;
  o.format.library_version = "concurrency-test";
  return o;
}

std::string key_name(int i) {
  return "key-" + std::to_string(i);
}
// 4-64 KB, fixed per key: 48 keys hold about 1.6 MB, more than the capacity.
std::size_t size_of(int i) {
  return 4096 + static_cast<std::size_t>(i) * 1300;
}

struct tally {
  int hits = 0;
  int torn = 0;  // a read that returned other bytes than the key's
  int failed_puts = 0;
};

// One worker's mix: 60% get, 30% put, 10% erase over the shared keys.
tally work(directory_store& s, unsigned seed, int ops) {
  tally t;
  std::minstd_rand rng(seed);
  for (int n = 0; n < ops; ++n) {
    int i = static_cast<int>(rng() % key_count);
    std::string k = key_name(i);
    unsigned op = rng() % 10;
    if (op < 6) {
      if (auto got = s.get(as_bytes(k))) {
        ++t.hits;
        if (*got != payload_of(k, size_of(i))) ++t.torn;
      }
    } else if (op < 9) {
      auto r = s.put(as_bytes(k), payload_of(k, size_of(i)));
      if (r.status == put_status::failed || r.status == put_status::too_large) ++t.failed_puts;
    } else {
      s.erase(as_bytes(k));
    }
  }
  return t;
}

void check_final_state(const std::string& path) {
  auto s = directory_store::open(options_for(path));
  auto rep = s->verify(false);
  INFO((rep.bad.empty() ? std::string() : rep.bad[0].path + ": " + rep.bad[0].message));
  CHECK(rep.ok());
  CHECK(rep.bytes <= (capacity_mb << 20));
  CHECK(rep.bytes == rep.recorded_bytes);
  CHECK(rep.stale_temporaries == 0);
  for (int i = 0; i < key_count; ++i) {
    if (auto got = s->get(as_bytes(key_name(i)))) {
      CHECK(*got == payload_of(key_name(i), size_of(i)));
    }
  }
}

}  // namespace

TEST_CASE("threads share one directory store", "[persist][directory][concurrency]") {
  temp_dir dir;
  auto s = directory_store::open(options_for(dir.path()));
  constexpr int threads = 8;
  constexpr int ops = 250;
  std::vector<tally> tallies(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { tallies[t] = work(*s, 1000u + static_cast<unsigned>(t), ops); });
  }
  // An operator turning the capacity meanwhile.
  std::thread op([&] {
    for (int i = 0; i < 5; ++i) {
      s->set_capacity(capacity_mb);
      std::this_thread::yield();
    }
  });
  for (auto& th : pool) th.join();
  op.join();
  int hits = 0;
  for (const tally& t : tallies) {
    CHECK(t.torn == 0);
    CHECK(t.failed_puts == 0);
    hits += t.hits;
  }
  CHECK(hits > 0);
  auto st = s->stats();
  CHECK(st.errors == 0);
  CHECK(st.corrupt_entries == 0);
  CHECK(st.evictions > 0);
  check_final_state(dir.path());
}

TEST_CASE("8 processes share one directory", "[persist][directory][concurrency][process]") {
  temp_dir dir;
  directory_store::open(options_for(dir.path()));
  constexpr int processes = 8;
  constexpr int ops = 300;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Each process opens its own store (its own lock descriptor).
      int code = 0;
      try {
        auto s = directory_store::open(options_for(dir.path()));
        tally t = work(*s, 77u + static_cast<unsigned>(p), ops);
        auto st = s->stats();
        if (t.torn != 0)
          code = 1;
        else if (t.failed_puts != 0 || st.errors != 0)
          code = 2;
        else if (st.corrupt_entries != 0)
          code = 3;
      } catch (...) {
        code = 4;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    // 1: torn read, 2: failed put or I/O error, 3: corrupt entry, 4: exception.
    CHECK(WEXITSTATUS(status) == 0);
  }
  check_final_state(dir.path());
}
