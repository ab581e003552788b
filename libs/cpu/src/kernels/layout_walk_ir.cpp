#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <string>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include "jit/ir_loop.hpp"
#include "jit/ir_math.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/layout_walk.hpp"
#include "kernels/layout_walk_ir.hpp"

namespace primcache::cpu_internal {
namespace {

class walk_emitter {
 public:
  walk_emitter(llvm::Module& m, const walk_plan& p, const walk_codegen& g)
      : m_(m), ctx_(m.getContext()), b_(ctx_), p_(p), g_(g) {}

  void emit(const std::string& symbol);

 private:
  using body_fn = std::function<void(llvm::Value*)>;

  llvm::Value* c64(std::int64_t v) { return b_.getInt64(static_cast<std::uint64_t>(v)); }
  llvm::Type* shaped(llvm::Type* t, int n) {
    return n == 1 ? t : static_cast<llvm::Type*>(llvm::FixedVectorType::get(t, n));
  }
  llvm::Type* storage_type(data_type dt) { return walk_storage_type(b_, dt, raw_); }

  llvm::Value* emit_loop(llvm::Value* start, llvm::Value* end, std::int64_t step,
                         const body_fn& body);
  void emit_if(llvm::Value* cond, const std::function<void()>& then_fn,
               const std::function<void()>& else_fn = {});

  llvm::Value* load_lanes(llvm::Value* base, llvm::Type* ety, llvm::Value* off, int n,
                          std::int64_t stride);
  void store_lanes(llvm::Value* v, llvm::Value* base, llvm::Type* ety, llvm::Value* off, int n,
                   std::int64_t stride);
  // A full vector's store to consecutive dst elements: non-temporal (and
  // vector-aligned) inside the aligned copy of a non-temporal walk.
  void store_dense(llvm::Value* v, llvm::Value* off, int n);
  // Whether element `off` of dst starts a `bytes`-aligned address.
  llvm::Value* dst_aligned(llvm::Value* off, std::int64_t bytes);
  // Emits `body` twice behind a test of `aligned`: once with non-temporal
  // stores (aligned true), once with ordinary ones.
  void emit_nt_versions(llvm::Value* aligned, const std::function<void()>& body);
  llvm::Value* to_value(llvm::Value* x);
  llvm::Value* from_value(llvm::Value* v);
  llvm::Value* splat(llvm::Value* s, int n) { return n == 1 ? s : b_.CreateVectorSplat(n, s); }

  // The logical index of dim d at (i, j) of the inner loops (null i: none).
  llvm::Value* logical(int d, llvm::Value* i, llvm::Value* j);
  // `live` (null: every lane): the lanes, a prefix, whose scales may be
  // read; the others get zero.
  llvm::Value* scale_for(llvm::Value* i, llvm::Value* j, int n, llvm::Value* live = nullptr);
  walk_lanes lanes_at(llvm::Value* i, llvm::Value* j, llvm::Value* dst_off);
  llvm::Value* finish_value(llvm::Value* v, llvm::Value* i, llvm::Value* j, int n,
                            llvm::Value* dst_off, llvm::Value* live = nullptr);
  // True when every element with inner indices up to (i_last, j_last) is real.
  llvm::Value* all_real(llvm::Value* i_last, llvm::Value* j_last);

