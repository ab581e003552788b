#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "config.hpp"
#include "embedded_defaults.hpp"
#include "primcache/base/error.hpp"
#include "process.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace {

using namespace primcache;
using namespace primcache::primcached;

// The message load_workload refuses `text` with.
std::string refusal(const std::string& text) {
  try {
    load_workload(text, "workload.json");
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    return e.message();
  }
  FAIL("the workload was accepted: " << text);
  return "";
}

const std::string mm = R"({"kind": "matmul", "shapes": {"src": [4, 8], "weights": [8, 2]}})";

}  // namespace

TEST_CASE("The embedded default workload loads and mixes every primitive kind",
          "[services][workload]") {
  const workload w = load_workload(embedded_workload(), "default.json");
  REQUIRE(w.primitives.size() >= 10);
  bool seen[4] = {};
  for (const primitive_spec& p : w.primitives) seen[static_cast<int>(p.kind)] = true;
  CHECK((seen[0] && seen[1] && seen[2] && seen[3]));
  CHECK(w.name == "default");
}

TEST_CASE("A workload entry reads its shapes, types, layouts and attributes",
          "[services][workload]") {
  const workload w = load_workload(R"({"primitives": [
      {"name": "m", "kind": "matmul", "weight": 3, "recreate": 0.25,
       "shapes": {"src": [4, 8], "weights": [8, 2]}, "layouts": {"weights": "any"},
       "attributes": {"post_ops": [{"kind": "eltwise", "algorithm": "relu"},
                                   {"kind": "binary_add", "shape": [1, 2]}]}},
      {"kind": "convolution", "shapes": {"src": [1, 16, 8, 8], "weights": [16, 16, 3, 3]},
       "padding": [1, 1], "strides": [2, 2], "layouts": {"src": "nChw16c", "dst": "nChw16c"}},
      {"kind": "reorder", "shapes": {"src": [4, 32]}, "data_types": {"dst": "s8"},
       "attributes": {"output_scales": [0.5]}}]})",
                                   "w.json");
  REQUIRE(w.primitives.size() == 3);
  const primitive_spec& m = w.primitives[0];
  CHECK(m.name == "m");
  CHECK(m.weight == 3);
  CHECK(m.recreate == 0.25);
  CHECK(m.dst.dims == memory::dims{4, 2});
  CHECK(m.weights->layout == format_tag::any);
  REQUIRE(m.post_ops.size() == 2);
  CHECK(m.post_ops[1].binary);
  const primitive_spec& c = w.primitives[1];
  CHECK(c.name == "convolution#1");
  CHECK(c.dst.dims == memory::dims{1, 16, 4, 4});
  CHECK(w.primitives[2].dst.type == data_type::s8);
  CHECK(w.primitives[2].output_scales == std::vector<float>{0.5f});
}

TEST_CASE("A malformed workload is refused with a message naming the field",
          "[services][workload]") {
  SECTION("a shape that is not an array of positive integers") {
    CHECK(refusal(R"({"primitives": [)" + mm + "," + mm + "," + mm +
                  R"(, {"kind": "matmul", "shapes": {"src": [4, -8], "weights": [8, 2]}}]})") ==
          "workload.json: primitives[3].shapes.src: expected an array of positive integers");
  }
  SECTION("a missing shape") {
    CHECK(refusal(R"({"primitives": [{"kind": "matmul", "shapes": {"src": [4, 8]}}]})") ==
          "workload.json: primitives[0].shapes: missing field weights");
  }
  SECTION("an unknown primitive kind") {
    CHECK(refusal(R"({"primitives": [{"kind": "softmax", "shapes": {}}]})") ==
          "workload.json: primitives[0].kind: unknown primitive kind \"softmax\" (expected "
          "matmul, convolution, eltwise or reorder)");
  }
  SECTION("an unknown field, a typo") {
    CHECK_THAT(refusal(R"({"primitives": [{"kind": "matmul", "shape": {}}]})"),
               Catch::StartsWith("workload.json: primitives[0].shape: unknown field"));
  }
  SECTION("an unknown data type") {
    CHECK_THAT(refusal(R"({"primitives": [{"kind": "reorder", "shapes": {"src": [4]},
                                            "data_types": {"dst": "f64"}}]})"),
               Catch::StartsWith("workload.json: primitives[0].data_types.dst: unknown data type "
                                 "\"f64\""));
  }
  SECTION("a layout for the wrong number of dimensions") {
    CHECK(refusal(R"({"primitives": [{"kind": "eltwise", "algorithm": "relu",
                                      "shapes": {"src": [4, 4]}, "layouts": {"src": "nchw"}}]})") ==
          "workload.json: primitives[0].layouts.src: layout nchw lays out 4 dimensions, the "
          "tensor has 2");
  }
  SECTION("a weight that is not positive") {
    CHECK(refusal(R"({"primitives": [{"kind": "matmul", "weight": 0,
                                      "shapes": {"src": [4, 8], "weights": [8, 2]}}]})") ==
          "workload.json: primitives[0].weight: expected a number > 0");
  }
  SECTION("a recreate probability out of range") {
    CHECK(refusal(R"({"primitives": [{"kind": "matmul", "recreate": 2,
                                      "shapes": {"src": [4, 8], "weights": [8, 2]}}]})") ==
          "workload.json: primitives[0].recreate: expected a number in [0, 1]");
  }
  SECTION("an unknown eltwise algorithm in a post-op") {
    CHECK_THAT(refusal(R"({"primitives": [{"kind": "matmul",
                 "shapes": {"src": [4, 8], "weights": [8, 2]},
                 "attributes": {"post_ops": [{"kind": "eltwise", "algorithm": "swish"}]}}]})"),
               Catch::StartsWith("workload.json: primitives[0].attributes.post_ops[0].algorithm: "
                                 "unknown eltwise algorithm \"swish\""));
  }
  SECTION("shapes that do not agree, found by the runtime") {
    CHECK_THAT(refusal(R"({"primitives": [{"kind": "matmul",
                 "shapes": {"src": [4, 8], "weights": [7, 2]}}]})"),
               Catch::StartsWith("workload.json: primitives[0]: invalid_arguments: "));
  }
  SECTION("no primitives") {
    CHECK(refusal(R"({"primitives": []})") ==
          "workload.json: primitives: expected at least one primitive");
  }
  SECTION("not JSON") {
    CHECK_THAT(refusal("{\n  \"primitives\": [,]\n}"),
               Catch::StartsWith("workload.json: line 2, column 18: not valid JSON"));
  }
}

