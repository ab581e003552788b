#include "kernels/generic_matmul_generator.hpp"

#include <array>
#include <functional>
#include <string>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "jit/ir_loop.hpp"
#include "kernels/post_ops.hpp"

namespace primcache::cpu_internal {

generic_matmul_shape generic_matmul_shape_for(cpu_isa isa) noexcept {
  // The specialized heuristic's most frequent tiles (matmul_config.cpp):
  // 8 x 3 vectors of 16 (27 of 32 registers), 6 x 2 vectors of 8 (15 of 16).
  if (isa >= cpu_isa::avx512_core) return {16, 8, 3};
  return {8, 6, 2};
}

std::string generic_matmul_name(cpu_isa isa) {
  return "matmul_generic_" + std::string(to_string(isa));
}

namespace {

using values = ir_values;

class generic_matmul_generator {
 public:
  generic_matmul_generator(cpu_isa isa, llvm::Module& m)
      : shape_(generic_matmul_shape_for(isa)),
        lanes_(shape_.lanes),
        nv_(shape_.nv),
        mr_(shape_.mr),
        nr_(shape_.nr()),
        m_(m),
        ctx_(m.getContext()),
        b_(ctx_),
        f32_(b_.getFloatTy()),
        i64_(b_.getInt64Ty()),
        i32_(b_.getInt32Ty()),
        ptr_(llvm::PointerType::get(ctx_, 0)),
        vec_(llvm::FixedVectorType::get(f32_, lanes_)) {}

  void build() {
    post_ops_ = build_post_ops();
    pack_ = build_pack();
    micro_.assign(static_cast<std::size_t>(mr_) + 1, {nullptr, nullptr});
    for (int rows = 1; rows <= mr_; ++rows) {
      for (int tail = 0; tail < 2; ++tail) {
        micro_[rows][tail] = build_micro_kernel(
            rows, tail != 0,
            "matmul_generic_micro_" + std::to_string(rows) + (tail ? "_tail" : "_full"));
      }
    }
    build_driver();
  }

 private:
  llvm::Value* i64c(std::int64_t v) { return llvm::ConstantInt::get(i64_, v); }
  llvm::Value* gep(llvm::Value* base, llvm::Value* index) {
    return b_.CreateGEP(f32_, base, index);
  }
  llvm::Value* gep(llvm::Value* base, std::int64_t index) { return gep(base, i64c(index)); }
  llvm::Value* smin(llvm::Value* x, llvm::Value* y) {
    return b_.CreateSelect(b_.CreateICmpSLT(x, y), x, y);
  }
  llvm::Value* div_up(llvm::Value* x, llvm::Value* y) {
    return b_.CreateSDiv(b_.CreateAdd(x, b_.CreateSub(y, i64c(1))), y);
  }
  llvm::Value* zero_vec() { return llvm::Constant::getNullValue(vec_); }
  llvm::Value* splat(llvm::Value* s) { return b_.CreateVectorSplat(lanes_, s); }

  // Slot `slot` of the parameter block (slot may be a value).
  llvm::Value* slot_ptr(llvm::Value* params, llvm::Value* slot) {
    return b_.CreateGEP(i64_, params, slot);
  }
  llvm::Value* param(llvm::Value* params, int slot) {
    return b_.CreateAlignedLoad(i64_, slot_ptr(params, i64c(slot)), llvm::Align(8));
  }
  llvm::Value* param_at(llvm::Value* params, llvm::Value* slot) {
    return b_.CreateAlignedLoad(i64_, slot_ptr(params, slot), llvm::Align(8));
  }
  llvm::Value* param_f32_at(llvm::Value* params, llvm::Value* slot) {
    return b_.CreateAlignedLoad(f32_, slot_ptr(params, slot), llvm::Align(8));
  }

