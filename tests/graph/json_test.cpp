// The JSON graph format: the shipped examples load and run; bad documents
// are refused with the place in the document and the reason.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "graph_test_util.hpp"
#include "primcache/graph/graph_json.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"

using namespace primcache;
using namespace graph_test;

namespace {

const std::string examples = PRIMCACHE_GRAPH_EXAMPLES;

// A valid document with `tensor_extra` added to tensor x and `op_extra` to op f.
std::string doc(const std::string& tensor_extra = "", const std::string& op_extra = "") {
  return R"({"name": "t", "tensors": [
    {"name": "x", "shape": [2, 3], "type": "f32", "role": "input")" +
         tensor_extra + R"(},
    {"name": "y", "role": "output"}],
  "ops": [{"name": "f", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"],
           "attributes": {"algorithm": "relu"})" +
         op_extra + "}]}";
}

// A GPU whose every allocation fails with `failing_status`: the machine
// failing while the loader makes a constant's data on it (the host data
// copied there).
std::atomic<status> failing_status{status::out_of_memory};

class failing_gpu final : public backend::engine_impl {
 public:
  explicit failing_gpu(std::size_t index) : engine_impl(engine_kind::gpu, index) {}
  void write_identity(key_writer& w) const override { w.str("graph_test:failing_gpu"); }
  std::string describe() const override { return "gpu:failing"; }
  void* allocate(std::size_t bytes) const override {
    throw error(failing_status.load(),
                "test device: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  void deallocate(void*) const noexcept override {}
};

// Registers failing_gpu as the gpu engines for its lifetime. graph_test
// links no GPU backend; a factory without `create` is what an engine kind
// no backend registered reads as, so the destructor puts that back.
struct failing_gpu_scope {
  failing_gpu_scope() {
    backend::register_engine_factory(
        engine_kind::gpu, [] { return std::size_t{1}; },
        [](std::size_t index) -> std::shared_ptr<const backend::engine_impl> {
          return std::make_shared<const failing_gpu>(index);
        });
  }
  ~failing_gpu_scope() {
    backend::register_engine_factory(engine_kind::gpu, nullptr, nullptr);
    failing_status = status::out_of_memory;
  }
  failing_gpu_scope(const failing_gpu_scope&) = delete;
  failing_gpu_scope& operator=(const failing_gpu_scope&) = delete;
};

}  // namespace

TEST_CASE("the MLP example runs and matches loops", "[graph][json][examples]") {
  const graph g = load_graph_file(examples + "/mlp.json");
  CHECK(g.name() == "mlp");
  executor exec(g);
  const auto in = make_inputs(g);
  const auto y = logical(exec.run(in).at("logits"));
  const auto X = logical(in.at("x"));
  auto layer = [](const std::vector<double>& a, int m, int k, const std::vector<float>& w,
                  const std::vector<float>* b, int n, double (*act)(double)) {
    std::vector<double> out(static_cast<std::size_t>(m) * n);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = b ? (*b)[j] : 0.0;
        for (int q = 0; q < k; ++q) acc += a[i * k + q] * w[q * n + j];
        out[i * n + j] = act(acc);
      }
    }
    return out;
  };
  const auto W1 = logical(g.data("w1")), B1 = logical(g.data("b1"));
  const auto W2 = logical(g.data("w2")), B2 = logical(g.data("b2")), W3 = logical(g.data("w3"));
  auto relu = [](double v) { return std::max(v, 0.0); };
  auto gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  auto none = [](double v) { return v; };
  const auto h1 = layer(std::vector<double>(X.begin(), X.end()), 32, 256, W1, &B1, 512, relu);
  const auto h2 = layer(h1, 32, 512, W2, &B2, 256, gelu);
  check_close(y, layer(h2, 32, 256, W3, nullptr, 10, none), 1e-4);
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 1);  // w2, stored transposed
  CHECK(s.transforms[0].tensor == "w2");
  CHECK(s.transforms[0].constant);
}

