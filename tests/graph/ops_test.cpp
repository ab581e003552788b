// Each built-in op against a reference computed here with plain loops, on
// the CPU engine.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph_test_util.hpp"
#include "primcache/graph/op_registry.hpp"

using namespace primcache;
using namespace graph_test;

TEST_CASE("matmul with bias, relu and add matches loops", "[graph][ops][matmul]") {
  graph g("mm");
  const memory x = add_with_data(g, tensor("x", {5, 7}, tensor_role::input), 1);
  const memory w = add_with_data(g, tensor("w", {7, 3}, tensor_role::constant), 2);
  const memory b = add_with_data(g, tensor("b", {1, 3}, tensor_role::constant), 3);
  const memory r = add_with_data(g, tensor("r", {5, 3}, tensor_role::input), 4);
  g.add_tensor(produced("y"));
  op_spec op{.name = "fc", .kind = "matmul", .inputs = {"x", "w", "b", "r"}, .outputs = {"y"}};
  op.attributes["post_ops"] = std::vector<std::string>{"relu", "add"};
  g.add_op(op);
  executor exec(g);
  const auto out = exec.run({{"x", x}, {"r", r}});
  const auto X = logical(x), W = logical(w), B = logical(b), R = logical(r);
  std::vector<double> want(15);
  for (int m = 0; m < 5; ++m) {
    for (int n = 0; n < 3; ++n) {
      double acc = B[n];
      for (int k = 0; k < 7; ++k) acc += double(X[m * 7 + k]) * W[k * 3 + n];
      want[m * 3 + n] = std::max(acc, 0.0) + R[m * 3 + n];
    }
  }
  check_close(logical(out.at("y")), want);
  CHECK(exec.stats().transforms.empty());
}

TEST_CASE("convolution with strides, padding and relu matches loops", "[graph][ops][conv]") {
  const std::string op_layout =
      GENERATE(std::string("abcd"), std::string("acdb"), std::string("aBcd16b"));
  graph g("conv");
  const memory x = add_with_data(g, tensor("x", {2, 3, 9, 8}, tensor_role::input), 5);
  const memory w = add_with_data(g, tensor("w", {4, 3, 3, 3}, tensor_role::constant), 6);
  const memory b = add_with_data(g, tensor("b", {4}, tensor_role::constant), 7);
  g.add_tensor(produced("y"));
  op_spec op{.name = "conv", .kind = "convolution", .inputs = {"x", "w", "b"}, .outputs = {"y"}};
  op.attributes["strides"] = std::vector<std::int64_t>{2, 1};
  op.attributes["padding"] = std::vector<std::int64_t>{1, 1};
  op.attributes["post_ops"] = std::vector<std::string>{"relu"};
  op.layout = layout::parse(op_layout);
  g.add_op(op);
  executor exec(g);
  const auto y = exec.run({{"x", x}}).at("y");
  CHECK(y.get_desc().dims()[2] == 5);  // (9 + 2 - 3) / 2 + 1
  CHECK(y.get_desc().dims()[3] == 8);
  CHECK(kernel_type::of(y, library::jit()).layout == layout::parse(op_layout));
  const auto X = logical(x), W = logical(w), B = logical(b);
  std::vector<double> want;
  for (int n = 0; n < 2; ++n) {
    for (int o = 0; o < 4; ++o) {
      for (int oh = 0; oh < 5; ++oh) {
        for (int ow = 0; ow < 8; ++ow) {
          double acc = B[o];
          for (int c = 0; c < 3; ++c) {
            for (int kh = 0; kh < 3; ++kh) {
              for (int kw = 0; kw < 3; ++kw) {
                const int ih = oh * 2 - 1 + kh, iw = ow - 1 + kw;
                if (ih < 0 || ih >= 9 || iw < 0 || iw >= 8) continue;
                acc +=
                    double(X[((n * 3 + c) * 9 + ih) * 8 + iw]) * W[((o * 3 + c) * 3 + kh) * 3 + kw];
              }
            }
          }
          want.push_back(std::max(acc, 0.0));
        }
      }
    }
  }
  check_close(logical(y), want);
  // An input in another layout than the op's is transformed; weights stay.
  const auto s = exec.stats();
  if (op_layout == "abcd") {
    CHECK(s.transforms.empty());
  } else {
    REQUIRE(s.transforms.size() == 1);
    CHECK(s.transforms[0].tensor == "x");
    CHECK(s.transforms[0].steps == std::vector<transform_kind>{transform_kind::layout});
  }
}

