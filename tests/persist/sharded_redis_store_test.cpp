// The sharded Redis store against three real redis-servers started by the
// test on loopback ports: the URL list parser (and its errors, passwords
// redacted), keys spread over every shard, one key on one shard whatever
// the list's order or the process, removing (or adding) a server moving
// only the keys that lived on (or now win) it, a killed or stopped shard
// opening only its own breaker while the others keep serving hits — and
// never waiting on it — and recovery; sizes, stats, clear and control
// aggregated over shards, with each shard's breaker shown.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/registration.hpp"
#include "primcache/persist/sharded_redis_store.hpp"
#include "primcache/persist/store_spec.hpp"
#include "primcache/persist/tiered_store.hpp"
#include "redis_test_support.hpp"

using primcache::blob_store;
using primcache::breaker_state;
using primcache::put_status;
using primcache::redis_store_options;
using primcache::sharded_redis_store;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::raw_redis;
using primcache::test::redis_server;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

redis_store_options shard_options(int port, std::string prefix = "sh") {
  redis_store_options o;
  o.host = "127.0.0.1";
  o.port = port;
  o.prefix = std::move(prefix);
  o.format.library_version = "test-1";
  // Generous for a loaded machine where no failure is meant; the failure
  // tests set their own.
  o.connect_timeout = 500ms;
  o.command_timeout = 500ms;
  o.breaker.failure_threshold = 3;
  o.breaker.cool_down = 300ms;
  return o;
}

std::vector<redis_store_options> options_for(const std::vector<int>& ports) {
  std::vector<redis_store_options> out;
  for (int p : ports) out.push_back(shard_options(p));
  return out;
}

std::string key_name(int i) {
  return "kernel-" + std::to_string(i);
}

std::string name_of(int port) {
  return "127.0.0.1:" + std::to_string(port);
}

template <typename F>
std::chrono::milliseconds time_of(F&& f) {
  const auto t0 = clock_type::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
}

// Three servers and a raw client on each.
struct three_servers {
  std::array<redis_server, 3> servers;
  std::array<std::unique_ptr<raw_redis>, 3> raw;
  three_servers() {
    for (int i = 0; i < 3; ++i) raw[i] = std::make_unique<raw_redis>(servers[i].port());
  }
  std::vector<int> ports() const {
    return {servers[0].port(), servers[1].port(), servers[2].port()};
  }
  // The server (index) whose database holds `redis_key`; -1 if none, -2 if
  // several.
  int holder(const std::string& redis_key) {
    int found = -1;
    for (int i = 0; i < 3; ++i) {
      if (raw[i]->exists(redis_key)) found = found == -1 ? i : -2;
    }
    return found;
  }
};

constexpr int key_count = 300;

}  // namespace

