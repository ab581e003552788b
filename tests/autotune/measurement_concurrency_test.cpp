// Tunings of different problems at once take turns measuring: no two
// tunings' flushes and timed runs overlap, builds still do, a tuning
// started inside a candidate's run (on the same thread) measures without
// waiting for itself, and a fork() child can tune whatever the parent's
// threads were doing (run under ThreadSanitizer in CI).
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.hpp"
#include "primcache/autotune/tuner.hpp"
#include "support/child_process.hpp"

using namespace primcache;
using primcache::autotune_test::fake_clock;
using primcache::autotune_test::fake_options;
using primcache::autotune_test::scripted_candidates;

namespace {

// Default 1000 ns, candidate `fastest` 400 ns, the others 900 ns: the
// scripted winner is `fastest` (the fake clock ignores real time).
std::vector<std::vector<std::int64_t>> times_with_winner(std::size_t count, std::size_t fastest) {
  std::vector<std::vector<std::int64_t>> t(count, std::vector<std::int64_t>{900});
  t[0] = {1000};
  t[fastest] = {400};
  return t;
}

// A tuning of its own (clock, candidates) whose winner is `fastest`:
// whether it picked it.
bool tunes_right(std::size_t fastest) {
  fake_clock clk;
  scripted_candidates s(clk, times_with_winner(4, fastest));
  return tune(s.callbacks(), fake_options(clk)).winner == fastest;
}

// `run`, whose first call sets `measuring` (under `mu`, notifying `cv`) and
// then waits up to 30 s for `go`; `*came` (when given) says whether it came.
std::function<void(std::size_t)> pausing_first_run(std::function<void(std::size_t)> run,
                                                   std::mutex& mu, std::condition_variable& cv,
                                                   bool& measuring, const bool& go,
                                                   bool* came = nullptr) {
  return [&mu = mu, &cv = cv, &measuring = measuring, &go = go, run = std::move(run), came,
          once = true](std::size_t i) mutable {
    if (once) {
      once = false;
      std::unique_lock<std::mutex> l(mu);
      measuring = true;
      cv.notify_all();
      const bool waited = cv.wait_for(l, std::chrono::seconds(30), [&] { return go; });
      if (came != nullptr) *came = waited;
    }
    run(i);
  };
}

// How many tunings' measuring callbacks (a flush, a timed run, the
// confirmation's untimed warm-up) run at this moment, and the most at once.
struct overlap_meter {
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  void enter() {
    const int now = inside.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
  }
  void leave() { inside.fetch_sub(1); }
};

}  // namespace

TEST_CASE("tunings of different problems never measure at once",
          "[autotune][concurrency][exclusive]") {
  constexpr int kThreads = 4;
  constexpr int kProblems = 3;
  overlap_meter meter;
  std::atomic<int> wrong_winners{0};
  std::vector<std::thread> tuners;
  for (int t = 0; t < kThreads; ++t) {
    tuners.emplace_back([&, t] {
      for (int p = 0; p < kProblems; ++p) {
        fake_clock clk;
        const std::size_t fastest = static_cast<std::size_t>((t + p) % 3 + 1);
        scripted_candidates s(clk, times_with_winner(4, fastest));
        tuning_callbacks cb = s.callbacks();
        // Each measuring callback lasts a real millisecond, counted as
        // inside: two tunings measuring at once would overlap there.
        auto inside = [&meter](const auto& body) {
          meter.enter();
          body();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          meter.leave();
        };
        cb.run = [inside, run = cb.run](std::size_t i) { inside([&] { run(i); }); };
        tune_options o = fake_options(clk);
        o.flush = [inside, flush = s.flusher()] { inside(flush); };
        const tune_result r = tune(cb, o);
        if (r.winner != fastest) ++wrong_winners;
      }
    });
  }
  for (auto& th : tuners) th.join();
  CHECK(wrong_winners.load() == 0);
  // Before measurements were exclusive: 2 or more (each thread mostly
  // inside its runs).
  CHECK(meter.most.load() == 1);
}

