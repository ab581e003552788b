// The tiered store (a directory in front of a real redis-server) and
// open_store: local hits, remote hits copied into the directory, puts
// written through to Redis in the background, the bounded queue dropping
// and counting, and Redis down costing the tier nothing but misses.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "persist_test_support.hpp"
#include "primcache/base/error.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/store_spec.hpp"
#include "primcache/persist/tiered_store.hpp"
#include "redis_test_support.hpp"

using primcache::directory_store;
using primcache::put_status;
using primcache::redis_store;
using primcache::tiered_store;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::raw_redis;
using primcache::test::redis_server;
using primcache::test::temp_dir;
using namespace std::chrono_literals;

namespace {

primcache::entry_format test_format() {
  return {.library_version = "test-1", .key = nullptr};
}

std::unique_ptr<directory_store> local_store(const std::string& path) {
  primcache::directory_store_options o;
  o.path = path;
  o.capacity_mb = 16;
  o.format = test_format();
  return directory_store::open(o);
}

std::unique_ptr<redis_store> remote_store(int port) {
  primcache::redis_store_options o;
  o.port = port;
  o.prefix = "tier";
  o.format = test_format();
  o.breaker.cool_down = 200ms;
  return redis_store::open(o);
}

// A directory store whose put() of one key waits until the test opens the
// gate: the tiered store's writer held in the middle of a job, with more
// queued behind it.
class gated_store final : public primcache::blob_store {
 public:
  gated_store(std::unique_ptr<directory_store> inner, std::string gated_key)
      : inner_(std::move(inner)), gated_key_(std::move(gated_key)) {}