TEST_CASE("a redis URL list is parsed strictly", "[persist][redis][shard][url]") {
  SECTION("one URL is parsed as parse_redis_url does") {
    auto v = primcache::parse_redis_url_list("redis://h1:7000/pc?ttl=5");
    REQUIRE(v.size() == 1);
    CHECK(v[0].host == "h1");
    CHECK(v[0].port == 7000);
    CHECK(v[0].ttl_seconds == 5);
  }
  SECTION("a ',' in the password of a single URL still works") {
    auto v = primcache::parse_redis_url_list("redis://:pa,ss@h1:7000/pc");
    REQUIRE(v.size() == 1);
    CHECK(v[0].password == "pa,ss");
    CHECK(primcache::redact_redis_url_list("redis://:pa,ss@h1:7000/pc") ==
          "redis://***@h1:7000/pc");
  }
  SECTION("a list: each URL with its own credentials, prefix and parameters") {
    auto v = primcache::parse_redis_url_list(
        "redis://:one@h1:7000/pc?command_timeout_ms=20, redis://h2/other,"
        "redis://u:two%2C@[::1]:7002/pc?breaker_failures=9");
    REQUIRE(v.size() == 3);
    CHECK(v[0].host == "h1");
    CHECK(v[0].password == "one");
    CHECK(v[0].command_timeout == 20ms);
    CHECK(v[1].host == "h2");
    CHECK(v[1].port == 6379);
    CHECK(v[1].prefix == "other");
    CHECK(v[1].password.empty());
    CHECK(v[1].command_timeout == 50ms);
    CHECK(v[2].host == "::1");
    CHECK(v[2].username == "u");
    CHECK(v[2].password == "two,");
    CHECK(v[2].breaker.failure_threshold == 9);
    CHECK(primcache::redis_shard_name(v[0]) == "h1:7000");
    CHECK(primcache::redis_shard_name(v[2]) == "[::1]:7002");
  }
  SECTION("malformed lists are refused, naming the element, never the password") {
    auto refused = [](const std::string& urls, const std::string& why) {
      INFO(urls);
      try {
        primcache::parse_redis_url_list(urls);
        FAIL("accepted");
      } catch (const primcache::error& e) {
        CHECK(e.code() == primcache::status::invalid_arguments);
        CHECK_THAT(e.message(), Catch::Contains(why));
        CHECK_THAT(e.message(), !Catch::Contains("hunter2"));
      }
    };
    refused("redis://:hunter2@h1/pc,,redis://h2/pc", "element 2 of 3 is empty");
    refused("redis://:hunter2@h1/pc,redis://h2/pc,", "element 3 of 3 is empty");
    refused(",redis://:hunter2@h1/pc,redis://h2/pc", "element 1 of 3 is empty");
    refused("redis://:hunter2@h1/pc,", "element 2 of 2 is empty");
    refused("redis://:hunter2@h1/pc,redis://h2:99999/pc",
            "element 2 of 2: persistent cache redis URL 'redis://h2:99999/pc': the port '99999' "
            "is not in 1-65535");
    refused("redis://h1/pc,redis://:hunter2@h2:0/pc", "the port '0' is not in 1-65535");
    refused("redis://:hunter2@h1:7000/pc,h2:7001/pc",
            "element 2 of 2 ('h2:7001/pc') is not a redis:// URL");
    refused("redis://:hunter2@h1:7000/pc,redis://H1:7000/other",
            "elements 1 and 2 name the same server h1:7000");
    refused("redis://h1/pc,redis://h2/pc,redis://:hunter2@h1:6379/x",
            "elements 1 and 3 name the same server h1:6379");
    refused("redis://h1/pc,rediss://:hunter2@h2/pc?db=1",
            "element 2 of 2: persistent cache redis URL 'rediss://***@h2/pc?db=1': unknown "
            "parameter db");
  }
  SECTION("redaction hides every URL's credentials") {
    CHECK(primcache::redact_redis_url_list("redis://:a@h1/p,redis://u:b@h2/p, redis://h3/p") ==
          "redis://***@h1/p,redis://***@h2/p, redis://h3/p");
  }
}

TEST_CASE("sharded_redis_store::open checks its shards", "[persist][redis][shard]") {
  CHECK_THROWS_WITH(sharded_redis_store::open({}), Catch::Contains("no shard"));
  auto a = shard_options(7000);
  auto b = shard_options(7000);
  b.host = "LOCALHOST";
  a.host = "localhost";
  CHECK_THROWS_WITH(sharded_redis_store::open({a, b}),
                    Catch::Contains("shards 1 and 2 name the same server localhost:7000"));
  // Two names, one address.
  b.host = "127.0.0.1";
  CHECK_THROWS_WITH(sharded_redis_store::open({a, b}),
                    Catch::Contains("resolve to the same server"));
  b.port = 7001;
  CHECK(sharded_redis_store::open({a, b})->shard_count() == 2);
  auto bad = shard_options(7002);
  bad.prefix = "";
  CHECK_THROWS_AS(sharded_redis_store::open({a, bad}), primcache::error);
}

