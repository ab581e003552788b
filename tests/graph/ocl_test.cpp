// The mixed example on the CPU and the first OpenCL device (PoCL's CPU
// device on CI): its output equals the all-CPU run's within tolerance, the
// transforms between places run, and the device convolution's weights are
// copied to the device once. Skipped with a warning without a device.
#include <CL/cl.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "graph_test_util.hpp"
#include "primcache/graph/graph_json.hpp"
#include "primcache/graph/op_registry.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/constant_cache.hpp"
#include "support/ocl_user_context.hpp"

using namespace primcache;
using namespace graph_test;
using primcache::test::ocl_user_context;

namespace {

// A constant `spec` (placed on gpu:0) whose data, made on the host from
// `seed`, is in memory of `eng`. Returns the host data (plain f32).
memory add_constant_on(graph& g, tensor_spec spec, const engine& eng, std::uint64_t seed) {
  tensor_spec on_host = spec;
  on_host.place.reset();
  on_host.layout = layout();
  const memory host = make_tensor_data(on_host, {.seed = seed});
  const kernel_type want = declared_type(spec, library::jit());
  const memory data(want.layout.desc_for(spec.dims, spec.type), eng);
  execute_plan(*plan_transform(kernel_type::of(host, library::jit()), want), host, data);
  const std::string name = spec.name;
  g.add_tensor(std::move(spec));
  g.set_data(name, data);
  return host;
}

}  // namespace

TEST_CASE("the mixed CPU/OpenCL graph equals the all-CPU run", "[graph][ocl]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  const graph g = load_graph_file(std::string(PRIMCACHE_GRAPH_EXAMPLES) + "/mixed_cpu_ocl.json");
  const auto in = make_inputs(g);
  executor cpu_only(g, {.ignore_op_places = true});
  executor mixed(g);
  CHECK(mixed.op_type("act1").to_string() == "gpu:0/f32/abcd/jit");
  CHECK(mixed.op_type("conv2").to_string() == "gpu:0/f32/aBcd16b/jit");
  CHECK(mixed.op_type("conv3").to_string() == "cpu/f32/aBcd16b/jit");

  const auto want = logical(cpu_only.run(in).at("y"));
  for (int run = 0; run < 3; ++run) {
    const memory y = mixed.run(in).at("y");
    CHECK(kernel_type::of(y, library::jit()).to_string() == "cpu/f32/abcd/jit");
    const auto got = logical(y);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, double(std::abs(got[i] - want[i])));
    INFO("largest difference " << worst);
    CHECK(worst <= 1e-4);
  }

  const auto s = mixed.stats();
  std::map<std::string, transform_record> by_tensor;
  for (const auto& t : s.transforms) by_tensor.emplace(t.tensor, t);
  using tk = transform_kind;
  // cpu acdb -> gpu abcd: a layout change and a copy.
  REQUIRE(by_tensor.count("h1"));
  CHECK(by_tensor["h1"].steps.size() == 2);
  CHECK(std::count(by_tensor["h1"].steps.begin(), by_tensor["h1"].steps.end(), tk::place) == 1);
  // Relaid out on the device.
  CHECK(by_tensor["h2"].steps == std::vector<tk>{tk::layout});
  CHECK(by_tensor["h2"].to.place.to_string() == "gpu:0");
  // Both nChw16c: a copy alone.
  CHECK(by_tensor["h3"].steps == std::vector<tk>{tk::place});
  // The device conv's weights: copied once, kept in gpu.0's cache.
  REQUIRE(by_tensor.count("w2"));
  CHECK(by_tensor["w2"].constant);
  CHECK(by_tensor["w2"].steps == std::vector<tk>{tk::place});
  CHECK(by_tensor["w2"].executions == 1);
  CHECK(s.constant_transforms == 1);
  CHECK(s.constant_cache_hits == 2);
  // h5 goes back to the host for the reorder op, which changes its layout.
  CHECK(by_tensor["h5"].steps == std::vector<tk>{tk::place});
  CHECK(by_tensor["h5"].to.to_string() == "cpu/f32/acdb/jit");
  for (const auto& t : s.transforms) {
    if (!t.constant) CHECK(t.executions == 3);
  }
  // The all-CPU run transforms only layouts, on the host.
  for (const auto& t : cpu_only.stats().transforms) {
    for (auto k : t.steps) CHECK(k != tk::place);
  }
}