TEST_CASE("the ResNet-50 bottleneck example runs and matches loops", "[graph][json][examples]") {
  const graph g = load_graph_file(examples + "/resnet50_bottleneck.json");
  executor exec(g);
  const auto in = make_inputs(g);
  const memory y = exec.run(in).at("y");
  CHECK(kernel_type::of(y, library::jit()).to_string() == "cpu/f32/abcd/jit");
  const int H = 56, W = 56;
  auto conv = [&](const std::vector<double>& src, int ic, const std::string& w,
                  const std::string& b, int oc, int k, const std::vector<double>* add) {
    const auto Wt = logical(g.data(w)), Bt = logical(g.data(b));
    const int pad = k / 2;
    std::vector<double> out(static_cast<std::size_t>(oc) * H * W);
    for (int o = 0; o < oc; ++o) {
      for (int h = 0; h < H; ++h) {
        for (int x = 0; x < W; ++x) {
          double acc = Bt[o];
          for (int c = 0; c < ic; ++c) {
            for (int kh = 0; kh < k; ++kh) {
              const int ih = h - pad + kh;
              if (ih < 0 || ih >= H) continue;
              for (int kw = 0; kw < k; ++kw) {
                const int iw = x - pad + kw;
                if (iw < 0 || iw >= W) continue;
                acc += src[(c * H + ih) * W + iw] * Wt[((o * ic + c) * k + kh) * k + kw];
              }
            }
          }
          const std::size_t i = (static_cast<std::size_t>(o) * H + h) * W + x;
          if (add) acc += (*add)[i];
          out[i] = std::max(acc, 0.0);
        }
      }
    }
    return out;
  };
  const auto X = logical(in.at("x"));
  const std::vector<double> x(X.begin(), X.end());
  const auto h1 = conv(x, 256, "w1", "b1", 64, 1, nullptr);
  const auto h2 = conv(h1, 64, "w2", "b2", 64, 3, nullptr);
  check_close(logical(y), conv(h2, 64, "w3", "b3", 256, 1, &x), 1e-4);
  // x to nhwc once per run (conv1 and the shortcut share it), y back to nchw.
  const auto s = exec.stats();
  REQUIRE(s.transforms.size() == 2);
  CHECK(s.transforms[0].tensor == "x");
  CHECK(s.transforms[0].executions == 1);
  CHECK(s.transforms[1].tensor == "y");
}

TEST_CASE("the mixed example loads: its ops force CPU and OpenCL places",
          "[graph][json][examples]") {
  const graph g = load_graph_file(examples + "/mixed_cpu_ocl.json");
  int gpu_ops = 0;
  for (const auto& op : g.ops()) gpu_ops += op.place && !op.place->is_cpu();
  CHECK(gpu_ops == 3);
  // All on the CPU it runs anywhere.
  executor exec(g, {.ignore_op_places = true});
  CHECK(exec.run(make_inputs(g)).at("y").get_desc().dims()[1] == 16);
}

TEST_CASE("a good document loads every field", "[graph][json]") {
  const graph g = load_graph_json(doc(R"(, "layout": "ba", "place": "cpu",
      "init": {"kind": "fill", "value": 2.5})",
                                      R"(, "place": "cpu", "library": "jit",
      "type": "f32", "layout": "ab")"));
  const tensor_spec& x = *g.find_tensor("x");
  CHECK(x.layout.to_string() == "ba");
  CHECK(x.init->kind == tensor_init::kind::fill);
  CHECK(x.init->value == 2.5);
  CHECK(logical(make_inputs(g).at("x")) == std::vector<float>(6, 2.5f));
  const op_spec& f = *g.find_op("f");
  CHECK(f.library == "jit");
  CHECK(f.layout.to_string() == "ab");
  CHECK(f.string_attribute("algorithm", "") == "relu");
}