  void open_gate() {
    {
      std::lock_guard g(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Returns once the writer waits at the gate.
  void wait_until_held() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return held_; });
  }

  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override {
    return inner_->get(key);
  }
  primcache::put_result put(std::span<const std::byte> key,
                            std::span<const std::byte> payload) override {
    if (std::string(reinterpret_cast<const char*>(key.data()), key.size()) == gated_key_) {
      std::unique_lock l(mu_);
      held_ = true;
      cv_.notify_all();
      cv_.wait(l, [&] { return open_; });
    }
    return inner_->put(key, payload);
  }
  bool erase(std::span<const std::byte> key) override { return inner_->erase(key); }
  std::uint64_t size() const override { return inner_->size(); }
  std::uint64_t capacity() const override { return inner_->capacity(); }
  void set_capacity(std::uint64_t megabytes) override { inner_->set_capacity(megabytes); }
  void clear() override { inner_->clear(); }
  primcache::blob_store_stats stats() const override { return inner_->stats(); }
  bool read_only() const noexcept override { return inner_->read_only(); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<directory_store> inner_;
  std::string gated_key_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool open_ = false;
};

// Opens `gate` from another thread a little after the calling thread starts
// waiting in the tiered store for the job held at it.
std::thread open_later(gated_store& gate) {
  return std::thread([&gate] {
    std::this_thread::sleep_for(100ms);
    gate.open_gate();
  });
}

}  // namespace

TEST_CASE("the tiered store reads local, then remote, and writes both", "[persist][tiered]") {
  redis_server server;
  temp_dir dir;
  auto t = tiered_store::open(local_store(dir.path()), remote_store(server.port()));
  auto fleet = remote_store(server.port());  // what other processes of the fleet see
  CHECK(t->describe() == "directory " + dir.path() +
                             ", then redis 127.0.0.1:" + std::to_string(server.port()) + "/tier");

  SECTION("a put lands locally at once and in redis in the background") {
    const auto p = payload_of("k", 20000);
    CHECK(t->put(as_bytes("k"), p).status == put_status::stored);
    CHECK(*t->local().get(as_bytes("k")) == p);
    t->flush();
    CHECK(t->queued_writes() == 0);
    CHECK(*fleet->get(as_bytes("k")) == p);
    auto st = t->stats();
    CHECK(st.writes == 1);
    CHECK(st.bytes == t->local().size());
    CHECK(t->remote().stats().writes == 1);
    // A second put finds it locally and queues nothing.
    CHECK(t->put(as_bytes("k"), p).status == put_status::exists);
    t->flush();
    CHECK(t->remote().stats().writes == 1);
  }
  SECTION("a remote hit is returned and copied into the directory") {
    const auto p = payload_of("warm", 30000);
    REQUIRE(fleet->put(as_bytes("warm"), p).status == put_status::stored);
    CHECK_FALSE(t->local().get(as_bytes("warm")));
    auto got = t->get(as_bytes("warm"));
    REQUIRE(got);
    CHECK(*got == p);
    t->flush();
    CHECK(*t->local().get(as_bytes("warm")) == p);  // the next read is local
    auto before = t->remote().stats().hits;
    CHECK(*t->get(as_bytes("warm")) == p);
    CHECK(t->remote().stats().hits == before);
    auto st = t->stats();
    CHECK(st.hits == 2);
    CHECK(st.remote_hits == 1);
    CHECK(st.misses == 0);
  }
  SECTION("a miss in both tiers") {
    CHECK_FALSE(t->get(as_bytes("none")));
    CHECK(t->stats().misses == 1);
  }
  SECTION("erase and clear reach both tiers") {
    t->put(as_bytes("a"), payload_of("a", 10));
    t->put(as_bytes("b"), payload_of("b", 10));
    t->flush();
    CHECK(t->erase(as_bytes("a")));
    CHECK_FALSE(t->local().get(as_bytes("a")));
    CHECK_FALSE(fleet->get(as_bytes("a")));
    t->clear();
    CHECK(t->size() == 0);
    CHECK_FALSE(fleet->get(as_bytes("b")));
  }
  SECTION("capacity is the directory's") {
    t->set_capacity(3);
    CHECK(t->capacity() == 3);
    CHECK(t->local().capacity() == 3);
  }
  SECTION("a corrupt remote value is counted in the tier's stats") {
    raw_redis raw(server.port());
    raw.command({"SET", fleet->redis_key(as_bytes("bad")), "junk"});
    CHECK_FALSE(t->get(as_bytes("bad")));
    CHECK(t->stats().corrupt_entries == 1);
  }
}

TEST_CASE("nothing erased or cleared comes back from the tiered store's queue",
          "[persist][tiered]") {
  redis_server server;
  temp_dir dir;
  auto fleet = remote_store(server.port());
  const auto held = payload_of("held", 100), bad = payload_of("bad", 100);
  REQUIRE(fleet->put(as_bytes("held"), held).status == put_status::stored);
  REQUIRE(fleet->put(as_bytes("bad"), bad).status == put_status::stored);
  auto gated = std::make_unique<gated_store>(local_store(dir.path()), "held");
  gated_store& gate = *gated;
  auto t = tiered_store::open(std::move(gated), remote_store(server.port()));
  // Destroyed before t: a failed REQUIRE must not leave the writer held
  // while t's destructor waits for it.
  struct gate_opener {
    gated_store& gate;
    ~gate_opener() { gate.open_gate(); }
  } open_at_exit{gate};
  // A remote hit queues its local copy; the writer holds at the gate.
  REQUIRE(t->get(as_bytes("held")));
  gate.wait_until_held();

  SECTION("erase() discards the queued local copy of a remote hit") {
    // The caller reads "bad" from the fleet, finds it bad and erases it
    // before the writer reaches its local copy.
    REQUIRE(t->get(as_bytes("bad")));
    CHECK(t->queued_writes() == 1);
    CHECK(t->erase(as_bytes("bad")));
    CHECK(t->queued_writes() == 0);
    gate.open_gate();
    t->flush();
    CHECK_FALSE(t->local().get(as_bytes("bad")));
    CHECK_FALSE(fleet->get(as_bytes("bad")));
    CHECK(t->local().get(as_bytes("held")));
    CHECK(t->stats().dropped_writes == 0);
  }
  SECTION("erase() waits for the write in progress") {
    std::thread opener = open_later(gate);
    CHECK(t->erase(as_bytes("held")));
    opener.join();
    t->flush();
    CHECK_FALSE(t->local().get(as_bytes("held")));
    CHECK_FALSE(fleet->get(as_bytes("held")));
  }
  SECTION("clear() discards every queued write and waits for the one in progress") {
    CHECK(t->put(as_bytes("fresh"), payload_of("fresh", 100)).status == put_status::stored);
    REQUIRE(t->get(as_bytes("bad")));
    CHECK(t->queued_writes() == 2);  // "fresh" to the fleet, "bad" to the directory
    std::thread opener = open_later(gate);
    t->clear();
    opener.join();
    t->flush();
    CHECK(t->queued_writes() == 0);
    CHECK(t->size() == 0);
    for (const char* key : {"held", "bad", "fresh"}) {
      INFO(key);
      CHECK_FALSE(t->local().get(as_bytes(key)));
      CHECK_FALSE(fleet->get(as_bytes(key)));
    }
  }
}

TEST_CASE("the tiered store's queue is bounded: full means dropped and counted",
          "[persist][tiered]") {
  redis_server server;
  temp_dir dir;
  primcache::tiered_store_options o;
  SECTION("by entries") {
    o.max_queued_writes = 0;
  }
  SECTION("by bytes") {
    o.max_queued_bytes = 1000;
  }
  auto t = tiered_store::open(local_store(dir.path()), remote_store(server.port()), o);
  CHECK(t->put(as_bytes("k"), payload_of("k", 5000)).status == put_status::stored);
  t->flush();
  CHECK(t->stats().dropped_writes == 1);
  CHECK(t->local().get(as_bytes("k")));
  CHECK(t->remote().stats().writes == 0);
}

TEST_CASE("the tiered store with redis down: local works, remote costs a bounded miss",
          "[persist][tiered][failure]") {
  temp_dir dir;
  const int port = primcache::test::free_loopback_port();
  auto t = tiered_store::open(local_store(dir.path()), remote_store(port));
  const auto p = payload_of("k", 1000);
  CHECK(t->put(as_bytes("k"), p).status == put_status::stored);
  t->flush();  // the background put fails first; then the gets, one at a time
  CHECK(*t->get(as_bytes("k")) == p);
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(t->get(as_bytes("missing" + std::to_string(i))));
    CHECK(std::chrono::steady_clock::now() - t0 < 1500ms);
  }
  auto st = t->stats();
  CHECK(st.breaker_state == static_cast<std::uint64_t>(primcache::breaker_state::open));
  CHECK(st.remote_errors == 3);  // the background put and two gets; then the breaker
  CHECK(st.breaker_rejections == 2);
  CHECK(st.misses == 4);
  CHECK(st.hits == 1);
}

