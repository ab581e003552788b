#include "kernels/generic_reorder_generator.hpp"

#include <array>
#include <bit>
#include <cassert>
#include <numeric>
#include <string>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "jit/ir_loop.hpp"
#include "jit/ir_math.hpp"
#include "kernels/layout_walk.hpp"
#include "kernels/layout_walk_ir.hpp"

namespace primcache::cpu_internal {

generic_walk_shape generic_walk_shape_for(cpu_isa isa) noexcept {
  // default_reorder_config / default_eltwise_config: a vector of the ISA's
  // width, two per iteration, tiles of 16 at 512 bits and 8 below.
  if (isa >= cpu_isa::avx512_core) return {16, 2, 16, true, true};
  return {8, 2, 8, false, false};
}

std::string generic_reorder_name(cpu_isa isa) {
  return "reorder_generic_" + std::string(to_string(isa));
}

namespace {

const char* form_suffix(generic_walk_form form) {
  switch (form) {
    case generic_walk_form::stream: return "_stream";
    case generic_walk_form::tile: return "_tile";
    case generic_walk_form::runs: return "_runs";
  }
  return "";
}

}  // namespace

std::string generic_reorder_symbol(data_type src, data_type dst, generic_walk_form form) {
  return "reorder_generic_" + std::string(to_string(src)) + "_" + std::string(to_string(dst)) +
         form_suffix(form);
}

std::string generic_reorder_raw_symbol(std::size_t element_bytes, generic_walk_form form) {
  return "reorder_generic_raw" + std::to_string(element_bytes * 8) + form_suffix(form);
}

llvm::Value* emit_load_f32_lanes(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* index,
                                 llvm::Value* step, int n, llvm::Value* live) {
  llvm::Type* f32 = b.getFloatTy();
  auto scalar_at = [&](llvm::Value* i) {
    return b.CreateAlignedLoad(f32, b.CreateGEP(f32, base, i), llvm::Align(4));
  };
  if (n == 1) return scalar_at(index);
  llvm::Type* vt = llvm::FixedVectorType::get(f32, static_cast<unsigned>(n));
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  auto* splat_bb = llvm::BasicBlock::Create(ctx, "lanes.splat", fn);
  auto* other_bb = llvm::BasicBlock::Create(ctx, "lanes.other", fn);
  auto* dense_bb = llvm::BasicBlock::Create(ctx, "lanes.dense", fn);
  auto* gather_bb = llvm::BasicBlock::Create(ctx, "lanes.gather", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "lanes.done", fn);
  b.CreateCondBr(b.CreateICmpEQ(step, b.getInt64(0)), splat_bb, other_bb);
  b.SetInsertPoint(other_bb);
  b.CreateCondBr(b.CreateICmpEQ(step, b.getInt64(1)), dense_bb, gather_bb);

  b.SetInsertPoint(splat_bb);
  llvm::Value* s = b.CreateVectorSplat(static_cast<unsigned>(n), scalar_at(index));
  b.CreateBr(done);
  b.SetInsertPoint(dense_bb);
  llvm::Value* d = nullptr;
  if (live) {
    d = b.CreateMaskedLoad(vt, b.CreateGEP(f32, base, index), llvm::Align(4),
                           emit_lane_mask(b, live, n), llvm::Constant::getNullValue(vt));
  } else {
    d = b.CreateAlignedLoad(vt, b.CreateGEP(f32, base, index), llvm::Align(4));
  }
  b.CreateBr(done);
  b.SetInsertPoint(gather_bb);
  if (live) {
    // Only where a vector is clipped: a masked gather in place.
    std::vector<llvm::Constant*> iota;
    for (int e = 0; e < n; ++e) iota.push_back(b.getInt64(static_cast<std::uint64_t>(e)));
    llvm::Value* at = b.CreateAdd(b.CreateVectorSplat(static_cast<unsigned>(n), index),
                                  b.CreateMul(llvm::ConstantVector::get(iota),
                                              b.CreateVectorSplat(static_cast<unsigned>(n), step)));
    llvm::Value* g =
        b.CreateMaskedGather(vt, b.CreateGEP(f32, base, at), llvm::Align(4),
                             emit_lane_mask(b, live, n), llvm::Constant::getNullValue(vt));
    llvm::BasicBlock* gather_end = b.GetInsertBlock();
    b.CreateBr(done);
    b.SetInsertPoint(done);
    llvm::PHINode* out = b.CreatePHI(vt, 3);
    out->addIncoming(s, splat_bb);
    out->addIncoming(d, dense_bb);
    out->addIncoming(g, gather_end);
    return out;
  }
  // Single loads in a function of their own: inline, their n addresses
  // (invariant in a post-op loop) were hoisted out of it by LICM and
  // computed, and spilled, for every vector, gather or not.
  llvm::Module* m = fn->getParent();
  const std::string helper = "gw_gather_f32_" + std::to_string(n);
  llvm::Function* gather = m->getFunction(helper);
  if (gather == nullptr) {
    llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
    llvm::Type* i64 = b.getInt64Ty();
    gather = llvm::Function::Create(llvm::FunctionType::get(vt, {ptr, i64, i64}, false),
                                    llvm::Function::InternalLinkage, helper, m);
    gather->addFnAttr(llvm::Attribute::NoInline);
    gather->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::IRBuilder<> gb(llvm::BasicBlock::Create(ctx, "entry", gather));
    llvm::Value* g = llvm::PoisonValue::get(vt);
    for (int e = 0; e < n; ++e) {
      llvm::Value* i =
          gb.CreateAdd(gather->getArg(1),
                       gb.CreateMul(gather->getArg(2), gb.getInt64(static_cast<std::uint64_t>(e))));
      g = gb.CreateInsertElement(
          g, gb.CreateAlignedLoad(f32, gb.CreateGEP(f32, gather->getArg(0), i), llvm::Align(4)),
          static_cast<std::uint64_t>(e));
    }
    gb.CreateRet(g);
  }
  llvm::Value* g = b.CreateCall(gather, {base, index, step});
  llvm::BasicBlock* gather_end = b.GetInsertBlock();
  b.CreateBr(done);

  b.SetInsertPoint(done);
  llvm::PHINode* out = b.CreatePHI(vt, 3);
  out->addIncoming(s, splat_bb);
  out->addIncoming(d, dense_bb);
  out->addIncoming(g, gather_end);
  return out;
}

namespace {

// The walk of layout_walk_ir.cpp with its loops read at run time.
class generic_walk_emitter {
 public:
  generic_walk_emitter(llvm::Module& m, const generic_walk_shape& s, const generic_walk_variant& v)
      : m_(m), ctx_(m.getContext()), b_(ctx_), s_(s), v_(v) {}

  void emit(const std::string& symbol);

 private:
  llvm::Value* c64(std::int64_t v) { return b_.getInt64(static_cast<std::uint64_t>(v)); }
  llvm::Type* shaped(llvm::Type* t, int n) {
    return n == 1 ? t : static_cast<llvm::Type*>(llvm::FixedVectorType::get(t, n));
  }
  llvm::Type* storage_type(data_type dt) { return walk_storage_type(b_, dt, v_.raw); }
  llvm::Value* param(llvm::Value* slot) {
    return b_.CreateAlignedLoad(b_.getInt64Ty(), b_.CreateGEP(b_.getInt64Ty(), params_, slot),
                                llvm::Align(8));
  }
  llvm::Value* param(int slot) { return param(c64(slot)); }
  llvm::Value* level_field(llvm::Value* k, int field) {
    return param(b_.CreateAdd(c64(gw_level0 + field), b_.CreateMul(k, c64(gw_level_slots))));
  }

  using body_fn = std::function<void(llvm::Value*)>;
  llvm::Value* loop(llvm::Value* start, llvm::Value* end, std::int64_t step, const body_fn& body,
                    loop_test test = loop_test::index_below_end) {
    return emit_counted_loop(
               b_, start, end, step, {},
               [&](llvm::Value* i, const ir_values&) {
                 body(i);
                 return ir_values{};
               },
               test, "gw")
        .index;
  }
  void emit_if(llvm::Value* cond, const std::function<void()>& then_fn,
               const std::function<void()>& else_fn) {
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "gw.then", fn_);
    auto* else_bb = llvm::BasicBlock::Create(ctx_, "gw.else", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "gw.done", fn_);
    b_.CreateCondBr(cond, then_bb, else_bb);
    b_.SetInsertPoint(then_bb);
    then_fn();
    b_.CreateBr(done);
    b_.SetInsertPoint(else_bb);
    if (else_fn) else_fn();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  llvm::Value* load_lanes(llvm::Value* base, llvm::Type* ety, llvm::Value* off, int n) {
    const llvm::Align align(ety->getPrimitiveSizeInBits() / 8);
    return b_.CreateAlignedLoad(shaped(ety, n), b_.CreateGEP(ety, base, off), align);
  }
  void store_lanes(llvm::Value* v, llvm::Value* base, llvm::Type* ety, llvm::Value* off) {
    const llvm::Align align(ety->getPrimitiveSizeInBits() / 8);
    b_.CreateAlignedStore(v, b_.CreateGEP(ety, base, off), align);
  }
  // The specialized walk's conversions (layout_walk_ir.hpp).
  llvm::Value* to_value(llvm::Value* x) { return walk_to_f32(b_, v_.src_dt, v_.raw, x); }
  llvm::Value* from_value(llvm::Value* v) { return walk_from_f32(b_, v_.dst_dt, v_.raw, v); }