  llvm::Function* declare(const std::string& name, llvm::Type* ret,
                          llvm::ArrayRef<llvm::Type*> params, bool external) {
    auto* fn = llvm::Function::Create(
        llvm::FunctionType::get(ret, params, false),
        external ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage, name, m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    if (!external) fn->addFnAttr(llvm::Attribute::NoInline);
    return fn;
  }

  // <lanes x i1>: lane i < n (n an i64 value; negative: no lane).
  llvm::Value* lane_mask(llvm::Value* n) {
    std::vector<llvm::Constant*> iota;
    for (int i = 0; i < lanes_; ++i) iota.push_back(b_.getInt32(i));
    llvm::Value* n32 = b_.CreateTrunc(smin(n, i64c(lanes_)), i32_);
    return b_.CreateICmpSLT(llvm::ConstantVector::get(iota), b_.CreateVectorSplat(lanes_, n32));
  }
  // A whole vector (mask null) or the masked lanes (others read as 0).
  llvm::Value* load_vec(llvm::Value* p, llvm::Value* mask) {
    if (mask == nullptr) return b_.CreateAlignedLoad(vec_, p, llvm::Align(4));
    return b_.CreateMaskedLoad(vec_, p, llvm::Align(4), mask, zero_vec());
  }
  void store_vec(llvm::Value* v, llvm::Value* p, llvm::Value* mask) {
    if (mask == nullptr) {
      b_.CreateAlignedStore(v, p, llvm::Align(4));
    } else {
      b_.CreateMaskedStore(v, p, llvm::Align(4), mask);
    }
  }

  values emit_loop(llvm::Value* begin, llvm::Value* end, const values& init, const loop_body& body,
                   const char* name, std::int64_t step = 1) {
    return emit_counted_loop(b_, begin, end, step, init, body, loop_test::index_below_end, name)
        .carried;
  }
  // for t in [0, div_up(end - begin, step)): body(begin + t * step)
  void emit_block_loop(llvm::Value* begin, llvm::Value* end, llvm::Value* step,
                       const std::function<void(llvm::Value*)>& body, const char* name) {
    llvm::Value* count = div_up(b_.CreateSub(end, begin), step);
    emit_loop(
        i64c(0), count, {},
        [&](llvm::Value* t, const values&) {
          body(b_.CreateAdd(begin, b_.CreateMul(t, step)));
          return values{};
        },
        name);
  }
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

  // One post-op of the chain, picked at run time, applied to x: the IR
  // emit_post_ops emits for that post-op with its constants as values.
  llvm::Value* apply_post_op(llvm::Value* params, llvm::Value* i, llvm::Value* x,
                             llvm::Value* binary, llvm::Value* row_off, llvm::Value* col_at,
                             llvm::Value* mask) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::Value* base = b_.CreateAdd(i64c(gm_post_ops), b_.CreateMul(i, i64c(gm_post_op_slots)));
    llvm::Value* code = param_at(params, base);
    auto* done = llvm::BasicBlock::Create(ctx_, "op.done", fn);
    auto* binary_bb = llvm::BasicBlock::Create(ctx_, "op.binary", fn);
    llvm::SwitchInst* sw = b_.CreateSwitch(code, binary_bb, 8);
    b_.SetInsertPoint(done);
    llvm::PHINode* out = b_.CreatePHI(vec_, 9);

    auto alpha = [&] { return param_f32_at(params, b_.CreateAdd(base, i64c(3))); };
    auto beta = [&] { return param_f32_at(params, b_.CreateAdd(base, i64c(4))); };
    auto finish_eltwise = [&](llvm::Value* y) {
      // scale * f(x), multiplied only when scale != 1 (as emit_eltwise).
      llvm::Value* scale = param_f32_at(params, b_.CreateAdd(base, i64c(5)));
      llvm::Value* one = b_.CreateFCmpOEQ(scale, llvm::ConstantFP::get(f32_, 1.0));
      y = b_.CreateSelect(one, y, b_.CreateFMul(y, splat(scale)));
      out->addIncoming(y, b_.GetInsertBlock());
      b_.CreateBr(done);
    };
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
      finish_eltwise(y);
    }