  void emit_element(llvm::Value* i, llvm::Value* j);
  void emit_vector(llvm::Value* j, int n);
  void emit_stream(llvm::Value* s0, llvm::Value* s1);
  // A stream over blocks of a padded dimension (walk_loop::period): whole
  // vectors where the work item's block is real, else emit_masked_vector's.
  void emit_block_stream(llvm::Value* s0, llvm::Value* s1);
  // The <n x i1> lanes k whose place in their block, (first + k) % period
  // (period a power of two), is below `count` (an i64).
  llvm::Value* block_lanes_below(llvm::Value* first, int n, std::int64_t period,
                                 llvm::Value* count);
  // n lanes at j (unit strides) whose real lanes are `real` and in-bound
  // lanes `bound` (<n x i1>): src read in the real lanes only (so are the
  // transform's operands, live_lanes_, and with `live`, the real lanes' count
  // when they are a prefix, the per-dimension scales), dst's padding in
  // bound stored as zero, stored whole when `whole`, else through `bound`.
  // `bound_count`: the in-bound lanes' count where they are a prefix (the
  // runs of a joined loop need both counts).
  void emit_masked_vector(llvm::Value* j, int n, llvm::Value* real, llvm::Value* bound, bool whole,
                          llvm::Value* live = nullptr, llvm::Value* bound_count = nullptr);
  // A vector of a stream along a padded dimension that is not all real,
  // clipped to its real lanes (a prefix) by emit_masked_vector.
  void emit_clipped_vector(llvm::Value* j, int n);
  // True when every padded dimension walked by the outer loops is in bound.
  llvm::Value* outer_bound();
  bool stream_clips_ = false;  // a stream along a padded dimension, unit strides
  void emit_tile(llvm::Value* i, llvm::Value* j, int ri, int rj);
  // A row of `ri` loaded elements (a scalar when ri is 1) as one of a
  // tile's rows of g_.tile lanes (type row_ty); the lanes past ri are
  // poison, or, with `zeros`, zero where the shape lets them be (the
  // clipped tile's: its rows are stored through masks).
  llvm::Value* tile_row(llvm::Value* x, llvm::Type* row_ty, int ri, bool zeros);
  // A tile of ri x rj with elements that are not real, clipped to its real
  // part: the real rows and columns (prefixes, as no padded dimension steps
  // along both I and J: tile_clips_) loaded whole or by masked loads, the
  // others not read, transposed as emit_tile's, dst's padding among the
  // in-bound rows and columns stored as zero, the rest untouched. The
  // counts are constants where the tile's place is (the padding inside one
  // block along J, as nchw to nChw16c with 3 channels), so the element
  // loops this replaces (256 tests and scalar moves per tile of 16, which
  // the loop vectorizer turned into scatters) become a few loads and whole
  // stores.
  void emit_clipped_tile(llvm::Value* i, llvm::Value* j, int ri, int rj);
  // How many of `limit` elements, the e-th at index l + e * mult (mult >
  // 0), have an index below `end`: 0 ... limit.
  llvm::Value* count_below(std::int64_t end, llvm::Value* l, std::int64_t mult, int limit);
  // The element offset of iteration j of a loop of `stride`, walked in runs
  // of `run` iterations `run_stride` apart (run 0: none).
  llvm::Value* along_j(llvm::Value* j, std::int64_t stride, std::int64_t run,
                       std::int64_t run_stride);
  // The src element offset, from the work item's base, of the innermost
  // loop's iteration j (in runs where the loop is joined: join_dst_runs).
  llvm::Value* src_along_j(llvm::Value* j);
  // n elements of the stream from j on (j a multiple of n, or of the run):
  // one load, or one per run of a joined loop; `mask` (null: all) selects
  // the lanes read, the others zero; with runs, `count` is the selected
  // lanes' count (they are a prefix).
  llvm::Value* load_stream(llvm::Value* j, int n, llvm::Value* mask, llvm::Value* count = nullptr);
  // The same for dst (join_src_runs).
  llvm::Value* dst_along_j(llvm::Value* j);
  // Stores v, n elements of the stream from j on, whole (mask null) or in
  // the lanes of `mask` (with runs, a prefix of `count` lanes): one store,
  // or one per run of a joined loop.
  void store_stream(llvm::Value* v, llvm::Value* j, int n, llvm::Value* mask,
                    llvm::Value* count = nullptr);
  llvm::Value* smin(llvm::Value* a, llvm::Value* b) {
    return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b);
  }
  bool tile_clips_ = false;  // no padded dimension steps along both I and J
  void emit_tiles(llvm::Value* s0, llvm::Value* s1);

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const walk_plan& p_;
  const walk_codegen& g_;
  bool raw_ = false;
  bool checks_ = false;  // some dimension is not exact
  bool nt_ = false;      // dense full-vector stores are non-temporal (and aligned)
  llvm::Type* src_ty_ = nullptr;
  llvm::Type* dst_ty_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::Value* src_ = nullptr;
  llvm::Value* dst_ = nullptr;
  llvm::Value* scales_ = nullptr;
  llvm::Value* operands_ = nullptr;
  llvm::Value* common_scale_ = nullptr;
  // Per work item.
  llvm::Value* src_base_ = nullptr;
  llvm::Value* dst_base_ = nullptr;
  std::array<llvm::Value*, max_ndims> outer_l_{};
  llvm::Value* outer_real_ = nullptr;
  llvm::Value* live_lanes_ = nullptr;  // see walk_lanes::live
  const walk_loop* li_ = nullptr;      // tile: the I loop
  const walk_loop* lj_ = nullptr;      // the innermost loop
};

llvm::Value* walk_emitter::emit_loop(llvm::Value* start, llvm::Value* end, std::int64_t step,
                                     const body_fn& body) {
  return emit_counted_loop(
             b_, start, end, step, {},
             [&](llvm::Value* v, const ir_values&) {
               body(v);
               return ir_values{};
             },
             loop_test::step_within_end, "loop")
      .index;
}

void walk_emitter::emit_if(llvm::Value* cond, const std::function<void()>& then_fn,
                           const std::function<void()>& else_fn) {
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
  auto* else_bb = else_fn ? llvm::BasicBlock::Create(ctx_, "if.else", fn_) : nullptr;
  auto* done = llvm::BasicBlock::Create(ctx_, "if.done", fn_);
  b_.CreateCondBr(cond, then_bb, else_bb ? else_bb : done);
  b_.SetInsertPoint(then_bb);
  then_fn();
  b_.CreateBr(done);
  if (else_bb) {
    b_.SetInsertPoint(else_bb);
    else_fn();
    b_.CreateBr(done);
  }
  b_.SetInsertPoint(done);
}

llvm::Value* walk_emitter::load_lanes(llvm::Value* base, llvm::Type* ety, llvm::Value* off, int n,
                                      std::int64_t stride) {
  const llvm::Align align(ety->getPrimitiveSizeInBits() / 8);
  if (n == 1 || stride == 1) {
    return b_.CreateAlignedLoad(shaped(ety, n), b_.CreateGEP(ety, base, off), align);
  }
  llvm::Value* v = llvm::PoisonValue::get(shaped(ety, n));
  for (int e = 0; e < n; ++e) {
    llvm::Value* p = b_.CreateGEP(ety, base, b_.CreateAdd(off, c64(e * stride)));
    v = b_.CreateInsertElement(v, b_.CreateAlignedLoad(ety, p, align), e);
  }
  return v;
}

void walk_emitter::store_lanes(llvm::Value* v, llvm::Value* base, llvm::Type* ety, llvm::Value* off,
                               int n, std::int64_t stride) {
  const llvm::Align align(ety->getPrimitiveSizeInBits() / 8);
  if (n == 1 || stride == 1) {
    b_.CreateAlignedStore(v, b_.CreateGEP(ety, base, off), align);
    return;
  }
  for (int e = 0; e < n; ++e) {
    llvm::Value* p = b_.CreateGEP(ety, base, b_.CreateAdd(off, c64(e * stride)));
    b_.CreateAlignedStore(b_.CreateExtractElement(v, e), p, align);
  }
}

void walk_emitter::store_dense(llvm::Value* v, llvm::Value* off, int n) {
  if (!nt_) {
    store_lanes(v, dst_, dst_ty_, off, n, 1);
    return;
  }
  const std::uint64_t bytes = static_cast<std::uint64_t>(n) * dst_ty_->getPrimitiveSizeInBits() / 8;
  // Aligned to the vector, or to a cache line for wider ones (stored as
  // several). Frozen: the code generator would fold a narrowing conversion
  // into a truncating store, which has no non-temporal form (the hint is
  // dropped).
  auto* st = b_.CreateAlignedStore(b_.CreateFreeze(v), b_.CreateGEP(dst_ty_, dst_, off),
                                   llvm::Align(std::min<std::uint64_t>(bytes, 64)));
  st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                  llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1))));
}

llvm::Value* walk_emitter::dst_aligned(llvm::Value* off, std::int64_t bytes) {
  llvm::Value* addr = b_.CreatePtrToInt(b_.CreateGEP(dst_ty_, dst_, off), b_.getInt64Ty());
  return b_.CreateICmpEQ(b_.CreateAnd(addr, c64(bytes - 1)), c64(0));
}

void walk_emitter::emit_nt_versions(llvm::Value* aligned, const std::function<void()>& body) {
  emit_if(
      aligned,
      [&] {
        nt_ = true;
        body();
        nt_ = false;
      },
      body);
}

llvm::Value* walk_emitter::to_value(llvm::Value* x) {
  return walk_to_f32(b_, g_.src_dt, raw_, x);
}

llvm::Value* walk_emitter::from_value(llvm::Value* v) {
  return walk_from_f32(b_, g_.dst_dt, raw_, v);
}

llvm::Value* walk_emitter::logical(int d, llvm::Value* i, llvm::Value* j) {
  llvm::Value* l = outer_l_[d];
  if (!l) return nullptr;
  if (i && li_ && li_->dim == d) l = b_.CreateAdd(l, b_.CreateMul(i, c64(li_->mult)));
  if (j && lj_->dim == d) {
    llvm::Value* at = lj_->period > 0 ? b_.CreateURem(j, c64(lj_->period)) : j;
    l = b_.CreateAdd(l, b_.CreateMul(at, c64(lj_->mult)));
  }
  return l;
}

llvm::Value* walk_emitter::scale_for(llvm::Value* i, llvm::Value* j, int n, llvm::Value* live) {
  if (g_.scales == reorder_scales::none) return nullptr;
  if (g_.scales == reorder_scales::common) return splat(common_scale_, n);
  const int d = g_.scale_dim;
  llvm::Value* idx = logical(d, i, j);
  const std::int64_t step = lj_->dim == d ? lj_->mult : 0;
  if (step == 0 && (!live || n == 1)) {
    llvm::Value* s = b_.CreateAlignedLoad(
        b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), scales_, idx), llvm::Align(4));
    return splat(s, n);
  }
  if (!live || n == 1) return load_lanes(scales_, b_.getFloatTy(), idx, n, step);
  // A clipped vector: the scales of its real lanes only (the scales end
  // with the real extent; with no lane real, as where an outer index is
  // padding, none is read).
  if (step == 0) {
    auto* one = llvm::FixedVectorType::get(b_.getFloatTy(), 1);
    llvm::Value* s = b_.CreateMaskedLoad(
        one, b_.CreateGEP(b_.getFloatTy(), scales_, idx), llvm::Align(4),
        b_.CreateVectorSplat(1, b_.CreateICmpSGT(live, c64(0))), llvm::Constant::getNullValue(one));
    return splat(b_.CreateExtractElement(s, std::uint64_t{0}), n);
  }
  llvm::Value* mask = emit_lane_mask(b_, live, n);
  llvm::Type* vt = shaped(b_.getFloatTy(), n);
  llvm::Value* none = llvm::Constant::getNullValue(vt);
  if (step == 1) {
    return b_.CreateMaskedLoad(vt, b_.CreateGEP(b_.getFloatTy(), scales_, idx), llvm::Align(4),
                               mask, none);
  }
  std::vector<llvm::Constant*> at;
  for (int e = 0; e < n; ++e) at.push_back(b_.getInt64(static_cast<std::uint64_t>(e * step)));
  llvm::Value* ptrs = b_.CreateGEP(b_.getFloatTy(), scales_,
                                   b_.CreateAdd(b_.CreateVectorSplat(static_cast<unsigned>(n), idx),
                                                llvm::ConstantVector::get(at)));
  return b_.CreateMaskedGather(vt, ptrs, llvm::Align(4), mask, none);
}

