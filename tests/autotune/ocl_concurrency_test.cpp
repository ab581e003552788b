// OpenCL primitives tuning from several threads at once (ThreadSanitizer in
// CI, label `concurrency`): two threads share a problem (one tunes it, the
// other waits for nothing and runs it), two others tune their own, a matmul
// and a convolution; every result equals the reference.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "ocl_support.hpp"

using namespace primcache;
using namespace ocl_tune_test;

TEST_CASE("OpenCL primitives tune from several threads at once", "[autotune][ocl][threads]") {
  set_tune_max_nconfigs(3);
  const tune_stats s0 = get_tune_stats();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  const int shapes[3][3] = {{19, 37, 23}, {19, 37, 23}, {30, 20, 48}};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      matmul_case c(shapes[t][0], shapes[t][1], shapes[t][2], 60 + t);
      c.attr.set_tunable(true);
      const matmul p(c.pd());
      for (int i = 0; i < 2; ++i) {
        c.run(p);
        bad += c.bad();
      }
    });
  }
  threads.emplace_back([&] {
    conv_case c(6, 16, 8, 3, 1, 1, 70);
    c.attr.set_tunable(true);
    const convolution_forward p(c.pd());
    for (int i = 0; i < 2; ++i) {
      c.run(p);
      bad += c.bad();
    }
  });
  for (auto& th : threads) th.join();
  CHECK(bad.load() == 0);
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 3);
  CHECK(s1.failed == s0.failed);
  CHECK(s1.wrong_candidates == s0.wrong_candidates);
  set_tune_max_nconfigs(40);
}