    b_.SetInsertPoint(binary_bb);
    llvm::Value* arg = param_at(params, b_.CreateAdd(base, i64c(1)));
    llvm::Value* bc = param_at(params, b_.CreateAdd(base, i64c(2)));
    llvm::Value* operand_base =
        b_.CreateAlignedLoad(ptr_, b_.CreateGEP(ptr_, binary, arg), llvm::Align(8));
    auto* none_bb = llvm::BasicBlock::Create(ctx_, "op.binary.none", fn);
    auto* channel_bb = llvm::BasicBlock::Create(ctx_, "op.binary.channel", fn);
    auto* scalar_bb = llvm::BasicBlock::Create(ctx_, "op.binary.scalar", fn);
    llvm::SwitchInst* bsw = b_.CreateSwitch(bc, none_bb, 2);
    bsw->addCase(b_.getInt64(static_cast<int>(binary_broadcast::per_channel)), channel_bb);
    bsw->addCase(b_.getInt64(static_cast<int>(binary_broadcast::scalar)), scalar_bb);
    b_.SetInsertPoint(none_bb);
    out->addIncoming(b_.CreateFAdd(x, load_vec(gep(operand_base, row_off), mask)), none_bb);
    b_.CreateBr(done);
    b_.SetInsertPoint(channel_bb);
    out->addIncoming(b_.CreateFAdd(x, load_vec(gep(operand_base, col_at), mask)), channel_bb);
    b_.CreateBr(done);
    b_.SetInsertPoint(scalar_bb);
    llvm::Value* s = b_.CreateAlignedLoad(f32_, operand_base, llvm::Align(4));
    out->addIncoming(b_.CreateFAdd(x, splat(s)), scalar_bb);
    b_.CreateBr(done);

    b_.SetInsertPoint(done);
    return out;
  }

  // void post_ops(const i64* params, float* c, i64 ldc, i64 rows, i64 cols,
  //               const float* const* binary, i64 dst_off, i64 col):
  // applies the chain to the rows x cols tile at c (already holding
  // accumulators plus bias); dst_off is the tile's offset in dst (for
  // same-shape operands), col its first column (per-column operands).
  llvm::Function* build_post_ops() {
    llvm::Function* fn = declare("matmul_generic_post_ops", b_.getVoidTy(),
                                 {ptr_, ptr_, i64_, i64_, i64_, ptr_, i64_, i64_}, false);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* params = fn->getArg(0);
    llvm::Value* c = fn->getArg(1);
    llvm::Value* ldc = fn->getArg(2);
    llvm::Value* rows = fn->getArg(3);
    llvm::Value* cols = fn->getArg(4);
    llvm::Value* binary = fn->getArg(5);
    llvm::Value* dst_off = fn->getArg(6);
    llvm::Value* col = fn->getArg(7);
    llvm::Value* nops = param(params, gm_post_op_count);
    values masks;
    for (int v = 0; v < nv_; ++v) masks.push_back(lane_mask(b_.CreateSub(cols, i64c(v * lanes_))));
    emit_loop(
        i64c(0), rows, {},
        [&](llvm::Value* r, const values&) {
          for (int v = 0; v < nv_; ++v) {
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(r, ldc), i64c(std::int64_t{v} * lanes_));
            llvm::Value* at = gep(c, off);
            llvm::Value* x = load_vec(at, masks[v]);
            x = emit_loop(
                i64c(0), nops, {x},
                [&](llvm::Value* i, const values& cur) {
                  return values{apply_post_op(params, i, cur[0], binary, b_.CreateAdd(dst_off, off),
                                              b_.CreateAdd(col, i64c(std::int64_t{v} * lanes_)),
                                              masks[v])};
                },
                "ops")[0];
            store_vec(x, at, masks[v]);
          }
          return values{};
        },
        "rows");
    b_.CreateRetVoid();
    return fn;
  }

