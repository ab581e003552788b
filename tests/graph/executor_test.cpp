// Kernel types, transforms between ops, constants transformed once, and
// every error the executor reports.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string_view>

#include "graph_test_util.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/graph/op_registry.hpp"
#include "primcache/runtime/constant_cache.hpp"

using namespace primcache;
using namespace graph_test;

namespace {

op_spec relu(std::string name, std::string in, std::string out) {
  op_spec op{.name = std::move(name),
             .kind = "eltwise",
             .inputs = {std::move(in)},
             .outputs = {std::move(out)}};
  op.attributes["algorithm"] = std::string("relu");
  return op;
}

// A host relu that a user registers under its own library ("mylib"):
// plain loops.
class my_relu final : public op_kernel {
 public:
  explicit my_relu(std::string library = "mylib") : library_(std::move(library)) {}

 private:
  std::unique_ptr<bound_kernel> bind(const kernel_binding& b) const override {
    struct run final : bound_kernel {
      void execute(const stream&, std::span<const memory> in,
                   std::span<const memory> out) const override {
        const auto* s = static_cast<const float*>(in[0].get_data_handle());
        auto* d = static_cast<float*>(out[0].get_data_handle());
        for (std::int64_t i = 0; i < in[0].get_desc().nelems(); ++i) d[i] = std::max(s[i], 0.f);
      }
    };
    REQUIRE(b.type.library.name == library_);
    return std::make_unique<run>();
  }

  std::string library_;
};

// The graph executors' backend id in the constant tensor caches ("graph").
constexpr std::uint64_t graph_backend_id = 0x6772617068ULL;

// The value of control()'s series `family` whose `graph` label is `label`
// (and, when given, whose `to` label is `to`); nullopt when there is none.
std::optional<double> graph_series(std::string_view family, std::string_view label,
                                   std::string_view to = {}) {
  for (const auto& f : control().list_metrics()) {
    if (f.name != family) continue;
    for (const auto& sample : f.samples) {
      bool graph_matches = false, to_matches = to.empty();
      for (const auto& [k, v] : sample.labels) {
        if (k == "graph" && v == label) graph_matches = true;
        if (k == "to" && v == to) to_matches = true;
      }
      if (graph_matches && to_matches) return sample.value;
    }
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("transforms run where kernel types differ and nowhere else",
          "[graph][executor][transform]") {
  graph g("layouts");
  const memory x = add_with_data(g, tensor("x", {2, 16, 5, 5}, tensor_role::input), 1);
  const memory w = add_with_data(g, tensor("w", {8, 16, 1, 1}, tensor_role::constant), 2);
  g.add_tensor(produced("y"));
  op_spec conv{.name = "conv", .kind = "convolution", .inputs = {"x", "w"}, .outputs = {"h1"}};
  conv.layout = layout::parse("acdb");  // nhwc: x (nchw) is transformed
  g.add_op(conv);
  op_spec act = relu("act", "h1", "h2");
  act.layout = layout::parse("acdb");  // the same: nothing between conv and act
  g.add_op(act);
  op_spec back{.name = "back", .kind = "reorder", .inputs = {"h2"}, .outputs = {"y"}};
  g.add_op(back);  // plain: the reorder op itself changes the layout
  executor exec(g);
  CHECK(exec.op_type("conv").to_string() == "cpu/f32/acdb/jit");
  CHECK(exec.tensor_type("h2").to_string() == "cpu/f32/acdb/jit");
  CHECK(exec.tensor_type("y").to_string() == "cpu/f32/abcd/jit");

  for (int i = 0; i < 3; ++i) exec.run({{"x", x}});
  const auto s = exec.stats();
  CHECK(s.runs == 3);
  REQUIRE(s.transforms.size() == 1);
  const auto& t = s.transforms[0];
  CHECK(t.tensor == "x");
  CHECK(t.op == "conv");
  CHECK(t.from.to_string() == "cpu/f32/abcd/jit");
  CHECK(t.to.to_string() == "cpu/f32/acdb/jit");
  CHECK(t.steps == std::vector<transform_kind>{transform_kind::layout});
  CHECK(t.bytes == 8u * 2 * 16 * 5 * 5);  // 4 B read + 4 B written per element
  CHECK(t.executions == 3);
  CHECK_FALSE(t.constant);
  CHECK(s.transforms_executed == 3);
  CHECK(s.bytes_transformed == 3 * t.bytes);
  CHECK(exec.describe().find("transform x: cpu/f32/abcd/jit -> cpu/f32/acdb/jit [layout]") !=
        std::string::npos);
}

TEST_CASE("a tensor read by two ops in one kernel type is transformed once per run",
          "[graph][executor][transform]") {
  graph g("fanout");
  const memory x = add_with_data(g, tensor("x", {2, 8, 3, 3}, tensor_role::input), 3);
  g.add_tensor(produced("a"));
  g.add_tensor(produced("b"));
  op_spec r1 = relu("r1", "x", "a");
  op_spec r2 = relu("r2", "x", "b");
  r1.layout = r2.layout = layout::parse("aBcd8b");
  g.add_op(r1);
  g.add_op(r2);
  executor exec(g);
  exec.run({{"x", x}});
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0].executions == 1);
}

TEST_CASE("transformed bytes count the padding of blocked layouts",
          "[graph][executor][transform]") {
  graph g("padded");
  const memory x = add_with_data(g, tensor("x", {1, 3, 4, 4}, tensor_role::input), 5);
  g.add_tensor(produced("y"));
  op_spec r = relu("r", "x", "y");
  r.layout = layout::parse("aBcd16b");  // 3 channels padded to 16
  g.add_op(r);
  executor exec(g);
  exec.run({{"x", x}});
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0].bytes == (3u + 16u) * 4 * 4 * 4);  // read nchw, write nChw16c
  CHECK(s.bytes_transformed == s.transforms[0].bytes);
}