TEST_CASE("bad JSON is refused with where and why", "[graph][json][errors]") {
  auto msg = [](const std::string& text) { return error_of([&] { load_graph_json(text); }); };
  CHECK(msg("{\"name\": \"t\",\n  \"tensors\": [}").find("graph JSON line 2, column 15: ") == 0);
  CHECK(msg("[]") == "graph JSON /: expected an object, got an array");
  CHECK(msg(R"({"tensors": [], "ops": [], "extra": 1})") ==
        "graph JSON /extra: unknown key \"extra\" (known: name, description, tensors, ops)");
  CHECK(msg(R"({"tensors": []})") == "graph JSON /: missing \"ops\"");
  CHECK(msg(doc(R"(, "shpe": [1])")) ==
        "graph JSON /tensors/0/shpe: unknown key \"shpe\" (known: name, shape, type, layout, "
        "place, role, init)");
  CHECK(
      msg(R"({"tensors": [{"name": "x", "shape": [2, "3"], "type": "f32", "role": "input"}], "ops": []})") ==
      "graph JSON /tensors/0/shape/1: expected an integer, got a string");
  CHECK(
      msg(R"({"tensors": [{"name": "x", "shape": [2, 0], "type": "f32", "role": "input"}], "ops": []})") ==
      "graph JSON /tensors/0/shape/1: dims must be positive, not 0");
  CHECK(
      msg(R"({"tensors": [{"name": "x", "shape": [2], "type": "f33", "role": "input"}], "ops": []})") ==
      "graph JSON /tensors/0/type: unknown data type \"f33\" (f32, bf16, f16, s8, u8, s32)");
  CHECK(
      msg(R"({"tensors": [{"name": "x", "shape": [2], "type": "f32", "role": "weights"}], "ops": []})") ==
      "graph JSON /tensors/0/role: unknown role \"weights\" (input, constant, intermediate, "
      "output)");
  CHECK(msg(R"({"tensors": [{"name": "x", "type": "f32", "role": "input"}], "ops": []})") ==
        "graph JSON /tensors/0: tensor \"x\" (input) needs a \"shape\"");
  CHECK(msg(doc(R"(, "layout": "abcd")")) ==
        "graph JSON /tensors/0/layout: layout abcd lays out 4 dims, the shape has 2");
  CHECK(msg(doc(R"(, "layout": "zz")")).find("graph JSON /tensors/0/layout: bad layout \"zz\": ") ==
        0);
  CHECK(msg(doc(R"(, "place": "tpu")"))
            .find("graph JSON /tensors/0/place: bad place \"tpu\" (cpu or gpu:N): ") == 0);
  CHECK(msg(doc(R"(, "init": {"kind": "gauss"})")) ==
        "graph JSON /tensors/0/init/kind: unknown init kind \"gauss\" (uniform, fill)");
  CHECK(msg(doc(R"(, "init": {"kind": "uniform", "low": 1, "high": 0})")) ==
        "graph JSON /tensors/0/init: uniform needs low < high");
  CHECK(msg(doc("", R"(, "inputs2": [])")) ==
        "graph JSON /ops/0/inputs2: unknown key \"inputs2\" (known: name, kind, inputs, outputs, "
        "attributes, place, library, type, layout)");
  CHECK(msg(doc("", R"(, "library": "a/b")")) ==
        "graph JSON /ops/0/library: a library name has no '/'");
  CHECK(
      msg(R"({"tensors": [], "ops": [{"name": "f", "kind": "relu", "inputs": [1], "outputs": ["y"]}]})") ==
      "graph JSON /ops/0/inputs/0: expected a string, got an integer");
  CHECK(msg(R"({"tensors": [], "ops": [{"name": "f", "kind": "relu", "inputs": ["x"]}]})") ==
        "graph JSON /ops/0: missing \"outputs\"");
  CHECK(msg(R"({"tensors": [], "ops": [{"name": "f", "kind": "e", "inputs": ["x"], "outputs": ["y"],
      "attributes": {"a": {"b": 1}}}]})") ==
        "graph JSON /ops/0/attributes/a: an attribute is a number, a string or a list of integers "
        "or of strings, not an object");
  CHECK(msg(R"({"tensors": [], "ops": [{"name": "f", "kind": "e", "inputs": ["x"], "outputs": ["y"],
      "attributes": {"a": [1, "b"]}}]})") ==
        "graph JSON /ops/0/attributes/a/1: expected an integer, got a string");
  // Structure errors come from validation, naming tensors and ops.
  CHECK(
      msg(R"({"tensors": [], "ops": [{"name": "f", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"]}]})") ==
      "op 'f' reads tensor 'x' (input 0), which the graph does not declare and no op writes");
  CHECK(error_of([] { load_graph_file("/nonexistent/g.json"); }) ==
        "graph file /nonexistent/g.json: cannot be read: No such file or directory");
}