  // void pack(const i64* params, const float* wei_b, float* buf, i64 k0,
  //           i64 kc, i64 nb0, i64 nb1): weights rows [k0, k0 + kc) of
  // column blocks [nb0, nb1) into buf, block j at (j - nb0) * kc_max * nr,
  // row k at + k * nr, columns past N as zeros (the specialized packer's
  // layout).
  llvm::Function* build_pack() {
    llvm::Function* fn = declare("matmul_generic_pack", b_.getVoidTy(),
                                 {ptr_, ptr_, ptr_, i64_, i64_, i64_, i64_}, false);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* params = fn->getArg(0);
    llvm::Value* wei = fn->getArg(1);
    llvm::Value* buf = fn->getArg(2);
    llvm::Value* k0 = fn->getArg(3);
    llvm::Value* kc = fn->getArg(4);
    llvm::Value* n = param(params, gm_n);
    llvm::Value* sk = param(params, gm_wei_k_stride);
    llvm::Value* sn = param(params, gm_wei_n_stride);
    llvm::Value* kc_max = param(params, gm_kc);
    llvm::Value* dense = b_.CreateICmpEQ(sn, i64c(1));
    std::vector<llvm::Constant*> iota;
    for (int i = 0; i < lanes_; ++i) iota.push_back(b_.getInt64(i));
    llvm::Value* gather_idx =
        b_.CreateMul(llvm::ConstantVector::get(iota), b_.CreateVectorSplat(lanes_, sn));
    emit_loop(
        fn->getArg(5), fn->getArg(6), {},
        [&](llvm::Value* j, const values&) {
          llvm::Value* cols = smin(i64c(nr_), b_.CreateSub(n, b_.CreateMul(j, i64c(nr_))));
          values masks;
          for (int v = 0; v < nv_; ++v) {
            masks.push_back(lane_mask(b_.CreateSub(cols, i64c(v * lanes_))));
          }
          llvm::Value* src_col = gep(wei, b_.CreateMul(j, b_.CreateMul(i64c(nr_), sn)));
          llvm::Value* dst_blk = gep(
              buf, b_.CreateMul(b_.CreateSub(j, fn->getArg(5)), b_.CreateMul(kc_max, i64c(nr_))));
          auto rows = [&](bool contiguous) {
            emit_loop(
                i64c(0), kc, {},
                [&](llvm::Value* k, const values&) {
                  llvm::Value* src_row = gep(src_col, b_.CreateMul(b_.CreateAdd(k, k0), sk));
                  llvm::Value* dst_row = gep(dst_blk, b_.CreateMul(k, i64c(nr_)));
                  for (int v = 0; v < nv_; ++v) {
                    llvm::Value* at =
                        gep(src_row, b_.CreateMul(i64c(std::int64_t{v} * lanes_), sn));
                    llvm::Value* x =
                        contiguous ? load_vec(at, masks[v])
                                   : b_.CreateMaskedGather(vec_, b_.CreateGEP(f32_, at, gather_idx),
                                                           llvm::Align(4), masks[v], zero_vec());
                    b_.CreateAlignedStore(x, gep(dst_row, std::int64_t{v} * lanes_),
                                          llvm::Align(4));
                  }
                  return values{};
                },
                contiguous ? "pack.k" : "pack.k.strided");
          };
          llvm::Function* f = b_.GetInsertBlock()->getParent();
          auto* yes = llvm::BasicBlock::Create(ctx_, "pack.dense", f);
          auto* no = llvm::BasicBlock::Create(ctx_, "pack.strided", f);
          auto* done = llvm::BasicBlock::Create(ctx_, "pack.done", f);
          b_.CreateCondBr(dense, yes, no);
          b_.SetInsertPoint(yes);
          rows(true);
          b_.CreateBr(done);
          b_.SetInsertPoint(no);
          rows(false);
          b_.CreateBr(done);
          b_.SetInsertPoint(done);
          return values{};
        },
        "pack.j");
    b_.CreateRetVoid();
    return fn;
  }