TEST_CASE("A workload tensor over 4 GiB is refused naming the entry, the tensor and its size",
          "[services][workload]") {
  SECTION("a given shape") {
    CHECK(refusal(R"({"primitives": [)" + mm + R"(, {"kind": "matmul",
                 "shapes": {"src": [65536, 65536], "weights": [65536, 65536]}}]})") ==
          "workload.json: primitives[1].shapes.src: 65536x65536 f32 takes 16 GiB (17179869184 "
          "bytes); a workload tensor may take at most 4 GiB");
  }
  SECTION("a defaulted dst, from shapes that are small themselves") {
    CHECK(refusal(R"({"primitives": [{"kind": "matmul",
                 "shapes": {"src": [65536, 1], "weights": [1, 65536]}}]})") ==
          "workload.json: primitives[0].shapes: dst (not given: from the other shapes) "
          "65536x65536 f32 takes 16 GiB (17179869184 bytes); a workload tensor may take at most "
          "4 GiB");
  }
  SECTION("a shape whose element count overflows 64 bits") {
    CHECK_THAT(refusal(R"({"primitives": [{"kind": "eltwise", "algorithm": "relu", "shapes":
                 {"src": [1073741824, 1073741824, 1073741824, 1073741824, 1073741824, 2]}}]})"),
               Catch::StartsWith("workload.json: primitives[0].shapes.src: "
                                 "1073741824x1073741824x1073741824x1073741824x1073741824x2 f32 "
                                 "takes more than 2^64 bytes; a workload tensor may take at most "
                                 "4 GiB"));
  }
  SECTION("a blocked layout's padding") {
    // 1 GiB as written; nChw16c pads C to 16.
    CHECK(refusal(R"({"primitives": [{"kind": "eltwise", "algorithm": "relu",
                 "shapes": {"src": [1, 1, 16384, 16384]}, "layouts": {"src": "nChw16c"}}]})") ==
          "workload.json: primitives[0].shapes.src: 1x1x16384x16384 f32 takes 16 GiB "
          "(17179869184 bytes) in layout nChw16c (padding included); a workload tensor may "
          "take at most 4 GiB");
  }
  SECTION("a binary post-op's operand") {
    CHECK(refusal(R"({"primitives": [{"kind": "matmul",
                 "shapes": {"src": [4, 8], "weights": [8, 2]},
                 "attributes": {"post_ops": [{"kind": "binary_add",
                                              "shape": [65536, 65536]}]}}]})") ==
          "workload.json: primitives[0].attributes.post_ops[0].shape: 65536x65536 f32 takes 16 "
          "GiB (17179869184 bytes); a workload tensor may take at most 4 GiB");
  }
  SECTION("exactly 4 GiB is allowed") {
    CHECK_NOTHROW(load_workload(R"({"primitives": [{"kind": "eltwise", "algorithm": "relu",
                 "shapes": {"src": [32768, 32768]}}]})",
                                "workload.json"));
  }
}