TEST_CASE("keys spread over every shard, one key on one shard", "[persist][redis][shard]") {
  three_servers t;
  auto s = sharded_redis_store::open(options_for(t.ports()));
  REQUIRE(s->shard_count() == 3);
  CHECK(s->describe() == "sharded redis [redis " + name_of(t.ports()[0]) + "/sh, redis " +
                             name_of(t.ports()[1]) + "/sh, redis " + name_of(t.ports()[2]) +
                             "/sh]");
  std::array<int, 3> per_shard{};
  for (int i = 0; i < key_count; ++i) {
    const std::string k = key_name(i);
    REQUIRE(s->put(as_bytes(k), payload_of(k, 200 + i)).status == put_status::stored);
    const int h = t.holder(s->shard(0).redis_key(as_bytes(k)));
    REQUIRE(h >= 0);  // on exactly one server
    CHECK(static_cast<std::size_t>(h) == s->shard_of(as_bytes(k)));
    ++per_shard[h];
  }
  // Expected 100 each (sd ~8): every shard holds a fair share.
  for (int n : per_shard) {
    CHECK(n > 60);
    CHECK(n < 140);
  }
  for (int i = 0; i < key_count; ++i) {
    const std::string k = key_name(i);
    auto got = s->get(as_bytes(k));
    REQUIRE(got);
    CHECK(*got == payload_of(k, 200 + i));
  }
  auto st = s->stats();
  CHECK(st.writes == key_count);
  CHECK(st.hits == key_count);
  CHECK(st.breaker_state == 0);
  auto shards = s->shards();
  REQUIRE(shards.size() == 3);
  std::uint64_t writes = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(shards[i].name == "redis " + name_of(t.ports()[i]) + "/sh");
    CHECK(shards[i].stats.writes == static_cast<std::uint64_t>(per_shard[i]));
    CHECK(shards[i].stats.hits == static_cast<std::uint64_t>(per_shard[i]));
    writes += shards[i].stats.writes;
  }
  CHECK(writes == key_count);

  // size() sums the shards' walks; clear() empties every shard.
  std::uint64_t sum = 0;
  for (int i = 0; i < 3; ++i) sum += s->shard(i).size();
  CHECK(sum > 0);
  CHECK(s->size() == sum);
  CHECK(s->stats().bytes == sum);
  s->clear();
  CHECK(s->size() == 0);
  for (int i = 0; i < 3; ++i) CHECK(t.raw[i]->command({"DBSIZE"}) == "0");

  // erase reaches the key's shard; capacity applies to every shard.
  REQUIRE(s->put(as_bytes("e"), payload_of("e", 10)).status == put_status::stored);
  CHECK(t.holder(s->shard(0).redis_key(as_bytes("e"))) ==
        static_cast<int>(s->shard_of(as_bytes("e"))));
  CHECK(s->erase(as_bytes("e")));
  CHECK_FALSE(s->erase(as_bytes("e")));
  CHECK_FALSE(s->get(as_bytes("e")));
  s->set_capacity(3);
  CHECK(s->capacity() == 3);
  for (int i = 0; i < 3; ++i) CHECK(s->shard(i).capacity() == 3);
  CHECK(s->put(as_bytes("big"), payload_of("big", 4 << 20)).status == put_status::too_large);
}

TEST_CASE("placement is the same in every instance and process, whatever the list's order",
          "[persist][redis][shard]") {
  three_servers t;
  const std::vector<int> p = t.ports();
  auto a = sharded_redis_store::open(options_for(p));
  auto b = sharded_redis_store::open(options_for({p[2], p[0], p[1]}));
  // Other prefixes and parameters do not move keys: only the servers' names count.
  auto c_opts = options_for({p[1], p[2], p[0]});
  for (auto& o : c_opts) {
    o.prefix = "other";
    o.command_timeout = 900ms;
  }
  auto c = sharded_redis_store::open(c_opts);
  for (int i = 0; i < key_count; ++i) {
    const auto k = as_bytes(key_name(i));
    const std::string& where = a->shard_name(a->shard_of(k));
    CHECK(b->shard_name(b->shard_of(k)) == where);
    CHECK(c->shard_name(c->shard_of(k)) == where);
  }

  // A forked process with the list reversed writes every key; each lands on
  // the server this process's store places it on.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int bad = 0;
    try {
      auto own = sharded_redis_store::open(options_for({p[2], p[1], p[0]}));
      for (int i = 0; i < key_count; ++i) {
        const std::string k = key_name(i);
        if (own->put(as_bytes(k), payload_of(k, 100)).status != put_status::stored) ++bad;
      }
    } catch (...) {
      bad = 1;
    }
    ::_exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  for (int i = 0; i < key_count; ++i) {
    const std::string k = key_name(i);
    const int h = t.holder(a->shard(0).redis_key(as_bytes(k)));
    CHECK(h == static_cast<int>(a->shard_of(as_bytes(k))));
    auto got = a->get(as_bytes(k));
    REQUIRE(got);
    CHECK(*got == payload_of(k, 100));
  }
}