TEST_CASE("a key given twice in one object is refused, naming the object and the line",
          "[graph][json][errors]") {
  auto msg = [](const std::string& text) { return error_of([&] { load_graph_json(text); }); };
  const std::string once = " (a key may appear once in an object)";
  // Boost.JSON keeps the last: each of these loaded, the last value taken.
  CHECK(msg(R"({"tensors": [], "ops": [], "ops": []})") ==
        "graph JSON /: duplicate key \"ops\" at line 1, column 28" + once);
  CHECK(msg(R"({"tensors": [{"name": "x", "shape": [4], "type": "f32", "role": "input"},
                            {"name": "y", "role": "output"}],
    "ops": [{"name": "act", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"],
             "attributes": {"algorithm": "relu", "algorithm": "tanh"}}]})") ==
        "graph JSON /ops/0/attributes: duplicate key \"algorithm\" at line 4, column 50" + once);
  CHECK(msg(doc(R"(, "init": {"kind": "fill", "value": 1, "value": 2})")) ==
        "graph JSON /tensors/0/init: duplicate key \"value\" at line 2, column 105" + once);
  // Keys compare unescaped.
  CHECK(msg(doc(R"(, "r\u006fle": "input")"))
            .find("graph JSON /tensors/0: duplicate key \"role\" "
                  "at line 2, column 68") == 0);
  // A file's message starts with its path.
  const std::string path = std::filesystem::temp_directory_path() /
                           ("primcache_graph_twice_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << doc("", R"(, "name": "g")");
  CHECK(error_of([&] { load_graph_file(path); }) ==
        path + ": graph JSON /ops/0: duplicate key \"name\" at line 5, column 49" + once);
  std::remove(path.c_str());
  // The same key in different objects is no duplicate (every doc() has
  // "name" in the top level, a tensor and an op).
  CHECK_NOTHROW(load_graph_json(doc()));
}

TEST_CASE("init values that are not finite as floats are refused at load",
          "[graph][json][errors]") {
  auto msg = [](const std::string& text) { return error_of([&] { load_graph_json(text); }); };
  CHECK(msg(doc(R"(, "init": {"kind": "uniform", "low": -1e308, "high": 1e308})")) ==
        "graph JSON /tensors/0/init/low: -1e+308 is not a finite float (at most 3.40282e+38 in "
        "magnitude)");
  CHECK(msg(doc(R"(, "init": {"kind": "uniform", "low": 0, "high": 1e39})")) ==
        "graph JSON /tensors/0/init/high: 1e+39 is not a finite float (at most 3.40282e+38 in "
        "magnitude)");
  CHECK(msg(doc(R"(, "init": {"kind": "fill", "value": 1e39})")) ==
        "graph JSON /tensors/0/init/value: 1e+39 is not a finite float (at most 3.40282e+38 in "
        "magnitude)");
  // The largest finite floats are fine.
  const graph g = load_graph_json(doc(R"(, "init": {"kind": "fill", "value": -3.4e38})"));
  CHECK(logical(make_inputs(g).at("x")) == std::vector<float>(6, -3.4e38f));
}

TEST_CASE("a tensor larger than max_tensor_bytes is refused at load", "[graph][json][errors]") {
  auto msg = [](const std::string& text) { return error_of([&] { load_graph_json(text); }); };
  const std::string limit =
      ": 17179869184 bytes, more than the limit of 4294967296 bytes per "
      "graph tensor";
  // A constant would be allocated and filled by the loader, an input by every run.
  CHECK(msg(R"({"tensors": [{"name": "w", "shape": [65536, 65536], "type": "f32",
                             "role": "constant"}], "ops": []})") ==
        "graph JSON /tensors/0/shape: tensor \"w\" (constant) is 65536x65536 f32" + limit);
  CHECK(msg(R"({"tensors": [{"name": "x", "shape": [65536, 65536], "type": "f32",
                             "role": "input"}], "ops": []})") ==
        "graph JSON /tensors/0/shape: tensor \"x\" (input) is 65536x65536 f32" + limit);
}