  // Scale (only where the specialized code scales) and transform.
  // `live`: the lanes, a prefix, whose scales and operands may be read
  // (null: all).
  // `convert` false: the f32 result, not yet dst's type (a tile's src row,
  // converted after the transpose).
  llvm::Value* finish_value(llvm::Value* v, int n, llvm::Value* dst_off, llvm::Value* dst_step,
                            llvm::Value* track, llvm::Value* track_step,
                            llvm::Value* live = nullptr, bool convert = true);
  // One element at (i, j) of the inner loops (i null: a streaming walk).
  void element(llvm::Value* i, llvm::Value* j);
  void vector(llvm::Value* j, int n);
  void stream(llvm::Value* s0, llvm::Value* s1);
  void tile(llvm::Value* i, llvm::Value* j);
  void tiles(llvm::Value* s0, llvm::Value* s1);

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const generic_walk_shape& s_;
  const generic_walk_variant& v_;
  llvm::Function* fn_ = nullptr;
  llvm::Type* src_ty_ = nullptr;
  llvm::Type* dst_ty_ = nullptr;
  llvm::Value* params_ = nullptr;
  llvm::Value* src_ = nullptr;
  llvm::Value* dst_ = nullptr;
  llvm::Value* scales_ = nullptr;
  llvm::Value* operands_ = nullptr;
  // Read once, at entry.
  llvm::Value* split_ss_ = nullptr;
  llvm::Value* split_ds_ = nullptr;
  llvm::Value* split_tr_ = nullptr;
  llvm::Value* j_extent_ = nullptr;
  llvm::Value* j_ss_ = nullptr;
  llvm::Value* j_tr_ = nullptr;
  llvm::Value* scale_kind_ = nullptr;
  // Per work item.
  llvm::Value* src_base_ = nullptr;
  llvm::Value* dst_base_ = nullptr;
  llvm::Value* track_base_ = nullptr;
  // The copy of the walk that checks padding (gw_checks > 0).
  bool checked_ = false;
  std::array<llvm::Value*, gw_max_checks> check_base_{};  // per work item
  std::array<llvm::Value*, gw_max_checks> check_dims_{};
  std::array<llvm::Value*, gw_max_checks> check_bound_{};
  std::array<llvm::Value*, gw_max_checks> check_split_{};
  std::array<llvm::Value*, gw_max_checks> check_j_{};

  // Where the checked dimensions leave their real extent (`bound` false) or
  // dst's padded bound along the split loop and the J loop, for the work
  // item at check_base_: an element at (i, j) of the inner loops (i null: a
  // streaming walk, j on the split loop) is real when i < split_real_ and
  // j < j_real_ (j < split_real_). Each checked dimension steps along one of
  // the two loops at most (make_generic_walk_params), so the real elements
  // of a work item are a rectangle, and of a vector or tile a prefix of its
  // rows and columns. Computed once per work item (a division only for an
  // index step above 1), instead of per vector or tile.
  void set_index_ends();
  // The first iteration of a loop whose index steps by `step` (>= 0, a
  // run-time i64) at which an index starting d below its limit reaches it:
  // 0 for d <= 0, INT64_MAX for step 0.
  llvm::Value* index_end(llvm::Value* d, llvm::Value* step);
  llvm::Value* split_real_ = nullptr;
  llvm::Value* split_bound_ = nullptr;
  llvm::Value* j_real_ = nullptr;
  llvm::Value* j_bound_ = nullptr;
  // How many of `limit` elements from index `at` lie below `end`: 0 ... limit.
  llvm::Value* count_below(llvm::Value* end, llvm::Value* at, int limit) {
    llvm::Value* d = b_.CreateSub(end, at);
    return smin(b_.CreateSelect(b_.CreateICmpSLT(d, c64(0)), c64(0), d), c64(limit));
  }
  // An element, a vector or a tile of the checked copy: as element(),
  // vector() and tile() where all real, clipped otherwise.
  void checked_element(llvm::Value* i, llvm::Value* j);
  void checked_vector(llvm::Value* j, int n);
  void checked_tile(llvm::Value* i, llvm::Value* j);