TEST_CASE("a tuning builds its candidates while another measures",
          "[autotune][concurrency][exclusive]") {
  // The first tuning's first timed run waits until the second has built
  // its default, and that build waits until the first is measuring: both
  // go through only when builds are outside the measuring turn (a turn that
  // covered a whole tuning would keep the second's build waiting, and the
  // first's run would give up).
  std::mutex mu;
  std::condition_variable cv;
  bool measuring = false, built = false, saw_build = false, saw_measuring = false;
  constexpr auto kPatience = std::chrono::seconds(30);
  bool first_ok = false, second_ok = false;
  std::thread first([&] {
    fake_clock clk;
    scripted_candidates s(clk, times_with_winner(4, 2));
    tuning_callbacks cb = s.callbacks();
    cb.run = pausing_first_run(cb.run, mu, cv, measuring, built, &saw_build);
    first_ok = tune(cb, fake_options(clk)).winner == 2;
  });
  std::thread second([&] {
    fake_clock clk;
    scripted_candidates s(clk, times_with_winner(4, 3));
    tuning_callbacks cb = s.callbacks();
    cb.build = [&, build = cb.build, once = true](std::size_t i) mutable {
      if (once) {
        once = false;
        std::unique_lock<std::mutex> l(mu);
        saw_measuring = cv.wait_for(l, kPatience, [&] { return measuring; });
        built = true;
        cv.notify_all();
      }
      build(i);
    };
    second_ok = tune(cb, fake_options(clk)).winner == 3;
  });
  first.join();
  second.join();
  CHECK(saw_measuring);
  CHECK(saw_build);
  CHECK(first_ok);
  CHECK(second_ok);
}

TEST_CASE("a tuning started inside a candidate's run measures on the same thread",
          "[autotune][concurrency][exclusive]") {
  // The outer tuning holds the measuring turn while its candidate runs; the
  // nested one (a candidate that tunes a primitive of its own) takes it
  // again on the same thread instead of waiting for itself. A deadlock here
  // shows as the test's timeout.
  fake_clock clk;
  scripted_candidates s(clk, times_with_winner(4, 1));
  tuning_callbacks cb = s.callbacks();
  int nested = 0;
  bool nested_ok = false;
  cb.run = [&, run = cb.run](std::size_t i) {
    if (i == 2 && nested++ == 0) nested_ok = tunes_right(3);
    run(i);
  };
  tune_options o = fake_options(clk);
  o.flush = s.flusher();
  CHECK(tune(cb, o).winner == 1);
  CHECK(nested > 0);
  CHECK(nested_ok);
  // And the turn is free again for this thread and others.
  CHECK(tunes_right(2));
  bool other_ok = false;
  std::thread other([&] { other_ok = tunes_right(3); });
  other.join();
  CHECK(other_ok);
}

TEST_CASE("a child forked while another thread measures can tune, and so can the parent after",
          "[autotune][concurrency][exclusive][fork]") {
  // The child has no copy of the measuring thread: a turn that stayed held
  // there would keep the child's first tuning waiting for ever.
  std::mutex mu;
  std::condition_variable cv;
  bool measuring = false, forked = false;
  bool measurer_ok = false;
  std::thread measurer([&] {
    fake_clock clk;
    scripted_candidates s(clk, times_with_winner(4, 2));
    tuning_callbacks cb = s.callbacks();
    cb.run = pausing_first_run(cb.run, mu, cv, measuring, forked);
    measurer_ok = tune(cb, fake_options(clk)).winner == 2;
  });
  {
    std::unique_lock<std::mutex> l(mu);
    REQUIRE(cv.wait_for(l, std::chrono::seconds(30), [&] { return measuring; }));
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(tunes_right(3) && tunes_right(1) ? 0 : 1);
  {
    std::lock_guard<std::mutex> l(mu);
    forked = true;
  }
  cv.notify_all();
  const int status = primcache_test::wait_child(pid, 30);
  measurer.join();
  INFO("the child: " << primcache_test::describe_child_status(status));
  CHECK(status == 0);
  CHECK(measurer_ok);
  CHECK(tunes_right(2));
}

TEST_CASE("a child forked inside a measurement finishes that tuning and tunes again",
          "[autotune][concurrency][exclusive][fork]") {
  // fork() from a candidate's run (the forking thread holds the turn): the
  // child goes on with the tuning, whose turn it holds there too, then
  // tunes another problem; the parent does the same.
  fake_clock clk;
  scripted_candidates s(clk, times_with_winner(4, 2));
  tuning_callbacks cb = s.callbacks();
  pid_t pid = -1;
  cb.run = [&, run = cb.run](std::size_t i) {
    if (i == 1 && pid < 0) {
      std::fflush(nullptr);
      pid = ::fork();
    }
    run(i);
  };
  const bool outer_ok = tune(cb, fake_options(clk)).winner == 2;
  if (pid == 0) ::_exit(outer_ok && tunes_right(3) ? 0 : 1);
  REQUIRE(pid > 0);
  const int status = primcache_test::wait_child(pid, 30);
  INFO("the child: " << primcache_test::describe_child_status(status));
  CHECK(status == 0);
  CHECK(outer_ok);
  CHECK(tunes_right(1));
}
