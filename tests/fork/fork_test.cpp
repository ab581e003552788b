// fork() safety: a child of a process that has run primitives (so its
// default thread pool has workers and its JIT holds code) creates and
// executes primitives through the public API, and its parallel regions run
// on a fresh pool. Each child reports through its exit status; an alarm
// turns a hang into a failure.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "primcache/runtime/runtime.hpp"
#include "support/child_process.hpp"
#include "support/sanitizers.hpp"

namespace pc = primcache;

namespace {

// Runs `body` in a forked child (killed by SIGALRM after 60 s, and by
// SIGKILL after 90 s when it hangs before its alarm is set) and returns its
// exit status: the body's return value, 255 for an exception, 128 + signal
// when a signal ended it (primcache_test::run_in_child).
int in_child(const std::function<int()>& body) {
  return primcache_test::run_in_child(90, [&] {
    ::alarm(60);
    return body();
  });
}

pc::engine& cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

float* data(const pc::memory& m) {
  return static_cast<float*>(m.get_data_handle());
}

// relu over n x 1024 f32 elements; 0 when the result is right.
int run_eltwise(std::int64_t rows) {
  pc::memory::desc md({rows, 1024}, pc::data_type::f32, pc::format_tag::ab);
  pc::eltwise_forward prim(pc::eltwise_forward::primitive_desc(
      pc::eltwise_forward::desc(pc::prop_kind::forward_inference, pc::algorithm::eltwise_relu, md),
      cpu()));
  pc::memory src(md, cpu());
  pc::memory dst(md, cpu());
  const std::int64_t n = rows * 1024;
  for (std::int64_t i = 0; i < n; ++i) data(src)[i] = static_cast<float>(i % 13) - 6.f;
  prim.execute(pc::stream(cpu()), {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(i % 13) - 6.f;
    if (data(dst)[i] != (x > 0 ? x : 0.f)) return 1;
  }
  return 0;
}

// An n x n x n matmul against a plain loop; 0 when the result is right.
int run_matmul(std::int64_t n) {
  pc::memory::desc md({n, n}, pc::data_type::f32, pc::format_tag::ab);
  pc::matmul prim(pc::matmul::primitive_desc(pc::matmul::desc(md, md, md), cpu()));
  pc::memory a(md, cpu());
  pc::memory b(md, cpu());
  pc::memory c(md, cpu());
  for (std::int64_t i = 0; i < n * n; ++i) {
    data(a)[i] = static_cast<float>(i % 7) - 3.f;
    data(b)[i] = static_cast<float>(i % 5) - 2.f;
  }
  prim.execute(pc::stream(cpu()),
               {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b}, {PRIMCACHE_ARG_DST, c}});
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (std::int64_t k = 0; k < n; ++k) want += double(data(a)[i * n + k]) * data(b)[k * n + j];
      if (std::abs(want - data(c)[i * n + j]) > 1e-3 * (1 + std::abs(want))) return 2;
    }
  }
  return 0;
}

}  // namespace

TEST_CASE("a forked child creates and executes matmul and eltwise primitives",
          "[fork][runtime][cpu]") {
  pc::set_num_threads(2);
  // The parent has compiled and run these, so the child inherits a warm
  // primitive cache, a JIT with code in it and a pool with a worker.
  REQUIRE(run_eltwise(16) == 0);
  REQUIRE(run_matmul(64) == 0);
  REQUIRE(run_matmul(256) == 0);

  SECTION("the primitives the parent made (cache hits in the child)") {
    CHECK(in_child([] {
            if (pc::get_num_threads() != 2) return 10;
            if (int r = run_eltwise(16)) return 10 + r;
            if (int r = run_matmul(64)) return 20 + r;
            if (int r = run_matmul(256)) return 30 + r;
            return 0;
          }) == 0);
  }
  SECTION("primitives the child compiles itself") {
    CHECK(in_child([] {
            if (int r = run_eltwise(40)) return 40 + r;
            if (int r = run_matmul(72)) return 50 + r;
            if (int r = run_matmul(200)) return 60 + r;
            return 0;
          }) == 0);
  }
  SECTION("a grandchild, after the child ran regions of its own") {
    CHECK(in_child([] {
            if (int r = run_matmul(256)) return 70 + r;
            const pid_t pid = ::fork();
            if (pid == 0) {
              ::alarm(60);
              int code = 255;
              try {
                code = run_eltwise(48) == 0 && run_matmul(96) == 0 ? 0 : 81;
              } catch (...) {
              }
              ::_exit(code);
            }
            int status = 0;
            if (::waitpid(pid, &status, 0) != pid) return 82;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 83;
          }) == 0);
  }
}

