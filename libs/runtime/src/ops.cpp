// The public op descriptors: argument checks, then the op structs the
// backends see. Checks here are about the op itself (shapes that agree);
// whether an implementation supports a layout or data type is for the
// implementations to say.
#include <string>

#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/convolution.hpp"
#include "primcache/runtime/eltwise.hpp"
#include "primcache/runtime/matmul.hpp"
#include "primcache/runtime/reorder.hpp"

namespace primcache {
namespace {

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw error(status::invalid_arguments, what + ": " + why);
}

std::string dims_str(const memory::desc& md) {
  return dims_to_string(md.dims());
}

// Shape arithmetic on user values: an overflow is a malformed descriptor,
// never undefined behaviour.
std::int64_t checked_mul(const char* what, std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    bad(what, std::to_string(a) + " * " + std::to_string(b) + " overflows 64 bits");
  }
  return r;
}
std::int64_t checked_add(const char* what, std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    bad(what, std::to_string(a) + " + " + std::to_string(b) + " overflows 64 bits");
  }
  return r;
}

void require_md(const char* what, const char* arg, const memory::desc& md) {
  if (md.is_zero()) bad(what, std::string(arg) + " descriptor is empty");
}

}  // namespace

// ---- matmul ---------------------------------------------------------------

matmul::desc::desc(const memory::desc& src, const memory::desc& weights, const memory::desc& dst)
    : desc(src, weights, memory::desc(), dst) {}

matmul::desc::desc(const memory::desc& src, const memory::desc& weights, const memory::desc& bias,
                   const memory::desc& dst) {
  const char* what = "matmul";
  require_md(what, "src", src);
  require_md(what, "weights", weights);
  require_md(what, "dst", dst);
  const int nd = src.ndims();
  if (nd != 2 && nd != 3) bad(what, "src must be 2-D or 3-D, got " + dims_str(src));
  if (weights.ndims() != nd || dst.ndims() != nd) {
    bad(what, "src " + dims_str(src) + ", weights " + dims_str(weights) + " and dst " +
                  dims_str(dst) + " must have the same number of dimensions");
  }
  auto s = src.dims(), w = weights.dims(), d = dst.dims();
  const int m = nd - 2, k = nd - 1;
  if (s[k] != w[m]) {
    bad(what, "src " + dims_str(src) + " and weights " + dims_str(weights) + " disagree on K (" +
                  std::to_string(s[k]) + " vs " + std::to_string(w[m]) + ")");
  }
  if (d[m] != s[m] || d[k] != w[k]) {
    bad(what, "dst " + dims_str(dst) + " is not M x N = " + std::to_string(s[m]) + "x" +
                  std::to_string(w[k]));
  }
  if (nd == 3) {
    // src and weights each have dst's batch or broadcast a batch of 1 over it.
    if (s[0] != d[0] && s[0] != 1) {
      bad(what, "src batch " + std::to_string(s[0]) + " is neither 1 nor dst batch " +
                    std::to_string(d[0]));
    }
    if (w[0] != d[0] && w[0] != 1) {
      bad(what, "weights batch " + std::to_string(w[0]) + " is neither 1 nor dst batch " +
                    std::to_string(d[0]));
    }
  }
  if (!bias.is_zero()) {
    auto b = bias.dims();
    bool ok = bias.ndims() == nd && b[k] == d[k];
    for (int i = 0; ok && i < nd - 1; ++i) ok = b[i] == 1;
    if (!ok) {
      bad(what, "bias " + dims_str(bias) + " must be " + (nd == 3 ? "1x1x" : "1x") +
                    std::to_string(d[k]) + " (one value per column)");
    }
  }
  // Filled in place: no temporary op to copy (clang 15 lacks parenthesized
  // aggregate initialization, which would say it in one line).
  auto& mm = op.emplace<backend::matmul_op>();
  mm.src = src;
  mm.weights = weights;
  mm.bias = bias;
  mm.dst = dst;
}

matmul::primitive_desc::primitive_desc(const desc& d, const engine& eng)
    : primitive_desc(d, primitive_attr(), eng) {}

matmul::primitive_desc::primitive_desc(const desc& d, const primitive_attr& attr, const engine& eng)
    : primcache::primitive_desc(backend::create_primitive_desc(d.op, attr, eng), eng) {}

// ---- convolution ------------------------------------------------------------