  // void micro(const i64* params, const float* a, const float* bp, float* c,
  //            i64 kc, i32 flags, const float* bias, const float* const* binary,
  //            i64 dst_off, i64 col, i64 cols, i64 ldb): as the specialized
  // micro-kernel (matmul_generator.cpp) for `rows` rows and, with `tail`,
  // cols < nr columns; bp is B's first row for this tile, ldb floats apart:
  // a packed panel (ldb nr, zero-padded) or the weights in place (their K
  // stride; the tail variant reads only the columns before N).
  llvm::Function* build_micro_kernel(int rows, bool tail, const std::string& name) {
    llvm::Function* fn =
        declare(name, b_.getVoidTy(),
                {ptr_, ptr_, ptr_, ptr_, i64_, i32_, ptr_, ptr_, i64_, i64_, i64_, i64_}, false);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* params = fn->getArg(0);
    llvm::Value* a = fn->getArg(1);
    llvm::Value* bp = fn->getArg(2);
    llvm::Value* c = fn->getArg(3);
    llvm::Value* kc = fn->getArg(4);
    llvm::Value* flags = fn->getArg(5);
    llvm::Value* col = fn->getArg(9);
    llvm::Value* cols = fn->getArg(10);
    llvm::Value* ldb = fn->getArg(11);
    llvm::Value* sam = param(params, gm_src_m_stride);
    llvm::Value* sak = param(params, gm_src_k_stride);
    llvm::Value* ldc = param(params, gm_dst_m_stride);
    values masks(nv_, nullptr);
    if (tail) {
      for (int v = 0; v < nv_; ++v) masks[v] = lane_mask(b_.CreateSub(cols, i64c(v * lanes_)));
    }
    auto c_at = [&](int r, int v) {
      return gep(c, b_.CreateAdd(b_.CreateMul(i64c(r), ldc), i64c(std::int64_t{v} * lanes_)));
    };
    values a_rows;
    for (int r = 0; r < rows; ++r) a_rows.push_back(gep(a, b_.CreateMul(i64c(r), sam)));

    // Initial accumulators: zeros for the first K block, else dst.
    llvm::BasicBlock* entry = b_.GetInsertBlock();
    auto* from_c = llvm::BasicBlock::Create(ctx_, "init.load", fn);
    auto* start = llvm::BasicBlock::Create(ctx_, "init.done", fn);
    llvm::Value* first = b_.CreateICmpNE(b_.CreateAnd(flags, 1), b_.getInt32(0));
    b_.CreateCondBr(first, start, from_c);
    b_.SetInsertPoint(from_c);
    values loaded;
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < nv_; ++v) loaded.push_back(load_vec(c_at(r, v), masks[v]));
    }
    b_.CreateBr(start);
    b_.SetInsertPoint(start);
    values acc;
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      llvm::PHINode* phi = b_.CreatePHI(vec_, 2);
      phi->addIncoming(zero_vec(), entry);
      phi->addIncoming(loaded[i], from_c);
      acc.push_back(phi);
    }

    // One K step, as the specialized kernel's: nv loads of B, one broadcast
    // of A per row, rows * nv fused multiply-adds, in k order.
    auto step = [&](llvm::Value* k, std::int64_t dk, values cur) {
      llvm::Value* kk = dk == 0 ? k : b_.CreateAdd(k, i64c(dk));
      llvm::Value* brow = gep(bp, b_.CreateMul(kk, ldb));
      llvm::Value* koff = b_.CreateMul(kk, sak);
      values bv;
      for (int v = 0; v < nv_; ++v) {
        bv.push_back(load_vec(gep(brow, std::int64_t{v} * lanes_), masks[v]));
      }
      for (int r = 0; r < rows; ++r) {
        llvm::Value* s = b_.CreateAlignedLoad(f32_, gep(a_rows[r], koff), llvm::Align(4));
        llvm::Value* sp = splat(s);
        for (int v = 0; v < nv_; ++v) {
          llvm::Value*& x = cur[r * nv_ + v];
          x = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_}, {sp, bv[v], x});
        }
      }
      return cur;
    };
    constexpr std::int64_t u = 4;
    llvm::Value* kmain = b_.CreateMul(b_.CreateUDiv(kc, i64c(u)), i64c(u));
    acc = emit_loop(
        i64c(0), kmain, acc,
        [&](llvm::Value* k, const values& cur) {
          values x = cur;
          for (std::int64_t d = 0; d < u; ++d) x = step(k, d, x);
          return x;
        },
        "k", u);
    acc = emit_loop(
        kmain, kc, acc, [&](llvm::Value* k, const values& cur) { return step(k, 0, cur); },
        "k.rem");

    auto store_all = [&](const values& x) {
      for (int r = 0; r < rows; ++r) {
        for (int v = 0; v < nv_; ++v) store_vec(x[r * nv_ + v], c_at(r, v), masks[v]);
      }
    };
    auto* epi = llvm::BasicBlock::Create(ctx_, "epilogue", fn);
    auto* plain = llvm::BasicBlock::Create(ctx_, "partial", fn);
    llvm::Value* last = b_.CreateICmpNE(b_.CreateAnd(flags, 2), b_.getInt32(0));
    b_.CreateCondBr(last, epi, plain);
    b_.SetInsertPoint(plain);
    store_all(acc);
    b_.CreateRetVoid();

    b_.SetInsertPoint(epi);
    auto* with_bias = llvm::BasicBlock::Create(ctx_, "epilogue.bias", fn);
    auto* no_bias = llvm::BasicBlock::Create(ctx_, "epilogue.nobias", fn);
    auto* post = llvm::BasicBlock::Create(ctx_, "epilogue.post", fn);
    b_.CreateCondBr(b_.CreateICmpNE(param(params, gm_with_bias), i64c(0)), with_bias, no_bias);
    b_.SetInsertPoint(with_bias);
    {
      llvm::Value* bias_col = gep(fn->getArg(6), col);
      values x = acc;
      for (int v = 0; v < nv_; ++v) {
        llvm::Value* bv = load_vec(gep(bias_col, std::int64_t{v} * lanes_), masks[v]);
        for (int r = 0; r < rows; ++r) x[r * nv_ + v] = b_.CreateFAdd(x[r * nv_ + v], bv);
      }
      store_all(x);
    }
    b_.CreateBr(post);
    b_.SetInsertPoint(no_bias);
    store_all(acc);
    b_.CreateBr(post);
    b_.SetInsertPoint(post);
    emit_if(
        b_.CreateICmpSGT(param(params, gm_post_op_count), i64c(0)),
        [&] {
          b_.CreateCall(post_ops_, {params, c, ldc, i64c(rows), tail ? cols : i64c(nr_),
                                    fn->getArg(7), fn->getArg(8), col});
        },
        "post");
    b_.CreateRetVoid();
    return fn;
  }

  // The exported function; see generic_matmul_function.
  void build_driver() {
    llvm::Function* fn =
        declare(generic_matmul_symbol, b_.getVoidTy(),
                {ptr_, ptr_, ptr_, ptr_, ptr_, ptr_, ptr_, i64_, i64_, i64_, i64_, i64_}, true);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* params = fn->getArg(0);
    llvm::Value* bias = fn->getArg(3);
    llvm::Value* binary = fn->getArg(5);
    llvm::Value* pack = fn->getArg(6);
    llvm::Value* batch = fn->getArg(7);
    llvm::Value* mb0 = fn->getArg(8);
    llvm::Value* mb1 = fn->getArg(9);
    llvm::Value* nb0 = fn->getArg(10);
    llvm::Value* nb1 = fn->getArg(11);
    llvm::Value* m = param(params, gm_m);
    llvm::Value* n = param(params, gm_n);
    llvm::Value* k = param(params, gm_k);
    llvm::Value* sam = param(params, gm_src_m_stride);
    llvm::Value* sak = param(params, gm_src_k_stride);
    llvm::Value* ldc = param(params, gm_dst_m_stride);
    llvm::Value* kc = param(params, gm_kc);
    llvm::Value* mcb = param(params, gm_mc_blocks);
    llvm::Value* ncb = param(params, gm_nc_blocks);
    llvm::Value* prepacked = b_.CreateICmpNE(param(params, gm_prepacked), i64c(0));
    llvm::Value* pack_b = b_.CreateICmpNE(param(params, gm_pack_b), i64c(0));
    llvm::Value* swk = param(params, gm_wei_k_stride);
    llvm::Value* src = gep(fn->getArg(1), b_.CreateMul(batch, param(params, gm_src_batch_stride)));
    llvm::Value* wei = gep(fn->getArg(2), b_.CreateMul(batch, param(params, gm_wei_batch_stride)));
    llvm::Value* dst_off_b = b_.CreateMul(batch, param(params, gm_dst_batch_stride));
    llvm::Value* dst = gep(fn->getArg(4), dst_off_b);

    emit_block_loop(
        nb0, nb1, ncb,
        [&](llvm::Value* jc) {
          llvm::Value* jce = smin(b_.CreateAdd(jc, ncb), nb1);
          emit_block_loop(
              i64c(0), k, kc,
              [&](llvm::Value* pc) {
                llvm::Value* kcur = smin(kc, b_.CreateSub(k, pc));
                llvm::Value* first = b_.CreateZExt(b_.CreateICmpEQ(pc, i64c(0)), i32_);
                llvm::Value* last = b_.CreateZExt(b_.CreateICmpSGE(b_.CreateAdd(pc, kc), k), i32_);
                llvm::Value* flags = b_.CreateOr(first, b_.CreateShl(last, 1));
                emit_if(
                    pack_b,
                    [&] {
                      b_.CreateCall(pack_, {params, wei, pack, pc, kcur, jc, jce});
                    },
                    "pack");
                emit_block_loop(
                    mb0, mb1, mcb,
                    [&](llvm::Value* ic) {
                      llvm::Value* ice = smin(b_.CreateAdd(ic, mcb), mb1);
                      emit_loop(
                          ic, ice, {},
                          [&](llvm::Value* ir, const values&) {
                            llvm::Value* row = b_.CreateMul(ir, i64c(mr_));
                            llvm::Value* rows = smin(i64c(mr_), b_.CreateSub(m, row));
                            llvm::Value* a = gep(
                                src, b_.CreateAdd(b_.CreateMul(row, sam), b_.CreateMul(pc, sak)));
                            emit_loop(
                                jc, jce, {},
                                [&](llvm::Value* jr, const values&) {
                                  emit_tile(params, a, wei, pack, dst, dst_off_b, bias, binary, k,
                                            kc, pc, kcur, flags, prepacked, pack_b, swk, ldc, n,
                                            row, rows, jc, jr);
                                  return values{};
                                },
                                "jr");
                            return values{};
                          },
                          "ir");
                    },
                    "ic");
              },
              "pc");
        },
        "jc");
    b_.CreateRetVoid();
  }

  void emit_tile(llvm::Value* params, llvm::Value* a, llvm::Value* wei, llvm::Value* pack,
                 llvm::Value* dst, llvm::Value* dst_off_b, llvm::Value* bias, llvm::Value* binary,
                 llvm::Value* k, llvm::Value* kc, llvm::Value* pc, llvm::Value* kcur,
                 llvm::Value* flags, llvm::Value* prepacked, llvm::Value* pack_b, llvm::Value* swk,
                 llvm::Value* ldc, llvm::Value* n, llvm::Value* row, llvm::Value* rows,
                 llvm::Value* jc, llvm::Value* jr) {
    llvm::Value* col = b_.CreateMul(jr, i64c(nr_));
    llvm::Value* cols = smin(i64c(nr_), b_.CreateSub(n, col));
    // Prepacked: column block jr holds K rows of nr floats; packed here:
    // the panel packed for [jc, jce) at K offset pc; else the weights'
    // rows in place (dense along N), from row pc and column col.
    llvm::Value* from_weights = gep(wei, b_.CreateAdd(b_.CreateMul(jr, b_.CreateMul(k, i64c(nr_))),
                                                      b_.CreateMul(pc, i64c(nr_))));
    llvm::Value* from_pack =
        gep(pack, b_.CreateMul(b_.CreateSub(jr, jc), b_.CreateMul(kc, i64c(nr_))));
    llvm::Value* in_place = gep(wei, b_.CreateAdd(b_.CreateMul(pc, swk), col));
    llvm::Value* bp =
        b_.CreateSelect(prepacked, from_weights, b_.CreateSelect(pack_b, from_pack, in_place));
    llvm::Value* ldb = b_.CreateSelect(b_.CreateOr(prepacked, pack_b), i64c(nr_), swk);
    llvm::Value* off = b_.CreateAdd(b_.CreateMul(row, ldc), col);
    llvm::Value* c = gep(dst, off);
    llvm::Value* dst_off = b_.CreateAdd(dst_off_b, off);
    llvm::Value* full = b_.CreateICmpEQ(cols, i64c(nr_));
    std::vector<llvm::Value*> args = {params, a,      bp,      c,   kcur, flags,
                                      bias,   binary, dst_off, col, cols, ldb};

    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* done = llvm::BasicBlock::Create(ctx_, "tile.done", fn);
    llvm::SwitchInst* sw = b_.CreateSwitch(rows, done, mr_);
    for (int r = 1; r <= mr_; ++r) {
      auto* bb = llvm::BasicBlock::Create(ctx_, "tile.rows", fn);
      sw->addCase(b_.getInt64(static_cast<std::uint64_t>(r)), bb);
      b_.SetInsertPoint(bb);
      auto* f = llvm::BasicBlock::Create(ctx_, "tile.full", fn);
      auto* t = llvm::BasicBlock::Create(ctx_, "tile.tail", fn);
      b_.CreateCondBr(full, f, t);
      b_.SetInsertPoint(f);
      b_.CreateCall(micro_[r][0], args);
      b_.CreateBr(done);
      b_.SetInsertPoint(t);
      b_.CreateCall(micro_[r][1], args);
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
  }

  const generic_matmul_shape shape_;
  const int lanes_;
  const int nv_;
  const int mr_;
  const int nr_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* f32_;
  llvm::Type* i64_;
  llvm::Type* i32_;
  llvm::Type* ptr_;
  llvm::FixedVectorType* vec_;
  llvm::Function* post_ops_ = nullptr;
  llvm::Function* pack_ = nullptr;
  std::vector<std::array<llvm::Function*, 2>> micro_;
};

}  // namespace

void generate_generic_matmul(cpu_isa isa, llvm::Module& m) {
  generic_matmul_generator(isa, m).build();
}

}  // namespace primcache::cpu_internal
