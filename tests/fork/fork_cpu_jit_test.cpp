// fork() and the CPU backend's JIT set-up and background compilations,
// through the public API.
//
// A process's first CPU creation creates the LLVM JIT and links the
// built-in generic code (tiered) under locks of the backend; a fork made
// meanwhile on another thread must wait for them instead of giving the child
// locks that no thread of its own will release (before the fix, 37 children
// in 40 hung in tiered mode, 17 in 20 in sync mode). And a child forked
// with specializations queued, or with one running on a thread that waits
// for it, gets its specialized code.
//
// Each round runs in a child of its own (a process creates its JIT once);
// CTest runs each case in a process of its own, so the test process itself
// has created nothing when it forks them. A hang is a failure: wait_child
// kills a child at its deadline.
//
// Not built under AddressSanitizer (tests/fork/CMakeLists.txt): every case
// forks while another thread compiles, and LLVM allocates all along.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/primitive_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "support/child_process.hpp"

namespace pc = primcache;

namespace {

constexpr int k_rounds = 30;

pc::matmul::primitive_desc matmul_pd(pc::engine& eng, std::int64_t m, std::int64_t k,
                                     std::int64_t n) {
  const pc::memory::desc a({m, k}, pc::data_type::f32, pc::format_tag::ab);
  const pc::memory::desc b({k, n}, pc::data_type::f32, pc::format_tag::ab);
  const pc::memory::desc c({m, n}, pc::data_type::f32, pc::format_tag::ab);
  return pc::matmul::primitive_desc(pc::matmul::desc(a, b, c), eng);
}

// Runs an m x 64 x 96 matmul of small integers (exact in f32): 0 when its
// result is right.
int run_matmul(pc::engine& eng, const pc::matmul& prim, std::int64_t m) {
  constexpr std::int64_t k = 64, n = 96;
  pc::memory a(pc::memory::desc({m, k}, pc::data_type::f32, pc::format_tag::ab), eng);
  pc::memory b(pc::memory::desc({k, n}, pc::data_type::f32, pc::format_tag::ab), eng);
  pc::memory c(pc::memory::desc({m, n}, pc::data_type::f32, pc::format_tag::ab), eng);
  auto* pa = static_cast<float*>(a.get_data_handle());
  auto* pb = static_cast<float*>(b.get_data_handle());
  auto* pd = static_cast<float*>(c.get_data_handle());
  for (std::int64_t i = 0; i < m * k; ++i) pa[i] = static_cast<float>(i % 7) - 3.f;
  for (std::int64_t i = 0; i < k * n; ++i) pb[i] = static_cast<float>(i % 5) - 2.f;
  prim.execute(pc::stream(eng),
               {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b}, {PRIMCACHE_ARG_DST, c}});
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float want = 0;
      for (std::int64_t p = 0; p < k; ++p) want += pa[i * k + p] * pb[p * n + j];
      if (pd[i * n + j] != want) return 1;
    }
  }
  return 0;
}

// A 3x3 convolution, 32 -> oc channels over 13 x 17 (the generic
// convolution's tiles are linked on its first tiered creation).
pc::convolution_forward::primitive_desc conv_pd(pc::engine& eng, int oc) {
  const pc::memory::desc src({1, 32, 13, 17}, pc::data_type::f32, pc::format_tag::nChw16c);
  const pc::memory::desc wei({oc, 32, 3, 3}, pc::data_type::f32, pc::format_tag::oihw);
  const pc::memory::desc bias({oc}, pc::data_type::f32, pc::format_tag::a);
  const pc::memory::desc dst({1, oc, 13, 17}, pc::data_type::f32, pc::format_tag::nhwc);
  return pc::convolution_forward::primitive_desc(
      pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                    pc::algorithm::convolution_direct, src, wei, bias, dst, {1, 1},
                                    {1, 1}, {1, 1}),
      eng);
}

enum class first_creation { tiered_matmul, sync_matmul, tiered_convolution };

