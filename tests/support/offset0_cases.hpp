// offset0_cases.hpp — the cases shared by the CPU and OpenCL offset0 tests
// (tests/cpu/offset0_test.cpp, tests/ocl/offset0_test.cpp): descriptors
// whose element 0 sits offset0 elements into the buffer, and binary post-op
// operands with offsets or strides, for matmul, convolution, eltwise and
// reorder, checked against plain host loops (addressed through
// memory_desc::offset_of, which counts offset0). Each check runs on a
// `target`: the engine and what differs between the backends (how buffers
// are written and read, how many runs a check makes, what a blocked dst's
// channel padding must hold).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "primcache/runtime/runtime.hpp"

namespace offset0_cases {

// What the buffer holds outside the tensor's elements: a kernel that reads
// it (offset0 ignored) gets a sum far from the expected one, and one that
// writes it is caught by the comparison of the whole buffer.
inline constexpr float kPoison = 1000.f;

struct target {
  primcache::engine eng;
  // Host copies of a memory's whole buffer (the stream idle).
  std::function<void(const primcache::memory&, const std::vector<float>&)> write;
  std::function<std::vector<float>(const primcache::memory&)> read;
  // Runs of each check; with wait_specialized, run 1 waits for the
  // specialized kernel first (the tiered CPU mode).
  int runs = 1;
  bool wait_specialized = false;
  // Matmul with constant weights is checked a second time (the weights then
  // come from the constant tensor cache).
  bool repeat_constant_weights = false;
  // The implementation must be a reference one ("ref:").
  bool expect_reference = false;
  // A convolution case may be refused with status::unimplemented.
  bool conv_may_refuse = false;
};

// A memory whose buffer is kPoison outside its logical elements, which get
// values in [-1, 1) from `seed`, and the host copy of what was written.
struct filled {
  primcache::memory mem;
  std::vector<float> host;
};
filled make(const primcache::memory::desc& md, const target& t, unsigned seed);

// A binary post-op operand's value at dst's logical index: dims of size 1
// broadcast.
float operand_at(const filled& f, const std::vector<std::int64_t>& dst_index);

// Every logical index of dims, row-major.
void for_each_index(std::span<const std::int64_t> dims,
                    const std::function<void(const std::vector<std::int64_t>&)>& f);

// dst's whole buffer as it must be: NaN (untouched, kPoison) outside the
// tensor's elements.
struct expectation {
  std::vector<double> value, tol;
  explicit expectation(const primcache::memory::desc& md);
  void set(std::int64_t off, double v, double magnitude);
  // dst's channel padding (channels dims[1] up to the padded dims, a blocked
  // 4-D dst): zeros, on every backend.
  void channel_padding(const primcache::memory::desc& md);
};

// Runs `prim` t.runs times with `args` (dst under `dst_arg`, filled with
// kPoison afresh each run) and checks dst's whole buffer against `want`.
void run_and_check(const primcache::primitive& prim, primcache::primitive::args args, int dst_arg,
                   const primcache::memory::desc& dst_md, const target& t, const expectation& want);

// Creates a primitive descriptor, or reports that it was refused with
// status::unimplemented (the other acceptable outcome of a case that a
// backend may not support); any other failure fails the test.
void check_refusal(const primcache::error& e);
template <class PD, class Make>
std::optional<PD> make_or_refused(Make make) {
  try {
    return make();
  } catch (const primcache::error& e) {
    check_refusal(e);
    return std::nullopt;
  }
}

// ---- matmul -------------------------------------------------------------

struct matmul_case {
  std::int64_t batch = 0;  // 0: 2-D
  std::int64_t m = 5, k = 19, n = 37;
  std::int64_t src_off = 0, wei_off = 0, bias_off = 0, dst_off = 0;
  bool bias = true;
  bool transposed_weights = false;
  bool constant_weights = false;
  // Binary post-ops after a relu: a per-column operand and a scalar, each
  // with this offset0 (-1: not appended), and a dst-shaped one (laid out
  // as dst, its offset0 included).
  std::int64_t column_off = -1, scalar_off = -1;
  bool full_operand = false;

  std::string describe() const;
};

void check_matmul(const matmul_case& c, const target& t);

// A (1, N) operand with column stride 2 and a scalar at offset 7, on a
// matmul of zeros: every output is 10 + 1 (or the descriptor is refused).
void check_strided_matmul_operands(const target& t);

// ---- convolution ----------------------------------------------------------

struct conv_case {
  std::int64_t ic = 16, oc = 16, h = 6, w = 7, k = 3, pad = 1, groups = 1;
  primcache::format_tag src = primcache::format_tag::nhwc, dst = primcache::format_tag::nhwc;
  std::int64_t src_off = 0, wei_off = 0, bias_off = 0, dst_off = 0;
  // Binary post-ops: a per-channel operand and a scalar at these offsets
  // (-1: none), a dst-shaped one laid out as dst.
  std::int64_t chan_off = -1, scalar_off = -1;
  // Channel stride of the per-channel operand (1: dense).
  std::int64_t chan_stride = 1;
  bool full_operand = false;
  bool constant_weights = false;

  std::string describe() const;
};

void check_conv(const conv_case& c, const target& t);

// ---- eltwise and reorder ----------------------------------------------------

// eltwise_linear (2x + 0.5) on {2, 21, 5, 3} in `layout`, with binary
// operands: per channel and scalar at these offsets (-1: none), dst-shaped.
struct eltwise_case {
  primcache::format_tag layout = primcache::format_tag::nchw;
  std::int64_t src_off = 0, dst_off = 0, chan_off = -1, scalar_off = -1;
  bool full_operand = false;
  // Seeds of the operands' values (src's is 1).
  unsigned chan_seed = 20, scalar_seed = 21, full_seed = 22;

  std::string describe() const;
};

void check_eltwise(const eltwise_case& c, const target& t);

// A reorder of `dims` from `from` at offset0 13 to `to` at offset0 70.
void check_reorder(const primcache::memory::dims& dims, primcache::format_tag from,
                   primcache::format_tag to, const target& t);

}  // namespace offset0_cases