  llvm::Value* smin(llvm::Value* a, llvm::Value* b) {
    return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b);
  }
  // A vector of the ISA's lanes at j of a dense stream, clipped to its real
  // part: its real lanes (a prefix) converted as vector() converts them,
  // dst's padding after them written as zero, both by masked loads and
  // stores; lanes from `range` on (null: none) are past the loop, and lanes
  // past dst's padded bound are left alone. Under a joined split loop's
  // `form` (not none), read and written in runs (run_load, run_store).
  void clipped_vector(llvm::Value* j, llvm::Value* range, gw_run_form form = gw_run_form::none);
  // The same for a tile at (i, j): rows (along I) from ni on and columns
  // (along J) from nj on are past the loops (null: none). Real rows and
  // columns are prefixes (no checked dimension steps along both I and J:
  // make_generic_walk_params declines such walks).
  void clipped_tile(llvm::Value* i, llvm::Value* j, llvm::Value* ni, llvm::Value* nj);
  // A src row of a tile at (i, jr) scaled (the scales of the first `live`
  // lanes only; null: all): in dst's type where the shape converts before
  // the transpose, else as f32 (as is for a bit copy), for tile_out.
  llvm::Value* tile_row(llvm::Value* x, llvm::Value* i, llvm::Value* jr, llvm::Value* live);
  // A transposed row of a tile in dst's type.
  llvm::Value* tile_out(llvm::Value* row) {
    return s_.convert_before_transpose ? row : from_value(row);
  }
  // The type of tile_row's rows.
  llvm::Type* tile_row_type() {
    const int t = s_.tile;
    return v_.raw || s_.convert_before_transpose ? shaped(dst_ty_, t) : shaped(b_.getFloatTy(), t);
  }
  // Stores v (a vector of dst's type) at dst element `off`: whole where
  // `all` (every lane in bound), else the lanes of `mask`.
  void store_in_bound(llvm::Value* v, llvm::Value* off, llvm::Value* all, llvm::Value* mask);
  llvm::AllocaInst* tile_rows_ = nullptr;  // the transposed rows of a clipped tile (dst's type)
  void any_element(llvm::Value* i, llvm::Value* j) {
    if (checked_) {
      checked_element(i, j);
    } else {
      element(i, j);
    }
  }
  // Steps the odometer (levels in idx, the innermost at `last`) by one
  // work item: the innermost level steps; a level that wraps returns to 0
  // and carries into the next outer one. c: the bases, stepped and returned.
  ir_values odometer_step(llvm::Value* idx, llvm::Value* last, const ir_values& c);
  // Work items [begin, end) in runs along the innermost level k (the level
  // before the chunks, one chunk per split loop; no checked index steps
  // along k): the bases of a run's first item set (src_base_...), the index
  // ends computed once, `run(m, k)` emitted for its m items, then the
  // odometer stepped past them.
  using run_fn = std::function<void(llvm::Value* m, llvm::Value* k)>;
  void item_runs(llvm::Value* idx, llvm::Value* last, llvm::Value* begin, llvm::Value* end,
                 const ir_values& bases, const run_fn& run);
  // The checked copy's run of m items (gw_batch) as one dense stream of m
  // split loops whose vectors hold several of them, masked per lane by the
  // position in its split loop.
  void batched_run(llvm::Value* m, llvm::Value* split_extent);
  // A run of m items of a joined split loop (gw_runs): item by item along
  // level k, each split loop in whole vectors that meet the runs as `form`
  // says; vectors past the real elements clipped as clipped_vector clips.
  void joined_run(llvm::Value* m, llvm::Value* k, llvm::Value* split_extent, gw_run_form form);
  // n lanes of the joined split loop from j on (j a multiple of n): one
  // access, or two of half a vector where `form` has that side's runs so;
  // with `count` (null: all lanes) only the first count lanes, the others
  // read as zero or left alone.
  llvm::Value* run_load(llvm::Value* j, gw_run_form form, llvm::Value* count);
  void run_store(llvm::Value* v, llvm::Value* j, gw_run_form form, llvm::Value* count);
  // The element offset, from the item's base, of lanes [k, ...) of the
  // vector at iteration j (a multiple of the lanes) of the joined split
  // loop, on the side whose runs `run` holds (shift, mask, stride) when
  // `runs` says it has them. What the form fixes is folded in: halves are
  // runs of exactly half the vector, so the vector starts a run (j & mask
  // is 0) and its second half is the next run; a side without runs under a
  // halves form is contiguous.
  llvm::Value* run_part_offset(llvm::Value* j, int k, gw_run_form form, bool runs,
                               const std::array<llvm::Value*, 3>& run);
  std::array<llvm::Value*, 3> src_run_{};  // shift, mask, stride
  std::array<llvm::Value*, 3> dst_run_{};
  void any_vector(llvm::Value* j, int n) {
    if (checked_) {
      checked_vector(j, n);
    } else {
      vector(j, n);
    }
  }
};

llvm::Value* generic_walk_emitter::index_end(llvm::Value* d, llvm::Value* step) {
  // Step 0: never or at once; 1: d; larger: ceil(d / step), the one division
  // behind a branch on the step (a constant of the walk).
  llvm::Value* zero = c64(0);
  llvm::Value* simple =
      b_.CreateSelect(b_.CreateICmpEQ(step, zero),
                      b_.CreateSelect(b_.CreateICmpSGT(d, zero), c64(INT64_MAX), zero), d);
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* div_bb = llvm::BasicBlock::Create(ctx_, "end.div", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "end.done", fn_);
  b_.CreateCondBr(b_.CreateICmpSGT(step, c64(1)), div_bb, done);
  b_.SetInsertPoint(div_bb);
  llvm::Value* pos = b_.CreateSelect(b_.CreateICmpSGT(d, zero), d, zero);
  llvm::Value* q = b_.CreateUDiv(b_.CreateAdd(pos, b_.CreateSub(step, c64(1))), step);
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  llvm::PHINode* n = b_.CreatePHI(b_.getInt64Ty(), 2);
  n->addIncoming(simple, from);
  n->addIncoming(q, div_bb);
  return b_.CreateSelect(b_.CreateICmpSLT(n, zero), zero, n);
}

void generic_walk_emitter::set_index_ends() {
  split_real_ = split_bound_ = j_real_ = j_bound_ = c64(INT64_MAX);
  for (int c = 0; c < gw_max_checks; ++c) {
    llvm::Value* d = b_.CreateSub(check_dims_[c], check_base_[c]);
    llvm::Value* e = b_.CreateSub(check_bound_[c], check_base_[c]);
    split_real_ = smin(split_real_, index_end(d, check_split_[c]));
    split_bound_ = smin(split_bound_, index_end(e, check_split_[c]));
    if (v_.form == generic_walk_form::tile) {
      j_real_ = smin(j_real_, index_end(d, check_j_[c]));
      j_bound_ = smin(j_bound_, index_end(e, check_j_[c]));
    }
  }
}

void generic_walk_emitter::checked_element(llvm::Value* i, llvm::Value* j) {
  // As walk_emitter::emit_element: real elements converted, dst's padding
  // zero, elements past the bound (a loop rounded up to its cut) untouched.
  llvm::Value* real =
      i ? b_.CreateAnd(b_.CreateICmpSLT(i, split_real_), b_.CreateICmpSLT(j, j_real_))
        : b_.CreateICmpSLT(j, split_real_);
  llvm::Value* in_bound =
      i ? b_.CreateAnd(b_.CreateICmpSLT(i, split_bound_), b_.CreateICmpSLT(j, j_bound_))
        : b_.CreateICmpSLT(j, split_bound_);
  emit_if(
      real, [&] { element(i, j); },
      [&] {
        emit_if(in_bound,
                [&] {
                  llvm::Value* dst_off =
                      i ? b_.CreateAdd(b_.CreateAdd(dst_base_, j), b_.CreateMul(i, split_ds_))
                        : b_.CreateAdd(dst_base_, b_.CreateMul(j, split_ds_));
                  store_lanes(llvm::Constant::getNullValue(dst_ty_), dst_, dst_ty_, dst_off);
                },
                {});
      });
}

void generic_walk_emitter::checked_vector(llvm::Value* j, int n) {
  // A wider vector (the eltwise's dense loop) is clipped vector by vector.
  emit_if(
      b_.CreateICmpSLE(b_.CreateAdd(j, c64(n)), split_real_), [&] { vector(j, n); },
      [&] {
        for (int k = 0; k < n; k += s_.lanes) clipped_vector(b_.CreateAdd(j, c64(k)), nullptr);
      });
}

void generic_walk_emitter::clipped_vector(llvm::Value* j, llvm::Value* range, gw_run_form form) {
  const int n = s_.lanes;
  llvm::Value* real = count_below(split_real_, j, n);
  llvm::Value* bound = count_below(split_bound_, j, n);
  if (range) {
    real = smin(real, range);
    bound = smin(bound, range);
  }
  llvm::Type* dvt = shaped(dst_ty_, n);
  llvm::Value* dst_off = b_.CreateAdd(dst_base_, j);
  llvm::Value* zero = llvm::Constant::getNullValue(dvt);
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* some_bb = llvm::BasicBlock::Create(ctx_, "clip.real", fn_);
  auto* store_bb = llvm::BasicBlock::Create(ctx_, "clip.store", fn_);
  b_.CreateCondBr(b_.CreateICmpSGT(real, c64(0)), some_bb, store_bb);
  b_.SetInsertPoint(some_bb);
  llvm::Value* x;
  if (form == gw_run_form::none) {
    llvm::Type* svt = shaped(src_ty_, n);
    x = b_.CreateMaskedLoad(svt, b_.CreateGEP(src_ty_, src_, b_.CreateAdd(src_base_, j)),
                            llvm::Align(src_ty_->getPrimitiveSizeInBits() / 8),
                            emit_lane_mask(b_, real, n), llvm::Constant::getNullValue(svt));
  } else {
    x = run_load(j, form, real);
  }
  llvm::Value* track = b_.CreateAdd(track_base_, b_.CreateMul(j, split_tr_));
  llvm::Value* v = finish_value(to_value(x), n, dst_off, c64(1), track, split_tr_, real);
  v = b_.CreateSelect(emit_lane_mask(b_, real, n), v, zero);
  llvm::BasicBlock* some_end = b_.GetInsertBlock();
  b_.CreateBr(store_bb);
  b_.SetInsertPoint(store_bb);
  llvm::PHINode* out = b_.CreatePHI(dvt, 2);
  out->addIncoming(zero, from);
  out->addIncoming(v, some_end);
  if (form == gw_run_form::none) {
    store_in_bound(out, dst_off, b_.CreateICmpEQ(bound, c64(n)), emit_lane_mask(b_, bound, n));
    return;
  }
  // Runs with nothing in bound are not touched (run_store's masked parts
  // would still address the first run).
  emit_if(
      b_.CreateICmpEQ(bound, c64(n)), [&] { run_store(out, j, form, nullptr); },
      [&] {
        emit_if(b_.CreateICmpSGT(bound, c64(0)), [&] { run_store(out, j, form, bound); }, {});
      });
}

void generic_walk_emitter::store_in_bound(llvm::Value* v, llvm::Value* off, llvm::Value* all,
                                          llvm::Value* mask) {
  // A masked store is slow where the mask is all ones anyway (avx2's
  // vmaskmov on some cores, a branch per lane for 8- and 16-bit elements):
  // a plain store then, the test predicted.
  const llvm::Align align(dst_ty_->getPrimitiveSizeInBits() / 8);
  llvm::Value* at = b_.CreateGEP(dst_ty_, dst_, off);
  emit_if(
      all, [&] { b_.CreateAlignedStore(v, at, align); },
      [&] { b_.CreateMaskedStore(v, at, align, mask); });
}

void generic_walk_emitter::clipped_tile(llvm::Value* i, llvm::Value* j, llvm::Value* ni,
                                        llvm::Value* nj) {
  const int t = s_.tile;
  // Real and in-bound rows and columns: a rectangle each.
  llvm::Value* rows_real = count_below(split_real_, i, t);
  llvm::Value* cols_real = count_below(j_real_, j, t);
  llvm::Value* rows_bound = count_below(split_bound_, i, t);
  llvm::Value* cols_bound = count_below(j_bound_, j, t);
  if (ni) {
    rows_real = smin(rows_real, ni);
    rows_bound = smin(rows_bound, ni);
  }
  if (nj) {
    cols_real = smin(cols_real, nj);
    cols_bound = smin(cols_bound, nj);
  }
  rows_real = b_.CreateSelect(b_.CreateICmpEQ(cols_real, c64(0)), c64(0), rows_real);
  // Every column in bound (the padding ends with a block, the usual case):
  // dst rows are stored whole.
  llvm::Value* whole_rows = b_.CreateICmpEQ(cols_bound, c64(t));
  // No real element (a tile of padding alone, as the upper half of a
  // 16-channel block with 3 real channels in tiles of 8): zero stores only.
  // Tiles of 16 lie wholly in the padding of no 8- or 16-element block, so
  // they skip the test (it cost about 8% on avx512_core's padded rows).
  auto* none_bb = llvm::BasicBlock::Create(ctx_, "clip.none", fn_);
  auto* some_bb = llvm::BasicBlock::Create(ctx_, "clip.some", fn_);
  auto* tile_done = llvm::BasicBlock::Create(ctx_, "clip.tile.done", fn_);
  b_.CreateCondBr(t < 16 ? b_.CreateICmpEQ(rows_real, c64(0)) : b_.getFalse(), none_bb, some_bb);
  b_.SetInsertPoint(none_bb);
  {
    llvm::Value* bound_lanes = emit_lane_mask(b_, cols_bound, t);
    llvm::Value* row0 = b_.CreateAdd(dst_base_, j);
    loop(c64(0), rows_bound, 1, [&](llvm::Value* q) {
      llvm::Value* off = b_.CreateAdd(row0, b_.CreateMul(b_.CreateAdd(i, q), split_ds_));
      store_in_bound(llvm::Constant::getNullValue(shaped(dst_ty_, t)), off, whole_rows,
                     bound_lanes);
    });
  }
  b_.CreateBr(tile_done);
  b_.SetInsertPoint(some_bb);
  // Src rows (one per column, along I): the real ones, whole where every
  // row of the tile is real, else by masked loads, scaled as tile() scales
  // them, their lanes past the real rows zero; the columns past
  // the real ones are not read at all (a masked load whose lanes are all
  // off still costs an address translation, and at avx512_core an assist
  // where it points past the buffer: most of the time of a tile with 3
  // real columns of 16) and stay zero.
  llvm::Type* svt = shaped(src_ty_, t);
  llvm::Type* dvt = shaped(dst_ty_, t);
  llvm::Type* rvt = tile_row_type();
  llvm::Value* zero = llvm::Constant::getNullValue(rvt);
  const llvm::Align salign(src_ty_->getPrimitiveSizeInBits() / 8);
  llvm::Value* src_off = b_.CreateAdd(b_.CreateAdd(src_base_, i), b_.CreateMul(j, j_ss_));
  llvm::Value* row_mask = emit_lane_mask(b_, rows_real, t);
  llvm::Value* all_rows = b_.CreateICmpEQ(rows_real, c64(t));
  llvm::Value* no_row = llvm::Constant::getNullValue(svt);
  std::vector<llvm::Value*> rows(static_cast<std::size_t>(t));
  // The rows' addresses step from one to the next (no per-row multiply, no
  // t hoisted offsets to spill).
  // Frozen: loop strength reduction would make each row's address an
  // induction variable of the I loop of its own (t of them, kept on the
  // stack and stepped there, a read-modify-write per row and tile).
  llvm::Value* at = b_.CreateFreeze(b_.CreateGEP(src_ty_, src_, src_off));
  for (int r = 0; r < t; ++r) {
    if (r > 0) at = b_.CreateGEP(src_ty_, at, j_ss_);
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* real_bb = llvm::BasicBlock::Create(ctx_, "clip.load", fn_);
    auto* whole_bb = llvm::BasicBlock::Create(ctx_, "clip.load.whole", fn_);
    auto* part_bb = llvm::BasicBlock::Create(ctx_, "clip.load.part", fn_);
    auto* convert_bb = llvm::BasicBlock::Create(ctx_, "clip.convert", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "clip.row.done", fn_);
    b_.CreateCondBr(b_.CreateICmpSGT(cols_real, c64(r)), real_bb, done);
    b_.SetInsertPoint(real_bb);
    b_.CreateCondBr(all_rows, whole_bb, part_bb);
    b_.SetInsertPoint(whole_bb);
    llvm::Value* whole = b_.CreateAlignedLoad(svt, at, salign);
    b_.CreateBr(convert_bb);
    b_.SetInsertPoint(part_bb);
    llvm::Value* part = b_.CreateMaskedLoad(svt, at, salign, row_mask, no_row);
    b_.CreateBr(convert_bb);
    b_.SetInsertPoint(convert_bb);
    llvm::PHINode* x = b_.CreatePHI(svt, 2);
    x->addIncoming(whole, whole_bb);
    x->addIncoming(part, part_bb);
    llvm::Value* y = tile_row(x, i, b_.CreateAdd(j, c64(r)), rows_real);
    // A bit copy's masked-off lanes are the zeros loaded; a conversion's
    // scale could make them other than zero.
    if (!v_.raw) y = b_.CreateSelect(row_mask, y, zero);
    llvm::BasicBlock* convert_end = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    llvm::PHINode* row = b_.CreatePHI(rvt, 2);
    row->addIncoming(zero, from);
    row->addIncoming(y, convert_end);
    rows[r] = row;
  }
  // The transpose. Columns past the real ones are zero rows: with at most
  // R of them real (R = 4, or half a tile), only the first R rows are
  // transposed, in blocks of R lanes (log2(R) of the log2(t) stages), and
  // dst row q is lanes [q / R * R, +R) of row q % R, zero-extended. Rows
  // past the real ones are zero lanes: with at most R of them real (1, or
  // half a tile: 17 channels from nChw16c), the stages of the bits from R
  // up fold every row's lanes into the first R rows (t - R shuffles: their
  // other halves are zero), and the stages below R transpose those.
  struct narrow_form {
    bool columns;  // few real columns (else few real rows)
    int r;
  };
  std::vector<narrow_form> narrow;
  for (int r : {4, t / 2}) {
    if (r < t && (narrow.empty() || narrow.back().r != r)) narrow.push_back({true, r});
  }
  for (int r : {1, t / 2}) narrow.push_back({false, r});
  std::vector<llvm::Value*> out(static_cast<std::size_t>(t));
  {
    std::vector<llvm::BasicBlock*> ends;
    std::vector<std::vector<llvm::Value*>> forms;
    auto* joined = llvm::BasicBlock::Create(ctx_, "clip.transposed", fn_);
    auto few_columns = [&](int rr) {
      std::vector<llvm::Value*> part(rows.begin(), rows.begin() + rr);
      walk_transpose(b_, part);
      std::vector<llvm::Value*> o(static_cast<std::size_t>(t));
      for (int q = 0; q < t; ++q) {
        std::vector<int> pick(static_cast<std::size_t>(t), t);
        for (int e = 0; e < rr; ++e) pick[e] = q / rr * rr + e;
        o[q] = b_.CreateShuffleVector(part[q % rr], zero, pick);
      }
      return o;
    };
    auto few_rows = [&](int rr) {
      std::vector<llvm::Value*> v = rows;
      for (int h = t / 2; h >= rr && h >= 1; h /= 2) {
        std::vector<int> lo(static_cast<std::size_t>(t));
        for (int c = 0; c < t; ++c) lo[c] = (c & h) ? t + (c ^ h) : c;
        for (int r = 0; r < h; ++r) v[r] = b_.CreateShuffleVector(v[r], v[r + h], lo);
      }
      std::vector<llvm::Value*> part(v.begin(), v.begin() + rr);
      if (rr > 1) walk_transpose(b_, part);
      std::vector<llvm::Value*> o(static_cast<std::size_t>(t), zero);
      for (int q = 0; q < rr; ++q) o[q] = part[q];
      return o;
    };
    for (const narrow_form& f : narrow) {
      auto* yes = llvm::BasicBlock::Create(ctx_, "clip.narrow", fn_);
      auto* no = llvm::BasicBlock::Create(ctx_, "clip.wider", fn_);
      b_.CreateCondBr(b_.CreateICmpSLE(f.columns ? cols_real : rows_real, c64(f.r)), yes, no);
      b_.SetInsertPoint(yes);
      forms.push_back(f.columns ? few_columns(f.r) : few_rows(f.r));
      ends.push_back(b_.GetInsertBlock());
      b_.CreateBr(joined);
      b_.SetInsertPoint(no);
    }
    walk_transpose(b_, rows);
    forms.push_back(rows);
    ends.push_back(b_.GetInsertBlock());
    b_.CreateBr(joined);
    b_.SetInsertPoint(joined);
    for (int q = 0; q < t; ++q) {
      llvm::PHINode* phi = b_.CreatePHI(rvt, static_cast<unsigned>(forms.size()));
      for (std::size_t f = 0; f < forms.size(); ++f) phi->addIncoming(forms[f][q], ends[f]);
      out[q] = phi;
    }
    for (int q = 0; q < t; ++q) out[q] = tile_out(out[q]);
  }
  // Rows past the real ones are zero (their lanes were). Every row in bound
  // and whole (the usual case): t plain stores. Otherwise the in-bound rows
  // (each behind a test of its index): whole, or half rows (a J loop of
  // half a tile: nChw8c at avx512_core; pairs of them below), or masked
  // where masked stores are instructions (avx512bw; 32-bit elements);
  // elsewhere (a branch per lane) a loop over the rows keeps the code small.
  llvm::Value* dst_off0 = b_.CreateAdd(dst_base_, j);
  // Frozen as the src rows' address.
  llvm::Value* row0 = b_.CreateFreeze(
      b_.CreateGEP(dst_ty_, dst_, b_.CreateAdd(dst_off0, b_.CreateMul(i, split_ds_))));
  const llvm::Align dalign(dst_ty_->getPrimitiveSizeInBits() / 8);
  const int h = t / 2;
  std::vector<int> low(static_cast<std::size_t>(h));
  std::iota(low.begin(), low.end(), 0);
  const bool unrolled = s_.narrow_masks || dst_ty_->getPrimitiveSizeInBits() >= 32;
  llvm::Value* col_bound = emit_lane_mask(b_, cols_bound, t);
  llvm::Value* all_in = b_.CreateICmpEQ(rows_bound, c64(t));
  auto* all_bb = llvm::BasicBlock::Create(ctx_, "clip.store.all", fn_);
  auto* whole_bb = llvm::BasicBlock::Create(ctx_, "clip.store.whole", fn_);
  auto* half_bb = llvm::BasicBlock::Create(ctx_, "clip.store.half", fn_);
  auto* pairs_bb = llvm::BasicBlock::Create(ctx_, "clip.store.pairs", fn_);
  auto* masked_bb = llvm::BasicBlock::Create(ctx_, "clip.store.masked", fn_);
  auto* loop_bb = llvm::BasicBlock::Create(ctx_, "clip.store.loop", fn_);
  auto* stored = llvm::BasicBlock::Create(ctx_, "clip.stored", fn_);
  // Half rows that follow one another (every row in bound, dst's I stride
  // half a tile: nchw to nChw8c at avx512_core) go two to a vector, as the
  // specialized walk stores them: t / 2 stores, no test per row.
  llvm::Value* half_form =
      b_.CreateSelect(b_.CreateAnd(all_in, b_.CreateICmpEQ(split_ds_, c64(h))), c64(5), c64(2));
  llvm::Value* form = b_.CreateSelect(
      whole_rows, b_.CreateSelect(all_in, c64(0), c64(1)),
      b_.CreateSelect(b_.CreateICmpEQ(cols_bound, c64(h)), half_form, c64(unrolled ? 3 : 4)));
  llvm::SwitchInst* sw = b_.CreateSwitch(form, loop_bb, 5);
  sw->addCase(b_.getInt64(0), all_bb);
  sw->addCase(b_.getInt64(1), whole_bb);
  sw->addCase(b_.getInt64(2), half_bb);
  sw->addCase(b_.getInt64(3), masked_bb);
  sw->addCase(b_.getInt64(5), pairs_bb);
  // Stores row q by `store` at its address; `guarded`: only below rows_bound.
  auto store_rows = [&](bool guarded,
                        const std::function<void(llvm::Value*, llvm::Value*)>& store) {
    llvm::Value* to = row0;
    for (int q = 0; q < t; ++q) {
      if (q > 0) to = b_.CreateGEP(dst_ty_, to, split_ds_);
      if (guarded) {
        emit_if(b_.CreateICmpSGT(rows_bound, c64(q)), [&] { store(out[q], to); }, {});
      } else {
        store(out[q], to);
      }
    }
    b_.CreateBr(stored);
  };
  b_.SetInsertPoint(all_bb);
  store_rows(false, [&](llvm::Value* v, llvm::Value* to) { b_.CreateAlignedStore(v, to, dalign); });
  b_.SetInsertPoint(whole_bb);
  store_rows(true, [&](llvm::Value* v, llvm::Value* to) { b_.CreateAlignedStore(v, to, dalign); });
  b_.SetInsertPoint(half_bb);
  store_rows(true, [&](llvm::Value* v, llvm::Value* to) {
    b_.CreateAlignedStore(b_.CreateShuffleVector(v, low), to, dalign);
  });
  b_.SetInsertPoint(pairs_bb);
  {
    std::vector<int> both(static_cast<std::size_t>(t));
    for (int e = 0; e < t; ++e) both[e] = e < h ? e : t + e - h;
    llvm::Value* to = row0;
    for (int q = 0; q < t; q += 2) {
      if (q > 0) to = b_.CreateGEP(dst_ty_, to, c64(t));
      b_.CreateAlignedStore(b_.CreateShuffleVector(out[q], out[q + 1], both), to, dalign);
    }
    b_.CreateBr(stored);
  }
  b_.SetInsertPoint(masked_bb);
  if (unrolled) {
    store_rows(true, [&](llvm::Value* v, llvm::Value* to) {
      b_.CreateMaskedStore(v, to, dalign, col_bound);
    });
  } else {
    b_.CreateBr(stored);
  }
  b_.SetInsertPoint(loop_bb);
  if (!tile_rows_) {
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    tile_rows_ = eb.CreateAlloca(dvt, c64(t));
  }
  for (int q = 0; q < t; ++q) {
    b_.CreateAlignedStore(out[q], b_.CreateGEP(dvt, tile_rows_, c64(q)), tile_rows_->getAlign());
  }
  loop(c64(0), rows_bound, 1, [&](llvm::Value* q) {
    llvm::Value* iq = b_.CreateAdd(i, q);
    llvm::Value* row =
        b_.CreateAlignedLoad(dvt, b_.CreateGEP(dvt, tile_rows_, q), tile_rows_->getAlign());
    store_in_bound(row, b_.CreateAdd(dst_off0, b_.CreateMul(iq, split_ds_)), whole_rows, col_bound);
  });
  b_.CreateBr(stored);
  b_.SetInsertPoint(stored);
  b_.CreateBr(tile_done);
  b_.SetInsertPoint(tile_done);
}

void generic_walk_emitter::checked_tile(llvm::Value* i, llvm::Value* j) {
  const int t = s_.tile;
  emit_if(
      b_.CreateAnd(b_.CreateICmpSLE(b_.CreateAdd(i, c64(t)), split_real_),
                   b_.CreateICmpSLE(b_.CreateAdd(j, c64(t)), j_real_)),
      [&] { tile(i, j); }, [&] { clipped_tile(i, j, nullptr, nullptr); });
}

llvm::Value* generic_walk_emitter::finish_value(llvm::Value* v, int n, llvm::Value* dst_off,
                                                llvm::Value* dst_step, llvm::Value* track,
                                                llvm::Value* track_step, llvm::Value* live,
                                                bool convert) {
  if (v_.raw) return v;
  if (v_.scales) {
    // none: no multiply; common: scales[0]; per_dim: scales[tracked index].
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* common_bb = llvm::BasicBlock::Create(ctx_, "scale.common", fn_);
    auto* dim_bb = llvm::BasicBlock::Create(ctx_, "scale.dim", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "scale.done", fn_);
    llvm::SwitchInst* sw = b_.CreateSwitch(scale_kind_, done, 2);
    sw->addCase(b_.getInt64(static_cast<std::uint64_t>(reorder_scales::common)), common_bb);
    sw->addCase(b_.getInt64(static_cast<std::uint64_t>(reorder_scales::per_dim)), dim_bb);
    b_.SetInsertPoint(common_bb);
    llvm::Value* s = b_.CreateAlignedLoad(b_.getFloatTy(), scales_, llvm::Align(4));
    if (n > 1) s = b_.CreateVectorSplat(static_cast<unsigned>(n), s);
    llvm::Value* vc = b_.CreateFMul(v, s);
    b_.CreateBr(done);
    b_.SetInsertPoint(dim_bb);
    llvm::Value* vd =
        b_.CreateFMul(v, emit_load_f32_lanes(b_, scales_, track, track_step, n, live));
    llvm::BasicBlock* dim_end = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    llvm::PHINode* out = b_.CreatePHI(v->getType(), 3);
    out->addIncoming(v, from);
    out->addIncoming(vc, common_bb);
    out->addIncoming(vd, dim_end);
    v = out;
  }
  if (v_.transform) {
    generic_walk_lanes lanes;
    lanes.params = params_;
    lanes.operands = operands_;
    lanes.dst_offset = dst_off;
    lanes.dst_step = dst_step;
    lanes.track_index = track;
    lanes.track_step = track_step;
    lanes.lanes = n;
    lanes.live = live;
    v = v_.transform(b_, v, lanes);
  }
  return convert ? from_value(v) : v;
}

void generic_walk_emitter::element(llvm::Value* i, llvm::Value* j) {
  llvm::Value* src_off;
  llvm::Value* dst_off;
  llvm::Value* track;
  llvm::Value* track_step;
  if (i) {  // tile form: I has src stride 1, J dst stride 1
    src_off = b_.CreateAdd(b_.CreateAdd(src_base_, i), b_.CreateMul(j, j_ss_));
    dst_off = b_.CreateAdd(b_.CreateAdd(dst_base_, j), b_.CreateMul(i, split_ds_));
    track =
        b_.CreateAdd(track_base_, b_.CreateAdd(b_.CreateMul(i, split_tr_), b_.CreateMul(j, j_tr_)));
    track_step = j_tr_;
  } else {
    src_off = b_.CreateAdd(src_base_, b_.CreateMul(j, split_ss_));
    dst_off = b_.CreateAdd(dst_base_, b_.CreateMul(j, split_ds_));
    track = b_.CreateAdd(track_base_, b_.CreateMul(j, split_tr_));
    track_step = split_tr_;
  }
  llvm::Value* x = to_value(load_lanes(src_, src_ty_, src_off, 1));
  store_lanes(finish_value(x, 1, dst_off, i ? c64(1) : split_ds_, track, track_step), dst_, dst_ty_,
              dst_off);
}

void generic_walk_emitter::vector(llvm::Value* j, int n) {
  // Both strides are 1.
  llvm::Value* src_off = b_.CreateAdd(src_base_, j);
  llvm::Value* dst_off = b_.CreateAdd(dst_base_, j);
  llvm::Value* track = b_.CreateAdd(track_base_, b_.CreateMul(j, split_tr_));
  llvm::Value* x = to_value(load_lanes(src_, src_ty_, src_off, n));
  store_lanes(finish_value(x, n, dst_off, c64(1), track, split_tr_), dst_, dst_ty_, dst_off);
}

void generic_walk_emitter::stream(llvm::Value* s0, llvm::Value* s1) {
  llvm::Value* dense =
      b_.CreateAnd(b_.CreateICmpEQ(split_ss_, c64(1)), b_.CreateICmpEQ(split_ds_, c64(1)));
  emit_if(
      dense,
      [&] {
        if (v_.raw && !checked_) {
          const std::int64_t es = static_cast<std::int64_t>(size_of(v_.src_dt));
          llvm::Value* sp = b_.CreateGEP(b_.getInt8Ty(), src_,
                                         b_.CreateMul(b_.CreateAdd(src_base_, s0), c64(es)));
          llvm::Value* dp = b_.CreateGEP(b_.getInt8Ty(), dst_,
                                         b_.CreateMul(b_.CreateAdd(dst_base_, s0), c64(es)));
          b_.CreateMemCpy(dp, llvm::MaybeAlign(es), sp, llvm::MaybeAlign(es),
                          b_.CreateMul(b_.CreateSub(s1, s0), c64(es)));
          return;
        }
        const int n = s_.lanes;
        llvm::Value* j = s0;
        if (v_.wide > 1) {
          j = loop(
              j, s1, std::int64_t{n} * v_.wide,
              [&](llvm::Value* at) { any_vector(at, n * v_.wide); }, loop_test::step_within_end);
        } else if (s_.unroll > 1) {
          j = loop(
              j, s1, std::int64_t{n} * s_.unroll,
              [&](llvm::Value* at) {
                for (int u = 0; u < s_.unroll; ++u) any_vector(b_.CreateAdd(at, c64(u * n)), n);
              },
              loop_test::step_within_end);
        }
        j = loop(
            j, s1, n, [&](llvm::Value* at) { any_vector(at, n); }, loop_test::step_within_end);
        if (checked_) {
          // Fewer than n elements: one vector clipped to them.
          emit_if(b_.CreateICmpSLT(j, s1), [&] { clipped_vector(j, b_.CreateSub(s1, j)); }, {});
        } else {
          loop(j, s1, 1, [&](llvm::Value* at) { any_element(nullptr, at); });
        }
      },
      [&] { loop(s0, s1, 1, [&](llvm::Value* at) { any_element(nullptr, at); }); });
}

llvm::Value* generic_walk_emitter::tile_row(llvm::Value* x, llvm::Value* i, llvm::Value* jr,
                                            llvm::Value* live) {
  // Lane e is the element at (i + e, jr). Tiles carry no transform (an
  // eltwise never transposes), so no dst offset is needed.
  assert(!v_.transform);
  llvm::Value* track =
      b_.CreateAdd(track_base_, b_.CreateAdd(b_.CreateMul(i, split_tr_), b_.CreateMul(jr, j_tr_)));
  return finish_value(to_value(x), s_.tile, nullptr, nullptr, track, split_tr_, live,
                      s_.convert_before_transpose);
}

void generic_walk_emitter::tile(llvm::Value* i, llvm::Value* j) {
  // As walk_emitter::emit_tile for a full tile: rows along I (src stride 1)
  // read, transposed by shuffles and stored along J (dst stride 1). The
  // scales are applied to the src rows, before the transpose (the
  // specialized code scales the transposed rows: the same bits, the
  // multiply is elementwise), so the run-time dispatch on their kind runs
  // while few rows are live; the conversion to dst's type too where the
  // shape says so (tile_row, tile_out).
  const int t = s_.tile;
  llvm::Value* src_off = b_.CreateAdd(b_.CreateAdd(src_base_, i), b_.CreateMul(j, j_ss_));
  std::vector<llvm::Value*> rows(static_cast<std::size_t>(t));
  // The rows' addresses step from one to the next (no per-row multiply, no
  // t hoisted offsets to spill).
  llvm::Type* svt = shaped(src_ty_, t);
  const llvm::Align salign(src_ty_->getPrimitiveSizeInBits() / 8);
  llvm::Value* at = b_.CreateGEP(src_ty_, src_, src_off);
  for (int r = 0; r < t; ++r) {
    if (r > 0) at = b_.CreateGEP(src_ty_, at, j_ss_);
    rows[r] = tile_row(b_.CreateAlignedLoad(svt, at, salign), i, b_.CreateAdd(j, c64(r)), nullptr);
  }
  walk_transpose(b_, rows);
  const llvm::Align dalign(dst_ty_->getPrimitiveSizeInBits() / 8);
  llvm::Value* to = b_.CreateGEP(
      dst_ty_, dst_, b_.CreateAdd(b_.CreateAdd(dst_base_, j), b_.CreateMul(i, split_ds_)));
  for (int q = 0; q < t; ++q) {
    if (q > 0) to = b_.CreateGEP(dst_ty_, to, split_ds_);
    b_.CreateAlignedStore(tile_out(rows[q]), to, dalign);
  }
}

void generic_walk_emitter::tiles(llvm::Value* s0, llvm::Value* s1) {
  const int t = s_.tile;
  if (checked_) {
    // Full tiles where all real, clipped tiles elsewhere and at the edges of
    // the I and J loops.
    llvm::Value* i = loop(
        s0, s1, t,
        [&](llvm::Value* iv) {
          llvm::Value* jend = loop(
              c64(0), j_extent_, t, [&](llvm::Value* jv) { checked_tile(iv, jv); },
              loop_test::step_within_end);
          emit_if(b_.CreateICmpSLT(jend, j_extent_),
                  [&] { clipped_tile(iv, jend, nullptr, b_.CreateSub(j_extent_, jend)); }, {});
        },
        loop_test::step_within_end);
    emit_if(b_.CreateICmpSLT(i, s1),
            [&] {
              loop(c64(0), j_extent_, t, [&](llvm::Value* jv) {
                clipped_tile(i, jv, b_.CreateSub(s1, i), smin(c64(t), b_.CreateSub(j_extent_, jv)));
              });
            },
            {});
    return;
  }
  llvm::Value* i = loop(
      s0, s1, t,
      [&](llvm::Value* iv) {
        llvm::Value* jend = loop(
            c64(0), j_extent_, t,
            [&](llvm::Value* jv) {
              if (checked_) {
                checked_tile(iv, jv);
              } else {
                tile(iv, jv);
              }
            },
            loop_test::step_within_end);
        loop(jend, j_extent_, 1, [&](llvm::Value* jv) {
          loop(iv, b_.CreateAdd(iv, c64(t)), 1, [&](llvm::Value* iq) { any_element(iq, jv); });
        });
      },
      loop_test::step_within_end);
  loop(i, s1, 1, [&](llvm::Value* iq) {
    loop(c64(0), j_extent_, 1, [&](llvm::Value* jv) { any_element(iq, jv); });
  });
}

ir_values generic_walk_emitter::odometer_step(llvm::Value* idx, llvm::Value* last,
                                              const ir_values& c) {
  llvm::Type* i64 = b_.getInt64Ty();
  // Advance the odometer: the innermost level steps; a level that
  // wraps returns to 0 and carries into the next outer one.
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* step_bb = llvm::BasicBlock::Create(ctx_, "odo.step", fn_);
  auto* wrap_bb = llvm::BasicBlock::Create(ctx_, "odo.wrap", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "odo.done", fn_);
  b_.CreateBr(step_bb);
  b_.SetInsertPoint(step_bb);
  llvm::PHINode* k = b_.CreatePHI(i64, 2);
  k->addIncoming(last, from);
  std::vector<llvm::PHINode*> base(c.size());
  for (std::size_t f = 0; f < c.size(); ++f) {
    base[f] = b_.CreatePHI(i64, 2);
    base[f]->addIncoming(c[f], from);
  }
  llvm::Value* at = b_.CreateGEP(i64, idx, k);
  llvm::Value* next = b_.CreateAdd(b_.CreateLoad(i64, at), c64(1));
  llvm::Value* ext = level_field(k, 0);
  std::vector<llvm::Value*> step(c.size()), stepped(c.size());
  for (std::size_t f = 0; f < c.size(); ++f) {
    step[f] = level_field(k, static_cast<int>(f) + 1);
    stepped[f] = b_.CreateAdd(base[f], step[f]);
  }
  llvm::Value* wraps = b_.CreateICmpEQ(next, ext);
  b_.CreateStore(b_.CreateSelect(wraps, c64(0), next), at);
  llvm::BasicBlock* step_end = b_.GetInsertBlock();
  b_.CreateCondBr(b_.CreateAnd(wraps, b_.CreateICmpSGT(k, c64(0))), wrap_bb, done);
  b_.SetInsertPoint(wrap_bb);
  k->addIncoming(b_.CreateSub(k, c64(1)), wrap_bb);
  for (std::size_t f = 0; f < c.size(); ++f) {
    base[f]->addIncoming(b_.CreateSub(stepped[f], b_.CreateMul(ext, step[f])), wrap_bb);
  }
  b_.CreateBr(step_bb);
  b_.SetInsertPoint(done);
  ir_values out;
  for (std::size_t f = 0; f < c.size(); ++f) {
    llvm::PHINode* o = b_.CreatePHI(i64, 1);
    o->addIncoming(stepped[f], step_end);
    out.push_back(o);
  }
  return out;
}

llvm::Value* generic_walk_emitter::run_part_offset(llvm::Value* j, int k, gw_run_form form,
                                                   bool runs,
                                                   const std::array<llvm::Value*, 3>& run) {
  if (form == gw_run_form::whole) {
    // Either side may hold the runs (the other: shift 63, mask all ones).
    llvm::Value* jk = b_.CreateAdd(j, c64(k));
    return b_.CreateAdd(b_.CreateMul(b_.CreateLShr(jk, run[0]), run[2]), b_.CreateAnd(jk, run[1]));
  }
  if (!runs) return b_.CreateAdd(j, c64(k));
  const int half = s_.lanes / 2;
  llvm::Value* first = b_.CreateLShr(j, c64(std::countr_zero(static_cast<unsigned>(half))));
  return b_.CreateMul(b_.CreateAdd(first, c64(k / half)), run[2]);
}

llvm::Value* generic_walk_emitter::run_load(llvm::Value* j, gw_run_form form, llvm::Value* count) {
  const int n = s_.lanes;
  return walk_load_parts(
      b_, src_ty_, src_, n, form == gw_run_form::src_halves ? n / 2 : n, 1,
      [&](int k) {
        return b_.CreateAdd(src_base_,
                            run_part_offset(j, k, form, form != gw_run_form::dst_halves, src_run_));
      },
      count ? emit_lane_mask(b_, count, n) : nullptr, count);
}

void generic_walk_emitter::run_store(llvm::Value* v, llvm::Value* j, gw_run_form form,
                                     llvm::Value* count) {
  const int n = s_.lanes;
  walk_store_parts(
      b_, dst_ty_, dst_, v, n, form == gw_run_form::dst_halves ? n / 2 : n,
      [&](int k) {
        return b_.CreateAdd(dst_base_,
                            run_part_offset(j, k, form, form != gw_run_form::src_halves, dst_run_));
      },
      count ? emit_lane_mask(b_, count, n) : nullptr, count);
}

void generic_walk_emitter::joined_run(llvm::Value* m, llvm::Value* k, llvm::Value* split_extent,
                                      gw_run_form form) {
  // No transform reaches here (reorders only): a vector's dst offsets are
  // not a progression where dst is written in runs.
  assert(!v_.transform);
  const int n = s_.lanes;
  llvm::Value* src0 = src_base_;
  llvm::Value* dst0 = dst_base_;
  llvm::Value* src_step = level_field(k, 1);
  llvm::Value* dst_step = level_field(k, 2);
  loop(c64(0), m, 1, [&](llvm::Value* t) {
    src_base_ = b_.CreateAdd(src0, b_.CreateMul(t, src_step));
    dst_base_ = b_.CreateAdd(dst0, b_.CreateMul(t, dst_step));
    // Whole vectors: the driver joins only split loops of a multiple of n.
    loop(
        c64(0), split_extent, n,
        [&](llvm::Value* j) {
          llvm::Value* track = b_.CreateAdd(track_base_, b_.CreateMul(j, split_tr_));
          llvm::Value* dst_off = b_.CreateAdd(dst_base_, j);
          emit_if(
              b_.CreateICmpSLE(b_.CreateAdd(j, c64(n)), split_real_),
              [&] {
                llvm::Value* v = finish_value(to_value(run_load(j, form, nullptr)), n, dst_off,
                                              c64(1), track, split_tr_);
                run_store(v, j, form, nullptr);
              },
              [&] { clipped_vector(j, nullptr, form); });
        },
        loop_test::step_within_end);
  });
  src_base_ = src0;
  dst_base_ = dst0;
}

void generic_walk_emitter::item_runs(llvm::Value* idx, llvm::Value* last, llvm::Value* begin,
                                     llvm::Value* end, const ir_values& bases, const run_fn& run) {
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, "gw.run", fn_);
  auto* body = llvm::BasicBlock::Create(ctx_, "gw.run.body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "gw.run.end", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* item = b_.CreatePHI(i64, 2);
  item->addIncoming(begin, from);
  std::vector<llvm::PHINode*> base(bases.size());
  for (std::size_t f = 0; f < bases.size(); ++f) {
    base[f] = b_.CreatePHI(i64, 2);
    base[f]->addIncoming(bases[f], from);
  }
  b_.CreateCondBr(b_.CreateICmpSLT(item, end), body, exit);
  b_.SetInsertPoint(body);
  src_base_ = base[0];
  dst_base_ = base[1];
  track_base_ = base[2];
  for (int e = 0; e < gw_max_checks; ++e) check_base_[e] = base[3 + e];
  // The run: the items left of the innermost level, up to `end`.
  llvm::Value* k = b_.CreateSub(last, c64(1));
  llvm::Value* at = b_.CreateGEP(i64, idx, k);
  llvm::Value* pos = b_.CreateLoad(i64, at);
  llvm::Value* m = smin(b_.CreateSub(end, item), b_.CreateSub(level_field(k, 0), pos));
  // Real and in-bound elements of each split loop: the same in all.
  set_index_ends();
  run(m, k);
  // Past the run's other items, then one step as for a single item.
  llvm::Value* skip = b_.CreateSub(m, c64(1));
  b_.CreateStore(b_.CreateAdd(pos, skip), at);
  ir_values skipped(bases.size());
  for (std::size_t f = 0; f < bases.size(); ++f) {
    skipped[f] = b_.CreateAdd(base[f], b_.CreateMul(skip, level_field(k, static_cast<int>(f) + 1)));
  }
  ir_values next = odometer_step(idx, last, skipped);
  llvm::BasicBlock* body_end = b_.GetInsertBlock();
  item->addIncoming(b_.CreateAdd(item, m), body_end);
  for (std::size_t f = 0; f < bases.size(); ++f) base[f]->addIncoming(next[f], body_end);
  b_.CreateBr(head);
  b_.SetInsertPoint(exit);
}

void generic_walk_emitter::batched_run(llvm::Value* m, llvm::Value* split_extent) {
  const int n = s_.lanes;
  llvm::Value* total = b_.CreateMul(m, split_extent);
  llvm::Value* real = smin(split_real_, split_extent);
  llvm::Value* bound = smin(split_bound_, split_extent);
  // Vectors start at a multiple of the split extent (a power of two no
  // longer than them): lane e is element e % extent of its split loop.
  std::vector<llvm::Constant*> iota;
  for (int e = 0; e < n; ++e) iota.push_back(b_.getInt32(static_cast<std::uint32_t>(e)));
  llvm::Value* at_lane = b_.CreateAnd(
      llvm::ConstantVector::get(iota),
      b_.CreateVectorSplat(static_cast<unsigned>(n),
                           b_.CreateTrunc(b_.CreateSub(split_extent, c64(1)), b_.getInt32Ty())));
  auto below = [&](llvm::Value* count) {
    return b_.CreateICmpULT(at_lane, b_.CreateVectorSplat(static_cast<unsigned>(n),
                                                          b_.CreateTrunc(count, b_.getInt32Ty())));
  };
  llvm::Value* real_lanes = below(real);
  llvm::Value* bound_lanes = below(bound);
  llvm::Type* dvt = shaped(dst_ty_, n);
  llvm::Type* svt = shaped(src_ty_, n);
  llvm::Value* zero = llvm::Constant::getNullValue(dvt);
  const llvm::Align salign(src_ty_->getPrimitiveSizeInBits() / 8);
  llvm::Value* whole_bound = b_.CreateICmpEQ(bound, split_extent);
  // A vector of the run at j, its lanes from rng on past the run.
  auto masked_vector = [&](llvm::Value* j, llvm::Value* rng) {
    llvm::Value* in_range = emit_lane_mask(b_, rng, n);
    llvm::Value* x =
        b_.CreateMaskedLoad(svt, b_.CreateGEP(src_ty_, src_, b_.CreateAdd(src_base_, j)), salign,
                            b_.CreateAnd(real_lanes, in_range), llvm::Constant::getNullValue(svt));
    llvm::Value* dst_off = b_.CreateAdd(dst_base_, j);
    llvm::Value* track = b_.CreateAdd(track_base_, b_.CreateMul(j, split_tr_));
    llvm::Value* v = finish_value(to_value(x), n, dst_off, c64(1), track, split_tr_, rng);
    store_in_bound(b_.CreateSelect(real_lanes, v, zero), dst_off,
                   b_.CreateAnd(whole_bound, b_.CreateICmpEQ(rng, c64(n))),
                   b_.CreateAnd(bound_lanes, in_range));
  };
  emit_if(
      b_.CreateICmpEQ(real, split_extent),
      [&] {
        // Every element real (the blocks before the padded one): the run is
        // a dense stream, whole vectors, then one clipped to the run's end.
        llvm::Value* j = loop(
            c64(0), total, std::int64_t{n} * s_.unroll,
            [&](llvm::Value* at) {
              for (int u = 0; u < s_.unroll; ++u) vector(b_.CreateAdd(at, c64(u * n)), n);
            },
            loop_test::step_within_end);
        j = loop(
            j, total, n, [&](llvm::Value* at) { vector(at, n); }, loop_test::step_within_end);
        emit_if(b_.CreateICmpSLT(j, total), [&] { masked_vector(j, b_.CreateSub(total, j)); }, {});
      },
      [&] {
        emit_if(
            b_.CreateICmpSGT(real, c64(0)),
            [&] {
              loop(c64(0), total, n,
                   [&](llvm::Value* j) { masked_vector(j, smin(c64(n), b_.CreateSub(total, j))); });
            },
            [&] {
              loop(c64(0), total, n, [&](llvm::Value* j) {
                llvm::Value* rng = smin(c64(n), b_.CreateSub(total, j));
                store_in_bound(zero, b_.CreateAdd(dst_base_, j),
                               b_.CreateAnd(whole_bound, b_.CreateICmpEQ(rng, c64(n))),
                               b_.CreateAnd(bound_lanes, emit_lane_mask(b_, rng, n)));
              });
            });
      });
}

void generic_walk_emitter::emit(const std::string& symbol) {
  src_ty_ = storage_type(v_.src_dt);
  dst_ty_ = storage_type(v_.dst_dt);
  llvm::Type* ptr = llvm::PointerType::get(ctx_, 0);
  llvm::Type* i64 = b_.getInt64Ty();
  fn_ = llvm::Function::Create(
      llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, ptr, ptr, i64, i64}, false),
      llvm::Function::ExternalLinkage, symbol, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  // The block is read only, and no buffer overlaps it; src and dst may be
  // one buffer (in-place eltwise).
  fn_->addParamAttr(0, llvm::Attribute::NoAlias);
  fn_->addParamAttr(0, llvm::Attribute::ReadOnly);
  params_ = fn_->getArg(0);
  src_ = fn_->getArg(1);
  dst_ = fn_->getArg(2);
  scales_ = fn_->getArg(3);
  operands_ = fn_->getArg(4);
  llvm::Value* begin = fn_->getArg(5);
  llvm::Value* end = fn_->getArg(6);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
  llvm::AllocaInst* idx = b_.CreateAlloca(i64, c64(gw_max_levels));