TEST_CASE("open_store picks the store from a directory and a redis URL", "[persist][spec]") {
  redis_server server;
  temp_dir dir;
  primcache::store_spec spec;
  spec.format = test_format();
  spec.capacity_mb = 5;
  SECTION("a directory alone") {
    spec.dir = dir.path();
    auto s = primcache::open_store(spec);
    REQUIRE(dynamic_cast<directory_store*>(s.get()));
    CHECK(s->capacity() == 5);
  }
  SECTION("redis alone") {
    spec.redis_url = server.url("spec");
    auto s = primcache::open_store(spec);
    REQUIRE(dynamic_cast<redis_store*>(s.get()));
    CHECK(s->put(as_bytes("k"), payload_of("k", 10)).status == put_status::stored);
    CHECK(s->get(as_bytes("k")));
  }
  SECTION("both: tiered, read-only reaching every tier") {
    spec.dir = dir.path();
    spec.redis_url = server.url("spec") + "?ttl=60";
    spec.read_only = true;
    auto s = primcache::open_store(spec);
    auto* t = dynamic_cast<tiered_store*>(s.get());
    REQUIRE(t);
    CHECK(t->local().read_only());
    CHECK(t->remote().read_only());
    CHECK(s->put(as_bytes("k"), payload_of("k", 10)).status == put_status::read_only);
  }
  SECTION("neither") {
    CHECK_THROWS_WITH(primcache::open_store(spec), Catch::Contains("neither a directory nor"));
  }
  SECTION("a malformed URL") {
    spec.dir = dir.path();
    spec.redis_url = "redis://h:1";
    try {
      primcache::open_store(spec);
      FAIL("opened");
    } catch (const primcache::error& e) {
      CHECK(e.code() == primcache::status::invalid_arguments);
      CHECK_THAT(e.message(), Catch::Contains("/PREFIX"));
    }
  }
}