TEST_CASE("data types: an op forcing bf16 gets its input narrowed, in one fused reorder",
          "[graph][executor][transform]") {
  graph g("types");
  const memory x = add_with_data(g, tensor("x", {4, 32}, tensor_role::input), 4);
  g.add_tensor(produced("y"));
  op_spec r = relu("r", "x", "y");
  r.type = data_type::bf16;
  r.layout = layout::parse("ba");
  g.add_op(r);
  executor exec(g);
  const auto y = exec.run({{"x", x}}).at("y");
  CHECK(kernel_type::of(y, library::jit()).to_string() == "cpu/bf16/ba/jit");
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0].steps == std::vector<transform_kind>{transform_kind::layout_and_data_type});
  CHECK(s.transforms[0].bytes == 6u * 4 * 32);
  std::vector<double> want;
  for (float v : logical(x)) want.push_back(std::max(v, 0.f));
  check_close(logical(y), want, 1.0 / 128);
}

TEST_CASE("a produced tensor that declares a layout is delivered in it", "[graph][executor]") {
  graph g("deliver");
  const memory x = add_with_data(g, tensor("x", {2, 8, 3, 3}, tensor_role::input), 5);
  tensor_spec y = produced("y");
  y.layout = layout::parse("acdb");
  g.add_tensor(y);
  g.add_op(relu("r", "x", "y"));
  executor exec(g);
  const auto out = exec.run({{"x", x}}).at("y");
  CHECK(kernel_type::of(out, library::jit()).layout == layout::parse("acdb"));
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0].op.empty());
  CHECK(s.transforms[0].tensor == "y");
}

TEST_CASE("constant weights are transformed once and kept in the constant tensor cache",
          "[graph][executor][constant]") {
  graph g("consts");
  const memory x = add_with_data(g, tensor("x", {6, 20}, tensor_role::input), 6);
  // Stored transposed: the matmul wants ab.
  const memory w = add_with_data(g, tensor("w", {20, 10}, tensor_role::constant, "ba"), 7);
  g.add_tensor(produced("y"));
  g.add_op({.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}});
  const std::vector<double> want = matmul_reference(x, w);
  auto& cache = constant_tensor_cache_for(engine_kind::cpu);
  const auto misses_before = cache.stats().misses;

  executor exec(g);
  for (int i = 0; i < 5; ++i) check_close(logical(exec.run({{"x", x}}).at("y")), want);
  auto s = exec.stats();
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0].constant);
  CHECK(s.transforms[0].tensor == "w");
  CHECK(s.transforms[0].executions == 1);
  CHECK(s.constant_transforms == 1);
  CHECK(s.constant_cache_hits == 4);
  CHECK(s.bytes_transformed == 8u * 20 * 10);
  // The graph's one miss, and the runtime's own packing of the weights.
  CHECK(cache.stats().misses >= misses_before + 1);

  SECTION("another executor over the same data takes it from the cache") {
    executor again(g);
    check_close(logical(again.run({{"x", x}}).at("y")), want);
    CHECK(again.stats().constant_transforms == 0);
    CHECK(again.stats().constant_cache_hits == 1);
  }
  SECTION("with the cache off, every run transforms again") {
    set_constant_tensor_cache_capacity(engine_kind::cpu, 0);
    executor off(g);
    for (int i = 0; i < 3; ++i) check_close(logical(off.run({{"x", x}}).at("y")), want);
    CHECK(off.stats().constant_transforms == 3);
    set_constant_tensor_cache_capacity(engine_kind::cpu, constant_tensor_cache_unlimited);
  }
}

TEST_CASE("a constant whose data handle changes is transformed again, not taken stale",
          "[graph][executor][constant]") {
  // The memory's id names its data (memory.hpp): set_data_handle gives the
  // constant new data and a new id, as the backends' constant weights
  // (primitive_attr::set_constant_weights) read it.
  graph g("rehandled");
  const memory x = add_with_data(g, tensor("x", {6, 20}, tensor_role::input), 11);
  const tensor_spec w_spec = tensor("w", {20, 10}, tensor_role::constant, "ba");
  memory w = add_with_data(g, w_spec, 12);
  g.add_tensor(produced("y"));
  g.add_op({.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}});
  executor exec(g);
  const auto first = matmul_reference(x, w);
  for (int i = 0; i < 2; ++i) check_close(logical(exec.run({{"x", x}}).at("y")), first);

  const memory other = make_tensor_data(w_spec, {.seed = 13});  // keeps the new buffer
  w.set_data_handle(other.get_data_handle());  // the graph's copy shares the handle
  const auto second = matmul_reference(x, w);
  REQUIRE(second != first);
  for (int i = 0; i < 2; ++i) check_close(logical(exec.run({{"x", x}}).at("y")), second);
  const auto s = exec.stats();
  CHECK(s.constant_transforms == 2);
  CHECK(s.constant_cache_hits == 2);
}