TEST_CASE("removing a server moves only its keys; adding one moves only the keys it wins",
          "[persist][redis][shard]") {
  three_servers t;
  const std::vector<int> p = t.ports();
  auto three = sharded_redis_store::open(options_for(p));
  std::map<int, int> holder;
  for (int i = 0; i < key_count; ++i) {
    const std::string k = key_name(i);
    REQUIRE(three->put(as_bytes(k), payload_of(k, 100)).status == put_status::stored);
    holder[i] = t.holder(three->shard(0).redis_key(as_bytes(k)));
    REQUIRE(holder[i] >= 0);
  }
  // Server 1 leaves the list.
  auto two = sharded_redis_store::open(options_for({p[0], p[2]}));
  int moved = 0, lived_on_removed = 0, hits = 0;
  for (int i = 0; i < key_count; ++i) {
    const std::string k = key_name(i);
    const std::string now = two->shard_name(two->shard_of(as_bytes(k)));
    if (now != name_of(p[holder[i]])) ++moved;
    if (holder[i] == 1) {
      ++lived_on_removed;
      CHECK_FALSE(two->get(as_bytes(k)));  // a miss: compiled and written to its new shard
      CHECK(two->put(as_bytes(k), payload_of(k, 100)).status == put_status::stored);
    } else {
      CHECK(now == name_of(p[holder[i]]));  // stays where it was: a hit
      if (two->get(as_bytes(k))) ++hits;
    }
  }
  CHECK(lived_on_removed > 0);
  CHECK(moved == lived_on_removed);
  CHECK(hits == key_count - lived_on_removed);
  for (int i = 0; i < key_count; ++i) CHECK(two->get(as_bytes(key_name(i))));

  // A fourth server joins (nothing listens there: placement needs no
  // connection): a key moves only to it, about a quarter of them.
  const int fourth = primcache::test::free_loopback_port();
  auto four = sharded_redis_store::open(options_for({p[0], p[1], p[2], fourth}));
  int to_fourth = 0;
  for (int i = 0; i < key_count; ++i) {
    const auto k = as_bytes(key_name(i));
    const std::string before = three->shard_name(three->shard_of(k));
    const std::string after = four->shard_name(four->shard_of(k));
    if (after != before) {
      CHECK(after == name_of(fourth));
      ++to_fourth;
    }
  }
  CHECK(to_fourth > key_count / 4 - 35);
  CHECK(to_fourth < key_count / 4 + 35);
}