walk_lanes walk_emitter::lanes_at(llvm::Value* i, llvm::Value* j, llvm::Value* dst_off) {
  walk_lanes lanes;
  lanes.dst_offset = dst_off;
  lanes.dst_step = lj_->dst_stride;
  lanes.operands = operands_;
  lanes.live = live_lanes_;
  for (int d = 0; d < p_.ndims; ++d) {
    // Along a loop of blocks the lanes' indices are no progression: unknown
    // (batch_padded_block keeps such plans for walks that need none).
    if (lj_->period > 0 && lj_->dim == d) continue;
    lanes.index[d] = logical(d, i, j);
    lanes.index_step[d] = lj_->dim == d ? lj_->mult : 0;
  }
  return lanes;
}

llvm::Value* walk_emitter::finish_value(llvm::Value* v, llvm::Value* i, llvm::Value* j, int n,
                                        llvm::Value* dst_off, llvm::Value* live) {
  if (raw_) return v;
  if (llvm::Value* s = scale_for(i, j, n, live)) v = b_.CreateFMul(v, s);
  if (g_.transform) v = g_.transform(b_, v, lanes_at(i, j, dst_off));
  return from_value(v);
}

llvm::Value* walk_emitter::all_real(llvm::Value* i_last, llvm::Value* j_last) {
  llvm::Value* ok = outer_real_;
  for (int d = 0; d < p_.ndims; ++d) {
    if (p_.exact[d]) continue;
    const bool inner = (li_ && li_->dim == d) || lj_->dim == d;
    if (!inner) continue;  // in outer_real_
    ok = b_.CreateAnd(ok, b_.CreateICmpSLT(logical(d, i_last, j_last), c64(p_.dims[d])));
  }
  return ok;
}

void walk_emitter::emit_element(llvm::Value* i, llvm::Value* j) {
  llvm::Value* src_off = b_.CreateAdd(src_base_, src_along_j(j));
  llvm::Value* dst_off = b_.CreateAdd(dst_base_, dst_along_j(j));
  if (i) {
    src_off = b_.CreateAdd(src_off, b_.CreateMul(i, c64(li_->src_stride)));
    dst_off = b_.CreateAdd(dst_off, b_.CreateMul(i, c64(li_->dst_stride)));
  }
  auto copy = [&] {
    llvm::Value* v = to_value(load_lanes(src_, src_ty_, src_off, 1, 1));
    store_lanes(finish_value(v, i, j, 1, dst_off), dst_, dst_ty_, dst_off, 1, 1);
  };
  if (!checks_) {
    copy();
    return;
  }
  llvm::Value* real = b_.getTrue();
  llvm::Value* in_bound = b_.getTrue();
  for (int d = 0; d < p_.ndims; ++d) {
    if (p_.exact[d]) continue;
    llvm::Value* l = logical(d, i, j);
    real = b_.CreateAnd(real, b_.CreateICmpSLT(l, c64(p_.dims[d])));
    in_bound = b_.CreateAnd(in_bound, b_.CreateICmpSLT(l, c64(p_.bound[d])));
  }
  emit_if(real, copy, [&] {
    emit_if(in_bound, [&] {
      store_lanes(llvm::Constant::getNullValue(dst_ty_), dst_, dst_ty_, dst_off, 1, 1);
    });
  });
}

void walk_emitter::emit_vector(llvm::Value* j, int n) {
  auto fast = [&] {
    llvm::Value* dst_off = b_.CreateAdd(dst_base_, dst_along_j(j));
    llvm::Value* v = to_value(load_stream(j, n, nullptr));
    v = finish_value(v, nullptr, j, n, dst_off);
    if (lj_->dst_run > 0) {
      store_stream(v, j, n, nullptr);
    } else if (lj_->dst_stride == 1 && n == g_.vector_lanes) {
      store_dense(v, dst_off, n);
    } else {
      store_lanes(v, dst_, dst_ty_, dst_off, n, lj_->dst_stride);
    }
  };
  if (!checks_) {
    fast();
    return;
  }
  emit_if(all_real(nullptr, b_.CreateAdd(j, c64(n - 1))), fast, [&] {
    if (stream_clips_ && n > 1) {
      emit_clipped_vector(j, n);
      return;
    }
    emit_loop(j, b_.CreateAdd(j, c64(n)), 1, [&](llvm::Value* e) { emit_element(nullptr, e); });
  });
}

llvm::Value* walk_emitter::outer_bound() {
  llvm::Value* ok = b_.getTrue();
  for (int d = 0; d < p_.ndims; ++d) {
    if (p_.exact[d] || lj_->dim == d || (li_ && li_->dim == d)) continue;
    ok = b_.CreateAnd(ok, b_.CreateICmpSLT(outer_l_[d], c64(p_.bound[d])));
  }
  return ok;
}

llvm::Value* walk_emitter::block_lanes_below(llvm::Value* first, int n, std::int64_t period,
                                             llvm::Value* count) {
  const auto un = static_cast<unsigned>(n);
  std::vector<llvm::Constant*> iota;
  for (int k = 0; k < n; ++k) iota.push_back(b_.getInt32(static_cast<std::uint32_t>(k)));
  llvm::Value* at =
      b_.CreateAnd(b_.CreateAdd(llvm::ConstantVector::get(iota),
                                b_.CreateVectorSplat(un, b_.CreateTrunc(first, b_.getInt32Ty()))),
                   b_.CreateVectorSplat(un, b_.getInt32(static_cast<std::uint32_t>(period - 1))));
  return b_.CreateICmpULT(at, b_.CreateVectorSplat(un, b_.CreateTrunc(count, b_.getInt32Ty())));
}

void walk_emitter::emit_clipped_vector(llvm::Value* j, int n) {
  const int d = lj_->dim;
  llvm::Value* l0 = logical(d, nullptr, j);
  llvm::Value* real =
      b_.CreateSelect(outer_real_, count_below(p_.dims[d], l0, lj_->mult, n), c64(0));
  llvm::Value* bound =
      b_.CreateSelect(outer_bound(), count_below(p_.bound[d], l0, lj_->mult, n), c64(0));
  llvm::Value* real_lanes = emit_lane_mask(b_, real, n);
  llvm::Value* bound_lanes = emit_lane_mask(b_, bound, n);
  emit_if(
      b_.CreateICmpEQ(bound, c64(n)),
      [&] { emit_masked_vector(j, n, real_lanes, bound_lanes, true, real, bound); },
      [&] { emit_masked_vector(j, n, real_lanes, bound_lanes, false, real, bound); });
}