TEST_CASE("a transformed constant leaves the constant tensor cache when its data does",
          "[graph][executor][constant]") {
  auto& cache = constant_tensor_cache_for(engine_kind::cpu);
  std::atomic<int> graph_erased{0};
  const auto subscription =
      cache.on_eviction([&](const constant_key& k, const constant_buffer*, eviction_reason why) {
        if (k.backend_id() == graph_backend_id && why == eviction_reason::erased) ++graph_erased;
      });
  const std::size_t tensors_before = cache.tensor_count();
  const tensor_spec x_spec = tensor("x", {6, 20}, tensor_role::input);
  const tensor_spec w_spec = tensor("w", {20, 10}, tensor_role::constant, "ba");
  const memory x = make_tensor_data(x_spec, {.seed = 21});
  // The constant's data on a buffer of the test's, so that a later memory
  // can take the same address.
  std::vector<float> buffer(200);
  const engine cpu = place::cpu().get_engine();
  const memory_desc w_desc = layout::parse("ba").desc_for(w_spec.dims, data_type::f32);
  auto fill = [&](std::uint64_t seed) {
    const memory m = make_tensor_data(w_spec, {.seed = seed});
    std::memcpy(buffer.data(), m.get_data_handle(), w_desc.size_bytes());
  };
  // Runs a graph over constant data `w` once and returns its output.
  auto run_once = [&](const memory& w) {
    graph g("released");
    g.add_tensor(x_spec);
    g.add_tensor(w_spec);
    g.set_data("w", w);
    g.add_tensor(produced("y"));
    g.add_op({.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}});
    executor exec(g);
    auto y = logical(exec.run({{"x", x}}).at("y"));
    CHECK(exec.stats().constant_transforms == 1);
    return y;
  };

  fill(22);
  memory w(w_desc, cpu, buffer.data());
  const auto first = matmul_reference(x, w);
  check_close(run_once(w), first);
  // The graph and its executor are gone; the data is not: another graph
  // over it may still take the entry.
  CHECK(cache.tensor_count() > tensors_before);
  CHECK(graph_erased == 0);

  SECTION("when the last copy of its memory goes") {
    w = memory();
    CHECK(graph_erased == 1);
    // The backend's packing of the transformed tensor went with it.
    CHECK(cache.tensor_count() == tensors_before);

    SECTION("and a new memory at the same address is its own data") {
      fill(23);
      const memory again(w_desc, cpu, buffer.data());
      REQUIRE(again.get_data_handle() == static_cast<void*>(buffer.data()));
      const auto second = matmul_reference(x, again);
      REQUIRE(second != first);
      check_close(run_once(again), second);
    }
  }
  SECTION("when its data handle changes") {
    const memory other = make_tensor_data(w_spec, {.seed = 24});
    w.set_data_handle(other.get_data_handle());
    CHECK(graph_erased == 1);
    CHECK(cache.tensor_count() == tensors_before);
  }
}

TEST_CASE("a user's kernel under its own library; the library change moves nothing",
          "[graph][executor][library]") {
  op_registry reg;
  reg.add_builtins();
  reg.add_kernel("eltwise", engine_kind::cpu, "mylib", std::make_shared<my_relu>());
  graph g("lib");
  const memory x = add_with_data(g, tensor("x", {3, 11}, tensor_role::input), 8);
  g.add_tensor(produced("y"));
  op_spec mine = relu("mine", "x", "h");
  mine.library = "mylib";
  g.add_op(mine);
  op_spec lin{.name = "lin", .kind = "eltwise", .inputs = {"h"}, .outputs = {"y"}};
  lin.attributes["algorithm"] = std::string("linear");
  lin.attributes["alpha"] = 2.0;
  g.add_op(lin);
  executor exec(g, {.ops = &reg});
  CHECK(exec.op_type("mine").library.name == "mylib");
  CHECK(exec.op_type("lin").library.name == "jit");
  const auto y = exec.run({{"x", x}}).at("y");
  std::vector<double> want;
  for (float v : logical(x)) want.push_back(2.0 * std::max(v, 0.f));
  check_close(logical(y), want, 1e-6);
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 2);  // jit -> mylib for x, mylib -> jit for h
  for (const auto& t : s.transforms) {
    CHECK(t.steps == std::vector<transform_kind>{transform_kind::library});
    CHECK(t.bytes == 0);
  }
  CHECK(s.bytes_transformed == 0);

  SECTION("the executor's library applies to ops that force none") {
    const std::string msg = error_of([&] { executor(g, {.library = "nolib", .ops = &reg}); });
    CHECK(msg ==
          "op 'lin' (eltwise): no kernel for cpu/nolib (registered: cpu/jit, cpu/mylib, gpu/jit)");
  }
}