  llvm::Value* levels = param(gw_levels);
  llvm::Value* split_extent = param(gw_split_extent);
  split_ss_ = param(gw_split_src_stride);
  split_ds_ = param(gw_split_dst_stride);
  split_tr_ = param(gw_split_track);
  llvm::Value* chunk = param(gw_chunk);
  j_extent_ = param(gw_j_extent);
  j_ss_ = param(gw_j_src_stride);
  j_tr_ = param(gw_j_track);
  if (v_.scales) scale_kind_ = param(gw_scales);
  src_run_ = {param(gw_src_run_shift), param(gw_src_run_mask), param(gw_src_run_stride)};
  dst_run_ = {param(gw_dst_run_shift), param(gw_dst_run_mask), param(gw_dst_run_stride)};
  for (int c = 0; c < gw_max_checks; ++c) {
    check_dims_[c] = param(gw_check_dims + c);
    check_bound_[c] = param(gw_check_bound + c);
    check_split_[c] = param(gw_split_check + c);
    check_j_[c] = param(gw_j_check + c);
  }

  // The odometer at `begin`, and the bases it gives: src, dst, the tracked
  // index, the checked indices (level fields 1, 2, 3, 4...).
  ir_values start{begin, param(gw_src_offset0), param(gw_dst_offset0), c64(0)};
  for (int c = 0; c < gw_max_checks; ++c) start.push_back(c64(0));
  auto decoded = emit_counted_loop(
      b_, c64(0), levels, 1, start,
      [&](llvm::Value* kk, const ir_values& c) {
        llvm::Value* k = b_.CreateSub(b_.CreateSub(levels, c64(1)), kk);
        llvm::Value* ext = level_field(k, 0);
        llvm::Value* q = b_.CreateURem(c[0], ext);
        b_.CreateStore(q, b_.CreateGEP(i64, idx, k));
        ir_values out{b_.CreateUDiv(c[0], ext)};
        for (std::size_t f = 1; f < c.size(); ++f) {
          out.push_back(b_.CreateAdd(c[f], b_.CreateMul(q, level_field(k, static_cast<int>(f)))));
        }
        return out;
      },
      loop_test::index_below_end, "gw.decode");