void walk_emitter::emit_masked_vector(llvm::Value* j, int n, llvm::Value* real, llvm::Value* bound,
                                      bool whole, llvm::Value* live, llvm::Value* bound_count) {
  llvm::Value* dst_off = b_.CreateAdd(dst_base_, j);
  llvm::Type* dvt = shaped(dst_ty_, n);
  llvm::Value* x = load_stream(j, n, real, live);
  live_lanes_ = real;
  llvm::Value* v = finish_value(to_value(x), nullptr, j, n, dst_off, live);
  live_lanes_ = nullptr;
  v = b_.CreateSelect(real, v, llvm::Constant::getNullValue(dvt));
  store_stream(v, j, n, whole ? nullptr : bound, bound_count);
}

void walk_emitter::emit_block_stream(llvm::Value* s0, llvm::Value* s1) {
  const int d = lj_->dim;
  const auto e = static_cast<int>(lj_->period);
  emit_if(
      all_real(nullptr, c64(e - 1)),
      [&] {
        checks_ = false;
        emit_stream(s0, s1);
        checks_ = true;
      },
      [&] {
        // The real and in-bound elements of each block: the same prefix in
        // every block of the work item (none where an outer padded index is
        // past them).
        llvm::Value* real = b_.CreateSelect(
            outer_real_, count_below(p_.dims[d], outer_l_[d], lj_->mult, e), c64(0));
        llvm::Value* bound = b_.CreateSelect(
            outer_bound(), count_below(p_.bound[d], outer_l_[d], lj_->mult, e), c64(0));
        const int n = g_.vector_lanes;
        const int rest = static_cast<int>(lj_->extent % n);
        auto masked = [&](llvm::Value* j, int lanes, bool whole) {
          emit_masked_vector(j, lanes, block_lanes_below(j, lanes, e, real),
                             block_lanes_below(j, lanes, e, bound), whole);
        };
        auto walk = [&](bool whole) {
          llvm::Value* j = emit_loop(s0, s1, n, [&](llvm::Value* v) { masked(v, n, whole); });
          // Only the chunk that ends the loop has a partial vector.
          if (rest != 0) {
            emit_if(b_.CreateICmpSLT(j, s1), [&] { masked(j, rest, whole); });
          }
        };
        emit_if(
            b_.CreateICmpEQ(bound, c64(e)), [&] { walk(true); }, [&] { walk(false); });
      });
}

void walk_emitter::emit_stream(llvm::Value* s0, llvm::Value* s1) {
  if (checks_ && lj_->period > 0) {
    emit_block_stream(s0, s1);
    return;
  }
  const std::int64_t extent = lj_->extent;
  if (raw_ && g_.use_memcpy && !checks_ && lj_->src_stride == 1 && lj_->dst_stride == 1 &&
      lj_->src_run == 0 && lj_->dst_run == 0) {
    const std::int64_t es = static_cast<std::int64_t>(size_of(g_.src_dt));
    llvm::Value* sp =
        b_.CreateGEP(b_.getInt8Ty(), src_, b_.CreateMul(b_.CreateAdd(src_base_, s0), c64(es)));
    llvm::Value* dp =
        b_.CreateGEP(b_.getInt8Ty(), dst_, b_.CreateMul(b_.CreateAdd(dst_base_, s0), c64(es)));
    b_.CreateMemCpy(dp, llvm::MaybeAlign(es), sp, llvm::MaybeAlign(es),
                    b_.CreateMul(b_.CreateSub(s1, s0), c64(es)));
    return;
  }
  const int n = g_.vector_lanes;
  // Non-temporal unrolled vectors are stored as one (a power of two of them).
  const bool wide = g_.unroll > 1 && is_pow2(g_.unroll);
  auto walk = [&] {
    llvm::Value* j = s0;
    if (g_.unroll > 1) {
      j = emit_loop(j, s1, static_cast<std::int64_t>(n) * g_.unroll, [&](llvm::Value* v) {
        if (!nt_ || !wide) {
          for (int u = 0; u < g_.unroll; ++u) emit_vector(b_.CreateAdd(v, c64(u * n)), n);
          return;
        }
        // One store of the unrolled vectors together: a narrowing
        // conversion's vectors would each become a truncating store, which
        // has no non-temporal form.
        std::vector<llvm::Value*> parts;
        for (int u = 0; u < g_.unroll; ++u) {
          llvm::Value* ju = b_.CreateAdd(v, c64(u * n));
          llvm::Value* x = to_value(load_stream(ju, n, nullptr));
          parts.push_back(finish_value(x, nullptr, ju, n, b_.CreateAdd(dst_base_, ju)));
        }
        store_dense(walk_concat_lanes(b_, std::move(parts)), b_.CreateAdd(dst_base_, v),
                    n * g_.unroll);
      });
    }
    j = emit_loop(j, s1, n, [&](llvm::Value* v) { emit_vector(v, n); });
    const int rest = static_cast<int>(extent % n);
    if (rest != 0) {
      // Only the chunk that ends the loop has a partial vector: chunks are
      // whole vectors.
      emit_if(b_.CreateICmpSLT(j, s1), [&] { emit_vector(j, rest); });
    }
  };
  // Non-temporal stores need vector-aligned addresses: the chunk starts at
  // a whole vector and the vectors follow one another, so the first one's
  // alignment is every one's.
  const std::int64_t vbytes = static_cast<std::int64_t>(n) * dst_ty_->getPrimitiveSizeInBits() / 8;
  const std::int64_t wbytes = wide ? vbytes * g_.unroll : vbytes;
  if (g_.nontemporal && lj_->dst_stride == 1 && lj_->dst_run == 0 && wbytes >= 16 && !checks_) {
    emit_nt_versions(dst_aligned(b_.CreateAdd(dst_base_, s0), std::min<std::int64_t>(wbytes, 64)),
                     walk);
  } else {
    walk();
  }
}

