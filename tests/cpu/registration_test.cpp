// A second registration of the CPU backend (a program carrying two copies of
// it: its objects and its shared library, or a static archive and a shared
// one) is detected and changes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "primcache/runtime/runtime.hpp"
#include "primitives/cpu_engine.hpp"

using namespace primcache;

TEST_CASE("registering the CPU backend twice is detected and harmless", "[cpu][registration]") {
  engine before(engine_kind::cpu, 0);
  memory::desc md({8, 8}, data_type::f32, format_tag::ab);
  memory a(md, before), c(md, before);
  std::fill_n(static_cast<float*>(a.get_data_handle()), 64, 1.f);

  // What the static initializer of a second copy runs.
  CHECK_FALSE(primcache::cpu_internal::register_cpu_backend());

  CHECK(engine::get_count(engine_kind::cpu) == 1);
  engine after(engine_kind::cpu, 0);
  // The device is the one engines already hold (a second factory would
  // have replaced it, and memory made before would not match it).
  CHECK(&backend::impl_of(after) == &backend::impl_of(before));
  matmul prim(matmul::primitive_desc(matmul::desc(md, md, md), after));
  prim.execute(stream(after),
               {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, a}, {PRIMCACHE_ARG_DST, c}});
  const auto* p = static_cast<const float*>(c.get_data_handle());
  CHECK(std::all_of(p, p + 64, [](float v) { return v == 8.f; }));
  // Each implementation is listed once: the creation error names every
  // implementation that declined, once each.
  try {
    memory::desc s8({8, 8}, data_type::s8, format_tag::ab);
    matmul::primitive_desc(matmul::desc(s8, s8, s8), after);
    FAIL("an s8 matmul was accepted");
  } catch (const error& e) {
    const std::string what = e.what();
    auto count = [&](const std::string& needle) {
      std::size_t n = 0;
      for (auto at = what.find(needle); at != std::string::npos; at = what.find(needle, at + 1))
        ++n;
      return n;
    };
    INFO(what);
    CHECK(count("jit:matmul:") == 1);
    CHECK(count("ref:matmul:") == 1);
  }
}