// Grouped weights G x O/G x C/G x KH x KW: group g's outputs read only
// group g's input channels. Depthwise is G = C with one channel per group.
TEST_CASE("grouped and depthwise convolutions match loops", "[graph][ops][conv]") {
  struct grouping {
    int groups, oc_per_group, ic_per_group;
  };
  const grouping gr = GENERATE(grouping{2, 3, 2}, grouping{8, 1, 1}, grouping{4, 2, 1});
  const std::string op_layout = GENERATE(std::string("abcd"), std::string("aBcd16b"));
  INFO("groups " << gr.groups << " x " << gr.oc_per_group << "/" << gr.ic_per_group << ", "
                 << op_layout);
  const int C = gr.groups * gr.ic_per_group, O = gr.groups * gr.oc_per_group;
  const int H = 7, W = 6, OH = 7, OW = 6;  // 3x3, padding 1, stride 1
  graph g("gconv");
  const memory x = add_with_data(g, tensor("x", {1, C, H, W}, tensor_role::input), 8);
  const memory w = add_with_data(
      g, tensor("w", {gr.groups, gr.oc_per_group, gr.ic_per_group, 3, 3}, tensor_role::constant),
      9);
  const memory b = add_with_data(g, tensor("b", {O}, tensor_role::constant), 10);
  g.add_tensor(produced("y"));
  op_spec op{.name = "conv", .kind = "convolution", .inputs = {"x", "w", "b"}, .outputs = {"y"}};
  op.attributes["padding"] = std::vector<std::int64_t>{1, 1};
  op.layout = layout::parse(op_layout);
  g.add_op(op);
  executor exec(g);
  const auto y = exec.run({{"x", x}}).at("y");
  const auto dims = y.get_desc().dims();
  REQUIRE(std::vector<std::int64_t>(dims.begin(), dims.end()) ==
          std::vector<std::int64_t>{1, O, OH, OW});
  const auto X = logical(x), Wt = logical(w), B = logical(b);
  std::vector<double> want;
  for (int o = 0; o < O; ++o) {
    const int grp = o / gr.oc_per_group, og = o % gr.oc_per_group;
    for (int oh = 0; oh < OH; ++oh) {
      for (int ow = 0; ow < OW; ++ow) {
        double acc = B[o];
        for (int cg = 0; cg < gr.ic_per_group; ++cg) {
          const int c = grp * gr.ic_per_group + cg;
          for (int kh = 0; kh < 3; ++kh) {
            for (int kw = 0; kw < 3; ++kw) {
              const int ih = oh - 1 + kh, iw = ow - 1 + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const int wi =
                  (((grp * gr.oc_per_group + og) * gr.ic_per_group + cg) * 3 + kh) * 3 + kw;
              acc += double(X[(c * H + ih) * W + iw]) * Wt[wi];
            }
          }
        }
        want.push_back(acc);
      }
    }
  }
  check_close(logical(y), want);
}