void walk_emitter::emit_tile(llvm::Value* i, llvm::Value* j, int ri, int rj) {
  const int t = g_.tile;
  auto fast = [&] {
    llvm::Value* src_off = b_.CreateAdd(b_.CreateAdd(src_base_, i),  // I has src stride 1
                                        b_.CreateMul(j, c64(lj_->src_stride)));
    std::vector<llvm::Value*> rows(t);
    llvm::Type* row_ty = shaped(raw_ ? src_ty_ : b_.getFloatTy(), t);
    for (int r = 0; r < t; ++r) {
      if (r >= rj) {
        rows[r] = llvm::PoisonValue::get(row_ty);
        continue;
      }
      llvm::Value* off = b_.CreateAdd(src_off, c64(r * lj_->src_stride));
      rows[r] = tile_row(to_value(load_lanes(src_, src_ty_, off, ri, 1)), row_ty, ri, false);
    }
    walk_transpose(b_, rows);
    std::vector<int> narrow(rj);
    std::iota(narrow.begin(), narrow.end(), 0);
    llvm::Value* dst_off0 = b_.CreateAdd(dst_base_, j);  // J has dst stride 1
    // dst rows that follow one another (nchw to nChw8c at tiles of 16: the
    // tile's 16 rows of 8 channels are 128 consecutive dst elements) go out
    // t / rj rows to a vector of t lanes, converted and stored whole: the
    // conversion runs on full vectors (f32 to bf16 at avx512_core: half the
    // instructions). A transform reads its lanes' indices as one row's
    // progression, so it keeps the rows apart.
    const int rows_per_vector = rj < t && t % rj == 0 ? t / rj : 1;
    if (rows_per_vector > 1 && li_->dst_stride == rj && ri % rows_per_vector == 0 &&
        !g_.transform) {
      for (int q = 0; q < ri; q += rows_per_vector) {
        std::vector<llvm::Value*> parts, part_scales;
        for (int k = 0; k < rows_per_vector; ++k) {
          llvm::Value* iq = b_.CreateAdd(i, c64(q + k));
          parts.push_back(b_.CreateShuffleVector(rows[q + k], narrow));
          if (!raw_ && g_.scales == reorder_scales::per_dim) {
            part_scales.push_back(scale_for(iq, j, rj, nullptr));
          }
        }
        llvm::Value* v = walk_concat_lanes(b_, parts);
        llvm::Value* iq = b_.CreateAdd(i, c64(q));
        if (!raw_) {
          if (g_.scales == reorder_scales::common) v = b_.CreateFMul(v, splat(common_scale_, t));
          if (!part_scales.empty()) v = b_.CreateFMul(v, walk_concat_lanes(b_, part_scales));
          v = from_value(v);
        }
        store_dense(v, b_.CreateAdd(dst_off0, b_.CreateMul(iq, c64(li_->dst_stride))), t);
      }
      return;
    }
    for (int q = 0; q < ri; ++q) {
      llvm::Value* v = rows[q];
      if (rj == 1) {
        v = b_.CreateExtractElement(v, std::uint64_t{0});
      } else if (rj < t) {
        v = b_.CreateShuffleVector(v, llvm::PoisonValue::get(v->getType()), narrow);
      }
      llvm::Value* iq = b_.CreateAdd(i, c64(q));
      llvm::Value* dst_off = b_.CreateAdd(dst_off0, b_.CreateMul(iq, c64(li_->dst_stride)));
      v = finish_value(v, iq, j, rj, dst_off);
      if (rj == t) {
        store_dense(v, dst_off, t);
      } else {
        store_lanes(v, dst_, dst_ty_, dst_off, rj, 1);
      }
    }
  };
  if (!checks_) {
    fast();
    return;
  }
  emit_if(all_real(b_.CreateAdd(i, c64(ri - 1)), b_.CreateAdd(j, c64(rj - 1))), fast, [&] {
    if (tile_clips_) {
      emit_clipped_tile(i, j, ri, rj);
      return;
    }
    emit_loop(i, b_.CreateAdd(i, c64(ri)), 1, [&](llvm::Value* iq) {
      emit_loop(j, b_.CreateAdd(j, c64(rj)), 1, [&](llvm::Value* jr) { emit_element(iq, jr); });
    });
  });
}

llvm::Value* walk_emitter::along_j(llvm::Value* j, std::int64_t stride, std::int64_t run,
                                   std::int64_t run_stride) {
  if (run == 0) return b_.CreateMul(j, c64(stride));
  // Runs are a power of two long: a shift and a mask.
  return b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(j, c64(run)), c64(run_stride)),
                      b_.CreateMul(b_.CreateURem(j, c64(run)), c64(stride)));
}

llvm::Value* walk_emitter::src_along_j(llvm::Value* j) {
  return along_j(j, lj_->src_stride, lj_->src_run, lj_->src_run_stride);
}

llvm::Value* walk_emitter::load_stream(llvm::Value* j, int n, llvm::Value* mask,
                                       llvm::Value* count) {
  const std::int64_t run = lj_->src_run;
  const int per = run > 0 && n > run ? static_cast<int>(run) : n;
  return walk_load_parts(
      b_, src_ty_, src_, n, per, lj_->src_stride,
      [&](int k) { return b_.CreateAdd(src_base_, src_along_j(b_.CreateAdd(j, c64(k)))); }, mask,
      count);
}

llvm::Value* walk_emitter::dst_along_j(llvm::Value* j) {
  return along_j(j, lj_->dst_stride, lj_->dst_run, lj_->dst_run_stride);
}

void walk_emitter::store_stream(llvm::Value* v, llvm::Value* j, int n, llvm::Value* mask,
                                llvm::Value* count) {
  const std::int64_t run = lj_->dst_run;
  const int per = run > 0 && n > run ? static_cast<int>(run) : n;
  walk_store_parts(
      b_, dst_ty_, dst_, v, n, per,
      [&](int k) { return b_.CreateAdd(dst_base_, dst_along_j(b_.CreateAdd(j, c64(k)))); }, mask,
      count);
}

llvm::Value* walk_emitter::tile_row(llvm::Value* x, llvm::Type* row_ty, int ri, bool zeros) {
  const int t = g_.tile;
  auto fill = [&](llvm::Type* ty) -> llvm::Value* {
    return zeros ? llvm::Constant::getNullValue(ty) : llvm::PoisonValue::get(ty);
  };
  if (ri == 1) return b_.CreateInsertElement(fill(row_ty), x, std::uint64_t{0});
  if (ri >= t) return x;
  // The mask's -1 lanes are poison whatever the second operand.
  std::vector<int> widen(t, -1);
  for (int e = 0; e < ri; ++e) widen[e] = e;
  return b_.CreateShuffleVector(x, fill(x->getType()), widen);
}

llvm::Value* walk_emitter::count_below(std::int64_t end, llvm::Value* l, std::int64_t mult,
                                       int limit) {
  llvm::Value* d = b_.CreateSub(c64(end), l);
  llvm::Value* pos = b_.CreateSelect(b_.CreateICmpSGT(d, c64(0)), d, c64(0));
  llvm::Value* n = mult == 1 ? pos : b_.CreateUDiv(b_.CreateAdd(pos, c64(mult - 1)), c64(mult));
  return smin(n, c64(limit));
}

