// fork() right after a component started its threads: the tiered store's
// background writer and the admin server's I/O threads. A thread allocates
// while it starts, and the AddressSanitizer of GCC 12 and clang 15 does not lock its allocator
// around fork(): a child forked in that moment inherits a size class's lock
// held by a thread it does not have, and its first allocation of that size
// waits forever. open() and start() return once their threads are past
// their start-up, so a fork right after them is safe. (The failure shows
// under AddressSanitizer, where CI runs these too; glibc's malloc locks its
// arenas around fork.)
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "primcache/admin/admin_server.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/tiered_store.hpp"
#include "support/child_process.hpp"
#include "support/sanitizers.hpp"

namespace {

#if PRIMCACHE_TEST_ASAN
constexpr int k_rounds = 16;  // a sanitized fork copies a large shadow mapping
#else
constexpr int k_rounds = 32;
#endif

// Forks at once; the grandchild allocates from every size class and exits
// 0. Returns the grandchild's wait_child status.
int fork_and_allocate() {
  const pid_t grandchild = ::fork();
  if (grandchild < 0) return 2;
  if (grandchild == 0) {
    primcache_test::allocate_from_every_size_class();
    ::_exit(0);
  }
  return primcache_test::wait_child(grandchild, 20);
}

std::unique_ptr<primcache::blob_store> directory(const std::string& path) {
  primcache::directory_store_options o;
  o.path = path;
  o.capacity_mb = 4;
  o.format = {.library_version = "fork-test", .key = nullptr};
  return primcache::directory_store::open(o);
}

}  // namespace

TEST_CASE("a fork right after a tiered store opens leaves a working child", "[fork][persist]") {
  char dir_template[] = "/tmp/primcache_fork_tiered_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  // A failure's status may be the child's or its grandchild's (passed on).
  const std::vector<std::string> failures =
      primcache_test::run_in_children(k_rounds, 60, [&dir](int i) {
        const std::string base = dir + "/" + std::to_string(i);
        auto store =
            primcache::tiered_store::open(directory(base + "-local"), directory(base + "-remote"));
        return fork_and_allocate();
      });
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("a fork right after the admin server starts leaves a working child", "[fork][admin]") {
  const std::vector<std::string> failures = primcache_test::run_in_children(k_rounds, 60, [](int) {
    primcache::admin_options o;
    o.token = "fork-test-token";  // no token file to write
    o.threads = 2;
    primcache::admin_server server = primcache::admin_server::start(o);
    return fork_and_allocate();
  });
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}
