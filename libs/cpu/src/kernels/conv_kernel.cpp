#include "kernels/conv_kernel.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "jit/jit_module.hpp"

namespace primcache::cpu_internal {
namespace {

// Output channels per vector: a 16-float vector is one zmm at avx512_core and
// two ymm at avx2, so the packed weights layout (Ohwi16o) is the same at
// every level.
constexpr int lanes = 16;
// Bound on stride, dilation and padding: every index the kernel forms from
// them and a tensor dimension stays far inside int64.
constexpr std::int64_t max_param = std::int64_t{1} << 24;
constexpr const char* entry_symbol = "conv_fwd_f32";

std::int64_t div_up(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

failure invalid(std::string message) {
  return failure{status::invalid_arguments, "convolution: " + std::move(message)};
}
failure unimplemented(std::string message) {
  return failure{status::unimplemented, "convolution: " + std::move(message)};
}

// How an activation tensor maps (n, c, h, w) to an element offset: plain
// (c * c_stride) or nChw16c ((c / 16) * c_stride + c % 16).
struct act_layout {
  std::int64_t off0 = 0, n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;
  bool blocked = false;

  std::int64_t channel(std::int64_t c) const {
    return blocked ? (c / lanes) * c_stride + c % lanes : c * c_stride;
  }
  std::int64_t offset(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return off0 + n * n_stride + channel(c) + h * h_stride + w * w_stride;
  }
  // Whether 16 channels from a multiple of `align` are 16 consecutive floats.
  bool vector_contiguous(std::int64_t align) const {
    if (blocked) return align % lanes == 0;
    return c_stride == 1;
  }
};

// Everything the code generator, the packer and the reference need, derived
// once from a validated problem.
struct geometry {
  std::int64_t n = 0, g = 0, ic = 0, oc = 0, icg = 0, ocg = 0;
  std::int64_t ih = 0, iw = 0, oh = 0, ow = 0, kh = 0, kw = 0;
  std::int64_t sh = 0, sw = 0, dh = 0, dw = 0, pt = 0, pl = 0;
  act_layout src, dst;
  bool depthwise = false;
  bool has_bias = false;
  // 16-channel output blocks per group (depthwise: per tensor).
  std::int64_t nb = 0;
};

// The physical element offset of a logical index in any blocked descriptor
// (the addressing formula of memory_desc.hpp, without its checks).
std::int64_t md_offset(const memory_desc& md, const std::int64_t* idx) {
  std::array<std::int64_t, max_ndims> p{};
  const int nd = md.ndims();
  for (int d = 0; d < nd; ++d) p[d] = idx[d];
  std::int64_t off = 0;
  std::int64_t mult = 1;
  const auto blks = md.inner_blks();
  const auto idxs = md.inner_idxs();
  for (int k = md.inner_nblks() - 1; k >= 0; --k) {
    const auto d = static_cast<int>(idxs[k]);
    off += (p[d] % blks[k]) * mult;
    p[d] /= blks[k];
    mult *= blks[k];
  }
  const auto strides = md.strides();
  for (int d = 0; d < nd; ++d) off += p[d] * strides[d];
  return off + md.offset0();
}

result<act_layout> activation_layout(const memory_desc& md, const char* what) {
  const std::string name(what);
  if (md.is_zero() || md.is_any()) return invalid(name + " has no resolved layout");
  if (md.ndims() != 4) {
    return invalid(name + " must be 4-D (N, C, H, W), got " + md.to_string());
  }
  if (md.data_type() != data_type::f32) {
    return unimplemented(name + " must be f32, got " + md.to_string());
  }
  act_layout l;
  const auto s = md.strides();
  l.off0 = md.offset0();
  l.n_stride = s[0];
  l.c_stride = s[1];
  l.h_stride = s[2];
  l.w_stride = s[3];
  if (md.is_plain()) return l;
  if (md.inner_nblks() == 1 && md.inner_idxs()[0] == 1 && md.inner_blks()[0] == lanes) {
    l.blocked = true;
    return l;
  }
  return unimplemented(name + " layout " + md.to_string() +
                       " is not supported (plain layouts and nChw16c are)");
}

result<geometry> analyze(const conv_problem& p) {
  auto src = activation_layout(p.src, "src");
  if (!src) return src.why();
  auto dst = activation_layout(p.dst, "dst");
  if (!dst) return dst.why();
  geometry g;
  g.src = src.value();
  g.dst = dst.value();

  const std::pair<const char*, std::int64_t> params[] = {
      {"stride_h", p.stride_h},     {"stride_w", p.stride_w}, {"dilation_h", p.dilation_h},
      {"dilation_w", p.dilation_w}, {"pad_t", p.pad_t},       {"pad_l", p.pad_l},
      {"pad_b", p.pad_b},           {"pad_r", p.pad_r},       {"groups", p.groups}};
  for (const auto& [name, v] : params) {
    const bool positive =
        std::string_view(name).starts_with("stride") || name == std::string("groups");
    // End padding may be negative (as in oneDNN): the stride leaves the last
    // input rows or columns unread.
    const bool end_pad = name == std::string("pad_b") || name == std::string("pad_r");
    const std::int64_t lo = positive ? 1 : end_pad ? -max_param : 0;
    if (v < lo || v > max_param) {
      return invalid(std::string(name) + " = " + std::to_string(v) + " is outside [" +
                     std::to_string(lo) + ", " + std::to_string(max_param) + "]");
    }
  }
  if (p.nthr < 1) return invalid("nthr = " + std::to_string(p.nthr) + " must be at least 1");

  g.n = p.src.dims()[0];
  g.ic = p.src.dims()[1];
  g.ih = p.src.dims()[2];
  g.iw = p.src.dims()[3];
  g.g = p.groups;
  g.oc = p.dst.dims()[1];
  g.oh = p.dst.dims()[2];
  g.ow = p.dst.dims()[3];
  if (p.dst.dims()[0] != g.n) {
    return invalid("src has " + std::to_string(g.n) + " images but dst has " +
                   std::to_string(p.dst.dims()[0]));
  }
  if (g.ic % g.g != 0 || g.oc % g.g != 0) {
    return invalid("channels (IC " + std::to_string(g.ic) + ", OC " + std::to_string(g.oc) +
                   ") are not divisible by groups = " + std::to_string(g.g));
  }
  g.icg = g.ic / g.g;
  g.ocg = g.oc / g.g;

  const memory_desc& w = p.weights;
  if (w.is_zero() || w.is_any()) return invalid("weights have no resolved layout");
  if (w.data_type() != data_type::f32) {
    return unimplemented("weights must be f32, got " + w.to_string());
  }
  const int wnd = g.g == 1 ? 4 : 5;
  if (w.ndims() != wnd && !(g.g == 1 && w.ndims() == 5)) {
    return invalid("weights " + w.to_string() + " must be " +
                   (g.g == 1 ? "(OC, IC, KH, KW)" : "(G, OC/G, IC/G, KH, KW)"));
  }
  const auto wd = w.dims();
  const int o = w.ndims() - 4;
  if ((o == 1 && wd[0] != g.g) || wd[o] != g.ocg || wd[o + 1] != g.icg) {
    return invalid("weights " + w.to_string() + " do not match groups " + std::to_string(g.g) +
                   ", IC " + std::to_string(g.ic) + " and OC " + std::to_string(g.oc));
  }
  g.kh = wd[o + 2];
  g.kw = wd[o + 3];

  if (!p.bias.is_zero()) {
    const memory_desc& b = p.bias;
    if (b.data_type() != data_type::f32) {
      return unimplemented("bias must be f32, got " + b.to_string());
    }
    if (b.ndims() != 1 || b.dims()[0] != g.oc) {
      return invalid("bias " + b.to_string() + " must be 1-D with OC = " + std::to_string(g.oc) +
                     " elements");
    }
    if (!b.is_plain() || b.strides()[0] != 1) {
      return unimplemented("bias " + b.to_string() + " must be dense");
    }
    g.has_bias = true;
  }

  auto oh = conv_output_size(g.ih, g.kh, p.stride_h, p.dilation_h, p.pad_t, p.pad_b);
  if (!oh) return oh.why();
  auto ow = conv_output_size(g.iw, g.kw, p.stride_w, p.dilation_w, p.pad_l, p.pad_r);
  if (!ow) return ow.why();
  if (oh.value() != g.oh || ow.value() != g.ow) {
    return invalid("dst " + p.dst.to_string() + " has output size " + std::to_string(g.oh) + "x" +
                   std::to_string(g.ow) + " but the shapes give " + std::to_string(oh.value()) +
                   "x" + std::to_string(ow.value()));
  }
  for (const post_op& op : p.post_ops) {
    if (op.what == post_op::kind::binary_add && (op.binary.arg_index < 0)) {
      return invalid("binary post-op arg_index " + std::to_string(op.binary.arg_index) +
                     " is negative");
    }
  }
  g.sh = p.stride_h;
  g.sw = p.stride_w;
  g.dh = p.dilation_h;
  g.dw = p.dilation_w;
  g.pt = p.pad_t;
  g.pl = p.pad_l;
  g.depthwise = g.g > 1 && g.icg == 1 && g.ocg == 1;
  g.nb = g.depthwise ? div_up(g.g, lanes) : div_up(g.ocg, lanes);
  return g;
}

// A 1x1, stride-1, unpadded convolution over rows stored back to back is the
// same computation over longer rows: the kernel then runs rows of `row`
// pixels (a divisor of H * W), which fills register tiles better than short
// image rows.
geometry flatten_pointwise(geometry g) {
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 &&
                         g.pl == 0 && g.oh == g.ih && g.ow == g.iw;
  if (!pointwise) return g;
  if (g.src.h_stride != g.iw * g.src.w_stride || g.dst.h_stride != g.ow * g.dst.w_stride) return g;
  const std::int64_t hw = g.oh * g.ow;
  std::int64_t row = g.ow;
  for (std::int64_t d = std::min<std::int64_t>(hw, 256); d > g.ow; --d) {
    if (hw % d == 0) {
      row = d;
      break;
    }
  }
  if (row == g.ow) return g;
  g.ih = g.oh = hw / row;
  g.iw = g.ow = row;
  g.src.h_stride = row * g.src.w_stride;
  g.dst.h_stride = row * g.dst.w_stride;
  return g;
}

// The config the generator really uses: blocks no larger than the problem.
conv_config effective_config(const geometry& g, conv_config c) {
  c.ow_block = static_cast<int>(std::min<std::int64_t>(c.ow_block, g.ow));
  c.oc_blocks = static_cast<int>(std::min<std::int64_t>(c.oc_blocks, g.nb));
  if (g.depthwise) c.ic_unroll = 1;
  // With one row, or one channel chunk per image, both orders enumerate the
  // same items.
  if (g.oh == 1 || (g.depthwise ? 1 : g.g) * div_up(g.nb, c.oc_blocks) == 1) {
    c.order = conv_loop_order::oc_outer;
  }
  c.ic_unroll =
      static_cast<int>(std::min<std::int64_t>(c.ic_unroll, std::max<std::int64_t>(g.icg, 1)));
  return c;
}

result<bool> check_config(const conv_config& c) {
  if (c.ow_block < 1 || c.ow_block > 64) {
    return invalid("config ow_block = " + std::to_string(c.ow_block) + " is outside [1, 64]");
  }
  if (c.oc_blocks < 1 || c.oc_blocks > 16) {
    return invalid("config oc_blocks = " + std::to_string(c.oc_blocks) + " is outside [1, 16]");
  }
  if (c.ow_block * c.oc_blocks > 64) {
    return invalid("config ow_block x oc_blocks = " + std::to_string(c.ow_block * c.oc_blocks) +
                   " exceeds 64 accumulators");
  }
  if (c.ic_unroll != 1 && c.ic_unroll != 2 && c.ic_unroll != 4 && c.ic_unroll != 8 &&
      c.ic_unroll != 16) {
    return invalid("config ic_unroll = " + std::to_string(c.ic_unroll) +
                   " is not one of 1, 2, 4, 8, 16");
  }
  if (c.order != conv_loop_order::oc_outer && c.order != conv_loop_order::spatial_outer) {
    return invalid("config loop order " + std::to_string(static_cast<int>(c.order)) +
                   " is unknown");
  }
  return true;
}

std::int64_t packed_weight_floats(const geometry& g) {
  if (g.depthwise) return g.nb * g.kh * g.kw * lanes;
  return g.g * g.nb * g.kh * g.kw * g.icg * lanes;
}

// ---------------------------------------------------------------------------
// Code generation.
//
// The entry function runs the work items [begin, end). An item is one output
// row of one image, one group and one chunk of oc_blocks 16-channel blocks.
// A row is split into tiles of ow_block pixels; the tiles whose taps all fall
// inside the image run in one loop with no bounds checks, the edge tiles are
// emitted one by one with the taps that fall into the padding left out at
// generation time. Rows at the top and bottom narrow the kh loop at run time.
// A tile keeps ow_block x oc_blocks accumulators in registers for the whole
// reduction (kh, then input channels in steps of ic_unroll, then kw) and
// applies bias and post-ops before its one store.

class conv_codegen {
 public:
  conv_codegen(llvm::Module& m, const conv_problem& p, const geometry& g, const conv_config& c)
      : m_(m), ctx_(m.getContext()), b_(ctx_), p_(p), g_(g), c_(c) {
    f32_ = b_.getFloatTy();
    i64_ = b_.getInt64Ty();
    v16_ = llvm::FixedVectorType::get(f32_, lanes);
    ptr_ = llvm::PointerType::get(ctx_, 0);
  }

  void build() {
    auto* fty =
        llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, ptr_, ptr_, ptr_, i64_, i64_}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, entry_symbol, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    for (unsigned a : {0u, 1u, 2u}) {
      fn_->addParamAttr(a, llvm::Attribute::NoAlias);
      fn_->addParamAttr(a, llvm::Attribute::ReadOnly);
    }
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    src_ = fn_->getArg(0);
    wei_ = fn_->getArg(1);
    bias_ = fn_->getArg(2);
    dst_ = fn_->getArg(3);
    llvm::Value* bin = fn_->getArg(4);
    acc_.resize(static_cast<std::size_t>(c_.ow_block * c_.oc_blocks));
    for (auto& a : acc_) a = b_.CreateAlloca(v16_);
    for (std::size_t i = 0; i < p_.post_ops.size(); ++i) {
      const post_op& op = p_.post_ops[i];
      llvm::Value* operand = nullptr;
      if (op.what == post_op::kind::binary_add) {
        operand = b_.CreateAlignedLoad(ptr_, gep(bin, op.binary.arg_index, ptr_), llvm::Align(8));
      }
      operands_.push_back(operand);
    }

    const std::int64_t nocc = div_up(g_.nb, c_.oc_blocks);
    loop(fn_->getArg(5), fn_->getArg(6), 1, [&](llvm::Value* item) { emit_item(item, nocc); });
    b_.CreateRetVoid();
  }

 private:
  llvm::Value* c64(std::int64_t v) { return llvm::ConstantInt::get(i64_, v, true); }
  llvm::Value* gep(llvm::Value* base, llvm::Value* off, llvm::Type* ty = nullptr) {
    return b_.CreateGEP(ty ? ty : f32_, base, off);
  }
  llvm::Value* gep(llvm::Value* base, std::int64_t off, llvm::Type* ty = nullptr) {
    return gep(base, c64(off), ty);
  }

  // for (iv = begin; iv < end; iv += step) body(iv), in i64.
  template <typename Body>
  void loop(llvm::Value* begin, llvm::Value* end, std::int64_t step, Body&& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, "head", fn_);
    auto* bodyb = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* iv = b_.CreatePHI(i64_, 2);
    iv->addIncoming(begin, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(iv, end), bodyb, exit);
    b_.SetInsertPoint(bodyb);
    body(static_cast<llvm::Value*>(iv));
    iv->addIncoming(b_.CreateAdd(iv, c64(step)), b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
  }

  llvm::Value* splat(float v) { return llvm::ConstantFP::get(v16_, v); }
  llvm::Value* lane_mask(int n) {
    std::vector<llvm::Constant*> bits;
    for (int l = 0; l < lanes; ++l) bits.push_back(b_.getInt1(l < n));
    return llvm::ConstantVector::get(bits);
  }
  llvm::Value* fma(llvm::Value* a, llvm::Value* x, llvm::Value* acc) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {v16_}, {a, x, acc});
  }