void walk_emitter::emit_clipped_tile(llvm::Value* i, llvm::Value* j, int ri, int rj) {
  const int t = g_.tile;
  llvm::Value* rows_real = c64(ri);
  llvm::Value* rows_bound = c64(ri);
  llvm::Value* cols_real = c64(rj);
  llvm::Value* cols_bound = c64(rj);
  llvm::Value* outer_bound = b_.getTrue();
  bool rows_checked = false;
  for (int d = 0; d < p_.ndims; ++d) {
    if (p_.exact[d]) continue;
    llvm::Value* l = logical(d, i, j);  // at the tile's first element
    if (li_->dim == d) {
      rows_checked = true;
      rows_real = smin(rows_real, count_below(p_.dims[d], l, li_->mult, ri));
      rows_bound = smin(rows_bound, count_below(p_.bound[d], l, li_->mult, ri));
    } else if (lj_->dim == d) {
      cols_real = smin(cols_real, count_below(p_.dims[d], l, lj_->mult, rj));
      cols_bound = smin(cols_bound, count_below(p_.bound[d], l, lj_->mult, rj));
    } else {
      outer_bound = b_.CreateAnd(outer_bound, b_.CreateICmpSLT(l, c64(p_.bound[d])));
    }
  }
  // outer_real_: the padded dimensions outside the tile, all real.
  rows_real = b_.CreateSelect(outer_real_, rows_real, c64(0));
  rows_bound = b_.CreateSelect(outer_bound, rows_bound, c64(0));
  // The columns read: none where no row is real.
  llvm::Value* cols_read = b_.CreateSelect(b_.CreateICmpEQ(rows_real, c64(0)), c64(0), cols_real);

  llvm::Value* src_off =
      b_.CreateAdd(b_.CreateAdd(src_base_, i), b_.CreateMul(j, c64(lj_->src_stride)));
  llvm::Type* row_ty = shaped(raw_ ? src_ty_ : b_.getFloatTy(), t);
  llvm::Type* svt = shaped(src_ty_, ri);
  const llvm::Align salign(src_ty_->getPrimitiveSizeInBits() / 8);
  std::vector<llvm::Value*> rows(t);
  for (int r = 0; r < t; ++r) {
    if (r >= rj) {
      rows[r] = llvm::Constant::getNullValue(row_ty);
      continue;
    }
    llvm::Value* at = b_.CreateGEP(src_ty_, src_, b_.CreateAdd(src_off, c64(r * lj_->src_stride)));
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* load_bb = llvm::BasicBlock::Create(ctx_, "clip.load", fn_);
    auto* loaded = llvm::BasicBlock::Create(ctx_, "clip.loaded", fn_);
    b_.CreateCondBr(b_.CreateICmpSGT(cols_read, c64(r)), load_bb, loaded);
    b_.SetInsertPoint(load_bb);
    // A row of one element is read only where it is real (cols_read).
    llvm::Value* x;
    if (rows_checked && ri > 1) {
      std::vector<llvm::Constant*> iota;
      for (int e = 0; e < ri; ++e) iota.push_back(b_.getInt32(static_cast<std::uint32_t>(e)));
      llvm::Value* mask =
          b_.CreateICmpULT(llvm::ConstantVector::get(iota),
                           b_.CreateVectorSplat(ri, b_.CreateTrunc(rows_real, b_.getInt32Ty())));
      x = b_.CreateMaskedLoad(svt, at, salign, mask, llvm::Constant::getNullValue(svt));
    } else {
      x = b_.CreateAlignedLoad(svt, at, salign);
    }
    llvm::BasicBlock* load_end = b_.GetInsertBlock();
    b_.CreateBr(loaded);
    b_.SetInsertPoint(loaded);
    llvm::PHINode* phi = b_.CreatePHI(svt, 2);
    phi->addIncoming(llvm::Constant::getNullValue(svt), from);
    phi->addIncoming(x, load_end);
    rows[r] = tile_row(to_value(phi), row_ty, ri, true);
  }
  walk_transpose(b_, rows);
  std::vector<int> narrow(rj);
  std::iota(narrow.begin(), narrow.end(), 0);
  llvm::Type* dvt = shaped(dst_ty_, rj);
  llvm::Value* zero = llvm::Constant::getNullValue(dvt);
  llvm::Value* col_real = nullptr;
  llvm::Value* col_bound = nullptr;
  if (rj > 1) {
    std::vector<llvm::Constant*> iota;
    for (int e = 0; e < rj; ++e) iota.push_back(b_.getInt32(static_cast<std::uint32_t>(e)));
    llvm::Value* lanes = llvm::ConstantVector::get(iota);
    col_real = b_.CreateICmpULT(
        lanes, b_.CreateVectorSplat(rj, b_.CreateTrunc(cols_real, b_.getInt32Ty())));
    col_bound = b_.CreateICmpULT(
        lanes, b_.CreateVectorSplat(rj, b_.CreateTrunc(cols_bound, b_.getInt32Ty())));
  } else {
    col_real = b_.CreateICmpSGT(cols_real, c64(0));
    col_bound = b_.CreateICmpSGT(cols_bound, c64(0));
  }
  llvm::Value* whole_rows = b_.CreateICmpEQ(cols_bound, c64(rj));
  const llvm::Align dalign(dst_ty_->getPrimitiveSizeInBits() / 8);
  llvm::Value* dst_off0 = b_.CreateAdd(dst_base_, j);  // J has dst stride 1
  for (int q = 0; q < ri; ++q) {
    llvm::Value* v = rows[q];
    if (rj == 1) {
      v = b_.CreateExtractElement(v, std::uint64_t{0});
    } else if (rj < t) {
      v = b_.CreateShuffleVector(v, llvm::PoisonValue::get(v->getType()), narrow);
    }
    llvm::Value* iq = b_.CreateAdd(i, c64(q));
    llvm::Value* dst_off = b_.CreateAdd(dst_off0, b_.CreateMul(iq, c64(li_->dst_stride)));
    emit_if(b_.CreateICmpSGT(rows_bound, c64(q)), [&] {
      // Real rows converted (their padding lanes, and the rows of padding,
      // are the zeros loaded: a bit copy stores them as they are; a
      // conversion's scale could make them other than zero).
      llvm::Value* out = v;
      if (!raw_) {
        llvm::BasicBlock* from = b_.GetInsertBlock();
        auto* real_bb = llvm::BasicBlock::Create(ctx_, "clip.row", fn_);
        auto* done = llvm::BasicBlock::Create(ctx_, "clip.row.done", fn_);
        b_.CreateCondBr(b_.CreateICmpSGT(rows_real, c64(q)), real_bb, done);
        b_.SetInsertPoint(real_bb);
        llvm::Value* f =
            b_.CreateSelect(col_real, finish_value(v, iq, j, rj, dst_off, cols_real), zero);
        llvm::BasicBlock* real_end = b_.GetInsertBlock();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        llvm::PHINode* phi = b_.CreatePHI(dvt, 2);
        phi->addIncoming(zero, from);
        phi->addIncoming(f, real_end);
        out = phi;
      }
      llvm::Value* at = b_.CreateGEP(dst_ty_, dst_, dst_off);
      emit_if(
          whole_rows,
          [&] {
            if (rj == t) {
              store_dense(out, dst_off, t);
            } else {
              b_.CreateAlignedStore(out, at, dalign);
            }
          },
          [&] {
            if (rj == 1) {
              emit_if(col_bound, [&] { b_.CreateAlignedStore(out, at, dalign); });
            } else {
              b_.CreateMaskedStore(out, at, dalign, col_bound);
            }
          });
    });
  }
}

