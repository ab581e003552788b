// The built-in shape-generic objects link against what the CPU supports, not
// against a temporarily lowered ISA cap: a descriptor bound to the host's ISA
// before the cap, created under it, must not leave the generic kernel of that
// ISA refused — generic_code keeps a failed link for the life of the process,
// which would turn tiered creation off at that ISA for good.
//
// The scenario needs a process in which nothing has linked the generic
// matmul yet: CTest runs each case in its own process (catch_discover_tests).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"
#include "tiered/generic_code.hpp"
#include "tiered_test_support.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

matmul::primitive_desc make_pd(int m) {
  const memory::desc a({m, 64}, data_type::f32, tag::ab);
  const memory::desc b({64, 96}, data_type::f32, tag::ab);
  const memory::desc c({m, 96}, data_type::f32, tag::ab);
  return matmul::primitive_desc(matmul::desc(a, b, c), tiered_support::cpu());
}

// Clears the cap however the test ends.
struct cap_scope {
  explicit cap_scope(cpu_isa cap) { set_max_cpu_isa(cap); }
  ~cap_scope() { clear_max_cpu_isa(); }
};

}  // namespace

TEST_CASE("a descriptor created under a lowered ISA cap leaves tiered creation on after the cap",
          "[cpu][tiered][isa_cap]") {
  if (!tiered_support::tiered_here()) return;
  const cpu_isa host = effective_isa();
  const auto generic =
      cpu_internal::generic_isa_for(cpu_internal::generic_kernel::matmul, host).value();
  // A cap below the generic object the host's descriptors use.
  if (generic == cpu_isa::x86_64) return;
  const auto cap = static_cast<cpu_isa>(static_cast<int>(generic) - 1);
  INFO("host " << to_string(host) << ", generic object " << to_string(generic) << ", cap "
               << to_string(cap));
  tiered_support::mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);  // every creation a miss

  const matmul::primitive_desc early = make_pd(33);  // bound to the host's ISA
  std::vector<matmul> made;
  {
    cap_scope capped(cap);
    made.emplace_back(early);  // the first tiered matmul at that ISA links its generic object
  }
  // Later creations at the host's ISA run the generic code first. Compiling
  // the specialized kernel takes milliseconds, so at least one of these is
  // still generic when asked right after its creation; before the fix all
  // were compiled synchronously.
  int generic_at_once = 0;
  for (int m : {47, 51, 65}) {
    made.emplace_back(make_pd(m));
    if (!made.back().specialized()) ++generic_at_once;
  }
  CHECK(generic_at_once > 0);
  for (const matmul& p : made) p.wait_until_specialized();
}