TEST_CASE("a depthwise convolution on the device equals the CPU's", "[graph][ocl][conv]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  graph g("dw");
  const memory x = add_with_data(g, tensor("x", {2, 16, 9, 9}, tensor_role::input), 3);
  add_with_data(g, tensor("w", {16, 1, 1, 3, 3}, tensor_role::constant), 4);
  add_with_data(g, tensor("b", {16}, tensor_role::constant), 5);
  g.add_tensor(produced("y"));
  op_spec op{.name = "dw", .kind = "convolution", .inputs = {"x", "w", "b"}, .outputs = {"y"}};
  op.attributes["padding"] = std::vector<std::int64_t>{1, 1};
  op.attributes["strides"] = std::vector<std::int64_t>{2, 2};
  op.attributes["post_ops"] = std::vector<std::string>{"relu"};
  op.place = place::gpu(0);
  g.add_op(op);
  executor cpu_only(g, {.ignore_op_places = true});
  executor device(g);
  CHECK(device.op_type("dw").place.to_string() == "gpu:0");
  const auto want = logical(cpu_only.run({{"x", x}}).at("y"));
  const auto got = logical(device.run({{"x", x}}).at("y"));
  REQUIRE(got.size() == want.size());
  REQUIRE(got.size() == 2 * 16 * 5 * 5);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(got[i] - want[i]) <= 1e-5 * (1 + std::abs(want[i])));
  }
}

TEST_CASE("an op forced onto a device that does not exist is refused", "[graph][ocl]") {
  graph g("far");
  add_with_data(g, tensor("x", {4}, tensor_role::input), 1);
  g.add_tensor(produced("y"));
  op_spec op{.name = "f", .kind = "eltwise", .inputs = {"x"}, .outputs = {"y"}};
  op.attributes["algorithm"] = std::string("relu");
  op.place = place::gpu(99);
  g.add_op(op);
  CHECK(error_of([&] { executor e(g); }).find("op 'f' (eltwise) runs on gpu:99: ") == 0);
}

TEST_CASE("a tensor placed on a device that does not exist is refused", "[graph][ocl]") {
  // The OpenCL backend is linked here: the engine's refusal says how many
  // devices there are, and the status is invalid_arguments (a bad graph).
  const std::string graph_text = R"({"tensors": [
      {"name": "x", "shape": [4], "type": "f32", "role": "input", "place": "X_PLACE"},
      {"name": "y", "role": "output", "place": "Y_PLACE"}],
    "ops": [{"name": "f", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"],
             "attributes": {"algorithm": "relu"}}]})";
  auto with = [&](const std::string& x_place, const std::string& y_place) {
    std::string text = graph_text;
    text.replace(text.find("X_PLACE"), 7, x_place);
    text.replace(text.find("Y_PLACE"), 7, y_place);
    return load_graph_json(text);  // loads: the places are well formed
  };
  const graph input_far = with("gpu:99", "cpu");
  CHECK(error_of([&] {
          executor e(input_far);
        }).find("tensor 'x' (input) is on gpu:99: gpu engine index 99 is out of range") == 0);
  CHECK(status_of([&] { executor e(input_far); }) == status::invalid_arguments);
  const graph output_far = with("cpu", "gpu:99");
  CHECK(error_of([&] {
          executor e(output_far);
        }).find("tensor 'y' (output) is on gpu:99: gpu engine index 99 is out of range") == 0);
  CHECK(status_of([&] { executor e(output_far); }) == status::invalid_arguments);
}

TEST_CASE("the MLP on the OpenCL device equals the CPU run", "[graph][ocl][matmul]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  const graph g = load_graph_file(std::string(PRIMCACHE_GRAPH_EXAMPLES) + "/mlp.json");
  const auto in = make_inputs(g);
  executor on_cpu(g);
  executor on_gpu(g, {.place = place::gpu(0)});
  CHECK(on_gpu.op_type("fc1").to_string() == "gpu:0/f32/ab/jit");
  const auto want = logical(on_cpu.run(in).at("logits"));
  for (int run = 0; run < 2; ++run) {
    const memory y = on_gpu.run(in).at("logits");
    CHECK(y.get_engine().get_kind() == engine_kind::gpu);
    const auto got = logical(y);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-4);
  }
  // x is copied up every run; the five constants once.
  const auto s = on_gpu.stats();
  CHECK(s.constant_transforms == 5);
  CHECK(s.constant_cache_hits == 5);
  for (const auto& t : s.transforms) {
    if (t.tensor == "x") CHECK(t.executions == 2);
    if (t.tensor == "w2") CHECK(t.steps.size() == 2);  // a copy and a relayout
  }
}

