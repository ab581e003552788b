// The runtime's constant tensor cache API (constant_cache.hpp): the RFC's
// capacity rules per engine kind, the old switch, the admin API's route
// through control, the backends' accessor, previews and refused values.
//
// The caches are the process's. The first test case checks the rules of a
// process that has not touched them yet; ctest runs each case in its own
// process, and run together it comes first (nothing before it uses the
// caches). The other cases set what they start from.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "fake_backend.hpp"
#include "primcache/base/error.hpp"
#include "primcache/const_cache/constant_buffer.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/constant_cache.hpp"

using primcache::constant_tensor_cache;
using primcache::constant_tensor_cache_for;
using primcache::constant_tensor_cache_unlimited;
using primcache::engine_kind;
using primcache::get_constant_tensor_cache_capacity;
using primcache::set_constant_tensor_cache_capacity;

namespace {

constexpr std::size_t KiB = 1024;

// Looks `name` up in `cache`, creating a tensor of `size` bytes on a miss.
// Returns whether the creator ran.
bool use(constant_tensor_cache& cache, const std::string& name, std::size_t size = KiB) {
  bool created = false;
  cache.get_or_add(42, name, size, [&] {
    created = true;
    return primcache::make_constant_buffer(
        size, [](std::size_t n) { return std::malloc(n); },
        [](void* p, std::size_t) { std::free(p); });
  });
  return created;
}

constant_tensor_cache& cpu() {
  return constant_tensor_cache_for(engine_kind::cpu);
}
constant_tensor_cache& gpu0() {
  return constant_tensor_cache_for(engine_kind::gpu, 0);
}

primcache::status status_of(void (*f)()) {
  try {
    f();
  } catch (const primcache::error& e) {
    return e.code();
  }
  return primcache::status::success;
}

}  // namespace

TEST_CASE("the RFC's capacity rules, from a process that has not set any", "[constant][rules]") {
  // Default: unlimited, enabled, never set.
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == constant_tensor_cache_unlimited);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::gpu) == constant_tensor_cache_unlimited);
  CHECK(primcache::get_constant_tensor_cache() == 1);
  CHECK_FALSE(cpu().capacity_set());
  CHECK(use(cpu(), "a"));
  CHECK(use(gpu0(), "g"));
  CHECK_FALSE(use(cpu(), "a"));  // kept

  // The first explicit setting flushes, even to the default it already has.
  set_constant_tensor_cache_capacity(engine_kind::cpu, constant_tensor_cache_unlimited);
  CHECK(cpu().tensor_count() == 0);
  CHECK(gpu0().tensor_count() == 1);  // another kind: untouched
  CHECK(use(cpu(), "a"));

  // A decrease flushes, even when the contents would fit.
  set_constant_tensor_cache_capacity(engine_kind::cpu, 100);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 100);
  CHECK(cpu().tensor_count() == 0);
  CHECK(use(cpu(), "a"));
  CHECK(use(cpu(), "b"));

  // An increase, or the same value, keeps the contents.
  set_constant_tensor_cache_capacity(engine_kind::cpu, 200);
  set_constant_tensor_cache_capacity(engine_kind::cpu, 200);
  CHECK(cpu().tensor_count() == 2);
  CHECK_FALSE(use(cpu(), "a"));
  set_constant_tensor_cache_capacity(engine_kind::cpu, constant_tensor_cache_unlimited);
  CHECK(cpu().tensor_count() == 2);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == constant_tensor_cache_unlimited);

  // 0 flushes and disables: every use computes, nothing is kept.
  set_constant_tensor_cache_capacity(engine_kind::cpu, 0);
  CHECK(cpu().tensor_count() == 0);
  CHECK(use(cpu(), "a"));
  CHECK(use(cpu(), "a"));
  CHECK(cpu().tensor_count() == 0);
  CHECK(primcache::get_constant_tensor_cache() == 1);  // gpu still has a capacity

  // A later increase enables it again.
  set_constant_tensor_cache_capacity(engine_kind::cpu, 50);
  CHECK(use(cpu(), "a"));
  CHECK_FALSE(use(cpu(), "a"));

  // The first setting of gpu flushes it.
  CHECK(gpu0().tensor_count() == 1);
  set_constant_tensor_cache_capacity(engine_kind::gpu, 4096);
  CHECK(gpu0().tensor_count() == 0);
  CHECK(cpu().tensor_count() == 1);
}