TEST_CASE("convolution weights that do not fit the input are refused", "[graph][ops][conv]") {
  auto refusal = [](std::vector<std::int64_t> wdims, std::vector<std::int64_t> bias) {
    graph g("bad");
    g.add_tensor(tensor("x", {1, 4, 5, 5}, tensor_role::input));
    add_with_data(g, tensor("w", std::move(wdims), tensor_role::constant), 1);
    op_spec op{.name = "c", .kind = "convolution", .inputs = {"x", "w"}, .outputs = {"y"}};
    if (!bias.empty()) {
      add_with_data(g, tensor("b", std::move(bias), tensor_role::constant), 2);
      op.inputs.push_back("b");
    }
    g.add_tensor(produced("y"));
    g.add_op(op);
    return error_of([&] { executor e(g); });
  };
  CHECK(refusal({4, 4, 3}, {}) ==
        "op 'c' (convolution): weights 'w' are 4x4x3: they must be O x C x KH x KW, or G x O/G x "
        "C/G x KH x KW for a grouped convolution");
  CHECK(refusal({3, 2, 2, 3, 3}, {}) ==
        "op 'c' (convolution): src 'x' has 4 channels, weights 'w' take 6 (3 groups of 2)");
  CHECK(refusal({4, 3, 3, 3}, {}) ==
        "op 'c' (convolution): src 'x' has 4 channels, weights 'w' take 3");
  CHECK(refusal({2, 3, 2, 3, 3}, {3}) == "op 'c' (convolution): bias 'b' is 3, it must be 6");
}

TEST_CASE("convolution geometry that overflows 64 bits is refused", "[graph][ops][conv]") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  // The shape function on its own: dims and attributes as a user may give them.
  const shape_function shapes = op_registry::global().find_kind("convolution");
  auto refusal = [&](std::vector<std::int64_t> wdims, const char* attribute,
                     std::vector<std::int64_t> value) {
    op_spec op{.name = "c", .kind = "convolution", .inputs = {"x", "w"}, .outputs = {"y"}};
    if (attribute) op.attributes[attribute] = std::move(value);
    const std::vector<tensor_shape> in{{{1, 4, 5, 5}, data_type::f32},
                                       {std::move(wdims), data_type::f32}};
    return error_of([&] { shapes(op, in); });
  };
  CHECK(refusal({4, 4, 3, 3}, "padding", {max, 0}) ==
        "op 'c' (convolution): the padded input height: 5 + 9223372036854775807 overflows 64 "
        "bits");
  CHECK(refusal({4, 4, 3, 3}, "padding_r", {0, max}) ==
        "op 'c' (convolution): the padded input width: 5 + 9223372036854775807 overflows 64 bits");
  CHECK(refusal({4, 4, 3, 3}, "dilation", {max, 0}) ==
        "op 'c' (convolution): the dilated kernel height: 9223372036854775807 + 1 overflows 64 "
        "bits");
  CHECK(refusal({4, 4, 3, std::int64_t{1} << 62}, "dilation", {0, 7}) ==
        "op 'c' (convolution): the dilated kernel width: 4611686018427387903 * 8 overflows 64 "
        "bits");
  CHECK(refusal({std::int64_t{1} << 62, 8, 1, 3, 3}, nullptr, {}) ==
        "op 'c' (convolution): weights 'w' are 4611686018427387904x8x1x3x3: groups * output "
        "channels per group: 4611686018427387904 * 8 overflows 64 bits");
  CHECK(refusal({4, 1, std::int64_t{1} << 62, 3, 3}, nullptr, {}) ==
        "op 'c' (convolution): weights 'w' are 4x1x4611686018427387904x3x3: groups * input "
        "channels per group: 4 * 4611686018427387904 overflows 64 bits");
  // Padding that does not overflow but makes an output too large to allocate
  // is refused by the executor's limit on tensor sizes.
  graph g("wide");
  add_with_data(g, tensor("x", {1, 4, 5, 5}, tensor_role::input), 1);
  add_with_data(g, tensor("w", {4, 4, 3, 3}, tensor_role::constant), 2);
  g.add_tensor(produced("y"));
  op_spec op{.name = "c", .kind = "convolution", .inputs = {"x", "w"}, .outputs = {"y"}};
  op.attributes["padding"] = std::vector<std::int64_t>{std::int64_t{1} << 40, 0};
  g.add_op(op);
  CHECK(error_of([&] { executor e(g); }) ==
        "tensor 'y' (output, written by op 'c') is 1x4x2199023255555x3 f32: 105553116266640 "
        "bytes, more than the limit of 4294967296 bytes per graph tensor");
}