TEST_CASE("a constant copied to the device leaves the device's cache when its data is released",
          "[graph][ocl][constant]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  constant_tensor_cache& cache = constant_tensor_cache_for(engine(engine_kind::gpu, 0));
  std::atomic<int> graph_erased{0};
  const auto subscription =
      cache.on_eviction([&](const constant_key& k, const constant_buffer*, eviction_reason why) {
        // The graph executors' backend id ("graph").
        if (k.backend_id() == 0x6772617068ULL && why == eviction_reason::erased) ++graph_erased;
      });
  const std::size_t tensors_before = cache.tensor_count();
  memory w;
  {
    graph g("released_on_device");
    const memory x = add_with_data(g, tensor("x", {6, 20}, tensor_role::input), 6);
    // On the host, stored transposed: copied up and relaid out once.
    w = add_with_data(g, tensor("w", {20, 10}, tensor_role::constant, "ba"), 7);
    g.add_tensor(produced("y"));
    op_spec op{.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}};
    op.place = place::gpu(0);
    g.add_op(op);
    const std::vector<double> want = matmul_reference(x, w);
    executor device(g);
    for (int run = 0; run < 2; ++run) check_close(logical(device.run({{"x", x}}).at("y")), want);
    CHECK(device.stats().constant_transforms == 1);
  }
  // The graph and its executor are gone, the data is not: the entry stays.
  CHECK(cache.tensor_count() > tensors_before);
  CHECK(graph_erased == 0);
  w = memory();
  CHECK(graph_erased == 1);
  // The device buffer went, and the backend's packing of it with it.
  CHECK(cache.tensor_count() == tensors_before);
}

TEST_CASE("a constant on a user's OpenCL context is transformed onto the op's engine",
          "[graph][ocl][constant][interop]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  const ocl_user_context user;
  const engine interop = ocl_interop::make_engine(user.device, user.context);
  REQUIRE(place::of(interop) == place::gpu(0));
  REQUIRE_FALSE(interop == engine(engine_kind::gpu, 0));

  graph g("interop_weights");
  const memory x = add_with_data(g, tensor("x", {6, 20}, tensor_role::input), 6);
  // On gpu:0, in the user's context, stored transposed: the matmul wants ab,
  // a relayout on the device.
  tensor_spec w_spec = tensor("w", {20, 10}, tensor_role::constant, "ba");
  w_spec.place = place::gpu(0);
  const memory w = add_constant_on(g, w_spec, interop, 7);
  g.add_tensor(produced("y"));
  op_spec op{.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}};
  op.place = place::gpu(0);
  g.add_op(op);
  const std::vector<double> want = matmul_reference(x, w);

  executor device(g);
  for (int run = 0; run < 3; ++run) check_close(logical(device.run({{"x", x}}).at("y")), want);
  const auto s = device.stats();
  std::map<std::string, transform_record> by_tensor;
  for (const auto& t : s.transforms) by_tensor.emplace(t.tensor, t);
  REQUIRE(by_tensor.count("w"));
  CHECK(by_tensor["w"].constant);
  CHECK(by_tensor["w"].executions == 1);
  CHECK(s.constant_transforms == 1);
  CHECK(s.constant_cache_hits == 2);

  SECTION("another executor over the same data takes it from the cache") {
    executor again(g);
    check_close(logical(again.run({{"x", x}}).at("y")), want);
    CHECK(again.stats().constant_transforms == 0);
    CHECK(again.stats().constant_cache_hits == 1);
  }
  SECTION("an op on the CPU gets it through the host") {
    executor on_cpu(g, {.ignore_op_places = true});
    check_close(logical(on_cpu.run({{"x", x}}).at("y")), want);
    CHECK(on_cpu.stats().constant_transforms == 1);
  }
}

TEST_CASE("a constant on a user's OpenCL context that an op would read as given is refused",
          "[graph][ocl][constant][interop]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  const ocl_user_context user;
  const engine interop = ocl_interop::make_engine(user.device, user.context);
  graph g("interop_as_given");
  add_with_data(g, tensor("x", {6, 20}, tensor_role::input), 6);
  // Already in the kernel type the matmul wants: no transform would move it
  // to the op's engine.
  tensor_spec w_spec = tensor("w", {20, 10}, tensor_role::constant);
  w_spec.place = place::gpu(0);
  add_constant_on(g, w_spec, interop, 7);
  g.add_tensor(produced("y"));
  op_spec op{.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}};
  op.place = place::gpu(0);
  g.add_op(op);
  CHECK_THAT(error_of([&] { executor e(g); }),
             Catch::StartsWith("op 'fc' (matmul) runs on gpu:0's default engine and reads "
                               "constant 'w' as gpu:0/f32/ab/jit as given, but its data is on "
                               "another engine of gpu:0"));
  CHECK(status_of([&] { executor e(g); }) == status::invalid_arguments);
  // On the default engine it runs.
  SECTION("the same data on engine(gpu, 0) runs") {
    graph ok("default_engine");
    const memory x = add_with_data(ok, tensor("x", {6, 20}, tensor_role::input), 6);
    add_constant_on(ok, w_spec, engine(engine_kind::gpu, 0), 7);
    ok.add_tensor(produced("y"));
    ok.add_op(op);
    executor e(ok);
    CHECK(e.run({{"x", x}}).at("y").get_desc().dims()[1] == 10);
  }
}
