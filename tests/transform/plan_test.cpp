#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/transform/transform_registry.hpp"

using namespace primcache;

namespace {

kernel_type kt(const char* text) {
  return kernel_type::parse(text);
}

std::vector<transform_kind> kinds(const transform_plan& p) {
  std::vector<transform_kind> k;
  for (const auto& s : p.steps) k.push_back(s.kind);
  return k;
}

// Every step starts where the previous one ended, from `from` to `to`.
void check_chained(const transform_plan& p) {
  kernel_type at = p.from;
  for (const auto& s : p.steps) {
    CHECK(s.from == at);
    at = s.to;
  }
  CHECK(at == p.to);
}

using tk = transform_kind;

}  // namespace

TEST_CASE("plans are the expected chains", "[transform][plan]") {
  transform_registry reg;
  struct expectation {
    const char* from;
    const char* to;
    std::vector<tk> steps;
    std::size_t bytes;
  };
  const std::vector<expectation> cases = {
      {"cpu/f32/abcd/jit", "cpu/f32/abcd/jit", {}, 0},
      {"cpu/f32/abcd/jit", "cpu/f32/acdb/jit", {tk::layout}, 8},
      {"cpu/f32/abcd/jit", "cpu/bf16/abcd/jit", {tk::data_type}, 6},
      // One reorder converts and relays out at once: 4 + 2, not 8 + 6.
      {"cpu/f32/abcd/jit", "cpu/bf16/aBcd16b/jit", {tk::layout_and_data_type}, 6},
      {"cpu/s8/acdb/jit", "cpu/f32/abcd/reference", {tk::layout_and_data_type}, 5},
      // Narrow on the host, then move 2 bytes an element.
      {"cpu/f32/abcd/jit", "gpu:0/bf16/abcd/jit", {tk::data_type, tk::place}, 6 + 4},
      {"cpu/f32/acdb/jit", "gpu:0/f16/abcd/jit", {tk::layout_and_data_type, tk::place}, 6 + 4},
      // Move 2 bytes an element, then widen on the host.
      {"gpu:0/bf16/abcd/jit", "cpu/f32/abcd/jit", {tk::place, tk::data_type}, 4 + 6},
      // Equal bytes either way: the fixed order puts layout first.
      {"gpu:0/f32/abcd/jit", "cpu/f32/acdb/jit", {tk::layout, tk::place}, 8 + 8},
      {"cpu/f32/abcd/jit", "gpu:0/f32/acdb/jit", {tk::layout, tk::place}, 8 + 8},
      // Fusing on the host beats the GPU's layout step (13 bytes, not 21).
      {"gpu:0/f32/abcd/jit", "cpu/s8/acdb/jit", {tk::place, tk::layout_and_data_type}, 8 + 5},
      // The OpenCL reorder relays out f32 only: bf16 goes through the host.
      {"gpu:0/bf16/abcd/jit", "gpu:0/bf16/acdb/jit", {tk::place, tk::layout, tk::place}, 12},
      {"gpu:0/f32/abcd/jit", "gpu:1/f32/abcd/jit", {tk::place, tk::place}, 16},
      // Another library reads the same bytes.
      {"cpu/f32/abcd/jit", "cpu/f32/abcd/reference", {tk::library}, 0},
      // A library change rides along with a step that runs anyway.
      {"cpu/f32/abcd/jit", "cpu/f32/acdb/reference", {tk::layout}, 8},
  };
  for (const auto& c : cases) {
    INFO(c.from << " -> " << c.to);
    const auto plan = reg.plan(kt(c.from), kt(c.to));
    INFO(plan->to_string());
    CHECK(kinds(*plan) == c.steps);
    CHECK(plan->bytes_per_element() == c.bytes);
    check_chained(*plan);
  }
}