TEST_CASE("a constant's library-only transform counts on every run, with 0 bytes",
          "[graph][executor][library]") {
  // Nothing moves and nothing is cached (docs/metrics.md): the relabelled
  // constant is handed to its reader on each run, as any tensor's is.
  op_registry reg;
  reg.add_builtins();
  reg.add_kernel("eltwise", engine_kind::cpu, "mylib", std::make_shared<my_relu>());
  graph g("lib constant");
  add_with_data(g, tensor("c", {3, 11}, tensor_role::constant), 9);
  g.add_tensor(produced("y"));
  op_spec mine = relu("mine", "c", "y");
  mine.library = "mylib";
  g.add_op(mine);
  executor exec(g, {.ops = &reg});
  for (int i = 0; i < 3; ++i) exec.run({});
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0].constant);
  CHECK(s.transforms[0].steps == std::vector<transform_kind>{transform_kind::library});
  CHECK(s.transforms[0].executions == 3);
  CHECK(s.transforms_executed == 3);
  CHECK(s.bytes_transformed == 0);
  CHECK(s.constant_transforms == 0);
  CHECK(s.constant_cache_hits == 0);
  CHECK(graph_series("primcache_graph_transform_executions_total", "lib constant") == 3);
  CHECK(graph_series("primcache_graph_transform_bytes_total", "lib constant") == 0);
  CHECK(graph_series("primcache_graph_constant_transforms_total", "lib constant") == 0);
}

TEST_CASE("a graph name or metrics label that is not UTF-8 is escaped in the metrics",
          "[graph][executor][metrics]") {
  // control refuses label values that are not UTF-8; the executor writes
  // each byte that is no part of a well-formed sequence as \xNN instead.
  auto runs_of = [](const std::string& name, executor_options options) {
    graph g(name);
    const memory x = add_with_data(g, tensor("x", {4}, tensor_role::input), 31);
    g.add_tensor(produced("y"));
    g.add_op(relu("r", "x", "y"));
    executor exec(g, std::move(options));
    exec.run({{"x", x}});
  };

  SECTION("a Latin-1 graph name") {
    runs_of("r\xe9sum\xe9 (graph name)", {});
    CHECK(graph_series("primcache_graph_runs_total", "r\\xe9sum\\xe9 (graph name)") == 1.0);
    CHECK(graph_series("primcache_graph_constant_transforms_total",
                       "r\\xe9sum\\xe9 (graph name)") == 0.0);
  }
  SECTION("a metrics label, by kind of ill-formed sequence") {
    const auto [label, exported] = GENERATE(table<std::string, std::string>({
        {"label caf\xe9", "label caf\\xe9"},               // Latin-1
        {"label cut \xe2\x82", "label cut \\xe2\\x82"},    // cut short by the end
        {"label cut \xe2\x82-", "label cut \\xe2\\x82-"},  // by a byte that is no continuation
        {"label overlong \xc0\xaf", "label overlong \\xc0\\xaf"},  // overlong '/'
        {"label overlong \xe0\x80\xaf", "label overlong \\xe0\\x80\\xaf"},
        {"label surrogate \xed\xa0\x80", "label surrogate \\xed\\xa0\\x80"},
        {"label past U+10FFFF \xf4\x90\x80\x80", "label past U+10FFFF \\xf4\\x90\\x80\\x80"},
        {"label stray \x80 and \xff", "label stray \\x80 and \\xff"},
        // Well-formed sequences around an ill-formed byte stay as they are.
        {"label \xc3\xa9\xe9\xe2\x82\xac\xf0\x9f\x98\x80",
         "label \xc3\xa9\\xe9\xe2\x82\xac\xf0\x9f\x98\x80"},
        {"label caf\xc3\xa9 (UTF-8)", "label caf\xc3\xa9 (UTF-8)"},
    }));
    CAPTURE(exported);
    const double before = graph_series("primcache_graph_runs_total", exported).value_or(0);
    runs_of("named", {.metrics_label = label});
    CHECK(graph_series("primcache_graph_runs_total", exported) == before + 1);
    if (exported != label) CHECK_FALSE(graph_series("primcache_graph_runs_total", label));
  }
  SECTION("a library name in the kernel types of the transform series") {
    op_registry reg;
    reg.add_builtins();
    reg.add_kernel("eltwise", engine_kind::cpu, "lat\xedn", std::make_shared<my_relu>("lat\xedn"));
    graph g("library label");
    const memory x = add_with_data(g, tensor("x", {3, 5}, tensor_role::input), 32);
    g.add_tensor(produced("y"));
    op_spec mine = relu("mine", "x", "y");
    mine.library = "lat\xedn";
    g.add_op(mine);
    executor exec(g, {.ops = &reg});
    exec.run({{"x", x}});
    CHECK(graph_series("primcache_graph_transform_executions_total", "library label",
                       "cpu/f32/ab/lat\\xedn") == 1.0);
  }
  SECTION("with metrics off nothing is registered") {
    runs_of("unexported \xe9", {.export_metrics = false});
    CHECK_FALSE(graph_series("primcache_graph_runs_total", "unexported \\xe9"));
  }
}