  // The element offset of channel c (i64) in a layout.
  llvm::Value* channel_offset(const act_layout& l, llvm::Value* c) {
    if (!l.blocked) return b_.CreateMul(c, c64(l.c_stride));
    return b_.CreateAdd(b_.CreateMul(b_.CreateLShr(c, 4), c64(l.c_stride)), b_.CreateAnd(c, 15));
  }

  // 16 channels from c0 of one pixel (`pixel` points at its channel 0):
  // whole-vector access when they are consecutive floats, lane by lane
  // otherwise; lanes at and past `valid` read as 0 and are not written.
  llvm::Value* load_channels(const act_layout& l, bool contiguous, llvm::Value* pixel,
                             llvm::Value* c0, int valid) {
    if (contiguous) {
      llvm::Value* ptr = gep(pixel, channel_offset(l, c0));
      if (valid == lanes || l.blocked) return b_.CreateAlignedLoad(v16_, ptr, llvm::Align(4));
      return b_.CreateMaskedLoad(v16_, ptr, llvm::Align(4), lane_mask(valid), splat(0.f));
    }
    llvm::Value* v = splat(0.f);
    for (int l2 = 0; l2 < valid; ++l2) {
      llvm::Value* c = b_.CreateAdd(c0, c64(l2));
      llvm::Value* x = b_.CreateAlignedLoad(f32_, gep(pixel, channel_offset(l, c)), llvm::Align(4));
      v = b_.CreateInsertElement(v, x, static_cast<std::uint64_t>(l2));
    }
    return v;
  }
  void store_channels(const act_layout& l, bool contiguous, llvm::Value* pixel, llvm::Value* c0,
                      int valid, llvm::Value* v) {
    if (contiguous) {
      llvm::Value* ptr = gep(pixel, channel_offset(l, c0));
      if (valid == lanes) {
        b_.CreateAlignedStore(v, ptr, llvm::Align(4));
      } else if (l.blocked) {
        // The channel padding of a blocked tensor is kept at zero.
        b_.CreateAlignedStore(b_.CreateSelect(lane_mask(valid), v, splat(0.f)), ptr,
                              llvm::Align(4));
      } else {
        b_.CreateMaskedStore(v, ptr, llvm::Align(4), lane_mask(valid));
      }
      return;
    }
    for (int l2 = 0; l2 < valid; ++l2) {
      llvm::Value* c = b_.CreateAdd(c0, c64(l2));
      b_.CreateAlignedStore(b_.CreateExtractElement(v, static_cast<std::uint64_t>(l2)),
                            gep(pixel, channel_offset(l, c)), llvm::Align(4));
    }
  }
  // 16 consecutive floats of a dense per-channel vector (bias, per-channel
  // operands).
  llvm::Value* load_dense(llvm::Value* base, llvm::Value* c0, int valid) {
    llvm::Value* ptr = gep(base, c0);
    if (valid == lanes) return b_.CreateAlignedLoad(v16_, ptr, llvm::Align(4));
    return b_.CreateMaskedLoad(v16_, ptr, llvm::Align(4), lane_mask(valid), splat(0.f));
  }