TEST_CASE("the old switch maps to the default or 0 for every kind", "[constant][switch]") {
  set_constant_tensor_cache_capacity(engine_kind::cpu, 10);
  set_constant_tensor_cache_capacity(engine_kind::gpu, 20);
  use(cpu(), "a");
  use(gpu0(), "g");

  primcache::set_constant_tensor_cache(0);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 0);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::gpu) == 0);
  CHECK(primcache::get_constant_tensor_cache() == 0);
  CHECK(cpu().tensor_count() == 0);
  CHECK(gpu0().tensor_count() == 0);
  CHECK(use(cpu(), "a"));
  CHECK(cpu().tensor_count() == 0);

  primcache::set_constant_tensor_cache(1);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == constant_tensor_cache_unlimited);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::gpu) == constant_tensor_cache_unlimited);
  CHECK(primcache::get_constant_tensor_cache() == 1);
  CHECK(use(cpu(), "a"));
  CHECK_FALSE(use(cpu(), "a"));
  primcache::set_constant_tensor_cache(7);  // any positive flag: the default, an increase
  CHECK(cpu().tensor_count() == 1);

  // One kind at 0 is not "disabled".
  set_constant_tensor_cache_capacity(engine_kind::cpu, 0);
  CHECK(primcache::get_constant_tensor_cache() == 1);
  set_constant_tensor_cache_capacity(engine_kind::gpu, 0);
  CHECK(primcache::get_constant_tensor_cache() == 0);

  CHECK(status_of([] { primcache::set_constant_tensor_cache(-1); }) ==
        primcache::status::invalid_arguments);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 0);
  primcache::set_constant_tensor_cache(1);
}

TEST_CASE("refused values change nothing", "[constant][errors]") {
  set_constant_tensor_cache_capacity(engine_kind::cpu, 300);
  use(cpu(), "kept");
  using primcache::status;
  CHECK(status_of([] { set_constant_tensor_cache_capacity(engine_kind::cpu, -1); }) ==
        status::invalid_arguments);
  CHECK(status_of([] {
          set_constant_tensor_cache_capacity(engine_kind::cpu,
                                             primcache::max_constant_tensor_cache_capacity + 1);
        }) == status::invalid_arguments);
  CHECK(status_of([] { set_constant_tensor_cache_capacity(static_cast<engine_kind>(3), 10); }) ==
        status::invalid_arguments);
  CHECK(status_of([] { (void)get_constant_tensor_cache_capacity(static_cast<engine_kind>(0)); }) ==
        status::invalid_arguments);
  CHECK(status_of([] { (void)constant_tensor_cache_for(static_cast<engine_kind>(9)); }) ==
        status::invalid_arguments);
  CHECK(status_of([] {
          (void)primcache::preview_constant_tensor_cache_capacity(engine_kind::cpu, -5);
        }) == status::invalid_arguments);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 300);
  CHECK(cpu().tensor_count() >= 1);
  // The largest limited value is accepted (a decrease here: it flushes).
  set_constant_tensor_cache_capacity(engine_kind::cpu,
                                     primcache::max_constant_tensor_cache_capacity);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) ==
        primcache::max_constant_tensor_cache_capacity);
}

TEST_CASE("a preview says what a setting would drop and changes nothing", "[constant][preview]") {
  set_constant_tensor_cache_capacity(engine_kind::cpu, 0);  // empty, whatever came before
  set_constant_tensor_cache_capacity(engine_kind::cpu, 100);
  use(cpu(), "a", 3 * KiB);
  use(cpu(), "b", KiB);
  auto e = primcache::preview_constant_tensor_cache_capacity(engine_kind::cpu, 150);
  CHECK_FALSE(e.flushes);
  CHECK(e.tensors == 0);
  e = primcache::preview_constant_tensor_cache_capacity(engine_kind::cpu, 99);
  CHECK(e.flushes);
  CHECK(e.tensors == 2);
  CHECK(e.bytes == 4 * KiB);
  CHECK(cpu().tensor_count() == 2);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 100);
}

TEST_CASE(
    "a capacity set through control (the admin API) follows the rules and the getter reads it",
    "[constant][control]") {
  set_constant_tensor_cache_capacity(engine_kind::cpu, 0);  // empty, whatever came before
  set_constant_tensor_cache_capacity(engine_kind::cpu, 100);
  use(cpu(), "a");
  auto h = primcache::control().find_cache("constant.cpu");
  h.set_capacity(200);  // increase: keeps
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 200);
  CHECK(cpu().tensor_count() == 1);
  const auto p = h.preview_capacity(64);
  REQUIRE(p.has_value());
  CHECK(p->flushes);
  CHECK(p->entries == 1);
  CHECK(p->bytes == KiB);
  h.set_capacity(64);  // decrease: flushes
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 64);
  CHECK(cpu().tensor_count() == 0);
  h.set_capacity(0);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 0);
  CHECK(use(cpu(), "a"));
  CHECK(cpu().tensor_count() == 0);
}

TEST_CASE("backends find one cache per CPU and one per GPU device", "[constant][devices]") {
  CHECK(&constant_tensor_cache_for(engine_kind::cpu, 0) ==
        &constant_tensor_cache_for(engine_kind::cpu, 3));
  CHECK(cpu().device() == "cpu");
  CHECK(constant_tensor_cache_for(engine_kind::gpu, 2).device() == "gpu.2");
  CHECK(&constant_tensor_cache_for(engine_kind::gpu, 2) != &gpu0());
  CHECK(primcache::control().find_cache("constant.gpu.2").unit() ==
        primcache::capacity_unit::megabytes);
  // A device made after its kind was set starts with the kind's capacity.
  set_constant_tensor_cache_capacity(engine_kind::gpu, 777);
  CHECK(constant_tensor_cache_for(engine_kind::gpu, 5).capacity() == 777);

  fake::install();
  const primcache::engine eng(engine_kind::gpu, 0);
  CHECK(&constant_tensor_cache_for(eng) == &gpu0());
}