TEST_CASE("quantization scales travel with their data type", "[transform][plan]") {
  SECTION("quantizing with a layout change is one fused reorder") {
    const auto p = plan_transform(kt("cpu/f32/abcd/jit"), kt("cpu/s8*0.05/acdb/jit"));
    CHECK(kinds(*p) == std::vector<tk>{tk::layout_and_data_type});
    check_chained(*p);
  }
  SECTION("a change of scale alone is one data-type step") {
    const auto p = plan_transform(kt("cpu/s8*0.05/abcd/jit"), kt("cpu/s8*0.1/abcd/jit"));
    CHECK(kinds(*p) == std::vector<tk>{tk::data_type});
  }
  SECTION("the scale is requantized on the host before a copy to the device") {
    const auto p = plan_transform(kt("cpu/s8*0.05/abcd/jit"), kt("gpu:0/s8*0.1/abcd/jit"));
    CHECK(kinds(*p) == std::vector<tk>{tk::data_type, tk::place});
    check_chained(*p);
    CHECK(p->steps[0].to == kt("cpu/s8*0.1/abcd/jit"));
  }
  SECTION("a device's data is requantized on the host (the device has no such reorder)") {
    const auto p = plan_transform(kt("gpu:0/s8*0.05/abcd/jit"), kt("gpu:0/s8*0.1/abcd/jit"));
    CHECK(kinds(*p) == std::vector<tk>{tk::place, tk::data_type, tk::place});
    check_chained(*p);
  }
  SECTION("a scale that does not fit its type is refused") {
    kernel_type bad = kt("cpu/f32/abcd/jit");
    bad.scale = 0.5f;
    try {
      (void)plan_transform(bad, kt("cpu/s8/abcd/jit"));
      FAIL("planned from " << bad.to_string());
    } catch (const error& e) {
      CHECK(e.code() == status::invalid_arguments);
      CHECK_THAT(e.what(), Catch::Contains("scale 0.5 on f32 data"));
    }
    kernel_type zero = kt("cpu/s8/abcd/jit");
    zero.scale = 0.f;
    CHECK_THROWS_WITH(
        transform_registry::global().add(zero, kt("cpu/f32/abcd/jit"), "z",
                                         [](const memory&, const memory&, const stream&) {}),
        Catch::Contains("not a finite positive number"));
  }
}

TEST_CASE("the global plan cache is listed in control", "[transform][plan][control]") {
  (void)plan_transform(kt("cpu/f32/abcd/jit"), kt("cpu/f32/acdb/jit"));
  control_registry& r = control();
  const cache_handle h = r.find_cache("transform_plan");  // throws when not registered
  CHECK(h.unit() == capacity_unit::entries);
  CHECK(h.size() >= 1);
  const auto hits = h.stats().hits;
  (void)plan_transform(kt("cpu/f32/abcd/jit"), kt("cpu/f32/acdb/jit"));
  CHECK(h.stats().hits == hits + 1);
  r.flush("transform_plan");
  CHECK(h.size() == 0);
}

TEST_CASE("plans print one step per line", "[transform][plan]") {
  transform_registry reg;
  const auto p = reg.plan(kt("gpu:0/bf16/abcd/jit"), kt("cpu/f32/acdb/jit"));
  CHECK(p->to_string() ==
        "gpu:0/bf16/abcd/jit -> cpu/f32/acdb/jit:\n"
        "  place gpu:0/bf16/abcd/jit -> cpu/bf16/abcd/jit (4 B/elem)\n"
        "  layout+data_type cpu/bf16/abcd/jit -> cpu/f32/acdb/jit (6 B/elem)");
  CHECK(reg.plan(kt("cpu/f32/abcd/jit"), kt("cpu/f32/abcd/jit"))->to_string() ==
        "cpu/f32/abcd/jit -> cpu/f32/abcd/jit: nothing to do");
  reg.add(kt("cpu/f32/ab/x"), kt("cpu/f32/ba/x"), "mine",
          [](const memory&, const memory&, const stream&) {});
  CHECK(reg.plan(kt("cpu/f32/ab/x"), kt("cpu/f32/ba/x"))->steps[0].to_string() ==
        "user:mine cpu/f32/ab/x -> cpu/f32/ba/x (8 B/elem)");
}

TEST_CASE("plans move fewer bytes than the fixed layout, type, place order", "[transform][plan]") {
  transform_registry reg;
  // Fixed order: layout on the host (8), f32 -> f16 (6), copy (4) = 18.
  const auto plan = reg.plan(kt("cpu/f32/acdb/jit"), kt("gpu:0/f16/abcd/jit"));
  CHECK(plan->bytes_per_element() == 10);
  // Fixed order for a widening download: copy bf16 with its layout (4),
  // relayout on the host (4), widen (6) = 14; fused: 4 + 6.
  const auto down = reg.plan(kt("gpu:0/bf16/abcd/jit"), kt("cpu/f32/acdb/jit"));
  CHECK(kinds(*down) == std::vector<tk>{tk::place, tk::layout_and_data_type});
  CHECK(down->bytes_per_element() == 10);
}