  struct item_ctx {
    llvm::Value* n;
    llvm::Value* g;    // group (general) — unused for depthwise
    llvm::Value* occ;  // output-channel chunk
    llvm::Value* oh;
    llvm::Value* kh_lo;
    llvm::Value* kh_hi;
    llvm::Value* src_img;    // src + off0 + n * n_stride
    llvm::Value* dst_row;    // dst + off0 + n * n_stride + oh * h_stride
    llvm::Value* ih0;        // oh * sh - pt
    llvm::Value* wei_chunk;  // packed weights of this chunk's first block
    llvm::Value* c_first;    // first output channel of the chunk (tensor-wide)
  };

  void emit_item(llvm::Value* item, std::int64_t nocc) {
    const std::int64_t groups = g_.depthwise ? 1 : g_.g;
    item_ctx it{};
    llvm::Value* rest = item;
    auto take = [&](std::int64_t extent) {
      llvm::Value* v = b_.CreateURem(rest, c64(extent));
      rest = b_.CreateUDiv(rest, c64(extent));
      return v;
    };
    if (c_.order == conv_loop_order::oc_outer) {
      it.oh = take(g_.oh);
      it.occ = take(nocc);
      it.g = take(groups);
      it.n = rest;
    } else {
      it.occ = take(nocc);
      it.g = take(groups);
      it.oh = take(g_.oh);
      it.n = rest;
    }
    // Rows of kh that fall inside the image: ih = ih0 + kh * (dh + 1).
    const std::int64_t dk = g_.dh + 1;
    it.ih0 = b_.CreateSub(b_.CreateMul(it.oh, c64(g_.sh)), c64(g_.pt));
    llvm::Value* neg = b_.CreateSub(c64(0), it.ih0);
    llvm::Value* lo = b_.CreateSDiv(b_.CreateAdd(neg, c64(dk - 1)), c64(dk));
    it.kh_lo = b_.CreateSelect(b_.CreateICmpSGT(neg, c64(0)), lo, c64(0));
    llvm::Value* room = b_.CreateSub(c64(g_.ih - 1), it.ih0);
    llvm::Value* hi = b_.CreateAdd(b_.CreateSDiv(room, c64(dk)), c64(1));
    hi = b_.CreateSelect(b_.CreateICmpSLT(room, c64(0)), c64(0), hi);
    it.kh_hi = b_.CreateSelect(b_.CreateICmpSLT(hi, c64(g_.kh)), hi, c64(g_.kh));

    it.src_img =
        gep(src_, b_.CreateAdd(c64(g_.src.off0), b_.CreateMul(it.n, c64(g_.src.n_stride))));
    it.dst_row = gep(
        dst_, b_.CreateAdd(b_.CreateAdd(c64(g_.dst.off0), b_.CreateMul(it.n, c64(g_.dst.n_stride))),
                           b_.CreateMul(it.oh, c64(g_.dst.h_stride))));
    llvm::Value* first_block = b_.CreateMul(it.occ, c64(c_.oc_blocks));
    if (g_.depthwise) {
      it.c_first = b_.CreateMul(first_block, c64(lanes));
      it.wei_chunk = gep(wei_, b_.CreateMul(first_block, c64(g_.kh * g_.kw * lanes)));
    } else {
      it.c_first =
          b_.CreateAdd(b_.CreateMul(it.g, c64(g_.ocg)), b_.CreateMul(first_block, c64(lanes)));
      llvm::Value* blk = b_.CreateAdd(b_.CreateMul(it.g, c64(g_.nb)), first_block);
      it.wei_chunk = gep(wei_, b_.CreateMul(blk, c64(g_.kh * g_.kw * g_.icg * lanes)));
    }

    // The last chunk may hold fewer blocks, and its last block fewer lanes.
    const std::int64_t channels = g_.depthwise ? g_.g : g_.ocg;
    const int tail_blocks = static_cast<int>(g_.nb - (nocc - 1) * c_.oc_blocks);
    const int tail_lanes = static_cast<int>(channels - (g_.nb - 1) * lanes);
    if (tail_blocks == c_.oc_blocks && tail_lanes == lanes) {
      emit_row(it, c_.oc_blocks, lanes);
      return;
    }
    auto* full = llvm::BasicBlock::Create(ctx_, "full_chunk", fn_);
    auto* tail = llvm::BasicBlock::Create(ctx_, "tail_chunk", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "chunk_done", fn_);
    b_.CreateCondBr(b_.CreateICmpEQ(it.occ, c64(nocc - 1)), tail, full);
    b_.SetInsertPoint(full);
    emit_row(it, c_.oc_blocks, lanes);
    b_.CreateBr(join);
    b_.SetInsertPoint(tail);
    emit_row(it, tail_blocks, tail_lanes);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }

  // Whether the tap (pixel ow, kw) reads inside the image.
  bool tap_inside(std::int64_t ow, std::int64_t kw) const {
    const std::int64_t iw = ow * g_.sw - g_.pl + kw * (g_.dw + 1);
    return iw >= 0 && iw < g_.iw;
  }

  void emit_row(const item_ctx& it, int blocks, int last_lanes) {
    const int owb = c_.ow_block;
    std::int64_t ow0 = 0;
    while (ow0 < g_.ow) {
      const int len = static_cast<int>(std::min<std::int64_t>(owb, g_.ow - ow0));
      auto interior = [&](std::int64_t start) {
        return start + owb <= g_.ow && tap_inside(start, 0) &&
               tap_inside(start + owb - 1, g_.kw - 1);
      };
      if (len == owb && interior(ow0)) {
        std::int64_t count = 0;
        while (ow0 + (count + 1) * owb <= g_.ow && interior(ow0 + count * owb)) ++count;
        if (count == 1) {
          emit_tile(it, c64(ow0), ow0, owb, blocks, last_lanes, true);
        } else {
          const std::int64_t start = ow0;
          loop(c64(0), c64(count), 1, [&](llvm::Value* i) {
            llvm::Value* o = b_.CreateAdd(c64(start), b_.CreateMul(i, c64(owb)));
            emit_tile(it, o, -1, owb, blocks, last_lanes, true);
          });
        }
        ow0 += count * owb;
      } else {
        emit_tile(it, c64(ow0), ow0, len, blocks, last_lanes, false);
        ow0 += len;
      }
    }
  }