TEST_CASE("a layout whose strides span more than max_tensor_bytes is refused at load",
          "[graph][json][errors]") {
  // 4 MiB of elements, 8 GiB of buffer: refused at the layout, before any
  // run allocates it.
  CHECK(error_of([&] { load_graph_json(doc()); }).empty());
  const std::string m = error_of([&] {
    load_graph_json(R"({"tensors": [
        {"name": "x", "shape": [1048576, 1], "type": "f32", "layout": "s2048,1", "role": "input"},
        {"name": "y", "role": "output"}],
      "ops": [{"name": "f", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"],
               "attributes": {"algorithm": "relu"}}]})");
  });
  CHECK(m ==
        "graph JSON /tensors/0/layout: tensor \"x\" (input) is 1048576x1 f32 in layout s2048,1: "
        "its buffer spans 8589934592 bytes, more than the limit of 4294967296 bytes per graph "
        "tensor");
}

TEST_CASE("a machine failure making a constant's data keeps its status at load",
          "[graph][json][errors]") {
  const std::string text = R"({"tensors": [
      {"name": "w", "shape": [4, 8], "type": "f32", "place": "gpu:0", "role": "constant"}],
    "ops": []})";
  // The test device stands in for a GPU backend graph_test does not link;
  // with one linked it would replace it (and the scope remove it).
  if (engine::get_count(engine_kind::gpu) != 0) {
    WARN("a GPU backend is linked: the failing test device is not installed");
    return;
  }
  {
    failing_gpu_scope gpu;
    // Not a malformed document: primcached keeps the machine's exit code.
    for (status code : {status::out_of_memory, status::runtime_error, status::corrupt_data}) {
      INFO("status " << to_string(code));
      failing_status = code;
      CHECK(status_of([&] { load_graph_json(text); }) == code);
      CHECK(error_of([&] { load_graph_json(text); }) ==
            "graph JSON /tensors/0: tensor \"w\": test device: cannot allocate 128 bytes");
    }
  }
  // With no GPU at all, the document asks for what this process lacks.
  CHECK(status_of([&] { load_graph_json(text); }) == status::invalid_arguments);
  CHECK(error_of([&] { load_graph_json(text); }).find("graph JSON /tensors/0: tensor \"w\": ") ==
        0);
}

TEST_CASE("an op attribute its kind does not accept is refused when the executor is built",
          "[graph][json][errors]") {
  const graph g = load_graph_json(R"({"tensors": [
      {"name": "x", "shape": [1, 2, 5, 5], "type": "f32", "role": "input"},
      {"name": "w", "shape": [2, 2, 3, 3], "type": "f32", "role": "constant"},
      {"name": "y", "role": "output"}],
    "ops": [{"name": "conv", "kind": "convolution", "inputs": ["x", "w"], "outputs": ["y"],
             "attributes": {"strides": [2, 2], "paddin": [1, 1]}}]})");
  CHECK(error_of([&] { executor e(g); }) ==
        "op 'conv' (convolution): unknown attribute 'paddin' (accepted: dilation, padding, "
        "padding_l, padding_r, post_ops, strides, weights_layout)");
}