TEST_CASE("plans made for dims count the padding of blocked layouts", "[transform][plan]") {
  transform_registry reg;
  const kernel_type host = kt("cpu/f32/abcd/jit"), device = kt("gpu:0/f32/aBcd16b/jit");
  // Per element both chains move 16 bytes: the fixed order relays out on
  // the host first, then copies the blocked data.
  CHECK(kinds(*reg.plan(host, device)) == std::vector<tk>{tk::layout, tk::place});
  // With 3 channels padded to 16 the blocked tensor is 16/3 times larger:
  // copy the plain data, relay out on the device.
  const std::int64_t plain = 2 * 3 * 8 * 8 * 4, blocked = 2 * 16 * 8 * 8 * 4;
  const auto padded = reg.plan(host, device, {2, 3, 8, 8});
  INFO(padded->to_string());
  CHECK(kinds(*padded) == std::vector<tk>{tk::place, tk::layout});
  CHECK(padded->bytes() == std::size_t(2 * plain + plain + blocked));
  CHECK(padded->steps[0].bytes == std::size_t(2 * plain));
  CHECK(padded->dims == std::vector<std::int64_t>{2, 3, 8, 8});
  CHECK(padded->steps[1].to_string() ==
        "layout gpu:0/f32/abcd/jit -> gpu:0/f32/aBcd16b/jit (8 B/elem, " +
            std::to_string(plain + blocked) + " B)");
  check_chained(*padded);
  // The same download: relay out on the device, then copy the plain data.
  CHECK(kinds(*reg.plan(device, host, {2, 3, 8, 8})) == std::vector<tk>{tk::layout, tk::place});
  // 32 channels fill two blocks: no padding, the per-element order again.
  const auto full = reg.plan(host, device, {2, 32, 8, 8});
  CHECK(kinds(*full) == std::vector<tk>{tk::layout, tk::place});
  CHECK(full->bytes() == std::size_t(4 * 2 * 32 * 8 * 8 * 4));
  // A plan without dims weighs nothing in bytes.
  CHECK(reg.plan(host, device)->bytes() == 0);
  // Each dims has its own cached plan.
  CHECK(reg.plan(host, device, {2, 3, 8, 8}) == padded);
  CHECK(reg.plan(host, device, {2, 32, 8, 8}) == full);
}

TEST_CASE("dims that a kernel type cannot lay out are refused", "[transform][plan]") {
  transform_registry reg;
  try {
    (void)reg.plan(kt("cpu/f32/abcd/jit"), kt("cpu/f32/acdb/jit"), {4, 4});
    FAIL("planned");
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.message(), Catch::Contains("no plan from cpu/f32/abcd/jit to cpu/f32/acdb/jit "
                                            "for dims 4x4: the actual kernel type "
                                            "cpu/f32/abcd/jit cannot lay them out (layout abcd "
                                            "has 4 dimensions, the tensor 2)"));
  }
}

TEST_CASE("dims no descriptor can have are refused with the reason and both kernel types",
          "[transform][plan]") {
  transform_registry reg;
  const auto a = kt("cpu/f32/abcd/jit"), b = kt("cpu/f32/acdb/jit");
  struct bad_dims {
    std::vector<std::int64_t> dims;
    const char* why;
  };
  const auto bad = GENERATE(bad_dims{{2, 0, 8, 8}, "dimension 1 of 2x0x8x8 is 0"},
                            bad_dims{{2, -3, 8, 8}, "dimension 1 of 2x-3x8x8 is -3"});
  try {
    (void)reg.plan(a, b, bad.dims);
    FAIL("planned");
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    // The tensor has as many dims as the layouts lay out: the message says
    // what is wrong with them, for the pair being planned.
    CHECK_THAT(e.message(),
               Catch::Contains(a.to_string() + " to " + b.to_string()) && Catch::Contains(bad.why));
  }
}