TEST_CASE("a forked child runs parallel_for on the default pool with several threads",
          "[fork][runtime]") {
  pc::set_num_threads(3);
  std::atomic<int> warm{0};
  pc::default_thread_pool().parallel_for(3, [&](int, int) { warm.fetch_add(1); });
  REQUIRE(warm.load() == 3);
  CHECK(in_child([] {
          if (pc::get_num_threads() != 3) return 1;
          constexpr std::int64_t n = 1 << 16;
          std::vector<std::int64_t> y(n, 0);
          std::atomic<int> started{0};
          std::atomic<bool> concurrent{true};
          pc::default_thread_pool().parallel_for(3, [&](int ithr, int nthr) {
            started.fetch_add(1);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) {
              std::this_thread::yield();
            }
            if (started.load() < 3) concurrent.store(false);
            const auto r = pc::balance(n, ithr, nthr);
            for (std::int64_t i = r.begin; i < r.end; ++i) y[i] = i * i;
          });
          if (!concurrent.load()) return 2;
          for (std::int64_t i = 0; i < n; ++i) {
            if (y[i] != i * i) return 3;
          }
          return 0;
        }) == 0);
  pc::set_num_threads(2);
}

// The parent's persistent-cache writer thread waits for work when the child
// is made. Before the fix the child's writer reused that thread's condition
// variable, which glibc still counted it a waiter on: the child's second
// write hung in pthread_cond_signal (its alarm ended it).
TEST_CASE("a forked child writes several entries to the persistent cache",
          "[fork][runtime][persistent]") {
  char dir_template[] = "/tmp/primcache_fork_persist_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);  // mode 0700, as the store requires
  const std::string dir = dir_template;
  pc::set_persistent_cache(pc::open_persistent_cache_dir(dir, 64));
  const std::uint64_t first = pc::get_persistent_cache_stats().writes_stored;
  REQUIRE(run_matmul(44) == 0);  // a store miss: written in the background
  pc::flush_persistent_cache_writes();
  REQUIRE(pc::get_persistent_cache_stats().writes_stored == first + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the writer waits again
  CHECK(in_child([&dir] {
          // A child opens its own store (the parent's file lock is shared).
          pc::set_persistent_cache(pc::open_persistent_cache_dir(dir, 64));
          const std::uint64_t before = pc::get_persistent_cache_stats().writes_stored;
          for (std::int64_t n : {46, 50, 54, 58}) {
            if (run_matmul(n) != 0) return 1;
            pc::flush_persistent_cache_writes();
          }
          return pc::get_persistent_cache_stats().writes_stored == before + 4 ? 0 : 2;
        }) == 0);
  pc::set_persistent_cache(nullptr);
  std::filesystem::remove_all(dir);
}

// A fork right after a process's first persistent-cache write started the
// writer thread (whose start-up allocates), or while that thread writes:
// the AddressSanitizer of GCC 12 and clang 15 does not lock its allocator around fork(), so
// before the prepare handler waited for both, a child could start with an
// allocator lock held by a thread it does not have and hang in its first
// allocation of that size. The writer thread is new only once per process,
// so each round runs in a child of its own; the grandchild attaches its own
// store, allocates across the allocator's size classes, and writes.
TEST_CASE("a fork while the persistent-cache writer starts or writes leaves a working child",
          "[fork][runtime][persistent]") {
  char dir_template[] = "/tmp/primcache_fork_writer_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
#if PRIMCACHE_TEST_ASAN
  const int rounds = 12;  // a sanitized fork copies a large shadow mapping
#else
  const int rounds = 24;
#endif
  // A failure's status may be the child's or its grandchild's (passed on).
  const std::vector<std::string> failures =
      primcache_test::run_in_children(rounds, 60, [&dir](int i) {
        pc::set_persistent_cache(pc::open_persistent_cache_dir(dir, 64));
        if (run_matmul(20 + 2 * i) != 0) return 1;  // a store miss: this process's first write
        // At once (the writer thread starting) or a little later (writing).
        std::this_thread::sleep_for(std::chrono::microseconds((i % 4) * 400));
        const pid_t grandchild = ::fork();
        if (grandchild < 0) return 2;
        if (grandchild == 0) {
          int result = 255;
          try {
            primcache_test::allocate_from_every_size_class();
            pc::set_persistent_cache(pc::open_persistent_cache_dir(dir, 64));
            const std::uint64_t before = pc::get_persistent_cache_stats().writes_stored;
            result = run_matmul(21 + 2 * i) != 0 ? 3 : 0;
            pc::flush_persistent_cache_writes();
            if (result == 0 && pc::get_persistent_cache_stats().writes_stored != before + 1) {
              result = 4;
            }
            pc::set_persistent_cache(nullptr);
          } catch (...) {
          }
          ::_exit(result);
        }
        const int code = primcache_test::wait_child(grandchild, 20);
        pc::flush_persistent_cache_writes();
        pc::set_persistent_cache(nullptr);
        return code;
      });
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
  std::filesystem::remove_all(dir);
}
