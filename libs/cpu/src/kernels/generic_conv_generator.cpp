#include "kernels/generic_conv_generator.hpp"

#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "jit/ir_loop.hpp"
#include "kernels/conv_geometry.hpp"
#include "kernels/post_ops.hpp"

namespace primcache::cpu_internal {

generic_conv_tiles generic_conv_tiles_for(cpu_isa isa) noexcept {
  // The tiles default_conv_config (conv_config.cpp) chooses from: up to 4
  // blocks and 24 accumulators at avx512_core, 2 and 6 below.
  if (isa >= cpu_isa::avx512_core) return {4, 24};
  return {2, 6};
}

bool generic_conv_masked_edges(cpu_isa isa) noexcept {
  return isa >= cpu_isa::avx512_core;
}

std::string generic_conv_symbol(int ow_block, int blocks, bool interior) {
  return "conv_generic_tile_" + std::to_string(ow_block) + "x" + std::to_string(blocks) +
         (interior ? "_interior" : "_edge");
}

generic_dw_tiles generic_dw_tiles_for(cpu_isa isa) noexcept {
  // A depthwise tap is one multiply-add per accumulator and one load, so
  // wider tiles only save weight loads (one per kw and block, shared by the
  // tile's pixels): up to 8 pixels x 2 blocks at avx512_core, the avx2
  // accumulator budget below.
  if (isa >= cpu_isa::avx512_core) return {2, 8, 16};
  return {2, 6, 6};
}

std::string generic_dw_symbol(int ow_block, int blocks, generic_dw_load load) {
  static const char* const loads[] = {"vector", "masked", "lanes", "blocked_s1", "blocked_s2"};
  return "conv_generic_dw_" + std::to_string(ow_block) + "x" + std::to_string(blocks) + "_" +
         loads[static_cast<int>(load)];
}

std::string generic_dw_row_symbol(int ow_block, int blocks, int stride) {
  return "conv_generic_dw_row_" + std::to_string(ow_block) + "x" + std::to_string(blocks) + "_s" +
         std::to_string(stride);
}

std::string generic_conv_name(cpu_isa isa) {
  return "conv_generic_" + std::string(to_string(isa));
}

namespace {

constexpr int lanes = conv_lanes;
using values = ir_values;

class generic_conv_generator {
 public:
  generic_conv_generator(cpu_isa isa, llvm::Module& m)
      : tiles_(generic_conv_tiles_for(isa)),
        dw_tiles_(generic_dw_tiles_for(isa)),
        masked_edges_(generic_conv_masked_edges(isa)),
        m_(m),
        ctx_(m.getContext()),
        b_(ctx_),
        f32_(b_.getFloatTy()),
        i64_(b_.getInt64Ty()),
        i32_(b_.getInt32Ty()),
        ptr_(llvm::PointerType::get(ctx_, 0)),
        vec_(llvm::FixedVectorType::get(f32_, lanes)) {}

  void build() {
    post_ops_ = build_post_ops();
    for (int blocks = 1; blocks <= tiles_.max_blocks; ++blocks) {
      for (int width = 1; tiles_.has(width, blocks); ++width) {
        for (bool interior : {true, false}) build_tile(width, blocks, interior);
      }
    }
    for (int blocks = 1; blocks <= dw_tiles_.max_blocks; ++blocks) {
      for (int width = 1; dw_tiles_.has(width, blocks); ++width) {
        for (int load = 0; load < generic_dw_load_count; ++load) {
          build_dw_tile(width, blocks, static_cast<generic_dw_load>(load));
        }
        for (int stride : {1, 2}) build_dw_row(width, blocks, stride);
      }
    }
  }