  // One register tile: pixels [ow0, ow0 + len) of the row, `blocks` output
  // blocks of the chunk (the last with `last_lanes` lanes). `ow0_const` is
  // ow0 when known at generation time (edge tiles), -1 in the interior loop,
  // where every tap is inside.
  void emit_tile(const item_ctx& it, llvm::Value* ow0, std::int64_t ow0_const, int len, int blocks,
                 int last_lanes, bool all_inside) {
    auto acc = [&](int j, int k) { return acc_[static_cast<std::size_t>(j * blocks + k)]; };
    auto valid_lanes = [&](int k) { return k == blocks - 1 ? last_lanes : lanes; };
    auto inside = [&](int j, std::int64_t kw) {
      return all_inside || tap_inside(ow0_const + j, kw);
    };

    // Accumulators start at the bias.
    for (int k = 0; k < blocks; ++k) {
      llvm::Value* init = splat(0.f);
      if (g_.has_bias) {
        llvm::Value* c0 = b_.CreateAdd(it.c_first, c64(k * lanes));
        init = load_dense(bias_, c0, valid_lanes(k));
      }
      for (int j = 0; j < len; ++j) b_.CreateStore(init, acc(j, k));
    }
    // iw of pixel j at tap 0, relative to the image: ow0 * sw - pl + j * sw.
    llvm::Value* iw0 = b_.CreateSub(b_.CreateMul(ow0, c64(g_.sw)), c64(g_.pl));

    loop(it.kh_lo, it.kh_hi, 1, [&](llvm::Value* kh) {
      llvm::Value* ih = b_.CreateAdd(it.ih0, b_.CreateMul(kh, c64(g_.dh + 1)));
      llvm::Value* row = gep(it.src_img, b_.CreateAdd(b_.CreateMul(ih, c64(g_.src.h_stride)),
                                                      b_.CreateMul(iw0, c64(g_.src.w_stride))));
      auto pixel = [&](int j, std::int64_t kw) {
        return gep(row, (j * g_.sw + kw * (g_.dw + 1)) * g_.src.w_stride);
      };
      if (g_.depthwise) {
        llvm::Value* wk = gep(it.wei_chunk, b_.CreateMul(kh, c64(g_.kw * lanes)));
        std::vector<llvm::Value*> a(static_cast<std::size_t>(len * blocks));
        for (int j = 0; j < len; ++j)
          for (int k = 0; k < blocks; ++k) a[j * blocks + k] = b_.CreateLoad(v16_, acc(j, k));
        const bool contiguous = g_.src.vector_contiguous(lanes);
        for (std::int64_t kw = 0; kw < g_.kw; ++kw) {
          for (int k = 0; k < blocks; ++k) {
            llvm::Value* w = b_.CreateAlignedLoad(v16_, gep(wk, (k * g_.kh * g_.kw + kw) * lanes),
                                                  llvm::Align(4));
            llvm::Value* c0 = b_.CreateAdd(it.c_first, c64(k * lanes));
            for (int j = 0; j < len; ++j) {
              if (!inside(j, kw)) continue;
              llvm::Value* x = load_channels(g_.src, contiguous, pixel(j, kw), c0, valid_lanes(k));
              a[j * blocks + k] = fma(x, w, a[j * blocks + k]);
            }
          }
        }
        for (int j = 0; j < len; ++j)
          for (int k = 0; k < blocks; ++k) b_.CreateStore(a[j * blocks + k], acc(j, k));
        return;
      }

      llvm::Value* wk = gep(it.wei_chunk, b_.CreateMul(kh, c64(g_.kw * g_.icg * lanes)));
      llvm::Value* c_in0 = b_.CreateMul(it.g, c64(g_.icg));
      const std::int64_t block_stride = g_.kh * g_.kw * g_.icg * lanes;
      // Channels [ic, ic + count) of the reduction.
      auto reduce = [&](llvm::Value* ic, int count) {
        std::vector<llvm::Value*> a(static_cast<std::size_t>(len * blocks));
        for (int j = 0; j < len; ++j)
          for (int k = 0; k < blocks; ++k) a[j * blocks + k] = b_.CreateLoad(v16_, acc(j, k));
        for (int u = 0; u < count; ++u) {
          llvm::Value* icu = b_.CreateAdd(ic, c64(u));
          llvm::Value* coff = channel_offset(g_.src, b_.CreateAdd(c_in0, icu));
          llvm::Value* wu = gep(wk, b_.CreateMul(icu, c64(lanes)));
          for (std::int64_t kw = 0; kw < g_.kw; ++kw) {
            std::vector<llvm::Value*> w(static_cast<std::size_t>(blocks));
            for (int k = 0; k < blocks; ++k) {
              w[k] = b_.CreateAlignedLoad(v16_, gep(wu, k * block_stride + kw * g_.icg * lanes),
                                          llvm::Align(4));
            }
            for (int j = 0; j < len; ++j) {
              if (!inside(j, kw)) continue;
              llvm::Value* x = b_.CreateAlignedLoad(f32_, gep(pixel(j, kw), coff), llvm::Align(4));
              llvm::Value* xs = b_.CreateVectorSplat(lanes, x);
              for (int k = 0; k < blocks; ++k) a[j * blocks + k] = fma(xs, w[k], a[j * blocks + k]);
            }
          }
        }
        for (int j = 0; j < len; ++j)
          for (int k = 0; k < blocks; ++k) b_.CreateStore(a[j * blocks + k], acc(j, k));
      };
      const int unroll = c_.ic_unroll;
      const std::int64_t main = g_.icg / unroll * unroll;
      if (main == unroll) {
        reduce(c64(0), unroll);
      } else if (main > 0) {
        loop(c64(0), c64(main), unroll, [&](llvm::Value* ic) { reduce(ic, unroll); });
      }
      if (main < g_.icg) reduce(c64(main), static_cast<int>(g_.icg - main));
    });

    // Epilogue: post-ops, then one store per accumulator.
    const bool dst_contiguous =
        g_.dst.vector_contiguous(g_.depthwise || g_.g == 1 ? lanes : g_.ocg);
    for (int k = 0; k < blocks; ++k) {
      llvm::Value* c0 = b_.CreateAdd(it.c_first, c64(k * lanes));
      const int valid = valid_lanes(k);
      for (int j = 0; j < len; ++j) {
        llvm::Value* ow = b_.CreateAdd(ow0, c64(j));
        llvm::Value* pix = b_.CreateMul(ow, c64(g_.dst.w_stride));
        llvm::Value* v = b_.CreateLoad(v16_, acc(j, k));
        v = emit_post_ops(b_, v, p_.post_ops, [&](int i, const binary_add_op& op) -> llvm::Value* {
          llvm::Value* base = operands_[static_cast<std::size_t>(i)];
          switch (op.broadcast) {
            case binary_broadcast::scalar:
              return b_.CreateVectorSplat(lanes, b_.CreateAlignedLoad(f32_, base, llvm::Align(4)));
            case binary_broadcast::per_channel: return load_dense(base, c0, valid);
            case binary_broadcast::none: break;
          }
          // Laid out as dst: the same offsets from the operand's start.
          llvm::Value* off =
              b_.CreateAdd(b_.CreateAdd(c64(g_.dst.off0), b_.CreateMul(it.n, c64(g_.dst.n_stride))),
                           b_.CreateAdd(b_.CreateMul(it.oh, c64(g_.dst.h_stride)), pix));
          return load_channels(g_.dst, dst_contiguous, gep(base, off), c0, valid);
        });
        store_channels(g_.dst, dst_contiguous, gep(it.dst_row, pix), c0, valid, v);
      }
    }
  }

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const conv_problem& p_;
  const geometry& g_;
  const conv_config& c_;
  llvm::Type* f32_ = nullptr;
  llvm::Type* i64_ = nullptr;
  llvm::Type* v16_ = nullptr;
  llvm::Type* ptr_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::Value *src_ = nullptr, *wei_ = nullptr, *bias_ = nullptr, *dst_ = nullptr;
  std::vector<llvm::Value*> acc_;
  std::vector<llvm::Value*> operands_;
};