convolution_forward::desc::desc(prop_kind prop, algorithm alg, const memory::desc& src,
                                const memory::desc& weights, const memory::desc& bias,
                                const memory::desc& dst, const memory::dims& strides,
                                const memory::dims& padding_l, const memory::dims& padding_r)
    : desc(prop, alg, src, weights, bias, dst, strides, memory::dims{0, 0}, padding_l, padding_r) {}

convolution_forward::desc::desc(prop_kind prop, algorithm alg, const memory::desc& src,
                                const memory::desc& weights, const memory::desc& bias,
                                const memory::desc& dst, const memory::dims& strides,
                                const memory::dims& dilates, const memory::dims& padding_l,
                                const memory::dims& padding_r) {
  const char* what = "convolution";
  if (prop != prop_kind::forward_inference && prop != prop_kind::forward_training) {
    bad(what, "only forward propagation is supported");
  }
  if (alg != algorithm::convolution_direct && alg != algorithm::convolution_auto) {
    bad(what, std::string(to_string(alg)) + " is not a convolution algorithm");
  }
  require_md(what, "src", src);
  require_md(what, "weights", weights);
  require_md(what, "dst", dst);
  if (src.ndims() != 4 || dst.ndims() != 4) {
    bad(what, "src " + dims_str(src) + " and dst " + dims_str(dst) +
                  " must be 4-D (N, C, H, W): only 2-D convolution is supported");
  }
  const bool grouped = weights.ndims() == 5;
  if (weights.ndims() != 4 && !grouped) {
    bad(what, "weights " + dims_str(weights) + " must be (O, I, KH, KW) or (G, O, I, KH, KW)");
  }
  for (const auto* v : {&strides, &dilates, &padding_l, &padding_r}) {
    if (v->size() != 2) bad(what, "strides, dilates and paddings need 2 values (H, W)");
  }
  auto s = src.dims(), w = weights.dims(), d = dst.dims();
  const std::int64_t g = grouped ? w[0] : 1;
  const std::int64_t oc_per_g = w[grouped ? 1 : 0], ic_per_g = w[grouped ? 2 : 1];
  const std::int64_t ic = checked_mul(what, ic_per_g, g), oc = checked_mul(what, oc_per_g, g);
  if (ic != s[1]) {
    bad(what, "weights " + dims_str(weights) + " expect " + std::to_string(ic) +
                  " input channels, src " + dims_str(src) + " has " + std::to_string(s[1]));
  }
  if (oc != d[1]) {
    bad(what, "weights " + dims_str(weights) + " make " + std::to_string(oc) +
                  " output channels, dst " + dims_str(dst) + " has " + std::to_string(d[1]));
  }
  if (d[0] != s[0]) bad(what, "src and dst minibatch differ");
  if (!bias.is_zero() && (bias.ndims() != 1 || bias.dims()[0] != d[1])) {
    bad(what, "bias " + dims_str(bias) + " must be 1-D with " + std::to_string(d[1]) + " values");
  }
  auto& c = op.emplace<backend::convolution_op>();
  c.prop = prop;
  c.alg = alg;
  c.src = src;
  c.weights = weights;
  c.bias = bias;
  c.dst = dst;
  for (int i = 0; i < 2; ++i) {
    if (strides[i] <= 0) bad(what, "stride " + std::to_string(strides[i]) + " must be positive");
    if (dilates[i] < 0) bad(what, "dilation " + std::to_string(dilates[i]) + " is negative");
    // Negative end padding is accepted, as oneDNN does: a stride that leaves
    // the last input rows unread (every stride-2 1x1 layer of ResNet-50)
    // describes itself that way. The start padding may not be negative.
    if (padding_l[i] < 0) {
      bad(what, "start padding " + std::to_string(padding_l[i]) + " is negative");
    }
    const std::int64_t k = w[(grouped ? 3 : 2) + i];
    const std::int64_t extent =
        checked_add(what, checked_mul(what, k - 1, checked_add(what, dilates[i], 1)), 1);
    const std::int64_t span = checked_add(what, checked_add(what, s[2 + i], padding_l[i]),
                                          checked_add(what, padding_r[i], -extent));
    if (span < 0) {
      bad(what,
          "the kernel (extent " + std::to_string(extent) + ") is larger than the padded input");
    }
    const std::int64_t expected = span / strides[i] + 1;
    if (d[2 + i] != expected) {
      bad(what, std::string(i == 0 ? "output height " : "output width ") +
                    std::to_string(d[2 + i]) + " should be " + std::to_string(expected) +
                    " for this input, kernel, stride, dilation and padding");
    }
    c.strides[i] = strides[i];
    c.dilates[i] = dilates[i];
    c.padding_l[i] = padding_l[i];
    c.padding_r[i] = padding_r[i];
  }
}