TEST_CASE("a bad graph is refused with a message naming the op or tensor",
          "[graph][executor][errors]") {
  graph g("bad");
  add_with_data(g, tensor("x", {4, 8}, tensor_role::input), 1);
  add_with_data(g, tensor("w", {9, 3}, tensor_role::constant), 2);
  g.add_tensor(produced("y"));

  SECTION("unknown op kind") {
    g.add_op({.name = "f", .kind = "matmull", .inputs = {"x", "w"}, .outputs = {"y"}});
    CHECK(error_of([&] { executor e(g); }) ==
          "op 'f': unknown op kind 'matmull' (known: convolution, eltwise, identity, matmul, "
          "reorder)");
  }
  SECTION("shape mismatch") {
    g.add_op({.name = "f", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}});
    CHECK(error_of([&] { executor e(g); }) ==
          "op 'f' (matmul): src 'x' is 4x8 and weights 'w' 9x3: inner dimensions 8 and 9 differ");
  }
  SECTION("an output that disagrees with what the op writes") {
    g.add_op(relu("f", "x", "y"));
    graph g2 = g;
    tensor_spec z = produced("z");
    z.dims = {4, 9};
    g2.add_tensor(z);
    g2.add_op(relu("g", "x", "z"));
    CHECK(error_of([&] { executor e(g2); }) ==
          "op 'g' (eltwise) writes tensor 'z' as 4x8, the tensor declares 4x9");
  }
  SECTION("cycle") {
    g.add_op(relu("a", "q", "p"));
    g.add_op(relu("b", "p", "q"));
    g.add_op(relu("c", "x", "y"));
    const std::string msg = error_of([&] { g.validate(); });
    CHECK(msg.find("graph 'bad' has a cycle: op ") == 0);
    CHECK(msg.find("'a'") != std::string::npos);
    CHECK(msg.find("'b'") != std::string::npos);
  }
  SECTION("an input nobody declares") {
    g.add_op(relu("f", "nothing", "y"));
    CHECK(error_of([&] { executor e(g); }) ==
          "op 'f' reads tensor 'nothing' (input 0), which the graph does not declare and no op "
          "writes");
  }
  SECTION("an output nobody writes") {
    CHECK(error_of([&] { executor e(g); }) == "tensor 'y' (output) is written by no op");
  }
  SECTION("a tensor written twice") {
    g.add_op(relu("f", "x", "y"));
    g.add_op(relu("g", "x", "y"));
    CHECK(error_of([&] { executor e(g); }) == "tensor 'y' is written by two ops, 'f' and 'g'");
  }
  SECTION("a constant without data") {
    g.add_tensor(tensor("c", {2}, tensor_role::constant));
    g.add_op(relu("f", "x", "y"));
    CHECK(error_of([&] { executor e(g); }) == "constant tensor 'c' has no data (graph::set_data)");
  }
  SECTION("no transform path names both kernel types") {
    add_with_data(g, tensor("img", {1, 2, 4, 4}, tensor_role::input), 3);
    add_with_data(g, tensor("k", {2, 2, 1, 1}, tensor_role::constant), 4);
    op_spec conv{.name = "conv", .kind = "convolution", .inputs = {"img", "k"}, .outputs = {"y"}};
    conv.attributes["weights_layout"] = std::string("ab");
    g.add_op(conv);
    const std::string msg = error_of([&] { executor e(g); });
    CHECK(msg.find("op 'conv' input 'k': no transform from cpu/f32/abcd/jit to cpu/f32/ab/jit") ==
          0);
  }
  SECTION("a bad attribute") {
    op_spec f = relu("f", "x", "y");
    f.attributes["algorithm"] = std::int64_t{3};
    g.add_op(f);
    CHECK(error_of([&] { executor e(g); }) ==
          "op 'f' (eltwise): attribute 'algorithm' must be a string, not an integer");
  }
  SECTION("duplicate names") {
    CHECK(error_of([&] { g.add_tensor(tensor("x", {1}, tensor_role::input)); }) ==
          "graph 'bad': tensor 'x' is declared twice");
    g.add_op(relu("f", "x", "y"));
    CHECK(error_of([&] { g.add_op(relu("f", "x", "z")); }) ==
          "graph 'bad': op 'f' is declared twice");
  }
}

TEST_CASE("run checks its inputs", "[graph][executor][errors]") {
  graph g("inputs");
  const memory x = add_with_data(g, tensor("x", {4, 8}, tensor_role::input), 1);
  g.add_tensor(produced("y"));
  g.add_op(relu("f", "x", "y"));
  executor exec(g);
  CHECK(error_of([&] { exec.run({}); }) == "run: input 'x' is missing");
  CHECK(error_of([&] {
          exec.run({{"x", x}, {"q", x}});
        }) == "run: 'q' is not an input of graph 'inputs' (inputs: x)");
  const memory wrong(memory_desc({4, 8}, data_type::f32, format_tag::ba),
                     engine(engine_kind::cpu, 0));
  CHECK(error_of([&] { exec.run({{"x", wrong}}); }).find("run: input 'x' is ") == 0);
  CHECK(exec.stats().runs == 0);
  CHECK(error_of([&] { exec.op_type("nope"); }) == "graph 'inputs' has no op 'nope'");
}