void walk_emitter::emit_tiles(llvm::Value* s0, llvm::Value* s1) {
  const int t = g_.tile;
  const int rest_i = static_cast<int>(li_->extent % t);
  const int rest_j = static_cast<int>(lj_->extent % t);
  auto row_of_tiles = [&](llvm::Value* i, int ri) {
    llvm::Value* jend =
        emit_loop(c64(0), c64(lj_->extent), t, [&](llvm::Value* j) { emit_tile(i, j, ri, t); });
    if (rest_j != 0) emit_tile(i, jend, ri, rest_j);
  };
  auto walk = [&] {
    const std::int64_t block = g_.tile_block;
    if (g_.tile_block_j > t) {
      // Blocks of tile_block_j J elements, each walked I tile by I tile:
      // every dst row of a block is written as one run of the block, and
      // the src rows of a block are read while they stay in cache.
      const std::int64_t bj = g_.tile_block_j;
      const std::int64_t j_full = lj_->extent / t * t;
      llvm::Value* full_end =
          b_.CreateAdd(s0, b_.CreateMul(b_.CreateUDiv(b_.CreateSub(s1, s0), c64(t)), c64(t)));
      if (j_full > 0) {
        emit_counted_loop(
            b_, c64(0), c64(j_full), bj, {},
            [&](llvm::Value* jb, const ir_values&) {
              llvm::Value* next = b_.CreateAdd(jb, c64(bj));
              llvm::Value* je =
                  b_.CreateSelect(b_.CreateICmpSLT(next, c64(j_full)), next, c64(j_full));
              emit_loop(s0, full_end, t, [&](llvm::Value* i) {
                emit_loop(jb, je, t, [&](llvm::Value* j) { emit_tile(i, j, t, t); });
              });
              return ir_values{};
            },
            loop_test::index_below_end, "jblock");
      }
      if (rest_j != 0) {
        emit_loop(s0, full_end, t, [&](llvm::Value* i) { emit_tile(i, c64(j_full), t, rest_j); });
      }
      if (rest_i != 0) {
        emit_if(b_.CreateICmpSLT(full_end, s1), [&] { row_of_tiles(full_end, rest_i); });
      }
      return;
    }
    if (block <= t) {
      llvm::Value* i = emit_loop(s0, s1, t, [&](llvm::Value* iv) { row_of_tiles(iv, t); });
      if (rest_i != 0) emit_if(b_.CreateICmpSLT(i, s1), [&] { row_of_tiles(i, rest_i); });
      return;
    }
    // Blocks of `block` I elements, each walked J tile by J tile: every src
    // row of a block is read as one run of block elements, and the tiles of
    // one J tile write whole dst rows, one after the other.
    llvm::Value* full_end =
        b_.CreateAdd(s0, b_.CreateMul(b_.CreateUDiv(b_.CreateSub(s1, s0), c64(t)), c64(t)));
    emit_counted_loop(
        b_, s0, full_end, block, {},
        [&](llvm::Value* ib, const ir_values&) {
          llvm::Value* next = b_.CreateAdd(ib, c64(block));
          llvm::Value* ie = b_.CreateSelect(b_.CreateICmpSLT(next, full_end), next, full_end);
          llvm::Value* jend = emit_loop(c64(0), c64(lj_->extent), t, [&](llvm::Value* j) {
            emit_loop(ib, ie, t, [&](llvm::Value* i) { emit_tile(i, j, t, t); });
          });
          if (rest_j != 0) {
            emit_loop(ib, ie, t, [&](llvm::Value* i) { emit_tile(i, jend, t, rest_j); });
          }
          return ir_values{};
        },
        loop_test::index_below_end, "block");
    if (rest_i != 0) {
      emit_if(b_.CreateICmpSLT(full_end, s1), [&] { row_of_tiles(full_end, rest_i); });
    }
  };
  // Non-temporal stores: each row of a tile fills whole cache lines, at
  // addresses that are line-aligned when the first tile's are.
  const std::int64_t es = dst_ty_->getPrimitiveSizeInBits() / 8;
  if (g_.nontemporal && (t * es) % 64 == 0 && (li_->dst_stride * es) % 64 == 0) {
    emit_nt_versions(dst_aligned(dst_base_, 64), walk);
  } else {
    walk();
  }
}

void walk_emitter::emit(const std::string& symbol) {
  raw_ = g_.src_dt == g_.dst_dt && g_.scales == reorder_scales::none && !g_.transform;
  for (int d = 0; d < p_.ndims; ++d) checks_ = checks_ || !p_.exact[d];
  src_ty_ = storage_type(g_.src_dt);
  dst_ty_ = storage_type(g_.dst_dt);
  const std::size_t split = p_.split_loop();
  lj_ = &p_.loops.back();
  li_ = p_.inner == walk_plan::inner_kind::tile ? &p_.loops[split] : nullptr;
  tile_clips_ = li_ != nullptr;
  stream_clips_ = !li_ && lj_->dim >= 0 && !p_.exact[lj_->dim] && p_.known[lj_->dim] &&
                  lj_->period == 0 && lj_->mult > 0 && lj_->src_stride == 1 && lj_->dst_stride == 1;
  for (int d = 0; d < p_.ndims; ++d) {
    if (!p_.exact[d] && li_ && li_->dim == d && lj_->dim == d) tile_clips_ = false;
  }

  llvm::Type* ptr = llvm::PointerType::get(ctx_, 0);
  llvm::Type* i64 = b_.getInt64Ty();
  fn_ = llvm::Function::Create(
      llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, ptr, i64, i64}, false),
      llvm::Function::ExternalLinkage, symbol, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  // No noalias on the buffers: eltwise runs in place (src == dst).
  src_ = fn_->getArg(0);
  dst_ = fn_->getArg(1);
  scales_ = fn_->getArg(2);
  operands_ = fn_->getArg(3);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));

  if (g_.scales == reorder_scales::common) {
    common_scale_ = b_.CreateAlignedLoad(b_.getFloatTy(), scales_, llvm::Align(4));
  }

  // The work items: the loops outside the split loop, then the chunks of the
  // split loop; an odometer of indices, set from `begin` once.
  const walk_loop& sl = p_.loops[split];
  const std::int64_t chunk = g_.chunk;
  const std::int64_t nchunks = div_up(sl.extent, chunk);
  std::vector<std::int64_t> extents;
  for (std::size_t k = 0; k < split; ++k) extents.push_back(p_.loops[k].extent);
  if (nchunks > 1) extents.push_back(nchunks);
  std::vector<llvm::AllocaInst*> idx(extents.size());
  for (auto& a : idx) a = b_.CreateAlloca(i64);
  {
    llvm::Value* rem = fn_->getArg(4);
    for (std::size_t k = extents.size(); k-- > 0;) {
      b_.CreateStore(b_.CreateURem(rem, c64(extents[k])), idx[k]);
      rem = b_.CreateUDiv(rem, c64(extents[k]));
    }
  }

  emit_loop(fn_->getArg(4), fn_->getArg(5), 1, [&](llvm::Value*) {
    std::vector<llvm::Value*> iv(extents.size());
    for (std::size_t k = 0; k < extents.size(); ++k) iv[k] = b_.CreateLoad(i64, idx[k]);
    src_base_ = c64(p_.src_offset0);
    dst_base_ = c64(p_.dst_offset0);
    for (int d = 0; d < p_.ndims; ++d) outer_l_[d] = p_.known[d] ? c64(0) : nullptr;
    for (std::size_t k = 0; k < split; ++k) {
      const walk_loop& l = p_.loops[k];
      src_base_ = b_.CreateAdd(src_base_, b_.CreateMul(iv[k], c64(l.src_stride)));
      dst_base_ = b_.CreateAdd(dst_base_, b_.CreateMul(iv[k], c64(l.dst_stride)));
      if (l.dim >= 0 && outer_l_[l.dim]) {
        outer_l_[l.dim] = b_.CreateAdd(outer_l_[l.dim], b_.CreateMul(iv[k], c64(l.mult)));
      }
    }
    // The split loop and the J loop are indexed from the same base: their
    // loop variables are absolute.
    llvm::Value* s0 = c64(0);
    llvm::Value* s1 = c64(sl.extent);
    if (nchunks > 1) {
      s0 = b_.CreateMul(iv.back(), c64(chunk));
      s1 = b_.CreateSelect(b_.CreateICmpEQ(iv.back(), c64(nchunks - 1)), c64(sl.extent),
                           b_.CreateAdd(s0, c64(chunk)));
    }
    outer_real_ = b_.getTrue();
    for (int d = 0; d < p_.ndims; ++d) {
      if (p_.exact[d] || lj_->dim == d || (li_ && li_->dim == d)) continue;
      outer_real_ = b_.CreateAnd(outer_real_, b_.CreateICmpSLT(outer_l_[d], c64(p_.dims[d])));
    }
    if (li_) {
      emit_tiles(s0, s1);
    } else {
      emit_stream(s0, s1);
    }
    // Advance the odometer.
    llvm::Value* carry = b_.getTrue();
    for (std::size_t k = extents.size(); k-- > 0;) {
      llvm::Value* next = b_.CreateAdd(iv[k], b_.CreateZExt(carry, i64));
      llvm::Value* wrap = b_.CreateICmpEQ(next, c64(extents[k]));
      b_.CreateStore(b_.CreateSelect(wrap, c64(0), next), idx[k]);
      carry = wrap;
    }
  });
  // Non-temporal stores are weakly ordered: fence them before returning, so
  // that whoever synchronizes with this thread sees them.
  if (g_.nontemporal) {
    b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::x86_sse_sfence));
  }
  b_.CreateRetVoid();
}

}  // namespace