TEST_CASE("A workload number made a float must be finite and within float range",
          "[services][workload]") {
  const std::string what = "expected a finite number of magnitude at most 3.40282e+38 (a float)";
  CHECK(refusal(R"({"primitives": [{"kind": "eltwise", "algorithm": "linear",
               "shapes": {"src": [4]}, "alpha": 1e300}]})") ==
        "workload.json: primitives[0].alpha: " + what);
  CHECK(refusal(R"({"primitives": [{"kind": "eltwise", "algorithm": "linear",
               "shapes": {"src": [4]}, "beta": -1e39}]})") ==
        "workload.json: primitives[0].beta: " + what);
  // Boost.JSON reads 1e400 as infinity.
  CHECK(refusal(R"({"primitives": [{"kind": "eltwise", "algorithm": "linear",
               "shapes": {"src": [4]}, "alpha": 1e400}]})") ==
        "workload.json: primitives[0].alpha: " + what);
  for (const char* field : {"scale", "alpha", "beta"}) {
    INFO(field);
    CHECK(refusal(R"({"primitives": [{"kind": "matmul",
                 "shapes": {"src": [4, 8], "weights": [8, 2]},
                 "attributes": {"post_ops": [{"kind": "eltwise", "algorithm": "linear", ")" +
                  std::string(field) + R"(": 1e300}]}}]})") ==
          "workload.json: primitives[0].attributes.post_ops[0]." + std::string(field) + ": " +
              what);
  }
  CHECK(refusal(R"({"primitives": [{"kind": "reorder", "shapes": {"src": [4, 2]},
               "attributes": {"output_scales": [0.5, 1e300], "output_scales_mask": 2}}]})") ==
        "workload.json: primitives[0].attributes.output_scales[1]: " + what);
  // Near the largest float is fine (Boost.JSON 1.81 may read FLT_MAX's own
  // digits a little above it).
  CHECK_NOTHROW(load_workload(R"({"primitives": [{"kind": "eltwise", "algorithm": "linear",
               "shapes": {"src": [4]}, "alpha": 3.4e38, "beta": -1e-300}]})",
                              "workload.json"));
}

TEST_CASE("A workload with a key given twice in one object is refused naming it and its line",
          "[services][workload]") {
  CHECK(refusal("{\"primitives\": [{\"kind\": \"matmul\",\n"
                "  \"shapes\": {\"src\": [4, 8], \"weights\": [8, 2],\n"
                "             \"src\": [4, 4]}}]}") ==
        "workload.json: line 3: duplicate key \"src\" (a key may appear once in an object)");
  // In a graph file too: libs/graph's loader refuses it, naming the object.
  const std::string graph = primcache::test::temp_path("twice-graph.json");
  primcache::test::write_text(
      graph, R"({"tensors": [{"name": "x", "shape": [4, 8], "type": "f32", "role": "input"},
                   {"name": "y", "role": "output"}],
    "ops": [{"name": "act", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"],
             "attributes": {"algorithm": "relu", "algorithm": "tanh"}}]})");
  CHECK(refusal(R"({"graphs": [{"file": ")" + graph + R"("}]})") ==
        "workload.json: graphs[0].file: " + graph +
            ": graph JSON /ops/0/attributes: duplicate key \"algorithm\" at line 4, column 50 (a "
            "key may appear once in an object)");
  // The same key in different objects is no duplicate.
  CHECK(load_workload(R"({"primitives": [)" + mm + "," + mm + "]}", "workload.json")
            .primitives.size() == 2);
}

TEST_CASE("The shipped workload and config files load", "[services][workload]") {
  const std::string configs = std::string(PRIMCACHE_SOURCE_DIR) + "/configs";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const std::string file = GENERATE(as<std::string>{}, "default", "resnet50_transformer");
  const std::string path = configs + "/workloads/" + file + ".json";
  CHECK(load_workload(read(path), path).name == file);
  if (file == "default") {
    CHECK(read(path) == embedded_workload());
    CHECK(read(configs + "/primcached.json") == embedded_config());
  } else {
    const std::string cpath = configs + "/" + file + ".json";
    CHECK(load_config(read(cpath), cpath, configs).workload == path);
  }
}

TEST_CASE("the runner keeps a bounded sample of creation times between takes",
          "[services][runner]") {
  // Recreated on every pick: cache hits of microseconds, each a sample.
  const workload w = load_workload(
      R"({"primitives": [{"name": "relu", "kind": "eltwise", "algorithm": "relu",
                          "recreate": 1, "shapes": {"src": [4, 4]}}]})",
      "w.json");
  constexpr std::size_t cap = 500;
  workload_runner runner(w, 2, 0x5eed, cap);
  runner.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  runner.stop();
  const interval_stats s = runner.take_interval();
  // Far more creations than the two threads may keep (each keeps `cap`).
  REQUIRE(s.creations > 4 * cap);
  CHECK(s.creation_ms.size() == 2 * cap);
  for (double ms : s.creation_ms) CHECK(ms >= 0);
  // A take empties the buffers.
  CHECK(runner.take_interval().creation_ms.empty());
}