 private:
  llvm::Value* i64c(std::int64_t v) { return llvm::ConstantInt::get(i64_, v, true); }
  llvm::Value* gep(llvm::Value* base, llvm::Value* index) {
    return b_.CreateGEP(f32_, base, index);
  }
  llvm::Value* zero_vec() { return llvm::Constant::getNullValue(vec_); }
  llvm::Value* splat(llvm::Value* s) { return b_.CreateVectorSplat(lanes, s); }
  llvm::Value* fma(llvm::Value* a, llvm::Value* x, llvm::Value* acc) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_}, {a, x, acc});
  }

  llvm::Value* param(int slot) {
    return b_.CreateAlignedLoad(i64_, b_.CreateGEP(i64_, params_, i64c(slot)), llvm::Align(8));
  }
  llvm::Value* param_at(llvm::Value* slot) {
    return b_.CreateAlignedLoad(i64_, b_.CreateGEP(i64_, params_, slot), llvm::Align(8));
  }
  llvm::Value* param_f32_at(llvm::Value* slot) {
    return b_.CreateAlignedLoad(f32_, b_.CreateGEP(i64_, params_, slot), llvm::Align(8));
  }
  llvm::Value* tile(int slot) {
    return b_.CreateAlignedLoad(i64_, b_.CreateGEP(i64_, tile_, i64c(slot)), llvm::Align(8));
  }
  llvm::Value* flag(int slot) { return b_.CreateICmpNE(param(slot), i64c(0)); }

  // <16 x i1>: lane i < n (n an i64 value, 1..16).
  llvm::Value* lane_mask(llvm::Value* n) {
    std::vector<llvm::Constant*> iota;
    for (int i = 0; i < lanes; ++i) iota.push_back(b_.getInt32(i));
    return b_.CreateICmpSLT(llvm::ConstantVector::get(iota),
                            b_.CreateVectorSplat(lanes, b_.CreateTrunc(n, i32_)));
  }

  values emit_loop(llvm::Value* begin, llvm::Value* end, const values& init, const loop_body& body,
                   const char* name) {
    return emit_counted_loop(b_, begin, end, 1, init, body, loop_test::index_below_end, name)
        .carried;
  }
  // then() in a block run when cond holds.
  void emit_if(llvm::Value* cond, const std::function<void()>& then, const char* name) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* yes = llvm::BasicBlock::Create(ctx_, std::string(name) + ".then", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, std::string(name) + ".done", fn);
    b_.CreateCondBr(cond, yes, done);
    b_.SetInsertPoint(yes);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
  // then() where cond holds, otherwise() where it does not.
  void emit_if_else(llvm::Value* cond, const std::function<void()>& then,
                    const std::function<void()>& otherwise, const char* name) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* yes = llvm::BasicBlock::Create(ctx_, std::string(name) + ".then", fn);
    auto* no = llvm::BasicBlock::Create(ctx_, std::string(name) + ".else", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, std::string(name) + ".done", fn);
    b_.CreateCondBr(cond, yes, no);
    b_.SetInsertPoint(yes);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(no);
    otherwise();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
  // The value of yes() where cond holds, else of no() (both vectors).
  llvm::Value* emit_choice(llvm::Value* cond, const std::function<llvm::Value*()>& yes,
                           const std::function<llvm::Value*()>& no, const char* name) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* y = llvm::BasicBlock::Create(ctx_, std::string(name) + ".yes", fn);
    auto* n = llvm::BasicBlock::Create(ctx_, std::string(name) + ".no", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, std::string(name) + ".done", fn);
    b_.CreateCondBr(cond, y, n);
    b_.SetInsertPoint(y);
    llvm::Value* vy = yes();
    llvm::BasicBlock* from_y = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(n);
    llvm::Value* vn = no();
    llvm::BasicBlock* from_n = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    llvm::PHINode* phi = b_.CreatePHI(vy->getType(), 2);
    phi->addIncoming(vy, from_y);
    phi->addIncoming(vn, from_n);
    return phi;
  }

  // The element offset of channel c in an activation layout (blocked: an
  // i1 value): (c / 16) * cs + c % 16, or c * cs.
  llvm::Value* channel_offset(llvm::Value* blocked, llvm::Value* cs, llvm::Value* c) {
    llvm::Value* plain = b_.CreateMul(c, cs);
    llvm::Value* blk = b_.CreateAdd(b_.CreateMul(b_.CreateLShr(c, 4), cs), b_.CreateAnd(c, 15));
    return b_.CreateSelect(blocked, blk, plain);
  }

  // 16 channels from c0 of the dst-laid-out tensor at `pixel` (its channel
  // 0), as conv_generator's load_channels: a whole vector when blocked or
  // all lanes are valid, masked when plain and contiguous, else lane by
  // lane with the lanes at and past `valid` zero.
  llvm::Value* load_dst_channels(llvm::Value* pixel, llvm::Value* c0, llvm::Value* valid,
                                 llvm::Value* mask) {
    llvm::Value* contiguous = flag(gc_dst_contiguous);
    llvm::Value* blocked = flag(gc_dst_blocked);
    llvm::Value* cs = param(gc_dst_c_stride);
    return emit_choice(
        contiguous,
        [&] {
          llvm::Value* p = gep(pixel, channel_offset(blocked, cs, c0));
          llvm::Value* whole = b_.CreateOr(blocked, b_.CreateICmpEQ(valid, i64c(lanes)));
          return emit_choice(
              whole, [&] { return b_.CreateAlignedLoad(vec_, p, llvm::Align(4)); },
              [&] { return b_.CreateMaskedLoad(vec_, p, llvm::Align(4), mask, zero_vec()); },
              "ld.whole");
        },
        [&] {
          return emit_loop(
              i64c(0), valid, {zero_vec()},
              [&](llvm::Value* l, const values& cur) {
                llvm::Value* off = channel_offset(blocked, cs, b_.CreateAdd(c0, l));
                llvm::Value* x = b_.CreateAlignedLoad(f32_, gep(pixel, off), llvm::Align(4));
                return values{b_.CreateInsertElement(cur[0], x, l)};
              },
              "ld.lanes")[0];
        },
        "ld.contiguous");
  }

  void store_dst_channels(llvm::Value* pixel, llvm::Value* c0, llvm::Value* valid,
                          llvm::Value* mask, llvm::Value* v) {
    llvm::Value* contiguous = flag(gc_dst_contiguous);
    llvm::Value* blocked = flag(gc_dst_blocked);
    llvm::Value* cs = param(gc_dst_c_stride);
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* vec_bb = llvm::BasicBlock::Create(ctx_, "st.vector", fn);
    auto* lanes_bb = llvm::BasicBlock::Create(ctx_, "st.lanes", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, "st.done", fn);
    b_.CreateCondBr(contiguous, vec_bb, lanes_bb);

    b_.SetInsertPoint(vec_bb);
    {
      llvm::Value* p = gep(pixel, channel_offset(blocked, cs, c0));
      auto* full_bb = llvm::BasicBlock::Create(ctx_, "st.full", fn);
      auto* blk_bb = llvm::BasicBlock::Create(ctx_, "st.blocked", fn);
      auto* masked_bb = llvm::BasicBlock::Create(ctx_, "st.masked", fn);
      auto* partial_bb = llvm::BasicBlock::Create(ctx_, "st.partial", fn);
      b_.CreateCondBr(b_.CreateICmpEQ(valid, i64c(lanes)), full_bb, partial_bb);
      b_.SetInsertPoint(full_bb);
      b_.CreateAlignedStore(v, p, llvm::Align(4));
      b_.CreateBr(done);
      b_.SetInsertPoint(partial_bb);
      b_.CreateCondBr(blocked, blk_bb, masked_bb);
      // The channel padding of a blocked tensor is kept at zero.
      b_.SetInsertPoint(blk_bb);
      b_.CreateAlignedStore(b_.CreateSelect(mask, v, zero_vec()), p, llvm::Align(4));
      b_.CreateBr(done);
      b_.SetInsertPoint(masked_bb);
      b_.CreateMaskedStore(v, p, llvm::Align(4), mask);
      b_.CreateBr(done);
    }

    b_.SetInsertPoint(lanes_bb);
    emit_loop(
        i64c(0), valid, {},
        [&](llvm::Value* l, const values&) {
          llvm::Value* off = channel_offset(blocked, cs, b_.CreateAdd(c0, l));
          b_.CreateAlignedStore(b_.CreateExtractElement(v, l), gep(pixel, off), llvm::Align(4));
          return values{};
        },
        "st.lane");
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // 16 consecutive floats from c0 of a dense per-channel vector.
  llvm::Value* load_dense(llvm::Value* base, llvm::Value* c0, llvm::Value* mask) {
    return b_.CreateMaskedLoad(vec_, gep(base, c0), llvm::Align(4), mask, zero_vec());
  }

  // Post-op i of the chain, picked at run time, applied to x: the IR
  // emit_post_ops emits for that post-op with its constants as values (as
  // generic_matmul_generator.cpp's).
  llvm::Value* apply_post_op(llvm::Value* i, llvm::Value* x, llvm::Value* c0, llvm::Value* valid,
                             llvm::Value* mask, llvm::Value* operand_pixel_off) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::Value* base = b_.CreateAdd(i64c(gc_post_ops), b_.CreateMul(i, i64c(gc_post_op_slots)));
    llvm::Value* code = param_at(base);
    auto* done = llvm::BasicBlock::Create(ctx_, "op.done", fn);
    auto* binary_bb = llvm::BasicBlock::Create(ctx_, "op.binary", fn);
    llvm::SwitchInst* sw = b_.CreateSwitch(code, binary_bb, 8);
    b_.SetInsertPoint(done);
    llvm::PHINode* out = b_.CreatePHI(vec_, 11);

    auto alpha = [&] { return param_f32_at(b_.CreateAdd(base, i64c(3))); };
    auto beta = [&] { return param_f32_at(b_.CreateAdd(base, i64c(4))); };
    for (int a = 0; a <= static_cast<int>(eltwise_alg::clip); ++a) {
      const auto alg = static_cast<eltwise_alg>(a);
      auto* bb = llvm::BasicBlock::Create(ctx_, "op.eltwise", fn);
      sw->addCase(b_.getInt64(static_cast<std::uint64_t>(a)), bb);
      b_.SetInsertPoint(bb);
      llvm::Value* y = nullptr;
      switch (alg) {
        case eltwise_alg::relu: {
          llvm::Value* al = alpha();
          llvm::Value* zero = zero_vec();
          llvm::Value* y0 = b_.CreateSelect(b_.CreateFCmpUGT(x, zero), x, zero);
          llvm::Value* y1 =
              b_.CreateSelect(b_.CreateFCmpOGT(x, zero), x, b_.CreateFMul(x, splat(al)));
          y = b_.CreateSelect(b_.CreateFCmpOEQ(al, llvm::ConstantFP::get(f32_, 0.0)), y0, y1);
          break;
        }
        case eltwise_alg::linear:
          y = b_.CreateFAdd(b_.CreateFMul(x, splat(alpha())), splat(beta()));
          break;
        case eltwise_alg::clip: {
          llvm::Value* lo = splat(alpha());
          llvm::Value* hi = splat(beta());
          llvm::Value* above = b_.CreateSelect(b_.CreateFCmpOLT(x, lo), lo, x);
          y = b_.CreateSelect(b_.CreateFCmpOGT(above, hi), hi, above);
          break;
        }
        default:
          // No constants: the very emitter the specialized kernel uses.
          y = emit_eltwise(b_, x, eltwise_op{alg, 0.f, 0.f, 1.f});
          break;
      }
      // scale * f(x), multiplied only when scale != 1 (as emit_eltwise).
      llvm::Value* scale = param_f32_at(b_.CreateAdd(base, i64c(5)));
      llvm::Value* one = b_.CreateFCmpOEQ(scale, llvm::ConstantFP::get(f32_, 1.0));
      y = b_.CreateSelect(one, y, b_.CreateFMul(y, splat(scale)));
      out->addIncoming(y, b_.GetInsertBlock());
      b_.CreateBr(done);
    }

    b_.SetInsertPoint(binary_bb);
    llvm::Value* arg = param_at(b_.CreateAdd(base, i64c(1)));
    llvm::Value* bc = param_at(b_.CreateAdd(base, i64c(2)));
    llvm::Value* operand_base =
        b_.CreateAlignedLoad(ptr_, b_.CreateGEP(ptr_, binary_, arg), llvm::Align(8));
    auto* none_bb = llvm::BasicBlock::Create(ctx_, "op.binary.none", fn);
    auto* channel_bb = llvm::BasicBlock::Create(ctx_, "op.binary.channel", fn);
    auto* scalar_bb = llvm::BasicBlock::Create(ctx_, "op.binary.scalar", fn);
    llvm::SwitchInst* bsw = b_.CreateSwitch(bc, none_bb, 2);
    bsw->addCase(b_.getInt64(static_cast<int>(binary_broadcast::per_channel)), channel_bb);
    bsw->addCase(b_.getInt64(static_cast<int>(binary_broadcast::scalar)), scalar_bb);
    b_.SetInsertPoint(none_bb);
    // Laid out as dst: the same offsets from the operand's start.
    llvm::Value* o = load_dst_channels(gep(operand_base, operand_pixel_off), c0, valid, mask);
    out->addIncoming(b_.CreateFAdd(x, o), b_.GetInsertBlock());
    b_.CreateBr(done);
    b_.SetInsertPoint(channel_bb);
    out->addIncoming(b_.CreateFAdd(x, load_dense(operand_base, c0, mask)), channel_bb);
    b_.CreateBr(done);
    b_.SetInsertPoint(scalar_bb);
    llvm::Value* s = b_.CreateAlignedLoad(f32_, operand_base, llvm::Align(4));
    out->addIncoming(b_.CreateFAdd(x, splat(s)), scalar_bb);
    b_.CreateBr(done);

    b_.SetInsertPoint(done);
    return out;
  }

  // `count` 64-byte aligned vectors in fn's entry block.
  llvm::Value* entry_alloca(llvm::Function* fn, int count) {
    llvm::IRBuilder<> at(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::AllocaInst* a = at.CreateAlloca(vec_, at.getInt64(count));
    a->setAlignment(llvm::Align(64));
    return a;
  }

  // void post_ops(const i64* params, const float* const* binary, <16 x float>* x,
  //               i64 c0, i64 valid, i64 pixel_off): applies the chain to *x,
  // the channels [c0, c0 + 16) of the dst pixel at element offset pixel_off
  // (valid lanes: `valid`). Out of line: the tiles call it per vector.
  llvm::Function* build_post_ops() {
    auto* fn = llvm::Function::Create(
        llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, ptr_, i64_, i64_, i64_}, false),
        llvm::Function::InternalLinkage, "conv_generic_post_ops", m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    fn->addFnAttr(llvm::Attribute::NoInline);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    params_ = fn->getArg(0);
    binary_ = fn->getArg(1);
    llvm::Value* slot = fn->getArg(2);
    llvm::Value* c0 = fn->getArg(3);
    llvm::Value* valid = fn->getArg(4);
    llvm::Value* pixel_off = fn->getArg(5);
    llvm::Value* mask = lane_mask(valid);
    llvm::Value* x = b_.CreateAlignedLoad(vec_, slot, llvm::Align(64));
    x = emit_loop(
        i64c(0), param(gc_post_op_count), {x},
        [&](llvm::Value* i, const values& cur) {
          return values{apply_post_op(i, cur[0], c0, valid, mask, pixel_off)};
        },
        "ops")[0];
    b_.CreateAlignedStore(x, slot, llvm::Align(64));
    b_.CreateRetVoid();
    return fn;
  }

  // void <symbol>(const i64* params, const void* src_img, const float* wei,
  //               const float* bias, float* dst, const float* const* binary,
  //               const i64* tile): the signature, attributes and entry block
  // every tile function shares; sets params_, binary_ and tile_.
  llvm::Function* begin_tile_function(const std::string& symbol) {
    auto* fn = llvm::Function::Create(
        llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, ptr_, ptr_, ptr_, ptr_, ptr_}, false),
        llvm::Function::ExternalLinkage, symbol, m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    for (unsigned a : {1u, 2u, 3u}) {
      fn->addParamAttr(a, llvm::Attribute::NoAlias);
      fn->addParamAttr(a, llvm::Attribute::ReadOnly);
    }
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    params_ = fn->getArg(0);
    binary_ = fn->getArg(5);
    tile_ = fn->getArg(6);
    return fn;
  }

  void build_tile(int owb, int blocks, bool interior) {
    llvm::Function* fn = begin_tile_function(generic_conv_symbol(owb, blocks, interior));
    llvm::Value* src_img = fn->getArg(1);
    llvm::Value* wei_chunk = fn->getArg(2);
    llvm::Value* bias = fn->getArg(3);
    llvm::Value* dst = fn->getArg(4);

    llvm::Value* iw_size = param(gc_iw);
    llvm::Value* kw_size = param(gc_kw);
    llvm::Value* icg = param(gc_icg);
    llvm::Value* sw = param(gc_sw);
    llvm::Value* dh1 = param(gc_dh1);
    llvm::Value* dw1 = param(gc_dw1);
    llvm::Value* src_blocked = flag(gc_src_blocked);
    llvm::Value* src_cs = param(gc_src_c_stride);
    llvm::Value* src_hs = param(gc_src_h_stride);
    llvm::Value* src_ws = param(gc_src_w_stride);
    llvm::Value* wei_bs = param(gc_wei_block_stride);
    llvm::Value* wei_khs = param(gc_wei_kh_stride);
    llvm::Value* ih0 = tile(gt_ih0);
    llvm::Value* iw0 = tile(gt_iw0);
    llvm::Value* c_in0 = tile(gt_c_in0);
    llvm::Value* c_first = tile(gt_c_first);
    llvm::Value* last_lanes = tile(gt_last_lanes);

    llvm::Value* full_mask = lane_mask(i64c(lanes));
    llvm::Value* last_mask = lane_mask(last_lanes);
    auto valid_of = [&](int k) { return k == blocks - 1 ? last_lanes : i64c(lanes); };
    auto mask_of = [&](int k) { return k == blocks - 1 ? last_mask : full_mask; };
    auto c0_of = [&](int k) { return b_.CreateAdd(c_first, i64c(std::int64_t{k} * lanes)); };

    // The masked edge form: which taps of each pixel are inside the image
    // depends on kw and the pixel only, so a table made once per call holds,
    // for every (kw, pixel), the source offset (clamped into the image) and
    // a mask of all lanes or none; each multiply-add of the reduction is
    // then one masked FMA (a select on the accumulator that AVX-512 folds
    // into the FMA) with no arithmetic per channel. Computed per channel
    // (the form below), the checks cost more than the multiply-adds, which
    // held a 7-pixel row (two edge pixels) at half the specialized speed.
    const bool masked = !interior && masked_edges_;
    // Whether source column iw is inside the image, and iw clamped into it
    // (where an edge form loads for a tap it leaves out).
    auto inside_and_clamped = [&](llvm::Value* iw) {
      llvm::Value* inside =
          b_.CreateAnd(b_.CreateICmpSGE(iw, i64c(0)), b_.CreateICmpSLT(iw, iw_size));
      llvm::Value* lo = b_.CreateSelect(b_.CreateICmpSLT(iw, i64c(0)), i64c(0), iw);
      llvm::Value* at =
          b_.CreateSelect(b_.CreateICmpSGE(lo, iw_size), b_.CreateSub(iw_size, i64c(1)), lo);
      return std::pair{inside, at};
    };
    llvm::Value* edge_offsets = nullptr;
    llvm::Value* edge_masks = nullptr;
    if (masked) {
      llvm::Value* entries = i64c(generic_conv_max_masked_kw * owb);
      edge_offsets = b_.CreateAlloca(i64_, entries);
      edge_masks = b_.CreateAlloca(b_.getInt16Ty(), entries);
      emit_loop(
          i64c(0), kw_size, {},
          [&](llvm::Value* kw, const values&) {
            llvm::Value* iw_kw = b_.CreateAdd(iw0, b_.CreateMul(kw, dw1));
            llvm::Value* row_at = b_.CreateMul(kw, i64c(owb));
            for (int j = 0; j < owb; ++j) {
              auto [inside, at] =
                  inside_and_clamped(b_.CreateAdd(iw_kw, b_.CreateMul(sw, i64c(j))));
              llvm::Value* e = b_.CreateAdd(row_at, i64c(j));
              b_.CreateAlignedStore(b_.CreateMul(at, src_ws), b_.CreateGEP(i64_, edge_offsets, e),
                                    llvm::Align(8));
              b_.CreateAlignedStore(b_.CreateSExt(inside, b_.getInt16Ty()),
                                    b_.CreateGEP(b_.getInt16Ty(), edge_masks, e), llvm::Align(2));
            }
            return values{};
          },
          "edge.table");
    }

    const values init = initial_accumulators(bias, owb, blocks, c0_of, mask_of);

    // One tap kw of every pixel of the tile for input channel row in_row,
    // its weights at wu: one multiply-add per output (kept only where the
    // tap is inside the image, in the edge forms).
    auto tap = [&](llvm::Value* kw, llvm::Value* in_row, llvm::Value* wu, const values& cur) {
      values a = cur;
      llvm::Value* wkw = gep(wu, b_.CreateMul(kw, b_.CreateMul(icg, i64c(lanes))));
      values w;
      for (int k = 0; k < blocks; ++k) {
        w.push_back(
            b_.CreateAlignedLoad(vec_, gep(wkw, b_.CreateMul(wei_bs, i64c(k))), llvm::Align(4)));
      }
      if (masked) {
        llvm::Value* row_at = b_.CreateMul(kw, i64c(owb));
        for (int j = 0; j < owb; ++j) {
          llvm::Value* e = b_.CreateAdd(row_at, i64c(j));
          llvm::Value* off =
              b_.CreateAlignedLoad(i64_, b_.CreateGEP(i64_, edge_offsets, e), llvm::Align(8));
          llvm::Value* bits = b_.CreateAlignedLoad(
              b_.getInt16Ty(), b_.CreateGEP(b_.getInt16Ty(), edge_masks, e), llvm::Align(2));
          llvm::Value* inside =
              b_.CreateBitCast(bits, llvm::FixedVectorType::get(b_.getInt1Ty(), lanes));
          llvm::Value* xs = splat(b_.CreateAlignedLoad(f32_, gep(in_row, off), llvm::Align(4)));
          for (int k = 0; k < blocks; ++k) {
            llvm::Value*& s = a[static_cast<std::size_t>(j * blocks + k)];
            s = b_.CreateSelect(inside, fma(xs, w[k], s), s);
          }
        }
        return a;
      }
      llvm::Value* iw_kw = b_.CreateAdd(iw0, b_.CreateMul(kw, dw1));
      for (int j = 0; j < owb; ++j) {
        llvm::Value* iw = b_.CreateAdd(iw_kw, b_.CreateMul(sw, i64c(j)));
        llvm::Value* inside = nullptr;
        // Edge form: outside the image the load reads a clamped address
        // and the sum stays.
        if (!interior) std::tie(inside, iw) = inside_and_clamped(iw);
        llvm::Value* x =
            b_.CreateAlignedLoad(f32_, gep(in_row, b_.CreateMul(iw, src_ws)), llvm::Align(4));
        llvm::Value* xs = splat(x);
        for (int k = 0; k < blocks; ++k) {
          llvm::Value*& s = a[static_cast<std::size_t>(j * blocks + k)];
          llvm::Value* next = fma(xs, w[k], s);
          s = interior ? next : b_.CreateSelect(inside, next, s);
        }
      }
      return a;
    };
    // The reduction: kh, then input channels, then kw, one multiply-add per
    // tap inside the image, in that order (the specialized kernel's).
    // `single`: kernels one tap wide (1x1 convolutions, flattened or not)
    // take the tap without a kw loop: a loop of one iteration per channel
    // cost the interior tile its pointers (reloaded from the stack at each
    // channel) and a third of the 1x1 layers' speed.
    auto reduce = [&](const values& start, bool single) {
      return emit_loop(
          tile(gt_kh_lo), tile(gt_kh_hi), start,
          [&](llvm::Value* kh, const values& cur_kh) {
            llvm::Value* ih = b_.CreateAdd(ih0, b_.CreateMul(kh, dh1));
            llvm::Value* row = gep(src_img, b_.CreateMul(ih, src_hs));
            llvm::Value* wk = gep(wei_chunk, b_.CreateMul(kh, wei_khs));
            return emit_loop(
                i64c(0), icg, cur_kh,
                [&](llvm::Value* ic, const values& cur_ic) {
                  llvm::Value* coff = channel_offset(src_blocked, src_cs, b_.CreateAdd(c_in0, ic));
                  llvm::Value* in_row = gep(row, coff);
                  llvm::Value* wu = gep(wk, b_.CreateMul(ic, i64c(lanes)));
                  if (single) return tap(i64c(0), in_row, wu, cur_ic);
                  return emit_loop(
                      i64c(0), kw_size, cur_ic,
                      [&](llvm::Value* kw, const values& cur) { return tap(kw, in_row, wu, cur); },
                      "kw");
                },
                single ? "ic.tap" : "ic");
          },
          "kh");
    };
    values acc;
    if (interior) {
      acc = emit_multi_choice(
          b_.CreateICmpEQ(kw_size, i64c(1)), [&] { return reduce(init, true); },
          [&] { return reduce(init, false); });
    } else {
      acc = reduce(init, false);
    }

    emit_epilogue(fn, dst, acc, owb, blocks, valid_of, mask_of, c0_of);
    b_.CreateRetVoid();
  }

  // A depthwise tile (groups == IC == OC, one input channel per output
  // channel): owb pixels x `blocks` 16-channel blocks, each output starting
  // at its bias (or +0) and taking one multiply-add per tap inside the
  // image, kh ascending then kw ascending — conv_generator.cpp's depthwise
  // reduction, whose channel vectors are read from the source (not
  // broadcast) at the output's own channels, over the kw range it is given
  // (all inside the image). `load` is how those vectors are read
  // (generic_dw_load).
  void build_dw_tile(int owb, int blocks, generic_dw_load load) {
    llvm::Function* fn = begin_tile_function(generic_dw_symbol(owb, blocks, load));
    llvm::Value* src_img = fn->getArg(1);
    llvm::Value* wei_chunk = fn->getArg(2);
    llvm::Value* bias = fn->getArg(3);
    llvm::Value* dst = fn->getArg(4);

    // The blocked forms' pixel distance and stride are constants.
    const bool blocked16 =
        load == generic_dw_load::blocked_s1 || load == generic_dw_load::blocked_s2;
    llvm::Value* sw = blocked16 ? i64c(load == generic_dw_load::blocked_s1 ? 1 : 2) : param(gc_sw);
    llvm::Value* dh1 = param(gc_dh1);
    llvm::Value* dw1 = param(gc_dw1);
    llvm::Value* src_blocked = flag(gc_src_blocked);
    llvm::Value* src_cs = param(gc_src_c_stride);
    llvm::Value* src_hs = param(gc_src_h_stride);
    llvm::Value* src_ws = blocked16 ? i64c(lanes) : param(gc_src_w_stride);
    llvm::Value* wei_bs = param(gc_wei_block_stride);
    llvm::Value* wei_khs = param(gc_wei_kh_stride);
    llvm::Value* ih0 = tile(gt_ih0);
    llvm::Value* iw0 = tile(gt_iw0);
    llvm::Value* c_first = tile(gt_c_first);
    llvm::Value* last_lanes = tile(gt_last_lanes);

    llvm::Value* full_mask = lane_mask(i64c(lanes));
    llvm::Value* last_mask = lane_mask(last_lanes);
    auto valid_of = [&](int k) { return k == blocks - 1 ? last_lanes : i64c(lanes); };
    auto mask_of = [&](int k) { return k == blocks - 1 ? last_mask : full_mask; };
    auto c0_of = [&](int k) { return b_.CreateAdd(c_first, i64c(std::int64_t{k} * lanes)); };

    // Where block k's channels start in a source pixel (a whole vector's
    // offset), and for lane-by-lane reads each lane's: lanes past the
    // valid ones read the last valid channel again (their sums are never
    // stored).
    std::vector<llvm::Value*> coff(static_cast<std::size_t>(blocks));
    std::vector<std::vector<llvm::Value*>> lane_off(static_cast<std::size_t>(blocks));
    for (int k = 0; k < blocks; ++k) {
      coff[k] = channel_offset(src_blocked, src_cs, c0_of(k));
      if (load != generic_dw_load::lanes) continue;
      llvm::Value* last = b_.CreateSub(valid_of(k), i64c(1));
      for (int l = 0; l < lanes; ++l) {
        llvm::Value* lane = b_.CreateSelect(b_.CreateICmpSLT(i64c(l), last), i64c(l), last);
        lane_off[k].push_back(b_.CreateAdd(coff[k], b_.CreateMul(lane, src_cs)));
      }
    }
    // Block k's 16 channels of the source pixel at `pixel`.
    auto load_x = [&](llvm::Value* pixel, int k) -> llvm::Value* {
      switch (load) {
        case generic_dw_load::vector:
        case generic_dw_load::blocked_s1:
        case generic_dw_load::blocked_s2:
          return b_.CreateAlignedLoad(vec_, gep(pixel, coff[k]), llvm::Align(4));
        case generic_dw_load::masked:
          if (k == blocks - 1) {
            return b_.CreateMaskedLoad(vec_, gep(pixel, coff[k]), llvm::Align(4), last_mask,
                                       zero_vec());
          }
          return b_.CreateAlignedLoad(vec_, gep(pixel, coff[k]), llvm::Align(4));
        case generic_dw_load::lanes: break;
      }
      llvm::Value* v = zero_vec();
      for (int l = 0; l < lanes; ++l) {
        llvm::Value* x = b_.CreateAlignedLoad(f32_, gep(pixel, lane_off[k][l]), llvm::Align(4));
        v = b_.CreateInsertElement(v, x, static_cast<std::uint64_t>(l));
      }
      return v;
    };

    const values init = initial_accumulators(bias, owb, blocks, c0_of, mask_of);

    values acc = emit_loop(
        tile(gt_kh_lo), tile(gt_kh_hi), init,
        [&](llvm::Value* kh, const values& cur_kh) {
          llvm::Value* ih = b_.CreateAdd(ih0, b_.CreateMul(kh, dh1));
          llvm::Value* row = gep(src_img, b_.CreateMul(ih, src_hs));
          llvm::Value* wk = gep(wei_chunk, b_.CreateMul(kh, wei_khs));
          return emit_loop(
              tile(gt_kw_lo), tile(gt_kw_hi), cur_kh,
              [&](llvm::Value* kw, const values& cur) {
                values a = cur;
                llvm::Value* wkw = gep(wk, b_.CreateMul(kw, i64c(lanes)));
                values w;
                for (int k = 0; k < blocks; ++k) {
                  w.push_back(b_.CreateAlignedLoad(vec_, gep(wkw, b_.CreateMul(wei_bs, i64c(k))),
                                                   llvm::Align(4)));
                }
                llvm::Value* iw_kw = b_.CreateAdd(iw0, b_.CreateMul(kw, dw1));
                for (int j = 0; j < owb; ++j) {
                  llvm::Value* iw = b_.CreateAdd(iw_kw, b_.CreateMul(sw, i64c(j)));
                  llvm::Value* pixel = gep(row, b_.CreateMul(iw, src_ws));
                  for (int k = 0; k < blocks; ++k) {
                    llvm::Value*& s = a[static_cast<std::size_t>(j * blocks + k)];
                    s = fma(load_x(pixel, k), w[k], s);
                  }
                }
                return a;
              },
              "kw");
        },
        "kh");

    // Without post-ops, into a dst whose 16 channels are consecutive and
    // all valid: whole-vector stores straight from the registers (a
    // depthwise output has only kh * kw taps to amortize the general
    // epilogue over); anything else through emit_epilogue.
    llvm::Value* direct = b_.CreateAnd(
        b_.CreateICmpEQ(param(gc_post_op_count), i64c(0)),
        b_.CreateAnd(flag(gc_dst_contiguous), b_.CreateICmpEQ(last_lanes, i64c(lanes))));
    auto* direct_bb = llvm::BasicBlock::Create(ctx_, "store.direct", fn);
    auto* general_bb = llvm::BasicBlock::Create(ctx_, "store.general", fn);
    auto* done_bb = llvm::BasicBlock::Create(ctx_, "store.done", fn);
    b_.CreateCondBr(direct, direct_bb, general_bb);
    b_.SetInsertPoint(direct_bb);
    {
      llvm::Value* row = gep(dst, tile(gt_dst_row_off));
      llvm::Value* dst_ws = param(gc_dst_w_stride);
      llvm::Value* px0 = gep(row, b_.CreateMul(tile(gt_ow0), dst_ws));
      llvm::Value* dst_blocked = flag(gc_dst_blocked);
      llvm::Value* dst_cs = param(gc_dst_c_stride);
      for (int k = 0; k < blocks; ++k) {
        llvm::Value* at = gep(px0, channel_offset(dst_blocked, dst_cs, c0_of(k)));
        for (int j = 0; j < owb; ++j) {
          b_.CreateAlignedStore(acc[static_cast<std::size_t>(j * blocks + k)],
                                gep(at, b_.CreateMul(dst_ws, i64c(j))), llvm::Align(4));
        }
      }
    }
    b_.CreateBr(done_bb);
    b_.SetInsertPoint(general_bb);
    emit_epilogue(fn, dst, acc, owb, blocks, valid_of, mask_of, c0_of);
    b_.CreateBr(done_bb);
    b_.SetInsertPoint(done_bb);
    b_.CreateRetVoid();
  }

  // Depthwise rows (generic_dw_row_symbol): kernel rows of 3 taps with no
  // dilation along w, an nChw16c source read at stride `s`. One call runs
  // gt_dw_rows output rows from gt_dw_oh0 of gt_dw_chunks consecutive
  // chunks, the chunks outer (a chunk's bias, channel offsets and weights
  // set once for its rows), each row's kh range found in the code (the
  // divisions only for rows at the top or bottom with dilation along h).
  // A row: the gt_dw_left pixels at the left edge one by one over their kw
  // range inside the image, then a first tile of owb pixels, gt_dw_wide
  // tiles of owb pixels and gt_dw_narrow tiles of owb - 1, a last tile,
  // then the pixels up to gt_dw_ow one by one. The first and last tile may
  // hold an edge pixel of padding 1 whose one tap outside is left out; each
  // combination is its own tile body (no select in the multiply-adds). A
  // tile reads the source columns of a kernel row in ascending order, each
  // loaded once and used by every tap that reads it ((owb - 1) * s + 3
  // loads per block and kh instead of 3 * owb, as the specialized kernel's
  // constant addresses merge them); each output still takes its
  // multiply-adds from its bias (or +0), kh ascending then kw ascending.
  void build_dw_row(int owb, int blocks, int s) {
    constexpr int kw_size = 3;
    llvm::Function* fn = begin_tile_function(generic_dw_row_symbol(owb, blocks, s));
    llvm::Value* src_img = fn->getArg(1);
    llvm::Value* wei_first = fn->getArg(2);
    llvm::Value* bias = fn->getArg(3);
    llvm::Value* dst = fn->getArg(4);

    // Every parameter and tile slot is read here, once: the stores to dst
    // may alias both blocks as far as the code knows.
    llvm::Value* ih_size = param(gc_ih);
    llvm::Value* iw_size = param(gc_iw);
    llvm::Value* kh_size = param(gc_kh);
    llvm::Value* sh = param(gc_sh);
    llvm::Value* pt = param(gc_pt);
    llvm::Value* dh1 = param(gc_dh1);
    llvm::Value* src_cs = param(gc_src_c_stride);
    llvm::Value* src_hs = param(gc_src_h_stride);
    llvm::Value* wei_bs = param(gc_wei_block_stride);
    llvm::Value* dst_ws = param(gc_dst_w_stride);
    llvm::Value* dst_hs = param(gc_dst_h_stride);
    llvm::Value* iw_first = tile(gt_iw0);  // pixel 0's first tap: -pl
    llvm::Value* c_base = tile(gt_c_first);
    llvm::Value* last_lanes = tile(gt_last_lanes);
    llvm::Value* img_off = tile(gt_dst_row_off);  // the image's row 0
    llvm::Value* oh_first = tile(gt_dw_oh0);
    llvm::Value* oh_end = b_.CreateAdd(oh_first, tile(gt_dw_rows));
    llvm::Value* chunks = tile(gt_dw_chunks);
    llvm::Value* left = tile(gt_dw_left);
    llvm::Value* first = tile(gt_dw_first);
    llvm::Value* first_lo = b_.CreateICmpNE(tile(gt_dw_first_lo), i64c(0));
    llvm::Value* first_hi = b_.CreateICmpNE(tile(gt_dw_first_hi), i64c(0));
    llvm::Value* wide = tile(gt_dw_wide);
    llvm::Value* narrow = tile(gt_dw_narrow);
    llvm::Value* last = tile(gt_dw_last);
    llvm::Value* last_hi = b_.CreateICmpNE(tile(gt_dw_last_hi), i64c(0));
    llvm::Value* ow_size = tile(gt_dw_ow);
    // A row whose kh taps all fall inside: ih0 >= 0 and ih0 + span <= ih - 1.
    llvm::Value* span = b_.CreateMul(b_.CreateSub(kh_size, i64c(1)), dh1);
    llvm::Value* dense_h = b_.CreateICmpEQ(dh1, i64c(1));

    llvm::Value* full_mask = lane_mask(i64c(lanes));
    llvm::Value* last_mask = lane_mask(last_lanes);
    auto valid_of = [&](int k) { return k == blocks - 1 ? last_lanes : i64c(lanes); };
    auto mask_of = [&](int k) { return k == blocks - 1 ? last_mask : full_mask; };
    // The chunk's first channel and weights (set per chunk below).
    llvm::Value* c_first = nullptr;
    llvm::Value* wei_chunk = nullptr;
    auto c0_of = [&](int k) { return b_.CreateAdd(c_first, i64c(std::int64_t{k} * lanes)); };
    // The row's (set per row below): its first tap row, kh range and dst
    // offset.
    llvm::Value* ih0 = nullptr;
    llvm::Value* kh_lo = nullptr;
    llvm::Value* kh_hi = nullptr;
    llvm::Value* row_off = nullptr;

    // Per chunk: block k's channels in a source pixel (nChw16c: a whole
    // block) and in a dst pixel, and each block's bias (or +0), the start
    // of every pixel's sums; its weights (kh * 3 vectors) from the chunk's.
    llvm::Value* dst_blocked = flag(gc_dst_blocked);
    llvm::Value* dst_cs = param(gc_dst_c_stride);
    std::vector<llvm::Value*> coff, woff, dst_coff;
    values start;
    for (int k = 0; k < blocks; ++k) woff.push_back(b_.CreateMul(wei_bs, i64c(k)));
    // As the tiles: whole-vector stores from the registers without
    // post-ops into a dst whose 16 channels are consecutive and all valid.
    llvm::Value* direct = b_.CreateAnd(
        b_.CreateICmpEQ(param(gc_post_op_count), i64c(0)),
        b_.CreateAnd(flag(gc_dst_contiguous), b_.CreateICmpEQ(last_lanes, i64c(lanes))));

    auto store = [&](const values& acc, llvm::Value* ow0, int width) {
      auto* direct_bb = llvm::BasicBlock::Create(ctx_, "store.direct", fn);
      auto* general_bb = llvm::BasicBlock::Create(ctx_, "store.general", fn);
      auto* done_bb = llvm::BasicBlock::Create(ctx_, "store.done", fn);
      b_.CreateCondBr(direct, direct_bb, general_bb);
      b_.SetInsertPoint(direct_bb);
      llvm::Value* px0 = gep(dst, b_.CreateAdd(row_off, b_.CreateMul(ow0, dst_ws)));
      for (int k = 0; k < blocks; ++k) {
        llvm::Value* at = gep(px0, dst_coff[k]);
        for (int j = 0; j < width; ++j) {
          b_.CreateAlignedStore(acc[static_cast<std::size_t>(j * blocks + k)],
                                gep(at, b_.CreateMul(dst_ws, i64c(j))), llvm::Align(4));
        }
      }
      b_.CreateBr(done_bb);
      b_.SetInsertPoint(general_bb);
      emit_epilogue(fn, dst, acc, width, blocks, valid_of, mask_of, c0_of, ow0, row_off);
      b_.CreateBr(done_bb);
      b_.SetInsertPoint(done_bb);
    };

    // `width` pixels from ow0, every tap inside the image but, where
    // skip_lo, the first pixel's tap kw 0 and, where skip_hi, the last
    // pixel's tap kw 2 (the edge pixels of padding 1), which are left out.
    // Block by block: the kernel row's weights, then the source columns in
    // ascending order, each loaded once and used by every tap that reads it
    // (pixel j's tap kw reads column j * s + kw, so a sum still takes its
    // taps in kw order).
    auto run_tile = [&](llvm::Value* ow0, int width, bool skip_lo, bool skip_hi) {
      llvm::Value* iw0 = b_.CreateAdd(iw_first, b_.CreateMul(ow0, i64c(s)));
      values init;
      for (int j = 0; j < width; ++j)
        for (int k = 0; k < blocks; ++k) init.push_back(start[k]);
      const values acc = emit_loop(
          kh_lo, kh_hi, init,
          [&](llvm::Value* kh, const values& cur) {
            values a = cur;
            llvm::Value* ih = b_.CreateAdd(ih0, b_.CreateMul(kh, dh1));
            llvm::Value* row = gep(
                src_img, b_.CreateAdd(b_.CreateMul(ih, src_hs), b_.CreateMul(iw0, i64c(lanes))));
            llvm::Value* wk = gep(wei_chunk, b_.CreateMul(kh, i64c(kw_size * lanes)));
            for (int k = 0; k < blocks; ++k) {
              llvm::Value* px = gep(row, coff[k]);
              llvm::Value* wb = gep(wk, woff[k]);
              llvm::Value* w[kw_size];
              for (int kw = 0; kw < kw_size; ++kw) {
                w[kw] = b_.CreateAlignedLoad(vec_, gep(wb, i64c(kw * lanes)), llvm::Align(4));
              }
              const int columns = (width - 1) * s + kw_size;
              for (int col = 0; col < columns; ++col) {
                llvm::Value* x = nullptr;
                for (int j = 0; j < width; ++j) {
                  const int kw = col - j * s;
                  if (kw < 0 || kw >= kw_size) continue;
                  if ((skip_lo && j == 0 && kw == 0) ||
                      (skip_hi && j == width - 1 && kw == kw_size - 1)) {
                    continue;
                  }
                  if (x == nullptr) {
                    x = b_.CreateAlignedLoad(vec_, gep(px, i64c(std::int64_t{col} * lanes)),
                                             llvm::Align(4));
                  }
                  llvm::Value*& sum = a[static_cast<std::size_t>(j * blocks + k)];
                  sum = fma(x, w[kw], sum);
                }
              }
            }
            return a;
          },
          "kh");
      store(acc, ow0, width);
    };
    // run_tile with skip_lo and skip_hi chosen at run time by lo and hi
    // (i1 values, or null for false): one tile body per combination.
    auto run_tile_where = [&](llvm::Value* ow0, int width, llvm::Value* lo, llvm::Value* hi) {
      auto with_hi = [&](bool skip_lo) {
        if (hi == nullptr) {
          run_tile(ow0, width, skip_lo, false);
          return;
        }
        emit_if_else(
            hi, [&] { run_tile(ow0, width, skip_lo, true); },
            [&] { run_tile(ow0, width, skip_lo, false); }, "tile.hi");
      };
      if (lo == nullptr) {
        with_hi(false);
        return;
      }
      emit_if_else(
          lo, [&] { with_hi(true); }, [&] { with_hi(false); }, "tile.lo");
    };

    // Pixel ow alone, over its kw range inside the image (empty when none
    // is): the taps the specialized kernel keeps.
    auto run_edge = [&](llvm::Value* ow) {
      llvm::Value* iw0 = b_.CreateAdd(iw_first, b_.CreateMul(ow, i64c(s)));
      llvm::Value* kw_lo =
          b_.CreateSelect(b_.CreateICmpSLT(iw0, i64c(0)), b_.CreateNeg(iw0), i64c(0));
      llvm::Value* room = b_.CreateSub(iw_size, iw0);
      llvm::Value* kw_hi =
          b_.CreateSelect(b_.CreateICmpSLT(room, i64c(kw_size)), room, i64c(kw_size));
      const values acc = emit_loop(
          kh_lo, kh_hi, start,
          [&](llvm::Value* kh, const values& cur_kh) {
            llvm::Value* ih = b_.CreateAdd(ih0, b_.CreateMul(kh, dh1));
            llvm::Value* row = gep(
                src_img, b_.CreateAdd(b_.CreateMul(ih, src_hs), b_.CreateMul(iw0, i64c(lanes))));
            llvm::Value* wk = gep(wei_chunk, b_.CreateMul(kh, i64c(kw_size * lanes)));
            return emit_loop(
                kw_lo, kw_hi, cur_kh,
                [&](llvm::Value* kw, const values& cur) {
                  values a = cur;
                  llvm::Value* at = b_.CreateMul(kw, i64c(lanes));
                  for (int k = 0; k < blocks; ++k) {
                    llvm::Value* w =
                        b_.CreateAlignedLoad(vec_, gep(gep(wk, woff[k]), at), llvm::Align(4));
                    llvm::Value* x =
                        b_.CreateAlignedLoad(vec_, gep(gep(row, coff[k]), at), llvm::Align(4));
                    a[static_cast<std::size_t>(k)] = fma(x, w, a[static_cast<std::size_t>(k)]);
                  }
                  return a;
                },
                "kw");
          },
          "kh");
      store(acc, ow, 1);
    };

    auto pixels = [&](llvm::Value* from, llvm::Value* to, int step, const char* name,
                      const std::function<void(llvm::Value*)>& body) {
      emit_counted_loop(
          b_, from, to, step, {},
          [&](llvm::Value* ow, const values&) {
            body(ow);
            return values{};
          },
          loop_test::index_below_end, name);
    };
    // The row of one chunk: the pixels alone on the left, the first tile
    // (owb pixels), the middle ones (owb, then owb - 1), the last (owb - 1
    // or owb), the pixels alone on the right, each only where the row has
    // it.
    auto emit_row = [&] {
      pixels(i64c(0), left, 1, "left", run_edge);
      emit_if(
          b_.CreateICmpNE(first, i64c(0)), [&] { run_tile_where(left, owb, first_lo, first_hi); },
          "first");
      llvm::Value* end = b_.CreateAdd(left, b_.CreateMul(first, i64c(owb)));
      {
        llvm::Value* from = end;
        end = b_.CreateAdd(from, b_.CreateMul(wide, i64c(owb)));
        pixels(from, end, owb, "wide", [&](llvm::Value* ow0) { run_tile(ow0, owb, false, false); });
      }
      if (owb > 1) {
        llvm::Value* from = end;
        end = b_.CreateAdd(from, b_.CreateMul(narrow, i64c(owb - 1)));
        pixels(from, end, owb - 1, "narrow",
               [&](llvm::Value* ow0) { run_tile(ow0, owb - 1, false, false); });
        emit_if(
            b_.CreateICmpEQ(last, i64c(owb - 1)),
            [&] { run_tile_where(end, owb - 1, nullptr, last_hi); }, "last.narrow");
      }
      emit_if(
          b_.CreateICmpEQ(last, i64c(owb)), [&] { run_tile_where(end, owb, nullptr, last_hi); },
          "last.wide");
      end = b_.CreateAdd(end, last);
      pixels(end, ow_size, 1, "right", run_edge);
    };
    // Output row oh's kh range (the driver's rule): [0, kh) where every
    // tap row is inside; else kh_lo = ceil(-ih0 / dh1) where ih0 < 0 and
    // kh_hi = min((ih - 1 - ih0) / dh1 + 1, kh) (0 where negative), with no
    // division when dh1 is 1.
    auto row_range = [&](llvm::Value* oh) {
      ih0 = b_.CreateSub(b_.CreateMul(oh, sh), pt);
      llvm::Value* neg = b_.CreateNeg(ih0);
      llvm::Value* room = b_.CreateSub(b_.CreateSub(ih_size, i64c(1)), ih0);
      llvm::Value* inside =
          b_.CreateAnd(b_.CreateICmpSGE(ih0, i64c(0)), b_.CreateICmpSGE(room, span));
      const values range = emit_multi_choice(
          inside,
          [&] {
            return values{i64c(0), kh_size};
          },
          [&] {
            return emit_multi_choice(
                dense_h,
                [&] {
                  llvm::Value* lo = b_.CreateSelect(b_.CreateICmpSGT(neg, i64c(0)), neg, i64c(0));
                  llvm::Value* hi = b_.CreateAdd(room, i64c(1));
                  hi = b_.CreateSelect(b_.CreateICmpSLT(hi, kh_size), hi, kh_size);
                  hi = b_.CreateSelect(b_.CreateICmpSLT(room, i64c(0)), i64c(0), hi);
                  return values{lo, hi};
                },
                [&] {
                  llvm::Value* up =
                      b_.CreateSDiv(b_.CreateAdd(neg, b_.CreateSub(dh1, i64c(1))), dh1);
                  llvm::Value* lo = b_.CreateSelect(b_.CreateICmpSGT(neg, i64c(0)), up, i64c(0));
                  llvm::Value* hi = b_.CreateAdd(b_.CreateSDiv(room, dh1), i64c(1));
                  hi = b_.CreateSelect(b_.CreateICmpSLT(hi, kh_size), hi, kh_size);
                  hi = b_.CreateSelect(b_.CreateICmpSLT(room, i64c(0)), i64c(0), hi);
                  return values{lo, hi};
                });
          });
      kh_lo = range[0];
      kh_hi = range[1];
      row_off = b_.CreateAdd(img_off, b_.CreateMul(oh, dst_hs));
    };
    // gt_dw_chunks chunks of `blocks` blocks from the call's first, one
    // after the other, each over the call's rows.
    emit_loop(
        i64c(0), chunks, {},
        [&](llvm::Value* chunk, const values&) {
          c_first = b_.CreateAdd(c_base, b_.CreateMul(chunk, i64c(std::int64_t{blocks} * lanes)));
          wei_chunk = gep(wei_first, b_.CreateMul(chunk, b_.CreateMul(wei_bs, i64c(blocks))));
          coff.clear();
          dst_coff.clear();
          for (int k = 0; k < blocks; ++k) {
            coff.push_back(b_.CreateMul(b_.CreateLShr(c0_of(k), 4), src_cs));
            dst_coff.push_back(channel_offset(dst_blocked, dst_cs, c0_of(k)));
          }
          start = initial_accumulators(bias, 1, blocks, c0_of, mask_of);
          emit_loop(
              oh_first, oh_end, {},
              [&](llvm::Value* oh, const values&) {
                row_range(oh);
                emit_row();
                return values{};
              },
              "row");
          return values{};
        },
        "chunk");
    b_.CreateRetVoid();
  }

  // Epilogue: post-ops, then one store per accumulator, over the pixels
  // in a loop (the accumulators go through a stack array). acc holds
  // pixel j's block k at j * blocks + k; the tile's first pixel is
  // ow0_value, or gt_ow0 when null; its row's dst offset row_off_value, or
  // gt_dst_row_off when null.
  void emit_epilogue(llvm::Function* fn, llvm::Value* dst, const values& acc, int owb, int blocks,
                     const std::function<llvm::Value*(int)>& valid_of,
                     const std::function<llvm::Value*(int)>& mask_of,
                     const std::function<llvm::Value*(int)>& c0_of,
                     llvm::Value* ow0_value = nullptr, llvm::Value* row_off_value = nullptr) {
    llvm::Value* ow0 = ow0_value != nullptr ? ow0_value : tile(gt_ow0);
    llvm::Value* row_off = row_off_value != nullptr ? row_off_value : tile(gt_dst_row_off);
    llvm::Value* dst_ws = param(gc_dst_w_stride);
    llvm::Value* with_ops = b_.CreateICmpSGT(param(gc_post_op_count), i64c(0));
    llvm::Value* out = entry_alloca(fn, owb * blocks);
    for (int i = 0; i < owb * blocks; ++i) {
      b_.CreateAlignedStore(acc[static_cast<std::size_t>(i)], b_.CreateGEP(vec_, out, i64c(i)),
                            llvm::Align(64));
    }
    for (int k = 0; k < blocks; ++k) {
      llvm::Value* c0 = c0_of(k);
      emit_loop(
          i64c(0), i64c(owb), {},
          [&](llvm::Value* j, const values&) {
            llvm::Value* pix = b_.CreateMul(b_.CreateAdd(ow0, j), dst_ws);
            llvm::Value* pixel_off = b_.CreateAdd(row_off, pix);
            llvm::Value* at =
                b_.CreateGEP(vec_, out, b_.CreateAdd(b_.CreateMul(j, i64c(blocks)), i64c(k)));
            emit_if(
                with_ops,
                [&] {
                  b_.CreateCall(post_ops_, {params_, binary_, at, c0, valid_of(k), pixel_off});
                },
                "post");
            llvm::Value* v = b_.CreateAlignedLoad(vec_, at, llvm::Align(64));
            store_dst_channels(gep(dst, pixel_off), c0, valid_of(k), mask_of(k), v);
            return values{};
          },
          "store");
    }
  }

  // The accumulators of owb pixels by `blocks` 16-channel blocks: each
  // starts at the bias of its channels (masked lanes 0), or +0 without one.
  values initial_accumulators(llvm::Value* bias, int owb, int blocks,
                              const std::function<llvm::Value*(int)>& c0_of,
                              const std::function<llvm::Value*(int)>& mask_of) {
    const values start = emit_multi_choice(
        flag(gc_with_bias),
        [&] {
          values v;
          for (int k = 0; k < blocks; ++k) v.push_back(load_dense(bias, c0_of(k), mask_of(k)));
          return v;
        },
        [&] { return values(static_cast<std::size_t>(blocks), zero_vec()); });
    values init;
    for (int j = 0; j < owb; ++j)
      for (int k = 0; k < blocks; ++k) init.push_back(start[k]);
    return init;
  }

  // Several values chosen together by cond.
  values emit_multi_choice(llvm::Value* cond, const std::function<values()>& yes,
                           const std::function<values()>& no) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* y = llvm::BasicBlock::Create(ctx_, "choice.yes", fn);
    auto* n = llvm::BasicBlock::Create(ctx_, "choice.no", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, "choice.done", fn);
    b_.CreateCondBr(cond, y, n);
    b_.SetInsertPoint(y);
    values vy = yes();
    llvm::BasicBlock* from_y = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(n);
    values vn = no();
    llvm::BasicBlock* from_n = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    values out;
    for (std::size_t i = 0; i < vy.size(); ++i) {
      llvm::PHINode* phi = b_.CreatePHI(vy[i]->getType(), 2);
      phi->addIncoming(vy[i], from_y);
      phi->addIncoming(vn[i], from_n);
      out.push_back(phi);
    }
    return out;
  }

  const generic_conv_tiles tiles_;
  const generic_dw_tiles dw_tiles_;
  const bool masked_edges_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* f32_;
  llvm::Type* i64_;
  llvm::Type* i32_;
  llvm::Type* ptr_;
  llvm::FixedVectorType* vec_;
  llvm::Value* params_ = nullptr;
  llvm::Value* binary_ = nullptr;
  llvm::Value* tile_ = nullptr;
  llvm::Function* post_ops_ = nullptr;
};

}  // namespace

void generate_generic_conv(cpu_isa isa, llvm::Module& m) {
  generic_conv_generator(isa, m).build();
}

}  // namespace primcache::cpu_internal