TEST_CASE("a dead or stopped shard opens only its own breaker; the others keep serving",
          "[persist][redis][shard][failure]") {
  three_servers t;
  auto opts = options_for(t.ports());
  for (auto& o : opts) {
    o.connect_timeout = 400ms;
    o.command_timeout = 400ms;
  }
  auto s = sharded_redis_store::open(opts);
  std::array<std::vector<std::string>, 3> keys;
  for (int i = 0; i < 90; ++i) {
    const std::string k = key_name(i);
    REQUIRE(s->put(as_bytes(k), payload_of(k, 500)).status == put_status::stored);
    keys[s->shard_of(as_bytes(k))].push_back(k);
  }
  for (const auto& v : keys) REQUIRE(v.size() >= 4);
  for (const auto& v : keys) {
    for (const auto& k : v) REQUIRE(s->get(as_bytes(k)));  // a pooled connection on each
  }

  int failing = 1;
  SECTION("SIGSTOP") {
    failing = 1;
    t.servers[1].pause();
  }
  SECTION("SIGKILL") {
    failing = 2;
    t.servers[2].kill();
  }
  // The failing shard's keys miss within its timeouts; its breaker opens.
  for (int i = 0; i < 3; ++i) {
    auto took = time_of([&] { CHECK_FALSE(s->get(as_bytes(keys[failing][i]))); });
    CHECK(took < 2500ms);  // 800 ms, and room for a loaded machine under sanitizers
  }
  auto shards = s->shards();
  for (int i = 0; i < 3; ++i) {
    INFO("shard " << i);
    CHECK(shards[i].stats.breaker_state ==
          static_cast<std::uint64_t>(i == failing ? breaker_state::open : breaker_state::closed));
    CHECK(shards[i].stats.remote_errors == (i == failing ? 3u : 0u));
  }
  // Partly open: the aggregate says so (2), the shards say which.
  CHECK(s->stats().breaker_state == 2);
  {
    primcache::control_registry registry;
    auto reg = primcache::register_blob_store(*s, "persistent", registry);
    auto info = registry.find_cache("persistent").info();
    std::map<std::string, std::uint64_t> extra(info.extra.begin(), info.extra.end());
    CHECK(extra["shards"] == 3);
    CHECK(extra["breaker_state"] == 2);
    for (int i = 0; i < 3; ++i) {
      const std::string p = "shard" + std::to_string(i) + "_";
      REQUIRE(extra.count(p + "breaker_state") == 1);
      CHECK(extra[p + "breaker_state"] == (i == failing ? 1u : 0u));
      CHECK(extra[p + "breaker_opens"] == (i == failing ? 1u : 0u));
      CHECK(extra[p + "remote_errors"] == (i == failing ? 3u : 0u));
      CHECK(extra[p + "writes"] == keys[i].size());
    }
  }
  // Open: the failing shard's keys cost nothing; every other key still hits.
  for (const auto& k : keys[failing]) {
    auto took = time_of([&] { CHECK_FALSE(s->get(as_bytes(k))); });
    CHECK(took < 300ms);  // a call that asked the server would wait 800 ms
  }
  for (int i = 0; i < 3; ++i) {
    if (i == failing) continue;
    for (const auto& k : keys[i]) {
      auto got = s->get(as_bytes(k));
      REQUIRE(got);
      CHECK(*got == payload_of(k, 500));
    }
  }
  // clear() clears the live shards and names the one it could not.
  try {
    s->clear();
    FAIL("clear() succeeded with a shard down");
  } catch (const primcache::error& e) {
    CHECK(e.code() == primcache::status::runtime_error);
    CHECK_THAT(e.message(), Catch::Contains(name_of(t.ports()[failing])));
  }
  for (int i = 0; i < 3; ++i) {
    if (i != failing) CHECK(t.raw[i]->command({"DBSIZE"}) == "0");
  }

  // Recovery: the server is back, the cool-down passes, the probe closes it.
  if (failing == 1) {
    t.servers[1].resume();
  } else {
    t.servers[2].restart();  // empty
    t.raw[2] = std::make_unique<raw_redis>(t.servers[2].port());
  }
  std::this_thread::sleep_for(400ms);  // the cool-down is 300 ms
  const std::string& k = keys[failing][0];
  auto r = s->put(as_bytes(k), payload_of(k, 500));
  INFO(r.message);
  // A stopped server kept its data; a killed one came back empty.
  CHECK(r.status == (failing == 1 ? put_status::exists : put_status::stored));
  CHECK(s->shards()[failing].stats.breaker_state == 0);
  CHECK(s->stats().breaker_state == 0);
  auto got = s->get(as_bytes(k));
  REQUIRE(got);
  CHECK(*got == payload_of(k, 500));
}

