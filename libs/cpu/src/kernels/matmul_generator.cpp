#include "kernels/matmul_generator.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "jit/ir_loop.hpp"
#include "jit/target.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/matmul_config.hpp"

namespace primcache::cpu_internal {

namespace {

using values = ir_values;

class matmul_generator {
 public:
  matmul_generator(const matmul_problem& p, const matmul_config& c, cpu_isa isa, llvm::Module& m)
      : p_(p),
        c_(c),
        lanes_(matmul_vector_lanes(isa)),
        post_op_group_(post_op_group(p.post_ops, isa_vector_bits(isa))),
        m_(m),
        ctx_(m.getContext()),
        b_(ctx_),
        f32_(b_.getFloatTy()),
        i64_(b_.getInt64Ty()),
        i32_(b_.getInt32Ty()),
        ptr_(llvm::PointerType::get(ctx_, 0)),
        vec_(llvm::FixedVectorType::get(f32_, lanes_)),
        mblocks_(div_up(p.m, c.mr)),
        nblocks_(div_up(p.n, c.nr)),
        m_tail_(static_cast<int>(p.m % c.mr)),
        n_tail_(static_cast<int>(p.n % c.nr)) {}

  void build() {
    if (c_.pack_b) {
      pack_full_ = build_pack(c_.nr, "matmul_pack");
      if (n_tail_ != 0) pack_tail_ = build_pack(n_tail_, "matmul_pack_tail");
    }
    for (int mt = 0; mt < 2; ++mt) {
      for (int nt = 0; nt < 2; ++nt) {
        const int rows = mt ? m_tail_ : c_.mr;
        const int cols = nt ? n_tail_ : c_.nr;
        if (rows == 0 || cols == 0) continue;
        micro_[mt][nt] = build_micro_kernel(
            rows, cols, "matmul_micro_" + std::to_string(rows) + "x" + std::to_string(cols));
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

  llvm::Function* declare(const std::string& name, llvm::Type* ret,
                          llvm::ArrayRef<llvm::Type*> params, bool external) {
    auto* fn = llvm::Function::Create(
        llvm::FunctionType::get(ret, params, false),
        external ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage, name, m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    if (!external) fn->addFnAttr(llvm::Attribute::NoInline);
    return fn;
  }

  // A <lanes x i1> constant with the first `n` lanes set.
  llvm::Constant* lane_mask(int n) {
    std::vector<llvm::Constant*> bits;
    for (int i = 0; i < lanes_; ++i) bits.push_back(b_.getInt1(i < n));
    return llvm::ConstantVector::get(bits);
  }
  llvm::Value* zero_vec() { return llvm::Constant::getNullValue(vec_); }

  // Loads `n` (1..lanes) consecutive floats; the others read as 0.
  llvm::Value* load_vec(llvm::Value* p, int n) {
    if (n >= lanes_) return b_.CreateAlignedLoad(vec_, p, llvm::Align(4));
    return b_.CreateMaskedLoad(vec_, p, llvm::Align(4), lane_mask(n), zero_vec());
  }
  void store_vec(llvm::Value* v, llvm::Value* p, int n) {
    if (n >= lanes_) {
      b_.CreateAlignedStore(v, p, llvm::Align(4));
    } else {
      b_.CreateMaskedStore(v, p, llvm::Align(4), lane_mask(n));
    }
  }
  // Loads n floats at p, p + stride, ...; the others read as 0.
  llvm::Value* gather_vec(llvm::Value* p, std::int64_t stride, int n) {
    std::vector<llvm::Constant*> idx;
    for (int i = 0; i < lanes_; ++i) idx.push_back(llvm::ConstantInt::get(i64_, i * stride));
    llvm::Value* ptrs = b_.CreateGEP(f32_, p, llvm::ConstantVector::get(idx));
    return b_.CreateMaskedGather(vec_, ptrs, llvm::Align(4), lane_mask(std::min(n, lanes_)),
                                 zero_vec());
  }

  // for (i = begin; i < end; i += step) carried = body(i, carried);
  // returns the carried values at exit. begin/end are i64 values.
  values emit_loop(llvm::Value* begin, llvm::Value* end, std::int64_t step, const values& init,
                   const loop_body& body, const char* name) {
    return emit_counted_loop(b_, begin, end, step, init, body, loop_test::index_below_end, name)
        .carried;
  }

  // Emits then() when cond holds (no values flow out).
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

  // void pack(const float* wei_b, float* buf, i64 k0, i64 kc, i64 nb0, i64 nb1):
  // copies weights rows [k0, k0 + kc) of column blocks [nb0, nb1) into
  // buf, block j at buf + (j - nb0) * kc_max * nr, row k at + k * nr, with
  // columns beyond N as zeros. `cols` is the width of every block in
  // [nb0, nb1) (nr, or the tail width for the single last block).
  llvm::Function* build_pack(int cols, const std::string& name) {
    llvm::Function* fn = declare(name, b_.getVoidTy(), {ptr_, ptr_, i64_, i64_, i64_, i64_}, false);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* wei = fn->getArg(0);
    llvm::Value* buf = fn->getArg(1);
    llvm::Value* k0 = fn->getArg(2);
    llvm::Value* kc = fn->getArg(3);
    const std::int64_t sk = p_.wei_strides[1];
    const std::int64_t sn = p_.wei_strides[2];
    const int nv = c_.nr / lanes_;
    emit_loop(
        fn->getArg(4), fn->getArg(5), 1, {},
        [&](llvm::Value* j, const values&) {
          llvm::Value* src_col = gep(wei, b_.CreateMul(j, i64c(c_.nr * sn)));
          llvm::Value* dst_blk =
              gep(buf, b_.CreateMul(b_.CreateSub(j, fn->getArg(4)), i64c(c_.kc * c_.nr)));
          // The source and destination rows are carried pointers, stepped
          // by constants.
          emit_loop(
              i64c(0), kc, 1, {gep(src_col, b_.CreateMul(k0, i64c(sk))), dst_blk},
              [&](llvm::Value*, const values& rows) {
                llvm::Value* src_row = rows[0];
                llvm::Value* dst_row = rows[1];
                for (int v = 0; v < nv; ++v) {
                  const int n = std::clamp(cols - v * lanes_, 0, lanes_);
                  llvm::Value* x = zero_vec();
                  if (n > 0) {
                    llvm::Value* at = gep(src_row, std::int64_t{v} * lanes_ * sn);
                    x = sn == 1 ? load_vec(at, n) : gather_vec(at, sn, n);
                  }
                  b_.CreateAlignedStore(x, gep(dst_row, std::int64_t{v} * lanes_), llvm::Align(4));
                }
                return values{gep(src_row, sk), gep(dst_row, c_.nr)};
              },
              "pack.k");
          return values{};
        },
        "pack.j");
    b_.CreateRetVoid();
    return fn;
  }

  // void micro(const float* a, const float* bp, float* c, i64 kc, i32 flags,
  //            const float* bias, const float* const* binary, i64 dst_off, i64 col):
  // c[rows x cols] (+)= a[rows x kc] * bp[kc x cols]; flags bit 0: first K
  // block (start from 0, else from c), bit 1: last K block (apply bias and
  // post-ops). a has src's strides, bp row stride ldb; dst_off is the
  // tile's element offset in dst (for same-shape binary operands), col its
  // first column (for per-column operands and bias).
  llvm::Function* build_micro_kernel(int rows, int cols, const std::string& name) {
    llvm::Function* fn = declare(name, b_.getVoidTy(),
                                 {ptr_, ptr_, ptr_, i64_, i32_, ptr_, ptr_, i64_, i64_}, false);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* a = fn->getArg(0);
    llvm::Value* bp = fn->getArg(1);
    llvm::Value* c = fn->getArg(2);
    llvm::Value* kc = fn->getArg(3);
    llvm::Value* flags = fn->getArg(4);
    const int nv = static_cast<int>(div_up(cols, lanes_));
    auto width = [&](int v) { return std::min(lanes_, cols - v * lanes_); };
    const std::int64_t sam = p_.src_strides[1];
    const std::int64_t sak = p_.src_strides[2];
    const bool packed_b = c_.pack_b || p_.prepacked_weights;
    const std::int64_t ldb = packed_b ? c_.nr : p_.wei_strides[1];
    const std::int64_t ldc = p_.dst_strides[1];
    // Without packing, B's columns past N are outside the tensor; packed
    // panels are zero-padded to nr.
    const bool mask_b = !packed_b;

    // Initial accumulators: zeros for the first K block, else dst.
    llvm::BasicBlock* entry = b_.GetInsertBlock();
    auto* from_c = llvm::BasicBlock::Create(ctx_, "init.load", fn);
    auto* start = llvm::BasicBlock::Create(ctx_, "init.done", fn);
    llvm::Value* first = b_.CreateICmpNE(b_.CreateAnd(flags, 1), b_.getInt32(0));
    b_.CreateCondBr(first, start, from_c);
    b_.SetInsertPoint(from_c);
    values loaded;
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < nv; ++v) {
        loaded.push_back(load_vec(gep(c, r * ldc + std::int64_t{v} * lanes_), width(v)));
      }
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

    // One K step at the rows `dk` past the carried pointers into A and B:
    // nv loads of B, one broadcast of A per row, rows * nv FMAs. The loops
    // step their pointers themselves (by constants), so every address is a
    // carried pointer plus a constant: code generation needs no loop strength
    // reduction to find that form.
    auto step = [&](llvm::Value* acol0, llvm::Value* brow0, std::int64_t dk, values cur) {
      llvm::Value* brow = dk == 0 ? brow0 : gep(brow0, dk * ldb);
      llvm::Value* acol = dk == 0 ? acol0 : gep(acol0, dk * sak);
      values bv;
      for (int v = 0; v < nv; ++v) {
        llvm::Value* at = gep(brow, std::int64_t{v} * lanes_);
        bv.push_back(mask_b ? load_vec(at, width(v)) : load_vec(at, lanes_));
      }
      for (int r = 0; r < rows; ++r) {
        llvm::Value* s = b_.CreateAlignedLoad(f32_, gep(acol, r * sam), llvm::Align(4));
        llvm::Value* splat = b_.CreateVectorSplat(lanes_, s);
        for (int v = 0; v < nv; ++v) {
          llvm::Value*& x = cur[r * nv + v];
          x = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_}, {splat, bv[v], x});
        }
      }
      return cur;
    };
    // The accumulators, then the pointers into A and B, carried around the
    // K loops.
    auto k_loop = [&](llvm::Value* begin, llvm::Value* end, std::int64_t u, const values& init,
                      const char* name) {
      return emit_loop(
          begin, end, u, init,
          [&](llvm::Value*, const values& cur) {
            const std::size_t n = cur.size() - 2;
            llvm::Value* acol = cur[n];
            llvm::Value* brow = cur[n + 1];
            values x(cur.begin(), cur.begin() + static_cast<std::ptrdiff_t>(n));
            for (std::int64_t d = 0; d < u; ++d) x = step(acol, brow, d, x);
            x.push_back(gep(acol, u * sak));
            x.push_back(gep(brow, u * ldb));
            return x;
          },
          name);
    };
    // The driver passes kc = min(c.kc, K - pc) for pc = 0, c.kc, ...: c.kc
    // and K % c.kc. When both are multiples of the unroll, the remainder
    // loop would never run and is not emitted.
    const std::int64_t u = c_.k_unroll;
    const bool remainder = (p_.k >= c_.kc && c_.kc % u != 0) || (p_.k % c_.kc) % u != 0;
    llvm::Value* kmain = !remainder ? kc : b_.CreateMul(b_.CreateUDiv(kc, i64c(u)), i64c(u));
    acc.push_back(a);
    acc.push_back(bp);
    acc = k_loop(i64c(0), kmain, u, acc, "k");
    if (remainder) acc = k_loop(kmain, kc, 1, acc, "k.rem");
    acc.resize(acc.size() - 2);

    auto store_all = [&](const values& x) {
      for (int r = 0; r < rows; ++r) {
        for (int v = 0; v < nv; ++v) {
          store_vec(x[r * nv + v], gep(c, r * ldc + std::int64_t{v} * lanes_), width(v));
        }
      }
    };
    // The sums go to dst as the K loop ends, also before an epilogue, which
    // reads them back a row at a time: an epilogue that took them as values
    // would keep every one live through it, and its temporaries (gelu_erf's
    // polynomials) made the register allocator spill accumulators inside
    // the K loop (one or two of 24 at 6x64, one of 8 at 2x64: a load and a
    // store per K step each). The round trip is a store and a load per
    // vector and tile, in L1.
    store_all(acc);
    const bool has_epilogue = p_.with_bias || !p_.post_ops.empty();
    if (!has_epilogue) {
      b_.CreateRetVoid();
      return fn;
    }
    auto* epi = llvm::BasicBlock::Create(ctx_, "epilogue", fn);
    auto* partial = llvm::BasicBlock::Create(ctx_, "partial", fn);
    llvm::Value* last = b_.CreateICmpNE(b_.CreateAnd(flags, 2), b_.getInt32(0));
    b_.CreateCondBr(last, epi, partial);
    b_.SetInsertPoint(partial);
    b_.CreateRetVoid();

    b_.SetInsertPoint(epi);
    llvm::Value* col = fn->getArg(8);
    llvm::Value* dst_off = fn->getArg(7);
    values bias;
    if (p_.with_bias) {
      llvm::Value* bias_col = gep(fn->getArg(5), col);
      for (int v = 0; v < nv; ++v) {
        bias.push_back(load_vec(gep(bias_col, std::int64_t{v} * lanes_), width(v)));
      }
    }
    // Operand pointers, and the operands that do not change along rows.
    const std::size_t nops = p_.post_ops.size();
    values op_ptr(nops, nullptr);
    std::vector<values> op_cols(nops);
    for (std::size_t i = 0; i < nops; ++i) {
      const post_op& op = p_.post_ops[i];
      if (op.what != post_op::kind::binary_add) continue;
      llvm::Value* slot = b_.CreateGEP(ptr_, fn->getArg(6), i64c(op.binary.arg_index));
      op_ptr[i] = b_.CreateAlignedLoad(ptr_, slot, llvm::Align(8));
      if (op.binary.broadcast == binary_broadcast::scalar) {
        llvm::Value* s = b_.CreateAlignedLoad(f32_, op_ptr[i], llvm::Align(4));
        op_cols[i].assign(nv, b_.CreateVectorSplat(lanes_, s));
      } else if (op.binary.broadcast == binary_broadcast::per_channel) {
        llvm::Value* base = gep(op_ptr[i], col);
        for (int v = 0; v < nv; ++v) {
          op_cols[i].push_back(load_vec(gep(base, std::int64_t{v} * lanes_), width(v)));
        }
      } else {
        op_ptr[i] = gep(op_ptr[i], dst_off);
      }
    }
    // One row of the tile per iteration, not the tile unrolled: the code of
    // an eltwise post-op (gelu_erf is about a hundred instructions a vector)
    // is emitted once per vector of a row instead of once per accumulator,
    // and its constants live in one iteration (a block materializes each
    // constant once: unrolled over 24 accumulators they stayed live through
    // the whole epilogue and the allocator spilled around them). A row's
    // vectors go through the post-ops joined (post_op_group: up to four
    // for a gelu), so that their dependency chains interleave. The
    // pointers into dst and into same-shape operands step by a row.
    values rows_init{c};
    std::vector<std::size_t> row_slot(nops, 0);  // operand i's pointer in the carried values
    for (std::size_t i = 0; i < nops; ++i) {
      const post_op& op = p_.post_ops[i];
      if (op.what != post_op::kind::binary_add || op.binary.broadcast != binary_broadcast::none) {
        continue;
      }
      row_slot[i] = rows_init.size();
      rows_init.push_back(op_ptr[i]);
    }
    emit_loop(
        i64c(0), i64c(rows), 1, rows_init,
        [&](llvm::Value*, const values& cur) {
          llvm::Value* c_row = cur[0];
          auto column = [&](std::size_t v) { return std::int64_t{static_cast<int>(v)} * lanes_; };
          auto valid = [&](std::size_t v) { return width(static_cast<int>(v)); };
          emit_post_ops(
              b_, static_cast<std::size_t>(nv), p_.post_ops, post_op_group_,
              [&](std::size_t v) {
                llvm::Value* x = load_vec(gep(c_row, column(v)), valid(v));
                return p_.with_bias ? b_.CreateFAdd(x, bias[v]) : x;
              },
              [&](int i, const binary_add_op& op, std::size_t v) -> llvm::Value* {
                if (op.broadcast != binary_broadcast::none) return op_cols[i][v];
                return load_vec(gep(cur[row_slot[i]], column(v)), valid(v));
              },
              [&](std::size_t v, llvm::Value* y) {
                store_vec(y, gep(c_row, column(v)), valid(v));
              });
          values next;
          for (llvm::Value* ptr : cur) next.push_back(gep(ptr, ldc));
          return next;
        },
        "epilogue.row");
    b_.CreateRetVoid();
    return fn;
  }

  // The exported function; see matmul_kernel::function.
  void build_driver() {
    llvm::Function* fn =
        declare(matmul_symbol, b_.getVoidTy(),
                {ptr_, ptr_, ptr_, ptr_, ptr_, ptr_, i64_, i64_, i64_, i64_, i64_}, true);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* batch = fn->getArg(6);
    llvm::Value* src = gep(fn->getArg(0), b_.CreateMul(batch, i64c(p_.src_strides[0])));
    // Prepacked weights: one packed copy per weights batch.
    const std::int64_t wei_batch_stride =
        p_.prepacked_weights ? matmul_packing::of(p_, c_).batch_stride() : p_.wei_strides[0];
    llvm::Value* wei = gep(fn->getArg(1), b_.CreateMul(batch, i64c(wei_batch_stride)));
    llvm::Value* bias = fn->getArg(2);
    llvm::Value* dst_off_b = b_.CreateMul(batch, i64c(p_.dst_strides[0]));
    llvm::Value* dst = gep(fn->getArg(3), dst_off_b);
    llvm::Value* binary = fn->getArg(4);
    llvm::Value* pack = fn->getArg(5);
    llvm::Value* mb0 = fn->getArg(7);
    llvm::Value* mb1 = fn->getArg(8);
    llvm::Value* nb0 = fn->getArg(9);
    llvm::Value* nb1 = fn->getArg(10);
    const std::int64_t ncb = c_.nc / c_.nr;
    const std::int64_t mcb = c_.mc / c_.mr;

    emit_loop(
        nb0, nb1, ncb, {},
        [&](llvm::Value* jc, const values&) {
          llvm::Value* jce = smin(b_.CreateAdd(jc, i64c(ncb)), nb1);
          emit_loop(
              i64c(0), i64c(p_.k), c_.kc, {},
              [&](llvm::Value* pc, const values&) {
                llvm::Value* kcur = smin(i64c(c_.kc), b_.CreateSub(i64c(p_.k), pc));
                llvm::Value* first = b_.CreateZExt(b_.CreateICmpEQ(pc, i64c(0)), i32_);
                llvm::Value* last = b_.CreateZExt(
                    b_.CreateICmpSGE(b_.CreateAdd(pc, i64c(c_.kc)), i64c(p_.k)), i32_);
                llvm::Value* flags = b_.CreateOr(first, b_.CreateShl(last, 1));
                if (c_.pack_b) emit_packing(wei, pack, pc, kcur, jc, jce);
                emit_loop(
                    mb0, mb1, mcb, {},
                    [&](llvm::Value* ic, const values&) {
                      llvm::Value* ice = smin(b_.CreateAdd(ic, i64c(mcb)), mb1);
                      tile_args t{src,  wei, bias, dst,   dst_off_b, binary,
                                  pack, pc,  kcur, flags, jc};
                      auto rows_loop = [&](llvm::Value* jr) {
                        emit_loop(
                            ic, ice, 1, {},
                            [&](llvm::Value* ir, const values&) {
                              emit_tile(t, ir, jr);
                              return values{};
                            },
                            "ir");
                      };
                      if (c_.n_inner) {
                        emit_loop(
                            ic, ice, 1, {},
                            [&](llvm::Value* ir, const values&) {
                              emit_loop(
                                  jc, jce, 1, {},
                                  [&](llvm::Value* jr, const values&) {
                                    emit_tile(t, ir, jr);
                                    return values{};
                                  },
                                  "jr");
                              return values{};
                            },
                            "ir");
                      } else {
                        emit_loop(
                            jc, jce, 1, {},
                            [&](llvm::Value* jr, const values&) {
                              rows_loop(jr);
                              return values{};
                            },
                            "jr");
                      }
                      return values{};
                    },
                    "ic");
                return values{};
              },
              "pc");
          return values{};
        },
        "jc");
    b_.CreateRetVoid();
  }

  llvm::Value* smin(llvm::Value* x, llvm::Value* y) {
    return b_.CreateSelect(b_.CreateICmpSLT(x, y), x, y);
  }

  // Packs column blocks [jc, jce): full blocks with the full packer, the
  // last block of the matrix with the tail packer when N % nr != 0.
  void emit_packing(llvm::Value* wei, llvm::Value* pack, llvm::Value* pc, llvm::Value* kcur,
                    llvm::Value* jc, llvm::Value* jce) {
    if (n_tail_ == 0) {
      b_.CreateCall(pack_full_, {wei, pack, pc, kcur, jc, jce});
      return;
    }
    llvm::Value* full_end = smin(jce, i64c(nblocks_ - 1));
    emit_if(
        b_.CreateICmpSLT(jc, full_end),
        [&] {
          b_.CreateCall(pack_full_, {wei, pack, pc, kcur, jc, full_end});
        },
        "pack.full");
    emit_if(
        b_.CreateICmpEQ(jce, i64c(nblocks_)),
        [&] {
          // The tail block sits at (nblocks - 1 - jc) in the buffer; the
          // packer indexes relative to its nb0, so shift the buffer.
          llvm::Value* at =
              gep(pack, b_.CreateMul(b_.CreateSub(i64c(nblocks_ - 1), jc), i64c(c_.kc * c_.nr)));
          b_.CreateCall(pack_tail_, {wei, at, pc, kcur, i64c(nblocks_ - 1), i64c(nblocks_)});
        },
        "pack.tail");
  }

  struct tile_args {
    llvm::Value *src, *wei, *bias, *dst, *dst_off_b, *binary, *pack, *pc, *kcur, *flags, *jc;
  };

  void emit_tile(const tile_args& t, llvm::Value* ir, llvm::Value* jr) {
    llvm::Value* row = b_.CreateMul(ir, i64c(c_.mr));
    llvm::Value* col = b_.CreateMul(jr, i64c(c_.nr));
    llvm::Value* a = gep(t.src, b_.CreateAdd(b_.CreateMul(row, i64c(p_.src_strides[1])),
                                             b_.CreateMul(t.pc, i64c(p_.src_strides[2]))));
    llvm::Value* bp = nullptr;
    if (p_.prepacked_weights) {
      // Column block jr holds K rows of nr floats.
      bp = gep(t.wei,
               b_.CreateAdd(b_.CreateMul(jr, i64c(p_.k * c_.nr)), b_.CreateMul(t.pc, i64c(c_.nr))));
    } else if (c_.pack_b) {
      bp = gep(t.pack, b_.CreateMul(b_.CreateSub(jr, t.jc), i64c(c_.kc * c_.nr)));
    } else {
      bp = gep(t.wei, b_.CreateAdd(b_.CreateMul(t.pc, i64c(p_.wei_strides[1])), col));
    }
    llvm::Value* off = b_.CreateAdd(b_.CreateMul(row, i64c(p_.dst_strides[1])), col);
    llvm::Value* c = gep(t.dst, off);
    llvm::Value* dst_off = b_.CreateAdd(t.dst_off_b, off);
    std::vector<llvm::Value*> args = {a, bp, c, t.kcur, t.flags, t.bias, t.binary, dst_off, col};

    auto call = [&](int mt, int nt) { b_.CreateCall(micro_[mt][nt], args); };
    auto by_n = [&](int mt) {
      if (n_tail_ == 0) {
        call(mt, 0);
        return;
      }
      llvm::Function* fn = b_.GetInsertBlock()->getParent();
      auto* full = llvm::BasicBlock::Create(ctx_, "n.full", fn);
      auto* tail = llvm::BasicBlock::Create(ctx_, "n.tail", fn);
      auto* done = llvm::BasicBlock::Create(ctx_, "n.done", fn);
      b_.CreateCondBr(b_.CreateICmpEQ(jr, i64c(nblocks_ - 1)), tail, full);
      b_.SetInsertPoint(full);
      call(mt, 0);
      b_.CreateBr(done);
      b_.SetInsertPoint(tail);
      call(mt, 1);
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    };
    if (m_tail_ == 0) {
      by_n(0);
      return;
    }
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* full = llvm::BasicBlock::Create(ctx_, "m.full", fn);
    auto* tail = llvm::BasicBlock::Create(ctx_, "m.tail", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, "m.done", fn);
    b_.CreateCondBr(b_.CreateICmpEQ(ir, i64c(mblocks_ - 1)), tail, full);
    b_.SetInsertPoint(full);
    by_n(0);
    b_.CreateBr(done);
    b_.SetInsertPoint(tail);
    by_n(1);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  const matmul_problem& p_;
  const matmul_config& c_;
  const int lanes_;
  // Vectors of a row the epilogue passes through the post-ops at once.
  const int post_op_group_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* f32_;
  llvm::Type* i64_;
  llvm::Type* i32_;
  llvm::Type* ptr_;
  llvm::FixedVectorType* vec_;
  const std::int64_t mblocks_;
  const std::int64_t nblocks_;
  const int m_tail_;
  const int n_tail_;
  llvm::Function* pack_full_ = nullptr;
  llvm::Function* pack_tail_ = nullptr;
  llvm::Function* micro_[2][2] = {};
};
}  // namespace

void generate_matmul(const matmul_problem& p, const matmul_config& c, cpu_isa isa,
                     llvm::Module& m) {
  matmul_generator(p, c, isa, m).build();
}

std::string matmul_module_name(const matmul_problem& p) {
  return "matmul_f32_" + std::to_string(p.batch) + "x" + std::to_string(p.m) + "x" +
         std::to_string(p.n) + "x" + std::to_string(p.k) + (p.prepacked_weights ? "_packed" : "");
}

}  // namespace primcache::cpu_internal