TEST_CASE("eltwise algorithms match their formulas", "[graph][ops][eltwise]") {
  struct algo {
    const char* name;
    double alpha, beta;
    double (*f)(double, double, double);
  };
  const algo a = GENERATE(
      algo{"relu", 0.25, 0, [](double v, double al, double) { return v > 0 ? v : al * v; }},
      algo{"tanh", 0, 0, [](double v, double, double) { return std::tanh(v); }},
      algo{"sigmoid", 0, 0, [](double v, double, double) { return 1 / (1 + std::exp(-v)); }},
      algo{"linear", 2, -0.5, [](double v, double al, double be) { return al * v + be; }},
      algo{"clip", -0.3, 0.4,
           [](double v, double al, double be) { return std::min(std::max(v, al), be); }});
  INFO(a.name);
  graph g("elt");
  const memory x = add_with_data(g, tensor("x", {3, 5, 7}, tensor_role::input), 8);
  g.add_tensor(produced("y"));
  op_spec op{.name = "act", .kind = "eltwise", .inputs = {"x"}, .outputs = {"y"}};
  op.attributes["algorithm"] = std::string(a.name);
  op.attributes["alpha"] = a.alpha;
  op.attributes["beta"] = a.beta;
  g.add_op(op);
  executor exec(g);
  const auto X = logical(x);
  std::vector<double> want;
  for (float v : X) want.push_back(a.f(v, a.alpha, a.beta));
  check_close(logical(exec.run({{"x", x}}).at("y")), want, 1e-5);
}

TEST_CASE("reorder writes the op's layout and type; identity copies", "[graph][ops][reorder]") {
  graph g("re");
  const memory x = add_with_data(g, tensor("x", {2, 19, 3, 5}, tensor_role::input), 9);
  g.add_tensor(produced("blocked"));
  g.add_tensor(produced("same"));
  op_spec re{.name = "to_blocked", .kind = "reorder", .inputs = {"x"}, .outputs = {"blocked"}};
  re.layout = layout::parse("aBcd8b");
  re.type = data_type::bf16;
  g.add_op(re);
  g.add_op({.name = "copy", .kind = "identity", .inputs = {"x"}, .outputs = {"same"}});
  executor exec(g);
  const auto out = exec.run({{"x", x}});
  const memory& blocked = out.at("blocked");
  CHECK(kernel_type::of(blocked, library::jit()).to_string() == "cpu/bf16/aBcd8b/jit");
  const auto X = logical(x);
  std::vector<double> want(X.begin(), X.end());
  check_close(logical(blocked), want, 1.0 / 256);
  CHECK(logical(out.at("same")) == X);
  CHECK(out.at("same").get_data_handle() != x.get_data_handle());
  // The reorder reads x where it is: no transform before it.
  CHECK(exec.stats().transforms.empty());
}

TEST_CASE("ops run in dependency order whatever the order they were added in",
          "[graph][ops][order]") {
  graph g("chain");
  const memory x = add_with_data(g, tensor("x", {4, 6}, tensor_role::input), 10);
  g.add_tensor(produced("y"));
  op_spec second{.name = "second", .kind = "eltwise", .inputs = {"h"}, .outputs = {"y"}};
  second.attributes["algorithm"] = std::string("linear");
  second.attributes["alpha"] = 3.0;
  op_spec first{.name = "first", .kind = "eltwise", .inputs = {"x"}, .outputs = {"h"}};
  first.attributes["algorithm"] = std::string("linear");
  first.attributes["beta"] = 1.0;
  first.attributes["alpha"] = 1.0;
  g.add_op(second);
  g.add_op(first);
  executor exec(g);
  const auto X = logical(x);
  std::vector<double> want;
  for (float v : X) want.push_back(3 * (double(v) + 1));
  check_close(logical(exec.run({{"x", x}}).at("y")), want, 1e-6);
  CHECK(exec.describe().find("op first") < exec.describe().find("op second"));
}