llvm::Value* walk_concat_lanes(llvm::IRBuilderBase& b, std::vector<llvm::Value*> parts) {
  while (parts.size() > 1) {
    const int n =
        static_cast<int>(llvm::cast<llvm::FixedVectorType>(parts[0]->getType())->getNumElements());
    std::vector<int> both(2 * n);
    std::iota(both.begin(), both.end(), 0);
    for (std::size_t k = 0; k < parts.size() / 2; ++k) {
      parts[k] = b.CreateShuffleVector(parts[2 * k], parts[2 * k + 1], both);
    }
    parts.resize(parts.size() / 2);
  }
  return parts[0];
}

llvm::Value* walk_load_parts(llvm::IRBuilderBase& b, llvm::Type* elem, llvm::Value* base, int n,
                             int per, std::int64_t stride, const walk_part_offset& offset_of,
                             llvm::Value* mask, llvm::Value* count) {
  const llvm::Align align(elem->getPrimitiveSizeInBits() / 8);
  llvm::Type* pt =
      per == 1 ? elem : static_cast<llvm::Type*>(llvm::FixedVectorType::get(elem, per));
  std::vector<llvm::Value*> parts;
  llvm::Value* first_off = nullptr;
  for (int k = 0; k < n; k += per) {
    llvm::Value* off = offset_of(k);
    if (k == 0) first_off = off;
    if (!mask) {
      if (per == 1 || stride == 1) {
        parts.push_back(b.CreateAlignedLoad(pt, b.CreateGEP(elem, base, off), align));
        continue;
      }
      llvm::Value* v = llvm::PoisonValue::get(pt);
      for (int e = 0; e < per; ++e) {
        llvm::Value* at = b.CreateGEP(elem, base, b.CreateAdd(off, b.getInt64(e * stride)));
        v = b.CreateInsertElement(v, b.CreateAlignedLoad(elem, at, align), e);
      }
      parts.push_back(v);
      continue;
    }
    llvm::Value* part_mask = mask;
    if (per < n) {
      std::vector<int> lanes(static_cast<std::size_t>(per));
      std::iota(lanes.begin(), lanes.end(), k);
      part_mask = b.CreateShuffleVector(mask, lanes);
      if (k > 0) off = b.CreateSelect(b.CreateICmpSGT(count, b.getInt64(k)), off, first_off);
    }
    parts.push_back(b.CreateMaskedLoad(pt, b.CreateGEP(elem, base, off), align, part_mask,
                                       llvm::Constant::getNullValue(pt)));
  }
  return walk_concat_lanes(b, std::move(parts));
}

void walk_store_parts(llvm::IRBuilderBase& b, llvm::Type* elem, llvm::Value* base, llvm::Value* v,
                      int n, int per, const walk_part_offset& offset_of, llvm::Value* mask,
                      llvm::Value* count) {
  const llvm::Align align(elem->getPrimitiveSizeInBits() / 8);
  llvm::Value* first_off = nullptr;
  for (int k = 0; k < n; k += per) {
    std::vector<int> lanes(static_cast<std::size_t>(per));
    std::iota(lanes.begin(), lanes.end(), k);
    llvm::Value* part = per == n ? v : b.CreateShuffleVector(v, lanes);
    llvm::Value* off = offset_of(k);
    if (k == 0) first_off = off;
    if (!mask) {
      b.CreateAlignedStore(part, b.CreateGEP(elem, base, off), align);
    } else if (per == n) {
      b.CreateMaskedStore(part, b.CreateGEP(elem, base, off), align, mask);
    } else {
      if (k > 0) off = b.CreateSelect(b.CreateICmpSGT(count, b.getInt64(k)), off, first_off);
      b.CreateMaskedStore(part, b.CreateGEP(elem, base, off), align,
                          b.CreateShuffleVector(mask, lanes));
    }
  }
}

llvm::Value* emit_lane_mask(llvm::IRBuilderBase& b, llvm::Value* count, int n) {
  std::vector<llvm::Constant*> iota;
  for (int e = 0; e < n; ++e) iota.push_back(b.getInt32(static_cast<std::uint32_t>(e)));
  return b.CreateICmpULT(
      llvm::ConstantVector::get(iota),
      b.CreateVectorSplat(static_cast<unsigned>(n), b.CreateTrunc(count, b.getInt32Ty())));
}

llvm::Type* walk_storage_type(llvm::IRBuilderBase& b, data_type dt, bool raw) {
  if (raw) return b.getIntNTy(static_cast<unsigned>(size_of(dt) * 8));
  switch (dt) {
    case data_type::f32: return b.getFloatTy();
    case data_type::bf16:
    case data_type::f16: return b.getInt16Ty();
    case data_type::s8:
    case data_type::u8: return b.getInt8Ty();
    default: return b.getInt32Ty();
  }
}

llvm::Value* walk_to_f32(llvm::IRBuilderBase& b, data_type src_dt, bool raw, llvm::Value* x) {
  if (raw) return x;
  llvm::Type* f = x->getType()->isVectorTy()
                      ? static_cast<llvm::Type*>(llvm::VectorType::get(
                            b.getFloatTy(), llvm::cast<llvm::VectorType>(x->getType())))
                      : b.getFloatTy();
  switch (src_dt) {
    case data_type::f32: return x;
    case data_type::bf16: return emit_bf16_to_f32(b, x);
    case data_type::f16: return emit_f16_to_f32(b, x);
    case data_type::u8: return b.CreateUIToFP(x, f);
    default: return b.CreateSIToFP(x, f);  // s8, s32
  }
}

llvm::Value* walk_from_f32(llvm::IRBuilderBase& b, data_type dst_dt, bool raw, llvm::Value* v) {
  if (raw) return v;
  switch (dst_dt) {
    case data_type::f32: return v;
    case data_type::bf16: return emit_f32_to_bf16(b, v);
    case data_type::f16: return emit_f32_to_f16(b, v);
    case data_type::s8: return emit_f32_to_s8(b, v);
    case data_type::u8: return emit_f32_to_u8(b, v);
    default: return emit_f32_to_s32(b, v);
  }
}

void walk_transpose(llvm::IRBuilderBase& b, std::vector<llvm::Value*>& rows) {
  const int t = static_cast<int>(rows.size());
  const int lanes =
      static_cast<int>(llvm::cast<llvm::FixedVectorType>(rows[0]->getType())->getNumElements());
  // Swap bit h of the row and column index, for every bit of the row index:
  // (r, c) -> (c, r) within each block of t lanes.
  for (int h = 1; h < t; h <<= 1) {
    std::vector<int> lo_mask(lanes), hi_mask(lanes);
    for (int c = 0; c < lanes; ++c) {
      lo_mask[c] = (c & h) ? lanes + (c ^ h) : c;
      hi_mask[c] = (c & h) ? lanes + c : (c ^ h);
    }
    for (int r = 0; r < t; ++r) {
      if (r & h) continue;
      llvm::Value* a = rows[r];
      llvm::Value* c = rows[r | h];
      rows[r] = b.CreateShuffleVector(a, c, lo_mask);
      rows[r | h] = b.CreateShuffleVector(a, c, hi_mask);
    }
  }
}

void emit_walk_function(llvm::Module& m, const std::string& symbol, const walk_plan& plan,
                        const walk_codegen& g) {
  walk_emitter(m, plan, g).emit(symbol);
}

}  // namespace primcache::cpu_internal