std::int64_t work_items(const geometry& g, const conv_config& c) {
  return g.n * (g.depthwise ? 1 : g.g) * div_up(g.nb, c.oc_blocks) * g.oh;
}

void write_md(key_writer& w, const memory_desc& md) {
  md.write_key(w);
}

}  // namespace

// ---------------------------------------------------------------------------

void conv_problem::write_key(key_writer& w) const {
  w.str("conv_fwd");
  write_md(w, src);
  write_md(w, weights);
  write_md(w, bias);
  write_md(w, dst);
  w.i64(stride_h).i64(stride_w).i64(dilation_h).i64(dilation_w);
  w.i64(pad_t).i64(pad_l).i64(pad_b).i64(pad_r).i64(groups);
  cpu_internal::write_key(w, post_ops);
  w.i32(nthr);
}

void conv_config::write_key(key_writer& w) const {
  w.i32(ow_block).i32(oc_blocks).i32(ic_unroll).enumeration(order);
}

result<std::int64_t> conv_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                      std::int64_t dilation, std::int64_t pad_before,
                                      std::int64_t pad_after) {
  if (in < 1 || kernel < 1 || stride < 1 || dilation < 0 || pad_before < 0 ||
      pad_after < -max_param || kernel > (std::int64_t{1} << 31) || stride > max_param ||
      dilation > max_param || pad_before > max_param || pad_after > max_param ||
      in > (std::int64_t{1} << 40)) {
    return invalid("output size of input " + std::to_string(in) + ", kernel " +
                   std::to_string(kernel) + ", stride " + std::to_string(stride) + ", dilation " +
                   std::to_string(dilation) + ", padding " + std::to_string(pad_before) + "+" +
                   std::to_string(pad_after) + ": an argument is out of range");
  }
  const std::int64_t extent = (kernel - 1) * (dilation + 1) + 1;
  const std::int64_t padded = in + pad_before + pad_after;
  if (padded < extent) {
    return invalid("the dilated kernel extent " + std::to_string(extent) +
                   " exceeds the padded input " + std::to_string(padded));
  }
  return (padded - extent) / stride + 1;
}

result<memory_desc> preferred_weights_desc(const conv_problem& p) {
  auto g = analyze(p);
  if (!g) return g.why();
  const geometry& ge = g.value();
  if (ge.depthwise) {
    return memory_desc::make({ge.g, 1, 1, ge.kh, ge.kw}, data_type::f32, format_tag::Goihw16g);
  }
  if (ge.g == 1 && p.weights.ndims() == 4) {
    return memory_desc::make({ge.oc, ge.ic, ge.kh, ge.kw}, data_type::f32, format_tag::Ohwi16o);
  }
  return memory_desc::make(p.weights.dims(), data_type::f32,
                           p.weights.ndims() == 5 ? format_tag::goihw : format_tag::oihw);
}