TEST_CASE("a tensor placed on a device the process does not have is refused",
          "[graph][executor][errors]") {
  // graph_test links no GPU backend: there is no gpu:0 here, and every run
  // would fail; the executor refuses the graph instead.
  graph g("far");
  SECTION("an input") {
    tensor_spec x = tensor("x", {4, 8}, tensor_role::input);
    x.place = place::gpu(0);
    g.add_tensor(x);
    g.add_tensor(produced("y"));
    g.add_op(relu("f", "x", "y"));
    CHECK(error_of([&] { executor e(g); }).find("tensor 'x' (input) is on gpu:0: ") == 0);
  }
  SECTION("an output delivered there") {
    add_with_data(g, tensor("x", {4, 8}, tensor_role::input), 1);
    tensor_spec y = produced("y");
    y.place = place::gpu(0);
    g.add_tensor(y);
    g.add_op(relu("f", "x", "y"));
    CHECK(error_of([&] { executor e(g); }).find("tensor 'y' (output) is on gpu:0: ") == 0);
  }
}

TEST_CASE("an attribute the op kind does not accept is refused, naming the accepted ones",
          "[graph][executor][errors]") {
  graph g("attrs");
  add_with_data(g, tensor("img", {1, 2, 5, 5}, tensor_role::input), 1);
  add_with_data(g, tensor("k", {2, 2, 3, 3}, tensor_role::constant), 2);
  g.add_tensor(produced("y"));
  SECTION("a misspelt convolution attribute (it would run without padding)") {
    op_spec conv{.name = "c", .kind = "convolution", .inputs = {"img", "k"}, .outputs = {"y"}};
    conv.attributes["strides"] = std::vector<std::int64_t>{2, 2};
    conv.attributes["paddin"] = std::vector<std::int64_t>{1, 1};
    g.add_op(conv);
    CHECK(error_of([&] { executor e(g); }) ==
          "op 'c' (convolution): unknown attribute 'paddin' (accepted: dilation, padding, "
          "padding_l, padding_r, post_ops, strides, weights_layout)");
    CHECK(status_of([&] { executor e(g); }) == status::invalid_arguments);
  }
  SECTION("eltwise") {
    op_spec f = relu("f", "img", "y");
    f.attributes["alpah"] = 0.5;
    g.add_op(f);
    CHECK(error_of([&] { executor e(g); }) ==
          "op 'f' (eltwise): unknown attribute 'alpah' (accepted: algorithm, alpha, beta)");
  }
  SECTION("reorder takes none") {
    op_spec r{.name = "r", .kind = "reorder", .inputs = {"img"}, .outputs = {"y"}};
    r.attributes["algorithm"] = std::string("relu");
    g.add_op(r);
    CHECK(error_of([&] { executor e(g); }) ==
          "op 'r' (reorder): unknown attribute 'algorithm' (accepted: none)");
  }
}

TEST_CASE("an op layout of another rank than the op's output is refused",
          "[graph][executor][errors]") {
  graph g("rank");
  add_with_data(g, tensor("x", {4, 8}, tensor_role::input), 1);
  g.add_tensor(produced("y"));
  op_spec f = relu("f", "x", "y");
  f.layout = layout::parse("acdb");  // 4 dims, the relu writes 2
  g.add_op(f);
  CHECK(error_of([&] { executor e(g); }) ==
        "op 'f' (eltwise): layout acdb lays out 4 dims, its output 'y' has 2");
  CHECK(status_of([&] { executor e(g); }) == status::invalid_arguments);
}

TEST_CASE("a tensor larger than max_tensor_bytes is refused before anything is allocated",
          "[graph][executor][errors]") {
  graph g("big");
  SECTION("an input: validation refuses it (each run would allocate it)") {
    add_with_data(g, tensor("x", {4, 8}, tensor_role::input), 1);
    g.add_tensor(tensor("huge", {65536, 65536}, tensor_role::input));
    g.add_tensor(produced("y"));
    g.add_op(relu("f", "x", "y"));
    CHECK(error_of([&] { g.validate(); }) ==
          "tensor 'huge' (input) is 65536x65536 f32: 17179869184 bytes, more than the limit of "
          "4294967296 bytes per graph tensor");
    CHECK(status_of([&] { executor e(g); }) == status::invalid_arguments);
  }
  SECTION("a constant's data is not made") {
    CHECK(error_of([&] {
            make_tensor_data(tensor("w", {65536, 65536}, tensor_role::constant), tensor_init{});
          }) ==
          "tensor 'w' (constant) is 65536x65536 f32: 17179869184 bytes, more than the limit of "
          "4294967296 bytes per graph tensor");
  }
  SECTION("a product too large to count") {
    g.add_tensor(
        tensor("huge", {std::int64_t{1} << 40, std::int64_t{1} << 40}, tensor_role::input));
    g.add_tensor(produced("y"));
    g.add_op(relu("f", "huge", "y"));
    CHECK(error_of([&] { g.validate(); }) ==
          "tensor 'huge' (input) is 1099511627776x1099511627776 f32: more than 2^64 bytes, more "
          "than the limit of 4294967296 bytes per graph tensor");
  }
  SECTION("a tensor an op writes (each run would allocate it)") {
    add_with_data(g, tensor("x", {65536, 1}, tensor_role::input), 1);
    add_with_data(g, tensor("w", {1, 65536}, tensor_role::constant), 2);
    g.add_tensor(produced("y"));
    g.add_op({.name = "outer", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}});
    CHECK(error_of([&] { executor e(g); }) ==
          "tensor 'y' (output, written by op 'outer') is 65536x65536 f32: 17179869184 bytes, "
          "more than the limit of 4294967296 bytes per graph tensor");
  }
}