  llvm::Value* last = b_.CreateSub(levels, c64(1));
  // The work items, in a copy that checks no padding (exact walks: the
  // branch is taken once per call) and one that checks it.
  auto items = [&] {
    const std::size_t nbases = checked_ ? 3 + gw_max_checks : 3;
    ir_values bases(decoded.carried.begin() + 1,
                    decoded.carried.begin() + 1 + static_cast<std::ptrdiff_t>(nbases));
    emit_counted_loop(
        b_, begin, end, 1, bases,
        [&](llvm::Value*, const ir_values& c) {
          src_base_ = c[0];
          dst_base_ = c[1];
          track_base_ = c[2];
          if (checked_) {
            for (int e = 0; e < gw_max_checks; ++e) check_base_[e] = c[3 + e];
            set_index_ends();
          }
          llvm::Value* s0 = b_.CreateMul(b_.CreateLoad(i64, b_.CreateGEP(i64, idx, last)), chunk);
          llvm::Value* s1 = b_.CreateAdd(s0, chunk);
          s1 = b_.CreateSelect(b_.CreateICmpSLT(s1, split_extent), s1, split_extent);
          if (v_.form == generic_walk_form::tile) {
            tiles(s0, s1);
          } else {
            stream(s0, s1);
          }
          return odometer_step(idx, last, c);
        },
        loop_test::index_below_end, checked_ ? "gw.checked_items" : "gw.items");
  };
  const ir_values checked_bases(decoded.carried.begin() + 1,
                                decoded.carried.begin() + 1 + 3 + gw_max_checks);
  auto plain_or_checked = [&] {
    emit_if(
        b_.CreateICmpEQ(param(gw_checks), c64(0)),
        [&] {
          checked_ = false;
          items();
        },
        [&] {
          checked_ = true;
          if (v_.form == generic_walk_form::tile) {
            items();
          } else {
            emit_if(
                b_.CreateAnd(b_.CreateICmpNE(param(gw_batch), c64(0)),
                             b_.CreateICmpSLE(split_extent, c64(s_.lanes))),
                [&] {
                  item_runs(idx, last, begin, end, checked_bases,
                            [&](llvm::Value* m, llvm::Value*) { batched_run(m, split_extent); });
                },
                [&] { items(); });
          }
          checked_ = false;
        });
  };
  if (v_.form != generic_walk_form::runs) {
    plain_or_checked();
  } else {
    // A joined split loop (reorders): exact walks too (their index ends are
    // past every item).
    llvm::Value* form = param(gw_runs);
    item_runs(idx, last, begin, end, checked_bases, [&](llvm::Value* m, llvm::Value* k) {
      auto* done = llvm::BasicBlock::Create(ctx_, "run.form.done", fn_);
      auto* whole_bb = llvm::BasicBlock::Create(ctx_, "run.whole", fn_);
      llvm::SwitchInst* sw = b_.CreateSwitch(form, whole_bb, 2);
      for (gw_run_form f : {gw_run_form::whole, gw_run_form::src_halves, gw_run_form::dst_halves}) {
        llvm::BasicBlock* bb = whole_bb;
        if (f != gw_run_form::whole) {
          bb = llvm::BasicBlock::Create(ctx_, "run.halves", fn_);
          sw->addCase(b_.getInt64(static_cast<std::uint64_t>(f)), bb);
        }
        b_.SetInsertPoint(bb);
        joined_run(m, k, split_extent, f);
        b_.CreateBr(done);
      }
      b_.SetInsertPoint(done);
    });
  }
  b_.CreateRetVoid();
}

}  // namespace

