// Kernel types, transforms between ops, constants transformed once, and
// every error the executor reports.
#include <algorithm>

#include "graph_test_util.hpp"
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

// A host relu that a user registers under library "mylib": plain loops.
class my_relu final : public op_kernel {
  std::unique_ptr<bound_kernel> bind(const kernel_binding& b) const override {
    struct run final : bound_kernel {
      void execute(const stream&, std::span<const memory> in,
                   std::span<const memory> out) const override {
        const auto* s = static_cast<const float*>(in[0].get_data_handle());
        auto* d = static_cast<float*>(out[0].get_data_handle());
        for (std::int64_t i = 0; i < in[0].get_desc().nelems(); ++i) d[i] = std::max(s[i], 0.f);
      }
    };
    REQUIRE(b.type.library.name == "mylib");
    return std::make_unique<run>();
  }
};

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
  const auto X = logical(x), W = logical(w);
  std::vector<double> want(60);
  for (int m = 0; m < 6; ++m) {
    for (int n = 0; n < 10; ++n) {
      double acc = 0;
      for (int k = 0; k < 20; ++k) acc += double(X[m * 20 + k]) * W[k * 10 + n];
      want[m * 10 + n] = acc;
    }
  }
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