TEST_CASE("a bad weights_layout is refused naming the op", "[graph][json][errors]") {
  auto build = [](const std::string& kind, const std::string& weights, const std::string& extra) {
    const bool conv = kind == "convolution";
    const graph g = load_graph_json(
        R"({"tensors": [
        {"name": "x", "shape": )" +
        std::string(conv ? "[1, 2, 5, 5]" : "[4, 8]") +
        R"(, "type": "f32", "role": "input"},
        {"name": "w", "shape": )" +
        weights + R"(, "type": "f32", "role": "constant"},
        {"name": "y", "role": "output"}],
      "ops": [{"name": "fc", "kind": ")" +
        kind + R"(", "inputs": ["x", "w"], "outputs": ["y"],
               "attributes": {)" +
        extra + "}}]}");
    return std::make_pair(error_of([&] { executor e(g); }), status_of([&] { executor e(g); }));
  };
  const auto [bad_tag, bad_tag_status] = build("matmul", "[8, 3]", R"("weights_layout": "oihw16")");
  CHECK(bad_tag ==
        "op 'fc' (matmul): weights_layout \"oihw16\": layout 'oihw16' is neither a format tag "
        "nor s<stride>,<stride>,...");
  CHECK(bad_tag_status == status::invalid_arguments);
  CHECK(build("convolution", "[2, 2, 3, 3]", R"("weights_layout": "oihw16")").first ==
        "op 'fc' (convolution): weights_layout \"oihw16\": layout 'oihw16' is neither a format "
        "tag nor s<stride>,<stride>,...");
  // A layout of another rank than the weights: the plan names op and input.
  CHECK(build("matmul", "[8, 3]", R"("weights_layout": "abcd")")
            .first.find(
                "op 'fc' input 'w': no transform from cpu/f32/ab/jit to cpu/f32/abcd/jit") == 0);
  // Not a string: the attribute check names it too.
  CHECK(build("matmul", "[8, 3]", R"("weights_layout": 3)").first ==
        "op 'fc' (matmul): attribute 'weights_layout' must be a string, not an integer");
  // A good one still runs.
  CHECK(build("matmul", "[8, 3]", R"("weights_layout": "ba")").first.empty());
  CHECK(build("convolution", "[2, 2, 3, 3]", R"("weights_layout": "acdb")").first.empty());
}

TEST_CASE("a graph of 200000 ops loads, validates, builds and runs in time linear in its size",
          "[graph][json][scaling]") {
  // A chain x -> t1 -> ... -> y of identity ops, each tensor declared, in a
  // document of about 16 MiB (a quarter of what a graph file may have).
  // Finding each op's tensors by scanning the lists made this take hours at
  // the file limit (1.8 million tensors), minutes here; with the indexes
  // the graph keeps by name it takes about a second. CTest's timeout for
  // graph_test (300 s) is the bound this checks; a scaling check, not a
  // timing claim.
  constexpr int n = 200000;
  std::string text = R"({"name": "chain", "tensors": [
    {"name": "x", "shape": [4], "type": "f32", "role": "input"})";
  text.reserve(std::size_t{96} * n);
  auto name = [&](int i) { return i == n ? std::string("y") : "t" + std::to_string(i); };
  for (int i = 1; i <= n; ++i) {
    text += R"(,
    {"name": ")" +
            name(i) + R"(", "role": ")" + (i == n ? "output" : "intermediate") + R"("})";
  }
  text += R"(], "ops": [)";
  for (int i = 1; i <= n; ++i) {
    text += std::string(i == 1 ? "" : ",") + "\n    {\"name\": \"op" + std::to_string(i) +
            R"(", "kind": "identity", "inputs": [")" + (i == 1 ? std::string("x") : name(i - 1)) +
            R"("], "outputs": [")" + name(i) + "\"]}";
  }
  text += "]}";
  const graph g = load_graph_json(text);  // validates
  REQUIRE(g.tensors().size() == std::size_t{n} + 1);
  REQUIRE(g.ops().size() == std::size_t{n});
  CHECK(g.find_tensor("t4711")->role == tensor_role::intermediate);
  CHECK(g.find_op("op4711")->inputs == std::vector<std::string>{"t4710"});
  const std::vector<std::size_t> order = g.validate();
  REQUIRE(order.size() == std::size_t{n});
  CHECK(g.ops()[order.front()].name == "op1");
  CHECK(g.ops()[order.back()].name == "op" + std::to_string(n));
  // The executor too (about two seconds), and a run through the chain.
  const executor e(g);
  const executor::tensor_map inputs = make_inputs(g);
  CHECK(logical(e.run(inputs).at("y")) == logical(inputs.at("x")));
}

TEST_CASE("a graph file is a regular file of at most max_graph_file_bytes",
          "[graph][json][errors]") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("primcache_graph_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto message_of = [](const std::string& path) {
    try {
      load_graph_file(path);
    } catch (const error& e) {
      return e.message();
    }
    return std::string("loaded");
  };
  // A directory read as empty text ("not valid JSON"); a FIFO waited for a
  // writer; /dev/zero was read until memory ran out.
  CHECK(message_of(dir.string()) ==
        "graph file " + dir.string() + ": a directory, not a regular file");
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(message_of(fifo) == "graph file " + fifo + ": a FIFO, not a regular file");
  CHECK(message_of("/dev/zero") == "graph file /dev/zero: a character device, not a regular file");
  const std::string big = (dir / "big.json").string();
  std::ofstream(big).close();
  std::filesystem::resize_file(big, max_graph_file_bytes + 1);
  CHECK(message_of(big).find("over the 64 MiB a graph file may have") != std::string::npos);
  CHECK(message_of((dir / "missing.json").string()).find("cannot be read") != std::string::npos);
  std::filesystem::remove_all(dir);
}
