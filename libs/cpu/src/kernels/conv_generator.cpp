#include "kernels/conv_generator.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "jit/ir_loop.hpp"
#include "jit/target.hpp"
#include "kernels/conv_geometry.hpp"
#include "kernels/integer_math.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr int lanes = conv_lanes;

// ---------------------------------------------------------------------------
// Code generation.
//
// The entry function runs the work items [begin, end). An item is one output
// row of one image, one group and one chunk of oc_blocks 16-channel blocks.
// A row is split into tiles of ow_block pixels. Not depthwise: the row's
// whole tiles run one tile body in a loop and the pixels left over a second,
// narrower body; the reduction runs kh, input channels (ic_unroll per
// iteration), then kw as a loop over the kernel row's taps; a pixel slot that
// some tile has at the image's edge checks its taps at run time (a table
// filled per tile, a branch around the multiply-adds of a tap outside).
// Depthwise: the tiles whose taps all fall inside the image run in one loop
// with no bounds checks, the edge tiles are emitted one by one with the taps
// that fall into the padding left out at generation time. Rows at the top
// and bottom narrow the kh loop at run time. A tile keeps ow_block x
// oc_blocks accumulators in registers for the whole reduction and applies
// bias and post-ops before its one store.

class conv_codegen {
 public:
  conv_codegen(llvm::Module& m, const conv_problem& p, const conv_geometry& g, const conv_config& c,
               cpu_isa isa)
      : m_(m),
        ctx_(m.getContext()),
        b_(ctx_),
        p_(p),
        g_(g),
        c_(c),
        isa_(isa),
        post_op_group_(std::min(2, post_op_group(p.post_ops, isa_vector_bits(isa)))) {
    f32_ = b_.getFloatTy();
    i64_ = b_.getInt64Ty();
    v16_ = llvm::FixedVectorType::get(f32_, lanes);
    ptr_ = llvm::PointerType::get(ctx_, 0);
  }