TEST_CASE("a pair with no path is an error naming both kernel types", "[transform][plan]") {
  transform_registry reg;
  SECTION("layouts of different ranks") {
    try {
      (void)reg.plan(kt("cpu/f32/abcd/jit"), kt("cpu/f32/ab/jit"));
      FAIL("planned");
    } catch (const error& e) {
      CHECK(e.code() == status::unimplemented);
      CHECK_THAT(e.what(), Catch::Contains("cpu/f32/abcd/jit") &&
                               Catch::Contains("cpu/f32/ab/jit") &&
                               Catch::Contains("4 and 2 dimensions"));
    }
  }
  SECTION("places no built-in joins") {
    CHECK_THROWS_WITH(reg.plan(kt("cpu:0/f32/abcd/jit"), kt("cpu:1/f32/abcd/jit")),
                      Catch::Contains("no transform from cpu/f32/abcd/jit to cpu:1/f32/abcd/jit"));
  }
  SECTION("an undef data type") {
    CHECK_THROWS_WITH(reg.plan(kt("cpu/undef/abcd/jit"), kt("cpu/f32/abcd/jit")),
                      Catch::Contains("cpu/undef/abcd/jit"));
  }
  SECTION("a failed plan is not cached") {
    CHECK_THROWS(reg.plan(kt("cpu/f32/abcd/jit"), kt("cpu/f32/ab/jit")));
    CHECK_THROWS(reg.plan(kt("cpu/f32/abcd/jit"), kt("cpu/f32/ab/jit")));
    CHECK(reg.plan_cache_stats().failures == 2);
    CHECK(reg.plan_cache_stats().hits == 0);
  }
}

TEST_CASE("a user transform wins over the built-in one", "[transform][plan]") {
  transform_registry reg;
  const auto a = kt("cpu/f32/abcd/jit"), b = kt("cpu/f32/acdb/jit");
  auto noop = [](const memory&, const memory&, const stream&) {};
  const auto before = reg.plan(a, b);
  CHECK(kinds(*before) == std::vector<tk>{tk::layout});

  reg.add(a, b, "my_nhwc", noop);
  const auto with = reg.plan(a, b);
  REQUIRE(kinds(*with) == std::vector<tk>{tk::user});
  CHECK(with->steps[0].user_name == "my_nhwc");
  CHECK(with->steps[0].function != nullptr);

  SECTION("even when a built-in chain would be cheaper") {
    const auto c = kt("cpu/bf16/abcd/jit");
    reg.add(a, c, "slow_bf16", noop);
    CHECK(kinds(*reg.plan(a, c)) == std::vector<tk>{tk::user});
  }
  SECTION("inside a longer chain") {
    const auto host_bf16 = kt("cpu/bf16/abcd/jit"), dev_bf16 = kt("gpu:0/bf16/abcd/jit");
    reg.add(host_bf16, dev_bf16, "my_upload", noop);
    const auto p = reg.plan(a, dev_bf16);
    REQUIRE(kinds(*p) == std::vector<tk>{tk::data_type, tk::user});
    CHECK(p->steps[1].user_name == "my_upload");
  }
  SECTION("removing it brings the built-in back") {
    CHECK(reg.remove(a, b));
    CHECK_FALSE(reg.remove(a, b));
    CHECK(kinds(*reg.plan(a, b)) == std::vector<tk>{tk::layout});
  }
  SECTION("bad registrations are refused") {
    CHECK_THROWS_AS(reg.add(a, b, "empty", transform_function()), error);
    CHECK_THROWS_WITH(reg.add(a, a, "self", noop), Catch::Contains("to itself"));
  }
}

TEST_CASE("a user transform between layouts of different ranks is refused", "[transform][plan]") {
  // A plan keeps the tensor's dims (every step writes a memory of the
  // source's dims), so no plan could use such a transform: plan(from, to)
  // would still be the no-path error, the registration silently unused.
  transform_registry reg;
  const auto from = kt("cpu/f32/abcd/mine"), to = kt("cpu/f32/ab/mine");
  try {
    reg.add(from, to, "flatten", [](const memory&, const memory&, const stream&) {});
    FAIL("registered");
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.message(),
               Catch::Contains("transform 'flatten'") && Catch::Contains(from.to_string()) &&
                   Catch::Contains(to.to_string()) && Catch::Contains("4 and 2 dimensions"));
  }
  // Nothing was registered: the generation stays, and so do the cached plans.
  (void)reg.plan(kt("cpu/f32/abcd/jit"), kt("cpu/f32/acdb/jit"));
  (void)reg.plan(kt("cpu/f32/abcd/jit"), kt("cpu/f32/acdb/jit"));
  CHECK(reg.plan_cache_stats().hits == 1);
}