TEST_CASE("a layout whose strides span more than max_tensor_bytes is refused",
          "[graph][executor][errors]") {
  // 1048576x1 f32 is 4 MiB of elements, but rows 2048 elements apart span
  // 2^31 elements (8 GiB): the buffer every run would allocate.
  const std::string spans =
      " is 1048576x1 f32 in layout s2048,1: its buffer spans 8589934592 bytes, more than the "
      "limit of 4294967296 bytes per graph tensor";
  graph g("strided");
  SECTION("an input: validation refuses it") {
    g.add_tensor(tensor("x", {1048576, 1}, tensor_role::input, "s2048,1"));
    g.add_tensor(produced("y"));
    g.add_op(relu("f", "x", "y"));
    CHECK(error_of([&] { g.validate(); }) == "tensor 'x' (input)" + spans);
    CHECK(status_of([&] { g.validate(); }) == status::invalid_arguments);
    CHECK(status_of([&] { executor e(g); }) == status::invalid_arguments);
  }
  SECTION("a constant: validation refuses it before its data is asked for") {
    add_with_data(g, tensor("x", {4, 1048576}, tensor_role::input), 1);
    g.add_tensor(tensor("w", {1048576, 1}, tensor_role::constant, "s2048,1"));
    g.add_tensor(produced("y"));
    g.add_op({.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}});
    CHECK(error_of([&] { g.validate(); }) == "tensor 'w' (constant)" + spans);
  }
  SECTION("an output declared in such a layout: the executor refuses it when built") {
    add_with_data(g, tensor("x", {1048576, 1}, tensor_role::input), 1);
    tensor_spec y = produced("y");
    y.layout = layout::parse("s2048,1");
    g.add_tensor(y);
    g.add_op(relu("f", "x", "y"));
    REQUIRE_NOTHROW(g.validate());
    CHECK(error_of([&] { executor e(g); }) == "tensor 'y' (output, delivered from op 'f')" + spans);
    CHECK(status_of([&] { executor e(g); }) == status::invalid_arguments);
  }
  SECTION("an op's layout: what it reads transformed and what it writes") {
    add_with_data(g, tensor("x", {1048576, 1}, tensor_role::input), 1);
    g.add_tensor(produced("y"));
    op_spec f = relu("f", "x", "y");
    f.layout = layout::parse("s2048,1");
    g.add_op(f);
    CHECK(error_of([&] { executor e(g); }) ==
          "tensor 'x' (input, read by op 'f' as cpu/f32/s2048,1/jit)" + spans);
  }
  SECTION("matmul weights wanted in such a layout") {
    add_with_data(g, tensor("x", {4, 1048576}, tensor_role::input), 1);
    add_with_data(g, tensor("w", {1048576, 1}, tensor_role::constant), 2);
    g.add_tensor(produced("y"));
    op_spec fc{.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}};
    fc.attributes["weights_layout"] = std::string("s2048,1");
    g.add_op(fc);
    CHECK(error_of([&] { executor e(g); }) ==
          "tensor 'w' (constant, read by op 'fc' as cpu/f32/s2048,1/jit)" + spans);
  }
  SECTION("make_tensor_data does not allocate it") {
    CHECK(error_of([&] {
            make_tensor_data(tensor("w", {1048576, 1}, tensor_role::constant, "s2048,1"),
                             tensor_init{});
          }) == "tensor 'w' (constant)" + spans);
  }
  SECTION("gaps within the limit, and the padding of blocked layouts, are allowed") {
    // Rows of 8 elements 16 apart: 512 bytes for 256 of elements.
    add_with_data(g, tensor("x", {4, 8}, tensor_role::input, "s16,1"), 1);
    // 1x1x32768x32768 f32 is 4 GiB of elements, 64 GiB padded to 16 channels.
    g.add_tensor(tensor("big", {1, 1, 32768, 32768}, tensor_role::input, "aBcd16b"));
    g.add_tensor(produced("y"));
    g.add_tensor(produced("z"));
    g.add_op(relu("f", "x", "y"));
    g.add_op(relu("h", "big", "z"));
    CHECK_NOTHROW(g.validate());
  }
}