conv_config default_conv_config(const conv_problem& p, cpu_isa isa) {
  conv_config c;
  auto ga = analyze(p);
  if (!ga) return c;
  const geometry g = flatten_pointwise(ga.value());
  const bool wide = isa >= cpu_isa::avx512_core;
  // Accumulator budget in 16-float vectors: 24 of 32 zmm (measured: 28
  // makes the code generator spill in the 3x3 bodies), or 6 (12 of 16 ymm)
  // at avx2, leaving registers for weights and broadcasts.
  const int budget = wide ? 24 : 6;
  const int max_blocks = g.depthwise ? 2 : (wide ? 4 : 2);
  double best = -1;
  for (int ocb = 1; ocb <= std::min<std::int64_t>(max_blocks, g.nb); ++ocb) {
    const int owb_max = static_cast<int>(std::min<std::int64_t>(budget / ocb, g.ow));
    for (int owb = 1; owb <= owb_max; ++owb) {
      // Useful work over work done (tiles past the row end or the channel
      // count compute nothing), times loads amortized per FMA.
      const double row_use =
          static_cast<double>(g.ow) / static_cast<double>(div_up(g.ow, owb) * owb);
      const double oc_use =
          static_cast<double>(g.nb) / static_cast<double>(div_up(g.nb, ocb) * ocb);
      const double intensity = static_cast<double>(owb * ocb) / static_cast<double>(owb + ocb);
      const double score =
          row_use * oc_use * std::min(1.0, intensity / (wide ? 2.4 : 2.0)) + 1e-3 * owb * ocb;
      if (score > best) {
        best = score;
        c.ow_block = owb;
        c.oc_blocks = ocb;
      }
    }
  }
  c.ic_unroll = g.depthwise ? 1 : (g.icg >= 4 ? 4 : 1);
  // Weights of all chunks larger than an input row set: keep weights hot.
  const std::int64_t weight_bytes = g.g * g.nb * lanes * g.icg * g.kh * g.kw * 4;
  const std::int64_t row_bytes = g.ic * g.iw * g.kh * 4;
  c.order =
      weight_bytes > 2 * row_bytes ? conv_loop_order::oc_outer : conv_loop_order::spatial_outer;
  if (g.n * g.g * div_up(g.nb, c.oc_blocks) < p.nthr) c.order = conv_loop_order::oc_outer;
  return effective_config(g, c);
}

std::vector<conv_config> conv_config_candidates(const conv_problem& p, cpu_isa isa) {
  const conv_config def = default_conv_config(p, isa);
  std::vector<conv_config> out;
  auto ga = analyze(p);
  if (!ga) return out;
  const geometry g = flatten_pointwise(ga.value());
  auto add = [&](conv_config c) {
    if (check_config(c) && c == effective_config(g, c) && !(c == def) &&
        std::find(out.begin(), out.end(), c) == out.end()) {
      out.push_back(c);
    }
  };
  const conv_loop_order other = def.order == conv_loop_order::oc_outer
                                    ? conv_loop_order::spatial_outer
                                    : conv_loop_order::oc_outer;
  conv_config c = def;
  c.order = other;
  add(c);
  for (int owb : {1, 2, 3, 4, 6, 7, 8, 14}) {
    c = def;
    c.ow_block = owb;
    add(c);
  }
  for (int ocb : {1, 2, 3, 4}) {
    c = def;
    c.oc_blocks = ocb;
    c.ow_block = std::max(1, std::min(def.ow_block, 28 / ocb));
    add(c);
  }
  for (int u : {1, 2, 4, 8, 16}) {
    c = def;
    c.ic_unroll = u;
    add(c);
  }
  return out;
}

conv_kernel::conv_kernel(const conv_problem& p, const conv_config& c, std::unique_ptr<jit_module> m,
                         entry_fn* fn)
    : problem_(p), config_(c), module_(std::move(m)), fn_(fn) {}

conv_kernel::~conv_kernel() = default;

result<std::unique_ptr<conv_kernel>> conv_kernel::finish(const conv_problem& p,
                                                         const conv_config& c,
                                                         std::unique_ptr<jit_module> m) {
  auto fn = m->lookup_function<entry_fn>(entry_symbol);
  if (!fn) return fn.why();
  auto g = analyze(p);
  const geometry ge = flatten_pointwise(g.value());
  const conv_config ec = effective_config(ge, c);
  std::unique_ptr<conv_kernel> k(new conv_kernel(p, c, std::move(m), fn.value()));
  auto pref = preferred_weights_desc(p);
  // Only Ohwi16o and Goihw16g are the packed layout itself; the plain
  // layout preferred for other grouped weights is always packed.
  const bool in_place = pref && (ge.depthwise || (ge.g == 1 && p.weights.ndims() == 4)) &&
                        pref.value() == p.weights && p.weights.offset0() == 0;
  k->packs_weights_ = !in_place;
  k->packed_bytes_ =
      k->packs_weights_ ? static_cast<std::size_t>(packed_weight_floats(ge)) * sizeof(float) : 0;
  k->work_items_ = work_items(ge, ec);
  // Grouped outputs whose groups split a 16-channel block are stored lane by
  // lane, which never touches a blocked dst's channel padding.
  k->zeroes_dst_padding_ =
      ge.dst.blocked && ge.g > 1 && !ge.depthwise && ge.ocg % lanes != 0 && ge.oc % lanes != 0;
  return k;
}

result<std::unique_ptr<conv_kernel>> conv_kernel::create(const conv_problem& p,
                                                         const conv_config& c, cpu_isa isa) {
  auto g = analyze(p);
  if (!g) return g.why();
  if (auto ok = check_config(c); !ok) return ok.why();
  if (isa > detected_isa()) {
    return unimplemented("ISA " + std::string(to_string(isa)) + " is not supported by this host");
  }
  if (isa < cpu_isa::avx2) {
    return unimplemented("ISA " + std::string(to_string(isa)) + " is below avx2");
  }
  const geometry ge = flatten_pointwise(g.value());
  const conv_config ec = effective_config(ge, c);
  auto m = jit_module::compile("conv_fwd_f32", isa,
                               [&](llvm::Module& mod) { conv_codegen(mod, p, ge, ec).build(); });
  if (!m) return m.why();
  return finish(p, c, std::move(m).value());
}

result<std::unique_ptr<conv_kernel>> conv_kernel::load(const conv_problem& p, const conv_config& c,
                                                       std::span<const std::byte> object) {
  auto g = analyze(p);
  if (!g) return g.why();
  if (auto ok = check_config(c); !ok) return ok.why();
  auto m = jit_module::load("conv_fwd_f32", object);
  if (!m) return m.why();
  return finish(p, c, std::move(m).value());
}

const std::vector<std::byte>& conv_kernel::object() const {
  return module_->object();
}

std::size_t conv_kernel::scratchpad_bytes() const {
  return packed_bytes_;
}