TEST_CASE("registrations whose kernel types plans cannot use are refused", "[transform][plan]") {
  transform_registry reg;
  auto noop = [](const memory&, const memory&, const stream&) {};
  const auto good = kt("cpu/f32/abcd/mine");
  const auto refused = [&](const kernel_type& bad, const std::string& why) {
    for (const bool bad_is_from : {true, false}) {
      INFO((bad_is_from ? "from " : "to ") << bad.to_string());
      try {
        if (bad_is_from) {
          reg.add(bad, good, "t", noop);
        } else {
          reg.add(good, bad, "t", noop);
        }
        FAIL("registered");
      } catch (const error& e) {
        CHECK(e.code() == status::invalid_arguments);
        CHECK_THAT(e.what(), Catch::Contains("transform 't'") && Catch::Contains(why));
      }
    }
  };
  SECTION("a layout left to the primitive (any) lays out nothing") {
    refused(kt("cpu/f32/any/mine"), "has no concrete layout");
    // Nothing was registered: a plan through such a node cannot be made.
    CHECK(kinds(*reg.plan(good, kt("cpu/f32/acdb/mine"))) == std::vector<tk>{tk::layout});
  }
  SECTION("an undef layout") {
    kernel_type t = good;
    t.layout = layout();
    refused(t, "has no concrete layout");
  }
  SECTION("an empty library name") {
    kernel_type t = good;
    t.library = library{};
    refused(t, "the library name is empty");
  }
  SECTION("a library name with a '/'") {
    kernel_type t = good;
    t.library = library{"my/lib"};
    refused(t, "the library name 'my/lib' contains '/'");
  }
}

TEST_CASE("plan refuses an end that add refuses, naming which end", "[transform][plan]") {
  transform_registry reg;
  const auto good = kt("cpu/f32/abcd/jit");
  const auto other = kt("cpu/f32/acdb/jit");
  struct bad_end {
    const char* what;
    kernel_type type;
    const char* why;
  };
  kernel_type empty_library = other;
  empty_library.library = library{};
  kernel_type slash_library = other;
  slash_library.library = library{"my/lib"};
  kernel_type no_layout = other;
  no_layout.layout = layout(format_tag::any);
  kernel_type no_type = other;
  no_type.data_type = data_type::undef;
  const auto bad = GENERATE_COPY(
      bad_end{"an empty library", empty_library, ": the library name is empty"},
      bad_end{"a '/' in the library", slash_library, ": the library name 'my/lib' contains '/'"},
      bad_end{"layout any", no_layout, " has no concrete layout (any)"},
      bad_end{"an undef data type", no_type, " is incomplete (no known data type)"});
  for (const bool bad_is_actual : {true, false}) {
    INFO(bad.what << (bad_is_actual ? " as the actual end" : " as the expected end"));
    const std::string end = bad_is_actual ? "the actual kernel type " : "the expected kernel type ";
    try {
      if (bad_is_actual) {
        (void)reg.plan(bad.type, good);
      } else {
        (void)reg.plan(good, bad.type);
      }
      FAIL_CHECK("planned");
    } catch (const error& e) {
      CHECK(e.code() == status::invalid_arguments);
      // The same words add() uses for the same kernel type.
      CHECK_THAT(e.message(), Catch::Contains(end + bad.type.to_string() + bad.why));
    }
  }
  // A failed plan is not kept: a good pair still plans.
  CHECK(kinds(*reg.plan(good, other)) == std::vector<tk>{tk::layout});
}

TEST_CASE("plans are cached", "[transform][plan]") {
  transform_registry reg;
  const auto a = kt("cpu/f32/abcd/jit"), b = kt("gpu:0/bf16/aBcd16b/jit");
  const auto first = reg.plan(a, b);
  const auto second = reg.plan(a, b);
  CHECK(first == second);  // the same object
  CHECK(reg.plan_cache_stats().misses == 1);
  CHECK(reg.plan_cache_stats().hits == 1);
  SECTION("a registration invalidates earlier plans") {
    reg.add(kt("cpu/f16/abcd/jit"), kt("cpu/f32/abcd/jit"), "x",
            [](const memory&, const memory&, const stream&) {});
    const auto third = reg.plan(a, b);
    CHECK(third != first);
    CHECK(reg.plan_cache_stats().misses == 2);
  }
  SECTION("clear empties it") {
    reg.clear_plan_cache();
    (void)reg.plan(a, b);
    CHECK(reg.plan_cache_stats().misses == 2);
  }
}