TEST_CASE("a kernel's failure to say its kernel types names the op and the tensor",
          "[graph][executor][errors]") {
  // A user kernel that reads an attribute of its own to choose layouts.
  class picky final : public op_kernel {
   public:
    kernel_type input_type(const op_spec& op, std::size_t index, const tensor_shape& shape,
                           const kernel_type& op_type, const kernel_type& actual) const override {
      kernel_type k = op_kernel::input_type(op, index, shape, op_type, actual);
      k.layout = layout::parse(op.string_attribute("in_layout", "ab"));
      return k;
    }
    kernel_type output_type(const op_spec& op, std::size_t index, const tensor_shape& shape,
                            const kernel_type& op_type) const override {
      kernel_type k = op_kernel::output_type(op, index, shape, op_type);
      k.layout = layout::parse(op.string_attribute("out_layout", "ab"));
      return k;
    }
    std::unique_ptr<bound_kernel> bind(const kernel_binding&) const override {
      throw error(status::unimplemented, "picky binds nothing");
    }
  };
  op_registry reg;
  reg.add_kind("picky", [](const op_spec&, std::span<const tensor_shape> in) {
    return std::vector<tensor_shape>{in[0]};
  });
  reg.add_kernel("picky", engine_kind::cpu, "jit", std::make_shared<picky>());
  auto build = [&](const char* attribute, const char* value) {
    graph g("picky");
    add_with_data(g, tensor("x", {4, 8}, tensor_role::input), 1);
    g.add_tensor(produced("y"));
    op_spec op{.name = "p", .kind = "picky", .inputs = {"x"}, .outputs = {"y"}};
    op.attributes[attribute] = std::string(value);
    g.add_op(op);
    return error_of([&] { executor e(g, {.ops = &reg}); });
  };
  CHECK(build("in_layout", "oihw16") ==
        "op 'p' (picky) input 'x': layout 'oihw16' is neither a format tag nor "
        "s<stride>,<stride>,...");
  CHECK(
      build("out_layout", "zz") ==
      "op 'p' (picky) output 'y': layout 'zz' is neither a format tag nor s<stride>,<stride>,...");
  // A failure that names the op already is not named twice.
  {
    graph g("picky");
    add_with_data(g, tensor("x", {4, 8}, tensor_role::input), 1);
    g.add_tensor(produced("y"));
    op_spec op{.name = "p", .kind = "picky", .inputs = {"x"}, .outputs = {"y"}};
    op.attributes["in_layout"] = std::int64_t{3};
    g.add_op(op);
    CHECK(error_of([&] { executor e(g, {.ops = &reg}); }) ==
          "op 'p' (picky): attribute 'in_layout' must be a string, not an integer");
  }
}

TEST_CASE("init values that are not finite as floats are refused", "[graph][executor][errors]") {
  const tensor_spec x = tensor("x", {4}, tensor_role::input);
  tensor_init fill{.kind = tensor_init::kind::fill, .value = 1e39};
  CHECK(error_of([&] { make_tensor_data(x, fill); }) ==
        "tensor 'x': init value 1e+39 is not a finite float (at most 3.40282e+38 in magnitude)");
  tensor_init uniform{.low = -1e308, .high = 1.0};
  CHECK(error_of([&] { make_tensor_data(x, uniform); }) ==
        "tensor 'x': init low -1e+308 is not a finite float (at most 3.40282e+38 in magnitude)");
  uniform.low = -3e38;  // the widest finite range gives finite values
  uniform.high = 3e38;
  for (float v : logical(make_tensor_data(x, uniform))) CHECK(std::isfinite(v));
}

TEST_CASE("a user's op kind accepts the attributes it declares, or any when it declares none",
          "[graph][executor][errors]") {
  op_registry reg;
  auto same_shape = [](const op_spec&, std::span<const tensor_shape> in) {
    return std::vector<tensor_shape>{in[0]};
  };
  reg.add_kind("leaky", same_shape, {"slope"});
  reg.add_kind("anything", same_shape);
  for (const char* kind : {"leaky", "anything"})
    reg.add_kernel(kind, engine_kind::cpu, "mylib", std::make_shared<my_relu>());
  CHECK(reg.accepted_attributes("leaky") == std::vector<std::string>{"slope"});
  CHECK_FALSE(reg.accepted_attributes("anything"));
  CHECK_FALSE(reg.accepted_attributes("unknown"));
  auto build = [&](const char* kind, const char* attribute) {
    graph g("user");
    add_with_data(g, tensor("x", {4}, tensor_role::input), 1);
    g.add_tensor(produced("y"));
    op_spec op{.name = "f", .kind = kind, .inputs = {"x"}, .outputs = {"y"}};
    op.attributes[attribute] = 0.5;
    op.library = "mylib";
    g.add_op(op);
    return error_of([&] { executor e(g, {.ops = &reg}); });
  };
  CHECK(build("leaky", "slope").empty());
  CHECK(build("leaky", "slop") == "op 'f' (leaky): unknown attribute 'slop' (accepted: slope)");
  CHECK(build("anything", "slop").empty());
}