void conv_kernel::pack_weights(const float* user, float* packed, thread_pool& pool) const {
  const geometry g = analyze(problem_).value();
  const memory_desc& md = problem_.weights;
  const bool five = md.ndims() == 5;
  auto user_at = [&](std::int64_t grp, std::int64_t o, std::int64_t i, std::int64_t h,
                     std::int64_t w) {
    const std::int64_t idx5[5] = {grp, o, i, h, w};
    return user[md_offset(md, five ? idx5 : idx5 + 1)];
  };
  const std::int64_t outer = g.depthwise ? g.nb : g.g * g.nb;
  pool.parallel_for(problem_.nthr, [&](int ithr, int nthr) {
    const range r = balance(outer, ithr, nthr);
    for (std::int64_t blk = r.begin; blk < r.end; ++blk) {
      if (g.depthwise) {
        float* out = packed + blk * g.kh * g.kw * lanes;
        for (std::int64_t h = 0; h < g.kh; ++h)
          for (std::int64_t w = 0; w < g.kw; ++w)
            for (int l = 0; l < lanes; ++l) {
              const std::int64_t grp = blk * lanes + l;
              *out++ = grp < g.g ? user_at(grp, 0, 0, h, w) : 0.f;
            }
        continue;
      }
      const std::int64_t grp = blk / g.nb;
      const std::int64_t ob = blk % g.nb;
      float* out = packed + blk * g.kh * g.kw * g.icg * lanes;
      for (std::int64_t h = 0; h < g.kh; ++h)
        for (std::int64_t w = 0; w < g.kw; ++w)
          for (std::int64_t i = 0; i < g.icg; ++i)
            for (int l = 0; l < lanes; ++l) {
              const std::int64_t o = ob * lanes + l;
              *out++ = o < g.ocg ? user_at(grp, o, i, h, w) : 0.f;
            }
    }
  });
}

void conv_kernel::execute(const conv_args& args, void* scratchpad, thread_pool& pool) const {
  const auto* wei = static_cast<const float*>(args.weights);
  if (packs_weights_) {
    auto* packed = static_cast<float*>(scratchpad);
    pack_weights(wei, packed, pool);
    wei = packed;
  }
  const auto* src = static_cast<const float*>(args.src);
  const auto* bias = static_cast<const float*>(args.bias);
  auto* dst = static_cast<float*>(args.dst);
  const std::int64_t items = work_items_;
  entry_fn* fn = fn_;
  pool.parallel_for(problem_.nthr, [&](int ithr, int nthr) {
    const range r = balance(items, ithr, nthr);
    if (r.begin < r.end) fn(src, wei, bias, dst, args.binary_operands, r.begin, r.end);
  });
  if (zeroes_dst_padding_) zero_dst_padding(dst);
}

void conv_kernel::zero_dst_padding(float* dst) const {
  // nChw16c: outer strides (N, C blocks, H, W), then the 16 lanes of a block.
  const memory_desc& d = problem_.dst;
  const auto dims = d.dims();
  const auto s = d.strides();
  const std::int64_t valid = dims[1] % lanes;
  float* last_block = dst + d.offset0() + (dims[1] / lanes) * s[1] + valid;
  for (std::int64_t n = 0; n < dims[0]; ++n)
    for (std::int64_t h = 0; h < dims[2]; ++h)
      for (std::int64_t w = 0; w < dims[3]; ++w)
        std::fill_n(last_block + n * s[0] + h * s[2] + w * s[3], lanes - valid, 0.f);
}

result<bool> check_conv_problem(const conv_problem& p) {
  auto g = analyze(p);
  if (!g) return g.why();
  return true;
}

void conv_reference(const conv_problem& p, const conv_args& args) {
  const geometry g = analyze(p).value();
  const auto* src = static_cast<const float*>(args.src);
  const auto* wei = static_cast<const float*>(args.weights);
  const auto* bias = static_cast<const float*>(args.bias);
  auto* dst = static_cast<float*>(args.dst);
  const memory_desc& wmd = p.weights;
  const bool five = wmd.ndims() == 5;
  std::vector<float> operands(p.post_ops.size());
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t grp = 0; grp < g.g; ++grp)
      for (std::int64_t o = 0; o < g.ocg; ++o)
        for (std::int64_t oh = 0; oh < g.oh; ++oh)
          for (std::int64_t ow = 0; ow < g.ow; ++ow) {
            const std::int64_t oc = grp * g.ocg + o;
            double acc = g.has_bias ? bias[oc] : 0.0;
            for (std::int64_t i = 0; i < g.icg; ++i)
              for (std::int64_t kh = 0; kh < g.kh; ++kh) {
                const std::int64_t ih = oh * g.sh - g.pt + kh * (g.dh + 1);
                if (ih < 0 || ih >= g.ih) continue;
                for (std::int64_t kw = 0; kw < g.kw; ++kw) {
                  const std::int64_t iw = ow * g.sw - g.pl + kw * (g.dw + 1);
                  if (iw < 0 || iw >= g.iw) continue;
                  const std::int64_t widx[5] = {grp, o, i, kh, kw};
                  const float wv = wei[md_offset(wmd, five ? widx : widx + 1)];
                  acc += static_cast<double>(src[g.src.offset(n, grp * g.icg + i, ih, iw)]) * wv;
                }
              }
            const std::int64_t off = g.dst.offset(n, oc, oh, ow);
            for (std::size_t k = 0; k < p.post_ops.size(); ++k) {
              const post_op& op = p.post_ops[k];
              if (op.what != post_op::kind::binary_add) continue;
              const float* operand = args.binary_operands[op.binary.arg_index];
              operands[k] = op.binary.broadcast == binary_broadcast::scalar        ? operand[0]
                            : op.binary.broadcast == binary_broadcast::per_channel ? operand[oc]
                                                                                   : operand[off];
            }
            dst[off] =
                apply_post_ops_reference(static_cast<float>(acc), p.post_ops, operands.data());
          }
  // The channel padding of a blocked dst holds zeros.
  if (g.dst.blocked) {
    const std::int64_t padded = div_up(g.oc, lanes) * lanes;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t oc = g.oc; oc < padded; ++oc)
        for (std::int64_t oh = 0; oh < g.oh; ++oh)
          for (std::int64_t ow = 0; ow < g.ow; ++ow) dst[g.dst.offset(n, oc, oh, ow)] = 0.f;
  }
}

}  // namespace primcache::cpu_internal