void emit_generic_walk(llvm::Module& m, const std::string& symbol, const generic_walk_shape& shape,
                       const generic_walk_variant& v) {
  generic_walk_emitter(m, shape, v).emit(symbol);
}

void generate_generic_reorder(cpu_isa isa, llvm::Module& m) {
  const generic_walk_shape shape = generic_walk_shape_for(isa);
  const data_type types[] = {data_type::f32, data_type::bf16, data_type::f16,
                             data_type::s8,  data_type::u8,   data_type::s32};
  for (generic_walk_form form :
       {generic_walk_form::stream, generic_walk_form::tile, generic_walk_form::runs}) {
    for (data_type src : types) {
      for (data_type dst : types) {
        generic_walk_variant v;
        v.src_dt = src;
        v.dst_dt = dst;
        v.form = form;
        v.scales = true;
        emit_generic_walk(m, generic_reorder_symbol(src, dst, form), shape, v);
      }
    }
    for (data_type dt : {data_type::s8, data_type::bf16, data_type::f32}) {
      generic_walk_variant v;
      v.src_dt = v.dst_dt = dt;
      v.raw = true;
      v.form = form;
      emit_generic_walk(m, generic_reorder_raw_symbol(size_of(dt), form), shape, v);
    }
  }
}

}  // namespace primcache::cpu_internal