TEST_CASE("a stalled shard never stalls calls to the others", "[persist][redis][shard][failure]") {
  three_servers t;
  auto opts = options_for(t.ports());
  // Shard 1 waits long and never gives up (its breaker stays closed), so
  // a call to it stalls for its whole timeout.
  opts[1].connect_timeout = 3000ms;
  opts[1].command_timeout = 3000ms;
  opts[1].breaker.failure_threshold = 1000;
  auto s = sharded_redis_store::open(opts);
  std::array<std::vector<std::string>, 3> keys;
  for (int i = 0; i < 60; ++i) {
    const std::string k = key_name(i);
    REQUIRE(s->put(as_bytes(k), payload_of(k, 500)).status == put_status::stored);
    keys[s->shard_of(as_bytes(k))].push_back(k);
  }
  REQUIRE(keys[1].size() >= 1);
  t.servers[1].pause();
  std::atomic<bool> stalling{true};
  std::thread stuck([&] {
    s->get(as_bytes(keys[1][0]));  // on a pooled connection: 6 s
    stalling = false;
  });
  std::this_thread::sleep_for(100ms);  // the thread is inside a stalled call
  std::chrono::milliseconds slowest{0};
  int served = 0;
  while (stalling) {
    for (int i : {0, 2}) {
      for (const auto& k : keys[i]) {
        slowest = std::max(slowest, time_of([&] {
                             if (s->get(as_bytes(k))) ++served;
                           }));
      }
    }
  }
  stuck.join();
  t.servers[1].resume();
  CHECK(served > 0);
  // A call waiting on shard 1 would take up to its 6 s deadline; a healthy
  // one a millisecond (the bound is room for a loaded machine and sanitizers).
  CHECK(slowest < 3000ms);
  CHECK(s->shards()[1].stats.timeouts == 1);
  CHECK(s->shards()[0].stats.remote_errors == 0);
  CHECK(s->shards()[2].stats.remote_errors == 0);
}

TEST_CASE("open_store opens a sharded store from a URL list", "[persist][redis][shard]") {
  three_servers t;
  const std::vector<int> p = t.ports();
  primcache::store_spec spec;
  spec.redis_url = "redis://127.0.0.1:" + std::to_string(p[0]) +
                   "/pc?command_timeout_ms=500,redis://127.0.0.1:" + std::to_string(p[1]) +
                   "/pc?command_timeout_ms=500,redis://127.0.0.1:" + std::to_string(p[2]) +
                   "/pc?command_timeout_ms=500";
  spec.format.library_version = "test-1";
  spec.capacity_mb = 7;
  SECTION("alone: the sharded store") {
    auto s = primcache::open_store(spec);
    auto* sharded = dynamic_cast<sharded_redis_store*>(s.get());
    REQUIRE(sharded != nullptr);
    CHECK(sharded->shard_count() == 3);
    CHECK(s->capacity() == 7);
    REQUIRE(s->put(as_bytes("k"), payload_of("k", 10)).status == put_status::stored);
    CHECK(t.holder(sharded->shard(0).redis_key(as_bytes("k"))) ==
          static_cast<int>(sharded->shard_of(as_bytes("k"))));
    spec.read_only = true;
    auto ro = primcache::open_store(spec);
    CHECK(ro->read_only());
    CHECK(ro->put(as_bytes("k2"), payload_of("k2", 10)).status == put_status::read_only);
    CHECK_THROWS_AS(ro->clear(), primcache::error);
  }
  SECTION("behind a directory: the tiered store shows the shards") {
    primcache::test::temp_dir dir;
    spec.dir = dir.path() + "/cache";
    auto s = primcache::open_store(spec);
    auto* tiered = dynamic_cast<primcache::tiered_store*>(s.get());
    REQUIRE(tiered != nullptr);
    REQUIRE(s->put(as_bytes("k"), payload_of("k", 10)).status == put_status::stored);
    tiered->flush();
    auto shards = s->shards();
    REQUIRE(shards.size() == 3);
    std::uint64_t writes = 0;
    for (const auto& sh : shards) writes += sh.stats.writes;
    CHECK(writes == 1);
  }
  SECTION("a malformed list is refused") {
    spec.redis_url = "redis://127.0.0.1:1/pc,,redis://127.0.0.1:2/pc";
    CHECK_THROWS_WITH(primcache::open_store(spec), Catch::Contains("element 2 of 3 is empty"));
  }
}