convolution_forward::primitive_desc::primitive_desc(const desc& d, const engine& eng)
    : primitive_desc(d, primitive_attr(), eng) {}

convolution_forward::primitive_desc::primitive_desc(const desc& d, const primitive_attr& attr,
                                                    const engine& eng)
    : primcache::primitive_desc(backend::create_primitive_desc(d.op, attr, eng), eng) {}

// ---- eltwise ----------------------------------------------------------------

eltwise_forward::desc::desc(prop_kind prop, algorithm alg, const memory::desc& data, float alpha,
                            float beta)
    : desc(prop, alg, data, data, alpha, beta) {}

eltwise_forward::desc::desc(prop_kind prop, algorithm alg, const memory::desc& src,
                            const memory::desc& dst, float alpha, float beta) {
  const char* what = "eltwise";
  if (prop != prop_kind::forward_inference && prop != prop_kind::forward_training) {
    bad(what, "only forward propagation is supported");
  }
  if (!is_eltwise(alg)) bad(what, std::string(to_string(alg)) + " is not an eltwise algorithm");
  require_md(what, "src", src);
  require_md(what, "dst", dst);
  if (!std::ranges::equal(src.dims(), dst.dims())) {
    bad(what, "src " + dims_str(src) + " and dst " + dims_str(dst) + " differ in shape");
  }
  auto& e = op.emplace<backend::eltwise_fwd_op>();
  e.prop = prop;
  e.alg = alg;
  e.src = src;
  e.dst = dst;
  e.alpha = alpha;
  e.beta = beta;
}

eltwise_forward::primitive_desc::primitive_desc(const desc& d, const engine& eng)
    : primitive_desc(d, primitive_attr(), eng) {}

eltwise_forward::primitive_desc::primitive_desc(const desc& d, const primitive_attr& attr,
                                                const engine& eng)
    : primcache::primitive_desc(backend::create_primitive_desc(d.op, attr, eng), eng) {}

// ---- reorder ----------------------------------------------------------------

namespace {
backend::reorder_op make_reorder_op(const engine& src_engine, const memory::desc& src,
                                    const engine& dst_engine, const memory::desc& dst) {
  const char* what = "reorder";
  require_md(what, "src", src);
  require_md(what, "dst", dst);
  if (src.is_any() || dst.is_any()) bad(what, "src and dst need concrete layouts, not any");
  if (!std::ranges::equal(src.dims(), dst.dims())) {
    bad(what, "src " + dims_str(src) + " and dst " + dims_str(dst) + " differ in shape");
  }
  return {src, dst, src_engine.get_kind(), dst_engine.get_kind()};
}

// The engine a reorder runs on: the GPU one when either side is on a GPU.
const engine& reorder_engine(const engine& src_engine, const engine& dst_engine) {
  return src_engine.get_kind() == engine_kind::cpu ? dst_engine : src_engine;
}
}  // namespace

reorder::primitive_desc::primitive_desc(const engine& src_engine, const memory::desc& src,
                                        const engine& dst_engine, const memory::desc& dst,
                                        const primitive_attr& attr)
    : primcache::primitive_desc(
          backend::create_primitive_desc(make_reorder_op(src_engine, src, dst_engine, dst), attr,
                                         reorder_engine(src_engine, dst_engine)),
          reorder_engine(src_engine, dst_engine), src_engine, dst_engine) {}

reorder::primitive_desc::primitive_desc(const memory& src, const memory& dst,
                                        const primitive_attr& attr)
    : primitive_desc(src.get_engine(), src.get_desc(), dst.get_engine(), dst.get_desc(), attr) {}

reorder::reorder(const memory& src, const memory& dst, const primitive_attr& attr)
    : reorder(primitive_desc(src, dst, attr)) {}

void reorder::execute(const stream& strm, const memory& src, const memory& dst) const {
  primitive::execute(strm, {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}});
}

}  // namespace primcache