  void build() {
    auto* fty =
        llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, ptr_, ptr_, ptr_, i64_, i64_}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, conv_entry_symbol, m_);
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
    for (std::size_t i = 0; i < p_.post_ops.size(); ++i) {
      const post_op& op = p_.post_ops[i];
      llvm::Value* operand = nullptr;
      if (op.what == post_op::kind::binary_add) {
        operand = b_.CreateAlignedLoad(ptr_, gep(bin, op.binary.arg_index, ptr_), llvm::Align(8));
      }
      operands_.push_back(operand);
    }

    const std::int64_t nocc = div_up(g_.nb, c_.oc_blocks);
    if (g_.depthwise) {
      emit_counted_items(fn_->getArg(5), fn_->getArg(6), nocc);
    } else {
      loop(fn_->getArg(5), fn_->getArg(6), 1, [&](llvm::Value* item) { emit_item(item, nocc); });
    }
    b_.CreateRetVoid();
  }

 private:
  llvm::Value* c64(std::int64_t v) { return llvm::ConstantInt::get(i64_, v, true); }
  llvm::Value* gep(llvm::Value* base, llvm::Value* off, llvm::Type* ty = nullptr) {
    return b_.CreateGEP(ty ? ty : f32_, base, off);
  }
  llvm::Value* gep(llvm::Value* base, std::int64_t off, llvm::Type* ty = nullptr) {
    return off == 0 ? base : gep(base, c64(off), ty);
  }
  // x + c and x * c, without the instruction where it changes nothing (the
  // kernel runs no IR pass that would fold them).
  llvm::Value* add(llvm::Value* x, std::int64_t c) { return c == 0 ? x : b_.CreateAdd(x, c64(c)); }
  llvm::Value* plus(llvm::Value* x, llvm::Value* y) {
    if (auto* cx = llvm::dyn_cast<llvm::ConstantInt>(x); cx && cx->isZero()) return y;
    if (auto* cy = llvm::dyn_cast<llvm::ConstantInt>(y); cy && cy->isZero()) return x;
    return b_.CreateAdd(x, y);
  }
  llvm::Value* mul(llvm::Value* x, std::int64_t c) {
    if (c == 1) return x;
    return c == 0 ? c64(0) : b_.CreateMul(x, c64(c));
  }

  // for (iv = begin; iv < end; iv += step) body(iv), in i64.
  template <typename Body>
  void loop(llvm::Value* begin, llvm::Value* end, std::int64_t step, Body&& body) {
    emit_counted_loop(b_, begin, end, step, {}, [&](llvm::Value* iv, const ir_values&) {
      body(iv);
      return ir_values{};
    });
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
  llvm::Value* channel_offset(const conv_act_layout& l, llvm::Value* c) {
    if (!l.blocked) return mul(c, l.c_stride);
    return plus(mul(b_.CreateLShr(c, 4), l.c_stride), b_.CreateAnd(c, 15));
  }

  // 16 channels from c0 of one pixel (`pixel` points at its channel 0):
  // whole-vector access when they are consecutive floats, lane by lane
  // otherwise; lanes at and past `valid` read as 0 and are not written.
  llvm::Value* load_channels(const conv_act_layout& l, bool contiguous, llvm::Value* pixel,
                             llvm::Value* c0, int valid, llvm::Value* coff = nullptr) {
    if (contiguous) {
      llvm::Value* ptr = gep(pixel, coff ? coff : channel_offset(l, c0));
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
  void store_channels(const conv_act_layout& l, bool contiguous, llvm::Value* pixel,
                      llvm::Value* c0, int valid, llvm::Value* v) {
    if (contiguous) {
      store_vector(l, gep(pixel, channel_offset(l, c0)), valid, v);
      return;
    }
    for (int l2 = 0; l2 < valid; ++l2) {
      llvm::Value* c = b_.CreateAdd(c0, c64(l2));
      b_.CreateAlignedStore(b_.CreateExtractElement(v, static_cast<std::uint64_t>(l2)),
                            gep(pixel, channel_offset(l, c)), llvm::Align(4));
    }
  }
  // The `valid` first lanes of v to 16 consecutive floats at ptr.
  void store_vector(const conv_act_layout& l, llvm::Value* ptr, int valid, llvm::Value* v) {
    if (valid == lanes) {
      b_.CreateAlignedStore(v, ptr, llvm::Align(4));
    } else if (l.blocked) {
      // The channel padding of a blocked tensor is kept at zero.
      b_.CreateAlignedStore(b_.CreateSelect(lane_mask(valid), v, splat(0.f)), ptr, llvm::Align(4));
    } else {
      b_.CreateMaskedStore(v, ptr, llvm::Align(4), lane_mask(valid));
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
    llvm::Value* src_img;      // src + off0 + n * n_stride
    llvm::Value* dst_row;      // dst + off0 + n * n_stride + oh * h_stride
    llvm::Value* dst_row_off;  // off0 + n * n_stride + oh * h_stride
    llvm::Value* ih0;          // oh * sh - pt
    llvm::Value* wei_chunk;    // packed weights of this chunk's first block
    llvm::Value* c_first;      // first output channel of the chunk (tensor-wide)
  };

  // An item's indices but the image's, innermost first: each one's extent
  // and field. The image's index is what remains.
  using item_digit = std::pair<std::int64_t, llvm::Value * item_ctx::*>;
  std::array<item_digit, 3> item_digits(std::int64_t nocc) const {
    const std::int64_t groups = g_.depthwise ? 1 : g_.g;
    if (c_.order == conv_loop_order::oc_outer) {
      return {{{g_.oh, &item_ctx::oh}, {nocc, &item_ctx::occ}, {groups, &item_ctx::g}}};
    }
    return {{{nocc, &item_ctx::occ}, {groups, &item_ctx::g}, {g_.oh, &item_ctx::oh}}};
  }

  void emit_item(llvm::Value* item, std::int64_t nocc) {
    item_ctx it{};
    llvm::Value* rest = item;
    for (const auto& [extent, field] : item_digits(nocc)) {
      if (extent == 1) {
        it.*field = c64(0);
        continue;
      }
      it.*field = b_.CreateURem(rest, c64(extent));
      rest = b_.CreateUDiv(rest, c64(extent));
    }
    it.n = rest;
    emit_item_at(it, nocc);
  }

  // The items [begin, end) with their indices counted from begin's instead
  // of divided out of each item number: at CodeGenOpt::None a division by
  // a constant stays a div instruction, two per index, which a depthwise
  // item (a row of a chunk, as little as 40 multiply-adds on a 7x7 layer)
  // would pay each time. The divisions run once per call.
  void emit_counted_items(llvm::Value* begin, llvm::Value* end, std::int64_t nocc) {
    const std::array<item_digit, 3> digits = item_digits(nocc);
    ir_values first;
    llvm::Value* rest = begin;
    for (const auto& [extent, field] : digits) {
      if (extent == 1) continue;
      first.push_back(b_.CreateURem(rest, c64(extent)));
      rest = b_.CreateUDiv(rest, c64(extent));
    }
    first.push_back(rest);
    emit_counted_loop(b_, begin, end, 1, first, [&](llvm::Value*, const ir_values& cur) {
      item_ctx it{};
      std::size_t i = 0;
      for (const auto& [extent, field] : digits) it.*field = extent == 1 ? c64(0) : cur[i++];
      it.n = cur[i];
      emit_item_at(it, nocc);
      // The next item's indices: the innermost one steps, each one that
      // reaches its extent wraps to 0 and carries into the next.
      ir_values next;
      llvm::Value* carry = nullptr;
      i = 0;
      for (const auto& [extent, field] : digits) {
        if (extent == 1) continue;
        llvm::Value* v = cur[i++];
        llvm::Value* stepped = carry ? b_.CreateAdd(v, b_.CreateZExt(carry, i64_)) : add(v, 1);
        carry = b_.CreateICmpEQ(stepped, c64(extent));
        next.push_back(b_.CreateSelect(carry, c64(0), stepped));
      }
      next.push_back(carry ? b_.CreateAdd(cur[i], b_.CreateZExt(carry, i64_)) : add(cur[i], 1));
      return next;
    });
  }

  void emit_item_at(item_ctx& it, std::int64_t nocc) {
    // Rows of kh that fall inside the image: ih = ih0 + kh * (dh + 1).
    const std::int64_t dk = g_.dh + 1;
    it.ih0 = add(mul(it.oh, g_.sh), -g_.pt);
    llvm::Value* neg = b_.CreateSub(c64(0), it.ih0);
    llvm::Value* lo = dk == 1 ? neg : b_.CreateSDiv(add(neg, dk - 1), c64(dk));
    it.kh_lo = b_.CreateSelect(b_.CreateICmpSGT(neg, c64(0)), lo, c64(0));
    llvm::Value* room = b_.CreateSub(c64(g_.ih - 1), it.ih0);
    llvm::Value* hi = add(dk == 1 ? room : b_.CreateSDiv(room, c64(dk)), 1);
    hi = b_.CreateSelect(b_.CreateICmpSLT(room, c64(0)), c64(0), hi);
    it.kh_hi = b_.CreateSelect(b_.CreateICmpSLT(hi, c64(g_.kh)), hi, c64(g_.kh));

    it.src_img = gep(src_, add(mul(it.n, g_.src.n_stride), g_.src.off0));
    it.dst_row_off =
        add(plus(mul(it.n, g_.dst.n_stride), mul(it.oh, g_.dst.h_stride)), g_.dst.off0);
    it.dst_row = gep(dst_, it.dst_row_off);
    llvm::Value* first_block = mul(it.occ, c_.oc_blocks);
    if (g_.depthwise) {
      it.c_first = mul(first_block, lanes);
      it.wei_chunk = gep(wei_, mul(first_block, g_.kh * g_.kw * lanes));
    } else {
      it.c_first = plus(mul(it.g, g_.ocg), mul(first_block, lanes));
      llvm::Value* blk = plus(mul(it.g, g_.nb), first_block);
      it.wei_chunk = gep(wei_, mul(blk, g_.kh * g_.kw * g_.icg * lanes));
    }

    // The last chunk may hold fewer blocks, and its last block fewer lanes.
    const std::int64_t channels = g_.depthwise ? g_.g : g_.ocg;
    const int tail_blocks = static_cast<int>(g_.nb - (nocc - 1) * c_.oc_blocks);
    const int tail_lanes = static_cast<int>(channels - (g_.nb - 1) * lanes);
    if (tail_blocks == c_.oc_blocks && tail_lanes == lanes) {
      row(it, c_.oc_blocks, lanes);
      return;
    }
    auto* full = llvm::BasicBlock::Create(ctx_, "full_chunk", fn_);
    auto* tail = llvm::BasicBlock::Create(ctx_, "tail_chunk", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "chunk_done", fn_);
    b_.CreateCondBr(b_.CreateICmpEQ(it.occ, c64(nocc - 1)), tail, full);
    b_.SetInsertPoint(full);
    row(it, c_.oc_blocks, lanes);
    b_.CreateBr(join);
    b_.SetInsertPoint(tail);
    row(it, tail_blocks, tail_lanes);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }

  void row(const item_ctx& it, int blocks, int last_lanes) {
    if (g_.depthwise) {
      emit_dw_row(it, blocks, last_lanes);
    } else {
      emit_dense_row(it, blocks, last_lanes);
    }
  }

  // Whether some output row has no kh tap inside the image (its kh loop
  // runs no iteration).
  bool some_row_without_taps() const {
    for (std::int64_t oh = 0; oh < g_.oh; ++oh) {
      bool any = false;
      for (std::int64_t kh = 0; kh < g_.kh && !any; ++kh) {
        const std::int64_t ih = oh * g_.sh - g_.pt + kh * (g_.dh + 1);
        any = ih >= 0 && ih < g_.ih;
      }
      if (!any) return true;
    }
    return false;
  }

  // A row of a convolution that is not depthwise: the row's whole tiles of
  // ow_block pixels run one tile body in one loop, and the pixels left over
  // (fewer than ow_block) a second, narrower one.
  void emit_dense_row(const item_ctx& it, int blocks, int last_lanes) {
    const int owb = c_.ow_block;
    const std::int64_t whole = g_.ow / owb;
    const int rest = static_cast<int>(g_.ow % owb);
    auto valid_lanes = [&](int k) { return k == blocks - 1 ? last_lanes : lanes; };
    // The sums start at the bias (loaded once per row).
    ir_values bias(static_cast<std::size_t>(blocks), splat(0.f));
    if (g_.has_bias) {
      for (int k = 0; k < blocks; ++k) {
        bias[static_cast<std::size_t>(k)] =
            load_dense(bias_, add(it.c_first, k * lanes), valid_lanes(k));
      }
    }
    if (c_.ic_block == 0) {
      if (whole > 0) emit_dense_tiles(it, 0, whole, owb, blocks, last_lanes, bias);
      if (rest > 0) emit_dense_tiles(it, whole * owb, 1, rest, blocks, last_lanes, bias);
      return;
    }
    // K panels: the row's tiles once per pass over ic_block input channels
    // (ascending), the partial sums kept in dst between passes: the first
    // pass starts at the bias, the others at what the previous one stored,
    // the last adds the post-ops. The passes between the first and the last
    // run in a loop.
    const std::int64_t block = c_.ic_block;
    const std::int64_t passes = div_up(g_.icg, block);
    auto pass = [&](llvm::Value* ic0, std::int64_t channels, bool first, bool last) {
      const dense_pass dp{ic0, channels, !first, last};
      if (whole > 0) emit_dense_tiles(it, 0, whole, owb, blocks, last_lanes, bias, dp);
      if (rest > 0) emit_dense_tiles(it, whole * owb, 1, rest, blocks, last_lanes, bias, dp);
    };
    pass(c64(0), block, true, false);
    if (passes == 3) {
      pass(c64(block), block, false, false);
    } else if (passes > 3) {
      loop(c64(1), c64(passes - 1), 1,
           [&](llvm::Value* p) { pass(mul(p, block), block, false, false); });
    }
    pass(c64((passes - 1) * block), g_.icg - (passes - 1) * block, false, true);
  }

  // One pass of a row's reduction over input channels [ic0, ic0 + channels)
  // of the group (ic0 null: 0); its sums start at the bias, or at the
  // partial sums in dst (from_dst); the last pass applies the post-ops,
  // the others store the partial sums as they are.
  struct dense_pass {
    llvm::Value* ic0;
    std::int64_t channels;
    bool from_dst;
    bool last;
  };

  // The partial sums a previous pass stored for pixels [0, len) of the
  // tile at ow0, as the accumulators hold them (pixel-major): the stores'
  // addressing (emit_epilogue_range), read back.
  ir_values load_partial_sums(const item_ctx& it, llvm::Value* ow0, int len, int blocks,
                              int last_lanes) {
    const bool dst_contiguous = g_.dst.vector_contiguous(g_.g == 1 ? lanes : g_.ocg);
    const std::int64_t ws = g_.dst.w_stride;
    llvm::Value* tile_dst = gep(dst_, plus(it.dst_row_off, mul(ow0, ws)));
    ir_values a(static_cast<std::size_t>(len * blocks));
    for (int k = 0; k < blocks; ++k) {
      llvm::Value* c0 = add(it.c_first, k * lanes);
      const int valid = k == blocks - 1 ? last_lanes : lanes;
      llvm::Value* coff = dst_contiguous ? channel_offset(g_.dst, c0) : nullptr;
      for (int j = 0; j < len; ++j) {
        a[static_cast<std::size_t>(j * blocks + k)] =
            load_channels(g_.dst, dst_contiguous, gep(tile_dst, j * ws), c0, valid, coff);
      }
    }
    return a;
  }

  // Stores the partial sums of pixels [0, len) of the tile at ow0 where
  // emit_epilogue_range stores results (the same lanes), without post-ops.
  void store_partial_sums(const item_ctx& it, llvm::Value* ow0, int len, int blocks, int last_lanes,
                          const ir_values& a) {
    const bool dst_contiguous = g_.dst.vector_contiguous(g_.g == 1 ? lanes : g_.ocg);
    const std::int64_t ws = g_.dst.w_stride;
    llvm::Value* tile_dst = gep(dst_, plus(it.dst_row_off, mul(ow0, ws)));
    for (int k = 0; k < blocks; ++k) {
      llvm::Value* c0 = add(it.c_first, k * lanes);
      const int valid = k == blocks - 1 ? last_lanes : lanes;
      llvm::Value* chan = dst_contiguous ? gep(tile_dst, channel_offset(g_.dst, c0)) : nullptr;
      for (int j = 0; j < len; ++j) {
        llvm::Value* v = a[static_cast<std::size_t>(j * blocks + k)];
        if (chan) {
          store_vector(g_.dst, gep(chan, j * ws), valid, v);
        } else {
          store_channels(g_.dst, false, gep(tile_dst, j * ws), c0, valid, v);
        }
      }
    }
  }

  // `count` register tiles of `len` pixels from pixel `start` of the row,
  // one after another in a loop over one tile body: `len` pixels x `blocks`
  // output blocks (the last with `last_lanes` lanes) of sums, from `bias`,
  // kept in registers through the reduction (kh, input channels, then kw in
  // a loop over the kernel row's taps), then post-ops and one store each.
  //
  // A pixel slot (a pixel's place in the tile) that some of the tiles has
  // where a tap falls outside the image checks its tap at run time: the
  // tap's source column comes from a table filled per tile (-1 where the
  // tap is outside), and a branch skips the multiply-adds of a tap outside,
  // which leaves the sums as they are, as the generic kernel's edge tiles
  // do (a multiply-add by 0 would turn a -0 sum into +0). Other slots check
  // nothing.
  //
  // `pass` (a K panel's, emit_dense_row) narrows the reduction to its input
  // channels, starts the sums at dst's partial sums and stores them without
  // post-ops where it says so; without it: every channel, from the bias, to
  // the post-ops.
  void emit_dense_tiles(const item_ctx& it, std::int64_t start, std::int64_t count, int len,
                        int blocks, int last_lanes, const ir_values& bias) {
    emit_dense_tiles(it, start, count, len, blocks, last_lanes, bias,
                     dense_pass{nullptr, g_.icg, false, true});
  }
  void emit_dense_tiles(const item_ctx& it, std::int64_t start, std::int64_t count, int len,
                        int blocks, int last_lanes, const ir_values& bias, const dense_pass& pass) {
    const std::int64_t pass_channels = pass.ic0 ? pass.channels : g_.icg;
    const bool one_stride = conv_steps_channels(g_, c_);
    const std::int64_t channel_step = g_.src.blocked ? 1 : g_.src.c_stride;
    const std::int64_t ws = g_.src.w_stride;
    const std::int64_t dw1 = g_.dw + 1;
    const std::int64_t block_stride = g_.kh * g_.kw * g_.icg * lanes;
    llvm::Value* c_in0 = mul(it.g, g_.icg);
    // The checked slots, numbered.
    std::vector<int> check_of(static_cast<std::size_t>(len), -1);
    int checks = 0;
    for (int j = 0; j < len; ++j) {
      bool outside = false;
      for (std::int64_t t = 0; t < count && !outside; ++t) {
        for (std::int64_t kw = 0; kw < g_.kw && !outside; ++kw) {
          outside = !tap_inside(start + t * len + j, kw);
        }
      }
      if (outside) check_of[static_cast<std::size_t>(j)] = checks++;
    }
    // Tap kw of checked slot c at entry kw * checks + c: its source column's
    // element offset, or -1 where the tap is outside the image.
    llvm::Value* col_table = nullptr;
    if (checks > 0) {
      llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      col_table = entry.CreateAlloca(i64_, c64(g_.kw * checks));
    }
    auto at = [&](ir_values& a, int j, int k) -> llvm::Value*& {
      return a[static_cast<std::size_t>(j * blocks + k)];
    };

    auto tile = [&](llvm::Value* ow0) {
      // iw of the tile's first pixel at tap 0.
      llvm::Value* iw0 = add(mul(ow0, g_.sw), -g_.pl);
      for (std::int64_t kw = 0; kw < g_.kw && checks > 0; ++kw) {
        for (int j = 0; j < len; ++j) {
          const int c = check_of[static_cast<std::size_t>(j)];
          if (c < 0) continue;
          llvm::Value* iw = add(iw0, j * g_.sw + kw * dw1);
          llvm::Value* inside = b_.CreateICmpULT(iw, c64(g_.iw));
          b_.CreateStore(b_.CreateSelect(inside, mul(iw, ws), c64(-1)),
                         b_.CreateGEP(i64_, col_table, c64(kw * checks + c)));
        }
      }

      // One tap of one input channel for every pixel and block: the
      // weights at wt; the source channel's column 0 at x and its column of
      // the tile's first pixel at this tap at xt; the checked slots'
      // entries of this tap at cols.
      auto tap = [&](llvm::Value* wt, llvm::Value* x, llvm::Value* xt, llvm::Value* cols,
                     ir_values a) {
        std::vector<llvm::Value*> w(static_cast<std::size_t>(blocks));
        for (int k = 0; k < blocks; ++k) {
          w[static_cast<std::size_t>(k)] =
              b_.CreateAlignedLoad(v16_, gep(wt, k * block_stride), llvm::Align(4));
        }
        auto madd = [&](int j, llvm::Value* ptr) {
          llvm::Value* xs =
              b_.CreateVectorSplat(lanes, b_.CreateAlignedLoad(f32_, ptr, llvm::Align(4)));
          for (int k = 0; k < blocks; ++k) {
            at(a, j, k) = fma(xs, w[static_cast<std::size_t>(k)], at(a, j, k));
          }
        };
        for (int j = 0; j < len; ++j) {
          const int c = check_of[static_cast<std::size_t>(j)];
          if (c < 0) {
            madd(j, gep(xt, j * g_.sw * ws));
            continue;
          }
          llvm::Value* off = b_.CreateLoad(i64_, b_.CreateGEP(i64_, cols, c64(c)));
          llvm::BasicBlock* from = b_.GetInsertBlock();
          auto* in = llvm::BasicBlock::Create(ctx_, "tap_inside", fn_);
          auto* done = llvm::BasicBlock::Create(ctx_, "tap_done", fn_);
          b_.CreateCondBr(b_.CreateICmpSGE(off, c64(0)), in, done);
          b_.SetInsertPoint(in);
          const ir_values before = a;
          madd(j, gep(x, off));
          b_.CreateBr(done);
          b_.SetInsertPoint(done);
          for (int k = 0; k < blocks; ++k) {
            llvm::PHINode* phi = b_.CreatePHI(v16_, 2);
            phi->addIncoming(at(const_cast<ir_values&>(before), j, k), from);
            phi->addIncoming(at(a, j, k), in);
            at(a, j, k) = phi;
          }
        }
        return a;
      };

      ir_values init;
      if (pass.from_dst) {
        init = load_partial_sums(it, ow0, len, blocks, last_lanes);
      } else {
        for (int j = 0; j < len; ++j) init.insert(init.end(), bias.begin(), bias.end());
      }
      const ir_values acc = reduction_loop(
          it.kh_lo, it.kh_hi, init, some_row_without_taps(), "kh",
          [&](llvm::Value* kh, ir_values a) {
            llvm::Value* ih = plus(it.ih0, mul(kh, g_.dh + 1));
            llvm::Value* row0 = gep(it.src_img, mul(ih, g_.src.h_stride));
            llvm::Value* wk = gep(it.wei_chunk, mul(kh, g_.kw * g_.icg * lanes));
            // Channels [ic, ic + n) of the reduction (of the pass).
            auto channels = [&](llvm::Value* ic, int n, ir_values s) {
              if (pass.ic0) ic = plus(pass.ic0, ic);
              llvm::Value* wic = gep(wk, mul(ic, lanes));
              llvm::Value* xic =
                  one_stride ? gep(row0, channel_offset(g_.src, plus(c_in0, ic))) : nullptr;
              for (int u = 0; u < n; ++u) {
                llvm::Value* x = one_stride
                                     ? gep(xic, std::int64_t{u} * channel_step)
                                     : gep(row0, channel_offset(g_.src, plus(c_in0, add(ic, u))));
                llvm::Value* wu = gep(wic, std::int64_t{u} * lanes);
                llvm::Value* xt = gep(x, mul(iw0, ws));
                if (g_.kw == 1) {
                  s = tap(wu, x, xt, col_table, s);
                  continue;
                }
                // The kernel row's taps in a loop, their
                // weights, source and table pointers stepped
                // per tap.
                s = tap_loop(
                    wu, xt, col_table, checks, s,
                    [&](llvm::Value* wt, llvm::Value* xtt, llvm::Value* cols, ir_values sums) {
                      return tap(wt, x, xtt, cols, std::move(sums));
                    });
              }
              return s;
            };
            const int unroll = c_.ic_unroll;
            const std::int64_t main = pass_channels / unroll * unroll;
            if (main == unroll) {
              a = channels(c64(0), unroll, a);
            } else if (main > 0) {
              a = inner_loop(c64(0), c64(main), unroll, a, "ic", [&](llvm::Value* ic, ir_values s) {
                return channels(ic, unroll, std::move(s));
              });
            }
            if (main < pass_channels) {
              a = channels(c64(main), static_cast<int>(pass_channels - main), a);
            }
            return a;
          });
      if (!pass.last) {
        store_partial_sums(it, ow0, len, blocks, last_lanes, acc);
        return;
      }
      emit_epilogue_range(it, ow0, 0, len, blocks, last_lanes, [&](int j, int k) {
        return acc[static_cast<std::size_t>(j * blocks + k)];
      });
    };
    if (count == 1) {
      tile(c64(start));
    } else {
      emit_bottom_tested_loop(
          b_, c64(0), c64(count), 1, {},
          [&](llvm::Value* t, const ir_values&) {
            tile(add(mul(t, len), start));
            return ir_values{};
          },
          false, "tile");
    }
  }

  // The kernel row's taps: tap(weights, source, table entries, sums) for kw
  // in [0, kw), in a loop whose pointers step per tap.
  template <typename Tap>
  ir_values tap_loop(llvm::Value* wu, llvm::Value* xt, llvm::Value* cols, int checks,
                     const ir_values& sums, Tap&& tap) {
    const std::int64_t dw1 = g_.dw + 1;
    ir_values carried{wu, xt};
    if (cols) carried.push_back(cols);
    const auto np = static_cast<std::ptrdiff_t>(carried.size());
    carried.insert(carried.end(), sums.begin(), sums.end());
    ir_values out =
        inner_loop(c64(0), c64(g_.kw), 1, carried, "kw", [&](llvm::Value*, const ir_values& cur) {
          ir_values s =
              tap(cur[0], cur[1], cols ? cur[2] : nullptr, ir_values(cur.begin() + np, cur.end()));
          ir_values next{gep(cur[0], g_.icg * lanes), gep(cur[1], dw1 * g_.src.w_stride)};
          if (cols) next.push_back(b_.CreateGEP(i64_, cur[2], c64(checks)));
          next.insert(next.end(), s.begin(), s.end());
          return next;
        });
    out.erase(out.begin(), out.begin() + np);
    return out;
  }

  // A loop whose body holds multiply-adds, carrying the sums: top-tested.
  // At CodeGenOpt::None a loop whose one block holds both its phis and the
  // multiply-adds (the bottom-tested form) makes the two-address pass tie
  // each multiply-add's result to a weight register and copy it, and the
  // sums move from register to register every iteration; with the phis in
  // a header block of their own, each accumulates in place (vfmadd231ps).
  template <typename Body>
  ir_values inner_loop(llvm::Value* begin, llvm::Value* end, std::int64_t step,
                       const ir_values& init, std::string_view name, Body&& body) {
    return emit_counted_loop(
               b_, begin, end, step, init,
               [&](llvm::Value* i, const ir_values& cur) { return body(i, cur); },
               loop_test::index_below_end, name)
        .carried;
  }
  // The kh loop around the channel loop: bottom-tested, guarded where some
  // output row has no kh tap inside the image.
  template <typename Body>
  ir_values reduction_loop(llvm::Value* begin, llvm::Value* end, const ir_values& init,
                           bool guarded, std::string_view name, Body&& body) {
    return emit_bottom_tested_loop(
               b_, begin, end, 1, init,
               [&](llvm::Value* i, const ir_values& cur) { return body(i, cur); }, guarded, name)
        .carried;
  }

  // Whether the tap (pixel ow, kw) reads inside the image.
  bool tap_inside(std::int64_t ow, std::int64_t kw) const {
    const std::int64_t iw = ow * g_.sw - g_.pl + kw * (g_.dw + 1);
    return iw >= 0 && iw < g_.iw;
  }

  // A depthwise row: tiles whose taps all fall inside the image run one
  // tile body in a loop with no bounds checks; edge tiles are emitted one by
  // one, with the taps that fall into the padding left out at generation
  // time.
  void emit_dw_row(const item_ctx& it, int blocks, int last_lanes) {
    const int owb = c_.ow_block;
    // The element offset of the chunk's first channel in a source pixel:
    // every source address of the row is a base stepped per kh plus a
    // constant (dw_channel_offset).
    llvm::Value* coff = channel_offset(g_.src, it.c_first);
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
          emit_dw_tile(it, c64(ow0), ow0, owb, blocks, last_lanes, true, coff);
        } else {
          const std::int64_t start = ow0;
          emit_bottom_tested_loop(
              b_, c64(0), c64(count), 1, {},
              [&](llvm::Value* t, const ir_values&) {
                emit_dw_tile(it, add(mul(t, owb), start), -1, owb, blocks, last_lanes, true, coff);
                return ir_values{};
              },
              false, "tile");
        }
        ow0 += count * owb;
      } else {
        emit_dw_tile(it, c64(ow0), ow0, len, blocks, last_lanes, false, coff);
        ow0 += len;
      }
    }
  }

  // The element offset of lane l of block k from the chunk's first channel
  // in a source pixel.
  std::int64_t dw_channel_offset(int k, int l) const {
    if (g_.src.blocked) return k * g_.src.c_stride + l;
    return (std::int64_t{k} * lanes + l) * g_.src.c_stride;
  }

  // 16 channels of block k of a source pixel at element offset `off` from
  // `x` (the source at the chunk's first channel): one vector load where
  // they are consecutive floats (masked for a plain layout's channel tail),
  // lane by lane otherwise; lanes at and past `valid` read as 0.
  llvm::Value* load_dw_source(llvm::Value* x, std::int64_t off, int k, int valid) {
    if (g_.src.vector_contiguous(lanes)) {
      llvm::Value* ptr = gep(x, off + dw_channel_offset(k, 0));
      if (valid == lanes || g_.src.blocked) return b_.CreateAlignedLoad(v16_, ptr, llvm::Align(4));
      return b_.CreateMaskedLoad(v16_, ptr, llvm::Align(4), lane_mask(valid), splat(0.f));
    }
    llvm::Value* v = splat(0.f);
    for (int l = 0; l < valid; ++l) {
      llvm::Value* e =
          b_.CreateAlignedLoad(f32_, gep(x, off + dw_channel_offset(k, l)), llvm::Align(4));
      v = b_.CreateInsertElement(v, e, static_cast<std::uint64_t>(l));
    }
    return v;
  }

  // Whether a depthwise tile of len pixels x `blocks` blocks takes its
  // taps kw by kw rather than column by column. Column by column, a sum's
  // taps come back to back where no other pixel shares the columns between
  // them (a stride above 1: pixel j's taps read columns 2j, 2j + 1, 2j + 2,
  // the middle one its own), so the multiply-adds wait on each other; kw by
  // kw they are len * blocks apart, at the price of keeping the columns two
  // kw passes share in registers. Taken where those, the sums, a weight and
  // a source vector fit in the ISA's 16-float vector registers (32 zmm at
  // avx512_core; none spare at avx2, where a vector is two ymm of 16). At
  // stride 1 column by column stays: there the taps a column serves belong
  // to three different sums. Measured (dw_object_ab, against the objects of
  // e17cb22, whose IR pipeline ordered the taps kw by kw): the stride-2
  // layers of 14 output columns 0.93-0.96x column by column, 0.97-0.98x kw
  // by kw (docs/PERFORMANCE.md, "The depthwise convolution at
  // CodeGenOpt::None").
  bool dw_taps_by_kw(int len, int blocks) const {
    if (g_.sw < 2 || isa_ < cpu_isa::avx512_core) return false;
    const std::int64_t dw1 = g_.dw + 1;
    const std::int64_t columns = (len - 1) * g_.sw + (g_.kw - 1) * dw1 + 1;
    std::vector<int> taps(static_cast<std::size_t>(columns), 0);
    for (int j = 0; j < len; ++j)
      for (std::int64_t kw = 0; kw < g_.kw; ++kw)
        ++taps[static_cast<std::size_t>(j * g_.sw + kw * dw1)];
    const auto shared = std::count_if(taps.begin(), taps.end(), [](int t) { return t > 1; });
    return len * blocks + blocks * shared + 2 <= 32;
  }

  // One depthwise register tile: pixels [ow0, ow0 + len) of the row,
  // `blocks` output blocks of the chunk (the last with `last_lanes` lanes).
  // `ow0_const` is ow0 when known at generation time (edge tiles), -1 in
  // the interior loop, where every tap is inside. The sums start at the
  // bias and stay SSA values through the kh loop (top-tested; bottom-tested
  // ran no faster on three small layers), whose source and weight pointers
  // step per kh;
  // inside it the kernel row's taps are unrolled (column by column, or kw
  // by kw: dw_taps_by_kw), each source vector loaded once for the taps that
  // share it, each weight vector once. Per sum: one multiply-add per tap
  // inside the image, kh then kw, as the generic kernel. At
  // CodeGenOpt::None a multiply-add is vfmadd213ps tied to its source
  // vector (no load folding, no commuting), so a source vector that two or
  // three taps share is copied for all but its last (docs/PERFORMANCE.md,
  // "The depthwise convolution at CodeGenOpt::None").
  void emit_dw_tile(const item_ctx& it, llvm::Value* ow0, std::int64_t ow0_const, int len,
                    int blocks, int last_lanes, bool all_inside, llvm::Value* coff) {
    auto valid_lanes = [&](int k) { return k == blocks - 1 ? last_lanes : lanes; };
    auto inside = [&](int j, std::int64_t kw) {
      return all_inside || tap_inside(ow0_const + j, kw);
    };
    const std::int64_t dk = g_.dh + 1;
    const std::int64_t dw1 = g_.dw + 1;
    const std::int64_t ws = g_.src.w_stride;
    // The sums start at the bias, loaded per tile (hoisted out of the row,
    // it would hold registers through every tile's reduction).
    ir_values bias(static_cast<std::size_t>(blocks), splat(0.f));
    if (g_.has_bias) {
      for (int k = 0; k < blocks; ++k) {
        bias[static_cast<std::size_t>(k)] =
            load_dense(bias_, add(it.c_first, k * lanes), valid_lanes(k));
      }
    }
    // The source at row ih(kh_lo), column iw of the tile's first pixel at
    // tap 0, channel c_first; the weights of kh_lo.
    llvm::Value* iw0 = add(mul(ow0, g_.sw), -g_.pl);
    llvm::Value* ih_lo = plus(it.ih0, mul(it.kh_lo, dk));
    llvm::Value* x_lo =
        gep(it.src_img, plus(plus(mul(ih_lo, g_.src.h_stride), mul(iw0, ws)), coff));
    llvm::Value* w_lo = gep(it.wei_chunk, mul(it.kh_lo, g_.kw * lanes));
    ir_values carried{x_lo, w_lo};
    for (int j = 0; j < len; ++j) carried.insert(carried.end(), bias.begin(), bias.end());
    ir_values out =
        inner_loop(it.kh_lo, it.kh_hi, 1, carried, "kh", [&](llvm::Value*, const ir_values& cur) {
          llvm::Value* x = cur[0];
          llvm::Value* wk = cur[1];
          ir_values a(cur.begin() + 2, cur.end());
          const std::int64_t columns = (len - 1) * g_.sw + (g_.kw - 1) * dw1 + 1;
          if (dw_taps_by_kw(len, blocks)) {
            // kw by kw, the blocks inside: each block's weight vector of
            // that kw, then its pixels' taps; a source column is loaded at
            // its first tap and kept for the next (pixel j's tap kw reads
            // column j * sw + kw * dw1). A sum's consecutive taps are
            // len * blocks multiply-adds apart.
            std::vector<std::vector<llvm::Value*>> xs(
                static_cast<std::size_t>(blocks),
                std::vector<llvm::Value*>(static_cast<std::size_t>(columns), nullptr));
            for (std::int64_t kw = 0; kw < g_.kw; ++kw) {
              for (int k = 0; k < blocks; ++k) {
                llvm::Value* w = b_.CreateAlignedLoad(
                    v16_, gep(wk, (k * g_.kh * g_.kw + kw) * lanes), llvm::Align(4));
                for (int j = 0; j < len; ++j) {
                  if (!inside(j, kw)) continue;
                  const std::int64_t col = j * g_.sw + kw * dw1;
                  llvm::Value*& xv = xs[static_cast<std::size_t>(k)][static_cast<std::size_t>(col)];
                  if (xv == nullptr) xv = load_dw_source(x, col * ws, k, valid_lanes(k));
                  llvm::Value*& s = a[static_cast<std::size_t>(j * blocks + k)];
                  s = fma(w, xv, s);
                }
              }
            }
          } else {
            // Block by block: the kernel row's weight vectors, then the
            // source columns the tile reads in ascending order, each loaded
            // once and used by every tap that reads it (so a sum still takes
            // its taps in kw order). Live at once: the sums, kw weights and
            // one source vector.
            for (int k = 0; k < blocks; ++k) {
              std::vector<llvm::Value*> w(static_cast<std::size_t>(g_.kw));
              for (std::int64_t kw = 0; kw < g_.kw; ++kw) {
                w[static_cast<std::size_t>(kw)] = b_.CreateAlignedLoad(
                    v16_, gep(wk, (k * g_.kh * g_.kw + kw) * lanes), llvm::Align(4));
              }
              for (std::int64_t col = 0; col < columns; ++col) {
                llvm::Value* xv = nullptr;
                for (int j = 0; j < len; ++j) {
                  const std::int64_t rest = col - j * g_.sw;
                  if (rest < 0 || rest % dw1 != 0 || rest / dw1 >= g_.kw) continue;
                  const std::int64_t kw = rest / dw1;
                  if (!inside(j, kw)) continue;
                  if (xv == nullptr) xv = load_dw_source(x, col * ws, k, valid_lanes(k));
                  llvm::Value*& s = a[static_cast<std::size_t>(j * blocks + k)];
                  s = fma(w[static_cast<std::size_t>(kw)], xv, s);
                }
              }
            }
          }
          ir_values next{gep(x, dk * g_.src.h_stride), gep(wk, g_.kw * lanes)};
          next.insert(next.end(), a.begin(), a.end());
          return next;
        });
    out.erase(out.begin(), out.begin() + 2);
    emit_epilogue_range(it, ow0, 0, len, blocks, last_lanes, [&](int j, int k) {
      return out[static_cast<std::size_t>(j * blocks + k)];
    });
  }

  // The same for pixels [j0, j1) of the tile, whose sums sum(j, k) gives.
  template <typename Sum>
  void emit_epilogue_range(const item_ctx& it, llvm::Value* ow0, int j0, int j1, int blocks,
                           int last_lanes, Sum&& sum) {
    auto valid_lanes = [&](int k) { return k == blocks - 1 ? last_lanes : lanes; };
    const bool dst_contiguous =
        g_.dst.vector_contiguous(g_.depthwise || g_.g == 1 ? lanes : g_.ocg);
    const std::int64_t ws = g_.dst.w_stride;
    // Element offset of the tile's first pixel (channel 0) in dst and in
    // binary operands laid out as dst.
    llvm::Value* tile_off = plus(it.dst_row_off, mul(ow0, ws));
    llvm::Value* tile_dst = gep(dst_, tile_off);
    for (int k = 0; k < blocks; ++k) {
      llvm::Value* c0 = add(it.c_first, k * lanes);
      const int valid = valid_lanes(k);
      // Contiguous channels: the block's vector at pixel j is chan + j * ws.
      llvm::Value* coff = dst_contiguous ? channel_offset(g_.dst, c0) : nullptr;
      llvm::Value* chan = coff ? gep(tile_dst, coff) : nullptr;
      auto pixel_of = [&](std::size_t at) { return j0 + static_cast<int>(at); };
      emit_post_ops(
          b_, static_cast<std::size_t>(j1 - j0), p_.post_ops, post_op_group_,
          [&](std::size_t at) { return sum(pixel_of(at), k); },
          [&](int i, const binary_add_op& op, std::size_t at) -> llvm::Value* {
            llvm::Value* base = operands_[static_cast<std::size_t>(i)];
            switch (op.broadcast) {
              case binary_broadcast::scalar:
                return b_.CreateVectorSplat(lanes,
                                            b_.CreateAlignedLoad(f32_, base, llvm::Align(4)));
              case binary_broadcast::per_channel: return load_dense(base, c0, valid);
              case binary_broadcast::none: break;
            }
            // Laid out as dst: the same offsets from the operand's start.
            llvm::Value* pixel = gep(gep(base, tile_off), pixel_of(at) * ws);
            return load_channels(g_.dst, dst_contiguous, pixel, c0, valid, coff);
          },
          [&](std::size_t at, llvm::Value* v) {
            const int j = pixel_of(at);
            if (chan) {
              store_vector(g_.dst, gep(chan, j * ws), valid, v);
            } else {
              store_channels(g_.dst, false, gep(tile_dst, j * ws), c0, valid, v);
            }
          });
    }
  }

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const conv_problem& p_;
  const conv_geometry& g_;
  const conv_config& c_;
  const cpu_isa isa_;
  // Pixels of a channel block the epilogue passes through the post-ops at
  // once: at most 2, since the tile's other sums are still held in
  // registers there (4 cost a 3x3 64-channel 56x56 layer 5% with gelu_erf,
  // 2 gained 1-4% on the layers measured; docs/PERFORMANCE.md,
  // "Interleaved epilogues").
  const int post_op_group_;
  llvm::Type* f32_ = nullptr;
  llvm::Type* i64_ = nullptr;
  llvm::Type* v16_ = nullptr;
  llvm::Type* ptr_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::Value *src_ = nullptr, *wei_ = nullptr, *bias_ = nullptr, *dst_ = nullptr;
  std::vector<llvm::Value*> operands_;
};

}  // namespace

void generate_conv(const conv_problem& p, const conv_geometry& g, const conv_config& c, cpu_isa isa,
                   llvm::Module& m) {
  conv_codegen(m, p, g, c, isa).build();
}

}  // namespace primcache::cpu_internal
