// Crash safety: a child process writing to the directory store is SIGKILLed
// at random points, again and again. Afterwards no entry fails verification,
// the capacity holds, and the store keeps working; verify(true) clears what
// the killed writers left behind (temporaries, a size.txt that lags).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

#include "persist_test_support.hpp"
#include "primcache/persist/directory_store.hpp"

using primcache::directory_store;
using primcache::put_status;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::temp_dir;

namespace {

constexpr std::uint64_t capacity_mb = 2;

primcache::directory_store_options options_for(const std::string& path) {
  primcache::directory_store_options o;
  o.path = path;
  o.capacity_mb = capacity_mb;
  o.format.library_version = "crash-test";
  return o;
}

// The child: writes (and now and then erases) entries of 16-160 KB until it
// is killed, saying on `started` when its first entry is in. Never returns.
[[noreturn]] void write_forever(const std::string& path, int round, int started) {
  auto s = directory_store::open(options_for(path));
  std::minstd_rand rng(static_cast<unsigned>(round) * 7919u + 1u);
  for (int j = 0;; ++j) {
    std::string k = "round-" + std::to_string(round) + "-" + std::to_string(j);
    s->put(as_bytes(k), payload_of(k, 16 * 1024 + rng() % (144 * 1024)));
    if (j == 0) {
      const char one = 1;
      (void)!::write(started, &one, 1);
      ::close(started);
    }
    if (j % 5 == 4)
      s->erase(as_bytes("round-" + std::to_string(round) + "-" + std::to_string(j - 2)));
  }
}

}  // namespace

TEST_CASE("a writer SIGKILLed at random points leaves no bad entry",
          "[persist][directory][crash]") {
  temp_dir dir;
  const std::string path = dir.path() + "/cache";
  directory_store::open(options_for(path));
  std::mt19937 rng(Catch::rngSeed());
  constexpr int rounds = 120;
  int killed_writing = 0;  // rounds whose child was killed before it finished
  int caught_midway = 0;
  for (int round = 0; round < rounds; ++round) {
    int started[2];
    REQUIRE(::pipe(started) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(started[0]);
      write_forever(path, round, started[1]);
    }
    ::close(started[1]);
    // The random delay counts from the child's first stored entry, not from
    // fork(): on a loaded machine a child may not run for milliseconds, and
    // kills timed from fork() then land before it has written anything.
    char one = 0;
    REQUIRE(::read(started[0], &one, 1) == 1);
    ::close(started[0]);
    ::usleep(rng() % 12000);
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++killed_writing;
    // A leftover under .tmp: this kill caught a write (or removal) midway.
    std::error_code ec;
    auto it = std::filesystem::directory_iterator(path + "/.tmp", ec);
    if (!ec && it != std::filesystem::directory_iterator()) ++caught_midway;
    if (round % 20 == 19) {
      auto rep = directory_store::open(options_for(path))->verify(false);
      INFO("after round " << round << ": " << (rep.bad.empty() ? "" : rep.bad[0].message));
      REQUIRE(rep.ok());
      CHECK(rep.bytes <= (capacity_mb << 20));
      // size.txt may be ahead of the entries after a kill, never behind.
      CHECK(rep.recorded_bytes >= rep.bytes);
    }
  }
  CHECK(killed_writing == rounds);
  // The kills land inside writes, not only between them.
  INFO(caught_midway << " of " << rounds << " kills left a write or removal half done");
  CHECK(caught_midway >= rounds / 4);

  auto s = directory_store::open(options_for(path));
  auto rep = s->verify(false);
  CHECK(rep.ok());
  CHECK(rep.entries > 0);
  CHECK(rep.bytes <= (capacity_mb << 20));
  CHECK(rep.recorded_bytes >= rep.bytes);

  auto fixed = s->verify(true);
  CHECK(fixed.ok());
  auto clean = s->verify(false);
  CHECK(clean.bytes == clean.recorded_bytes);
  CHECK(clean.stale_temporaries == 0);

  // The store keeps working: a round trip, and a put that must evict.
  auto big = payload_of("after", 500 * 1024);
  REQUIRE(s->put(as_bytes("after"), big).status == put_status::stored);
  CHECK(*s->get(as_bytes("after")) == big);
  REQUIRE(s->put(as_bytes("after-2"), payload_of("after-2", 1500 * 1024)).status ==
          put_status::stored);
  auto last = s->verify(false);
  CHECK(last.ok());
  CHECK(last.bytes <= (capacity_mb << 20));
  CHECK(last.bytes == last.recorded_bytes);
}
