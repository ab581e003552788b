// Descriptors whose element 0 sits offset0 elements into the buffer, and
// binary post-op operands with offsets or strides, on the OpenCL backend:
// matmul, convolution (depthwise included), eltwise and reorder, with and
// without constant weights (the packing kernel reads the user's weights).
// Every case computes what plain host loops compute (addressed through
// memory_desc::offset_of, which counts offset0; the cases and loops are
// shared with the CPU test, in tests/support/offset0_cases) and leaves the
// buffer outside dst's elements as it was, or is refused with
// status::unimplemented when the descriptor is created: never a silent
// wrong result.
#include <catch2/catch.hpp>

#include <vector>

#include "host_reference.hpp"
#include "primcache/ocl/ocl.hpp"
#include "support/offset0_cases.hpp"

using namespace primcache;
using namespace offset0_cases;
using tag = format_tag;

namespace {

// engine(gpu, 0): buffers are written and read through host copies; every
// check runs twice (constant weights come from the cache the second time);
// a convolution may be refused (a strided per-channel operand). A blocked
// dst's channel padding must hold zeros after a convolution and an eltwise,
// as on the CPU (the target's default).
target gpu() {
  target t{engine(engine_kind::gpu, 0)};
  t.write = [](const memory& m, const std::vector<float>& v) { ocl_test::write_all(m, v); };
  t.read = [](const memory& m) { return ocl_test::read_all(m); };
  t.runs = 2;
  t.conv_may_refuse = true;
  return t;
}

}  // namespace

TEST_CASE("OpenCL matmul honours offset0 on src, weights, bias, dst and binary operands",
          "[ocl][offset0][matmul]") {
  matmul_case c;
  SECTION("src") {
    c.src_off = 100;
  }
  SECTION("weights, transposed") {
    c.transposed_weights = true;
    c.wei_off = 33;
  }
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("dst and a dst-shaped operand") {
    c.dst_off = 12;
    c.full_operand = true;
  }
  SECTION("per-column and scalar operands") {
    c.column_off = 5;
    c.scalar_off = 7;
  }
  SECTION("everything, batched") {
    c.batch = 2;
    c.src_off = 3;
    c.wei_off = 4;
    c.bias_off = 5;
    c.dst_off = 6;
    c.column_off = 7;
    c.scalar_off = 8;
    c.full_operand = true;
  }
  SECTION("constant weights (the packing kernel reads them from their offset)") {
    c.constant_weights = true;
    c.wei_off = 11;
    c.src_off = 2;
  }
  check_matmul(c, gpu());
}

TEST_CASE("OpenCL binary operands with strides and offsets are refused or computed right",
          "[ocl][offset0][post_ops]") {
  // A (1, N) operand with column stride 2 and a scalar at offset 7, on a
  // matmul of zeros: every output is 10 + 1.
  check_strided_matmul_operands(gpu());
}

TEST_CASE("OpenCL convolution honours offset0 on every tensor and binary operand",
          "[ocl][offset0][conv]") {
  conv_case c;
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("all four, nchw") {
    c.src = c.dst = tag::nchw;
    c.src_off = 1;
    c.wei_off = 2;
    c.bias_off = 3;
    c.dst_off = 4;
  }
  SECTION("blocked activations, operands") {
    c.src = c.dst = tag::nChw16c;
    c.oc = 24;
    c.src_off = 20;
    c.dst_off = 9;
    c.chan_off = 5;
    c.scalar_off = 6;
    c.full_operand = true;
  }
  SECTION("a per-channel operand with a channel stride") {
    c.chan_off = 3;
    c.chan_stride = 3;
  }
  SECTION("depthwise, all four") {
    c.ic = c.oc = c.groups = 24;
    c.src_off = 6;
    c.wei_off = 7;
    c.bias_off = 8;
    c.dst_off = 9;
  }
  SECTION("constant weights at an offset (packed by the packing kernel)") {
    c.constant_weights = true;
    c.wei_off = 13;
    c.bias_off = 1;
  }
  check_conv(c, gpu());
}

TEST_CASE("OpenCL eltwise and reorder honour offset0", "[ocl][offset0][eltwise][reorder]") {
  const tag layout = GENERATE(tag::nchw, tag::nhwc, tag::nChw16c);
  INFO("layout " << static_cast<int>(layout));
  SECTION("eltwise with per-channel, scalar and dst-shaped operands") {
    eltwise_case c;
    c.layout = layout;
    c.src_off = 2;
    c.dst_off = 19;
    c.chan_off = 1;
    c.scalar_off = 30;
    c.full_operand = true;
    c.chan_seed = 2;
    c.scalar_seed = 3;
    c.full_seed = 4;
    check_eltwise(c, gpu());
  }
  SECTION("reorder from nchw at one offset to the layout at another") {
    check_reorder({2, 21, 5, 3}, tag::nchw, layout, gpu());
  }
}