// One round, in a fresh child: a thread makes the process's first creation
// (which creates the JIT, and in tiered mode links the generic code) while
// this thread forks, 0 to 2.85 ms after it started; the grandchild makes a
// creation of its own (and runs it). Returns the grandchild's wait_child
// status, or the creating thread's failure.
int fork_during_first_creation(first_creation what, int round) {
  pc::set_jit_mode(what == first_creation::sync_matmul ? pc::jit_mode::sync : pc::jit_mode::tiered);
  pc::engine eng(pc::engine_kind::cpu, 0);
  // The runtime's persistent-cache state and primitive caches are made
  // first: they are still made on first use, in function-local statics
  // whose guards a fork can catch held (docs/runtime.md, "fork() during a
  // first use"); this case is about the backend's JIT set-up.
  (void)pc::get_persistent_cache();
  (void)pc::get_primitive_cache_capacity();
  // The descriptors too: the race is with the first primitive's creation.
  const bool conv = what == first_creation::tiered_convolution;
  const auto first_conv = conv ? conv_pd(eng, 48) : pc::convolution_forward::primitive_desc();
  const auto second_conv = conv ? conv_pd(eng, 40) : pc::convolution_forward::primitive_desc();
  const auto first_matmul = matmul_pd(eng, 33, 64, 96);
  const auto second_matmul = matmul_pd(eng, 35, 64, 96);
  int made = 0;
  std::thread first([&] {
    try {
      if (conv) {
        pc::convolution_forward prim(first_conv);
      } else {
        pc::matmul prim(first_matmul);
      }
    } catch (...) {
      made = 40;
    }
  });
  std::this_thread::sleep_for(std::chrono::microseconds((round % 20) * 150));
  const pid_t grandchild = ::fork();
  if (grandchild < 0) {
    first.join();
    return 41;
  }
  if (grandchild == 0) {
    // In tiered mode, whatever the first creation's: the grandchild links
    // code into the JIT on its own thread (the generic kernel) and leaves
    // its own compilation to its pool, on which it does not wait.
    pc::set_jit_mode(pc::jit_mode::tiered);
    int code = 255;
    try {
      if (conv) {
        pc::convolution_forward prim(second_conv);
        code = 0;
      } else {
        pc::matmul prim(second_matmul);
        code = run_matmul(eng, prim, 35) == 0 ? 0 : 42;
      }
    } catch (...) {
      code = 43;
    }
    ::_exit(code);
  }
  const int status = primcache_test::wait_child(grandchild, 30);
  first.join();
  return status != 0 ? status : made;
}

void check_rounds(first_creation what) {
  const std::vector<std::string> failures = primcache_test::run_in_children(
      k_rounds, 60, [what](int round) { return fork_during_first_creation(what, round); });
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

}  // namespace

TEST_CASE("a fork during the process's first tiered matmul leaves a working child",
          "[fork][cpu][jit]") {
  check_rounds(first_creation::tiered_matmul);
}

TEST_CASE("a fork during the process's first sync matmul leaves a working child",
          "[fork][cpu][jit]") {
  check_rounds(first_creation::sync_matmul);
}

TEST_CASE("a fork during the process's first tiered convolution leaves a working child",
          "[fork][cpu][jit]") {
  check_rounds(first_creation::tiered_convolution);
}

// The specializations still queued in the parent are compiled in the child
// without anything asking for them: before the fix the child's pool started
// threads only on its next submit, so a child that created nothing new ran
// the generic code for ever.
TEST_CASE("a child forked with specializations queued gets them without asking",
          "[fork][cpu][tiered]") {
  pc::set_jit_mode(pc::jit_mode::tiered);
  pc::engine eng(pc::engine_kind::cpu, 0);
  std::vector<pc::matmul> prims;
  for (int i = 0; i < 4; ++i) prims.emplace_back(matmul_pd(eng, 61 + i, 512, 384));
  int pending = 0;
  for (const auto& p : prims) pending += p.specialized() ? 0 : 1;
  const int status = primcache_test::run_in_child(60, [&prims] {
    // Only looks: no wait, no creation, no execution.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      int specialized = 0;
      for (const auto& p : prims) specialized += p.specialized() ? 1 : 0;
      if (specialized == static_cast<int>(prims.size())) return 0;
      if (std::chrono::steady_clock::now() > deadline) return 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  INFO("specializations pending at the fork: " << pending);
  if (pending == 0) WARN("every specialization was in before the fork: nothing was queued");
  CHECK(primcache_test::describe_child_status(status) == "exit status 0");
  for (auto& p : prims) p.wait_until_specialized();
}

// A thread runs a specialization itself inside wait_until_specialized (the
// pool is busy with another) when the process forks: before the fix, the
// job stayed "running" in the child, where no thread runs it, and the
// child's wait_until_specialized waited for ever.
TEST_CASE("a child forked while a thread compiles in wait_until_specialized gets the code",
          "[fork][cpu][tiered]") {
  pc::set_jit_mode(pc::jit_mode::tiered);
  pc::engine eng(pc::engine_kind::cpu, 0);
  std::vector<pc::matmul> prims;
  for (int i = 0; i < 2; ++i) prims.emplace_back(matmul_pd(eng, 128 + i, 768, 3072));
  // The pool compiles the first; this thread takes the second, still queued.
  // It stays until the child is done, so that the fork catches it waiting
  // or compiling, never exiting.
  std::atomic<bool> release{false};
  std::thread waiter([&prims, &release] {
    prims[1].wait_until_specialized();
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int status = primcache_test::run_in_child(60, [&prims] {
    prims[1].wait_until_specialized();
    prims[0].wait_until_specialized();
    return prims[1].specialized() && prims[0].specialized() ? 0 : 1;
  });
  release.store(true);
  waiter.join();
  CHECK(primcache_test::describe_child_status(status) == "exit status 0");
  prims[0].wait_until_specialized();
}
