#include "kernels/reorder_kernel.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "jit/ir_math.hpp"
#include "jit/target.hpp"
#include "primcache/tensor/numeric.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr const char* kSymbol = "reorder";

failure invalid(std::string message) {
  return failure{status::invalid_arguments, "reorder: " + std::move(message)};
}
failure unimplemented(std::string message) {
  return failure{status::unimplemented, "reorder: " + std::move(message)};
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}
std::int64_t round_up(std::int64_t a, std::int64_t b) {
  return ceil_div(a, b) * b;
}
bool is_pow2(std::int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

// One level of a layout's addressing of a dimension: index i contributes
// ((i / lo) % (next level's lo / lo)) * stride, the top level (i / lo) * stride.
struct level {
  std::int64_t lo;
  std::int64_t stride;
};

std::vector<level> levels_of(const memory_desc& md, int d) {
  std::vector<level> out;
  std::int64_t inner = 1;  // product of the inner blocks inside block k
  std::int64_t cum = 1;    // product of dim d's blocks inside block k
  const auto blks = md.inner_blks();
  const auto idxs = md.inner_idxs();
  for (int k = md.inner_nblks() - 1; k >= 0; --k) {
    if (idxs[k] == d) {
      out.push_back({cum, inner});
      cum *= blks[k];
    }
    inner *= blks[k];
  }
  out.push_back({cum, md.strides()[d]});
  return out;
}

std::int64_t stride_at(const std::vector<level>& levels, std::int64_t lo) {
  const level* found = &levels.front();
  for (const level& l : levels) {
    if (l.lo <= lo) found = &l;
  }
  return found->stride * (lo / found->lo);
}

// Non-overlap of dst: sorted by stride, each outer dimension must start past
// the extent of those inside it.
bool dst_overlaps(const memory_desc& md) {
  std::int64_t inner = 1;
  std::vector<std::pair<std::int64_t, std::int64_t>> outer;  // stride, extent
  for (std::int64_t b : md.inner_blks()) inner *= b;
  for (int d = 0; d < md.ndims(); ++d) {
    std::int64_t blk = 1;
    for (int k = 0; k < md.inner_nblks(); ++k) {
      if (md.inner_idxs()[k] == d) blk *= md.inner_blks()[k];
    }
    const std::int64_t ext = md.padded_dims()[d] / blk;
    if (ext > 1) outer.emplace_back(md.strides()[d], ext);
  }
  std::sort(outer.begin(), outer.end());
  std::int64_t covered = inner;
  for (auto [stride, ext] : outer) {
    if (stride < covered) return true;
    covered = stride * ext;
  }
  return false;
}

result<bool> validate(const reorder_problem& p) {
  if (!p.src.is_blocked()) return invalid("src " + p.src.to_string() + " has no resolved layout");
  if (!p.dst.is_blocked()) return invalid("dst " + p.dst.to_string() + " has no resolved layout");
  if (p.src.ndims() != p.dst.ndims() ||
      !std::equal(p.src.dims().begin(), p.src.dims().end(), p.dst.dims().begin())) {
    return invalid("src " + p.src.to_string() + " and dst " + p.dst.to_string() +
                   " have different dims");
  }
  if (p.nthr < 1) return invalid("nthr is " + std::to_string(p.nthr) + "; it must be >= 1");
  switch (p.scales) {
    case reorder_scales::none:
    case reorder_scales::common: break;
    case reorder_scales::per_dim:
      if (p.scale_dim < 0 || p.scale_dim >= p.src.ndims()) {
        return invalid("scale dimension " + std::to_string(p.scale_dim) + " is outside [0, " +
                       std::to_string(p.src.ndims()) + ")");
      }
      break;
    default:
      return invalid("scale kind " + std::to_string(static_cast<int>(p.scales)) +
                     " is not a known kind");
  }
  for (const memory_desc* md : {&p.src, &p.dst}) {
    for (std::int64_t o : md->padded_offsets()) {
      if (o != 0) return unimplemented(md->to_string() + " has non-zero padded offsets");
    }
  }
  return true;
}

result<bool> validate(const reorder_config& c) {
  if (c.tile != 4 && c.tile != 8 && c.tile != 16) {
    return invalid("config tile " + std::to_string(c.tile) + " is not 4, 8 or 16");
  }
  if (!is_pow2(c.vector_lanes) || c.vector_lanes < 4 || c.vector_lanes > 64) {
    return invalid("config vector_lanes " + std::to_string(c.vector_lanes) +
                   " is not a power of two in [4, 64]");
  }
  if (c.unroll < 1 || c.unroll > 8) {
    return invalid("config unroll " + std::to_string(c.unroll) + " is outside [1, 8]");
  }
  if (c.chunk < 0) return invalid("config chunk " + std::to_string(c.chunk) + " is negative");
  return true;
}

bool is_raw(const reorder_problem& p) {
  return p.src.data_type() == p.dst.data_type() && p.scales == reorder_scales::none;
}

unsigned keep_mask(const reorder_problem& p) {
  return p.scales == reorder_scales::per_dim ? (1u << p.scale_dim) : 0u;
}

// Vectors wider than the streamed loop, or unrolling past it, give the same
// code as narrower ones: such configs take the narrower form, so different
// configs mean different code.
void canonicalize(reorder_config& c, std::int64_t extent) {
  while (c.vector_lanes > 4 && c.vector_lanes > extent) c.vector_lanes /= 2;
  while (c.unroll > 1 && static_cast<std::int64_t>(c.vector_lanes) * c.unroll > extent) --c.unroll;
}

int chunk_unit(const walk_plan& plan, const reorder_config& c) {
  return plan.inner == walk_plan::inner_kind::tile ? c.tile : c.vector_lanes * c.unroll;
}

// ---------------------------------------------------------------------------
// IR emission of a walk.

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
  llvm::Type* storage_type(data_type dt) {
    if (raw_) return b_.getIntNTy(static_cast<unsigned>(size_of(dt) * 8));
    switch (dt) {
      case data_type::f32: return b_.getFloatTy();
      case data_type::bf16:
      case data_type::f16: return b_.getInt16Ty();
      case data_type::s8:
      case data_type::u8: return b_.getInt8Ty();
      default: return b_.getInt32Ty();
    }
  }

  llvm::Value* emit_loop(llvm::Value* start, llvm::Value* end, std::int64_t step,
                         const body_fn& body);
  void emit_if(llvm::Value* cond, const std::function<void()>& then_fn,
               const std::function<void()>& else_fn = {});

  llvm::Value* load_lanes(llvm::Value* base, llvm::Type* ety, llvm::Value* off, int n,
                          std::int64_t stride);
  void store_lanes(llvm::Value* v, llvm::Value* base, llvm::Type* ety, llvm::Value* off, int n,
                   std::int64_t stride);
  llvm::Value* to_value(llvm::Value* x);
  llvm::Value* from_value(llvm::Value* v);
  llvm::Value* splat(llvm::Value* s, int n) { return n == 1 ? s : b_.CreateVectorSplat(n, s); }

  // The logical index of dim d at (i, j) of the inner loops (null i: none).
  llvm::Value* logical(int d, llvm::Value* i, llvm::Value* j);
  llvm::Value* scale_for(llvm::Value* i, llvm::Value* j, int n);
  walk_lanes lanes_at(llvm::Value* i, llvm::Value* j, llvm::Value* dst_off);
  llvm::Value* finish_value(llvm::Value* v, llvm::Value* i, llvm::Value* j, int n,
                            llvm::Value* dst_off);
  // True when every element with inner indices up to (i_last, j_last) is real.
  llvm::Value* all_real(llvm::Value* i_last, llvm::Value* j_last);

  void emit_element(llvm::Value* i, llvm::Value* j);
  void emit_vector(llvm::Value* j, int n);
  void emit_stream(llvm::Value* s0, llvm::Value* s1);
  void emit_tile(llvm::Value* i, llvm::Value* j, int ri, int rj);
  void emit_tiles(llvm::Value* s0, llvm::Value* s1);

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const walk_plan& p_;
  const walk_codegen& g_;
  bool raw_ = false;
  bool checks_ = false;  // some dimension is not exact
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
  const walk_loop* li_ = nullptr;  // tile: the I loop
  const walk_loop* lj_ = nullptr;  // the innermost loop
};

llvm::Value* walk_emitter::emit_loop(llvm::Value* start, llvm::Value* end, std::int64_t step,
                                     const body_fn& body) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, "loop.head", fn_);
  auto* body_bb = llvm::BasicBlock::Create(ctx_, "loop.body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "loop.exit", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* v = b_.CreatePHI(b_.getInt64Ty(), 2);
  v->addIncoming(start, pre);
  b_.CreateCondBr(b_.CreateICmpSLE(b_.CreateAdd(v, c64(step)), end), body_bb, exit);
  b_.SetInsertPoint(body_bb);
  body(v);
  v->addIncoming(b_.CreateAdd(v, c64(step)), b_.GetInsertBlock());
  b_.CreateBr(head);
  b_.SetInsertPoint(exit);
  return v;
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

llvm::Value* walk_emitter::to_value(llvm::Value* x) {
  if (raw_) return x;
  llvm::Type* f = x->getType()->isVectorTy()
                      ? static_cast<llvm::Type*>(llvm::VectorType::get(
                            b_.getFloatTy(), llvm::cast<llvm::VectorType>(x->getType())))
                      : b_.getFloatTy();
  switch (g_.src_dt) {
    case data_type::f32: return x;
    case data_type::bf16: return emit_bf16_to_f32(b_, x);
    case data_type::f16: return emit_f16_to_f32(b_, x);
    case data_type::u8: return b_.CreateUIToFP(x, f);
    default: return b_.CreateSIToFP(x, f);  // s8, s32
  }
}

llvm::Value* walk_emitter::from_value(llvm::Value* v) {
  if (raw_) return v;
  switch (g_.dst_dt) {
    case data_type::f32: return v;
    case data_type::bf16: return emit_f32_to_bf16(b_, v);
    case data_type::f16: return emit_f32_to_f16(b_, v);
    case data_type::s8: return emit_f32_to_s8(b_, v);
    case data_type::u8: return emit_f32_to_u8(b_, v);
    default: return emit_f32_to_s32(b_, v);
  }
}

llvm::Value* walk_emitter::logical(int d, llvm::Value* i, llvm::Value* j) {
  llvm::Value* l = outer_l_[d];
  if (!l) return nullptr;
  if (i && li_ && li_->dim == d) l = b_.CreateAdd(l, b_.CreateMul(i, c64(li_->mult)));
  if (j && lj_->dim == d) l = b_.CreateAdd(l, b_.CreateMul(j, c64(lj_->mult)));
  return l;
}

llvm::Value* walk_emitter::scale_for(llvm::Value* i, llvm::Value* j, int n) {
  if (g_.scales == reorder_scales::none) return nullptr;
  if (g_.scales == reorder_scales::common) return splat(common_scale_, n);
  const int d = g_.scale_dim;
  llvm::Value* idx = logical(d, i, j);
  const std::int64_t step = lj_->dim == d ? lj_->mult : 0;
  if (step == 0) {
    llvm::Value* s = b_.CreateAlignedLoad(
        b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), scales_, idx), llvm::Align(4));
    return splat(s, n);
  }
  return load_lanes(scales_, b_.getFloatTy(), idx, n, step);
}

walk_lanes walk_emitter::lanes_at(llvm::Value* i, llvm::Value* j, llvm::Value* dst_off) {
  walk_lanes lanes;
  lanes.dst_offset = dst_off;
  lanes.dst_step = lj_->dst_stride;
  lanes.operands = operands_;
  for (int d = 0; d < p_.ndims; ++d) {
    lanes.index[d] = logical(d, i, j);
    lanes.index_step[d] = lj_->dim == d ? lj_->mult : 0;
  }
  return lanes;
}

llvm::Value* walk_emitter::finish_value(llvm::Value* v, llvm::Value* i, llvm::Value* j, int n,
                                        llvm::Value* dst_off) {
  if (raw_) return v;
  if (llvm::Value* s = scale_for(i, j, n)) v = b_.CreateFMul(v, s);
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
  llvm::Value* src_off = b_.CreateAdd(src_base_, b_.CreateMul(j, c64(lj_->src_stride)));
  llvm::Value* dst_off = b_.CreateAdd(dst_base_, b_.CreateMul(j, c64(lj_->dst_stride)));
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
    llvm::Value* src_off = b_.CreateAdd(src_base_, b_.CreateMul(j, c64(lj_->src_stride)));
    llvm::Value* dst_off = b_.CreateAdd(dst_base_, b_.CreateMul(j, c64(lj_->dst_stride)));
    llvm::Value* v = to_value(load_lanes(src_, src_ty_, src_off, n, lj_->src_stride));
    store_lanes(finish_value(v, nullptr, j, n, dst_off), dst_, dst_ty_, dst_off, n,
                lj_->dst_stride);
  };
  if (!checks_) {
    fast();
    return;
  }
  emit_if(all_real(nullptr, b_.CreateAdd(j, c64(n - 1))), fast, [&] {
    emit_loop(j, b_.CreateAdd(j, c64(n)), 1, [&](llvm::Value* e) { emit_element(nullptr, e); });
  });
}

void walk_emitter::emit_stream(llvm::Value* s0, llvm::Value* s1) {
  const std::int64_t extent = lj_->extent;
  if (raw_ && g_.use_memcpy && !checks_ && lj_->src_stride == 1 && lj_->dst_stride == 1) {
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
  llvm::Value* j = s0;
  if (g_.unroll > 1) {
    j = emit_loop(j, s1, static_cast<std::int64_t>(n) * g_.unroll, [&](llvm::Value* v) {
      for (int u = 0; u < g_.unroll; ++u) emit_vector(b_.CreateAdd(v, c64(u * n)), n);
    });
  }
  j = emit_loop(j, s1, n, [&](llvm::Value* v) { emit_vector(v, n); });
  const int rest = static_cast<int>(extent % n);
  if (rest != 0) {
    // Only the chunk that ends the loop has a partial vector: chunks are
    // whole vectors.
    emit_if(b_.CreateICmpSLT(j, s1), [&] { emit_vector(j, rest); });
  }
}

void walk_emitter::emit_tile(llvm::Value* i, llvm::Value* j, int ri, int rj) {
  const int t = g_.tile;
  auto fast = [&] {
    llvm::Value* src_off = b_.CreateAdd(b_.CreateAdd(src_base_, i),  // I has src stride 1
                                        b_.CreateMul(j, c64(lj_->src_stride)));
    std::vector<llvm::Value*> rows(t);
    llvm::Type* row_ty = shaped(raw_ ? src_ty_ : b_.getFloatTy(), t);
    std::vector<int> widen(t, -1);
    for (int e = 0; e < ri; ++e) widen[e] = e;
    for (int r = 0; r < t; ++r) {
      if (r >= rj) {
        rows[r] = llvm::PoisonValue::get(row_ty);
        continue;
      }
      llvm::Value* off = b_.CreateAdd(src_off, c64(r * lj_->src_stride));
      llvm::Value* x = to_value(load_lanes(src_, src_ty_, off, ri, 1));
      if (ri == 1) {
        rows[r] = b_.CreateInsertElement(llvm::PoisonValue::get(row_ty), x, std::uint64_t{0});
      } else if (ri < t) {
        rows[r] = b_.CreateShuffleVector(x, llvm::PoisonValue::get(x->getType()), widen);
      } else {
        rows[r] = x;
      }
    }
    // Swap bit h of the row and column index, for every bit: (r, c) -> (c, r).
    for (int h = 1; h < t; h <<= 1) {
      std::vector<int> lo_mask(t), hi_mask(t);
      for (int c = 0; c < t; ++c) {
        lo_mask[c] = (c & h) ? t + (c ^ h) : c;
        hi_mask[c] = (c & h) ? t + c : (c ^ h);
      }
      for (int r = 0; r < t; ++r) {
        if (r & h) continue;
        llvm::Value* a = rows[r];
        llvm::Value* c = rows[r | h];
        rows[r] = b_.CreateShuffleVector(a, c, lo_mask);
        rows[r | h] = b_.CreateShuffleVector(a, c, hi_mask);
      }
    }
    std::vector<int> narrow(rj);
    std::iota(narrow.begin(), narrow.end(), 0);
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
      store_lanes(finish_value(v, iq, j, rj, dst_off), dst_, dst_ty_, dst_off, rj, 1);
    }
  };
  if (!checks_) {
    fast();
    return;
  }
  emit_if(all_real(b_.CreateAdd(i, c64(ri - 1)), b_.CreateAdd(j, c64(rj - 1))), fast, [&] {
    emit_loop(i, b_.CreateAdd(i, c64(ri)), 1, [&](llvm::Value* iq) {
      emit_loop(j, b_.CreateAdd(j, c64(rj)), 1, [&](llvm::Value* jr) { emit_element(iq, jr); });
    });
  });
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
  llvm::Value* i = emit_loop(s0, s1, t, [&](llvm::Value* iv) { row_of_tiles(iv, t); });
  if (rest_i != 0) emit_if(b_.CreateICmpSLT(i, s1), [&] { row_of_tiles(i, rest_i); });
}

void walk_emitter::emit(const std::string& symbol) {
  raw_ = g_.src_dt == g_.dst_dt && g_.scales == reorder_scales::none && !g_.transform;
  for (int d = 0; d < p_.ndims; ++d) checks_ = checks_ || !p_.exact[d];
  src_ty_ = storage_type(g_.src_dt);
  dst_ty_ = storage_type(g_.dst_dt);
  const std::size_t split = p_.split_loop();
  lj_ = &p_.loops.back();
  li_ = p_.inner == walk_plan::inner_kind::tile ? &p_.loops[split] : nullptr;

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
  const std::int64_t nchunks = ceil_div(sl.extent, chunk);
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
  b_.CreateRetVoid();
}

// Reads element `off` of a buffer of type dt as f32.
float read_f32(const void* base, data_type dt, std::int64_t off) {
  switch (dt) {
    case data_type::f32: return static_cast<const float*>(base)[off];
    case data_type::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(base)[off]);
    case data_type::f16: return f16_to_f32(static_cast<const std::uint16_t*>(base)[off]);
    case data_type::s8: return static_cast<const std::int8_t*>(base)[off];
    case data_type::u8: return static_cast<const std::uint8_t*>(base)[off];
    default: return static_cast<float>(static_cast<const std::int32_t*>(base)[off]);
  }
}

void write_f32(void* base, data_type dt, std::int64_t off, float v) {
  switch (dt) {
    case data_type::f32: static_cast<float*>(base)[off] = v; break;
    case data_type::bf16: static_cast<std::uint16_t*>(base)[off] = f32_to_bf16(v); break;
    case data_type::f16: static_cast<std::uint16_t*>(base)[off] = f32_to_f16(v); break;
    case data_type::s8: static_cast<std::int8_t*>(base)[off] = f32_to_s8(v); break;
    case data_type::u8: static_cast<std::uint8_t*>(base)[off] = f32_to_u8(v); break;
    default: static_cast<std::int32_t*>(base)[off] = f32_to_s32(v); break;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// The walk plan.

std::int64_t walk_plan::work_items(std::int64_t chunk) const {
  std::int64_t n = 1;
  const std::size_t split = split_loop();
  for (std::size_t k = 0; k < split; ++k) n *= loops[k].extent;
  return n * ceil_div(loops[split].extent, chunk);
}

std::int64_t walk_chunk(const walk_plan& plan, std::int64_t chunk, int unit) {
  const std::int64_t extent = plan.loops[plan.split_loop()].extent;
  if (chunk <= 0 || chunk >= extent) return extent;
  return std::min(extent, round_up(chunk, unit));
}

result<walk_plan> plan_walk(const memory_desc& src, const memory_desc& dst, unsigned keep_dims) {
  walk_plan plan;
  plan.ndims = dst.ndims();
  plan.src_offset0 = src.offset0();
  plan.dst_offset0 = dst.offset0();
  if (dst_overlaps(dst)) {
    return invalid("dst " + dst.to_string() + " has overlapping strides");
  }
  std::vector<walk_loop> loops;
  for (int d = 0; d < plan.ndims; ++d) {
    const auto sl = levels_of(src, d);
    const auto dl = levels_of(dst, d);
    std::vector<std::int64_t> cuts;
    for (const auto& l : sl) cuts.push_back(l.lo);
    for (const auto& l : dl) cuts.push_back(l.lo);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t k = 1; k < cuts.size(); ++k) {
      if (cuts[k] % cuts[k - 1] != 0) {
        return unimplemented("the blocks of dimension " + std::to_string(d) + " in " +
                             src.to_string() + " and " + dst.to_string() + " do not nest");
      }
    }
    plan.dims[d] = dst.dims()[d];
    plan.bound[d] = dst.padded_dims()[d];
    plan.exact[d] = plan.bound[d] == plan.dims[d] && plan.dims[d] % cuts.back() == 0;
    plan.known[d] = true;
    for (std::size_t k = 0; k < cuts.size(); ++k) {
      walk_loop l;
      l.extent = k + 1 < cuts.size() ? cuts[k + 1] / cuts[k] : ceil_div(plan.bound[d], cuts[k]);
      l.src_stride = stride_at(sl, cuts[k]);
      l.dst_stride = stride_at(dl, cuts[k]);
      l.dim = d;
      l.mult = cuts[k];
      if (l.extent > 1) loops.push_back(l);
    }
  }
  std::stable_sort(loops.begin(), loops.end(), [](const walk_loop& a, const walk_loop& b) {
    if (a.dst_stride != b.dst_stride) return a.dst_stride > b.dst_stride;
    return a.src_stride > b.src_stride;
  });
  auto mergeable = [&](const walk_loop& l) {
    return l.dim < 0 || (plan.exact[l.dim] && !(keep_dims & (1u << l.dim)));
  };
  for (const walk_loop& l : loops) {
    if (!plan.loops.empty()) {
      walk_loop& a = plan.loops.back();
      if (mergeable(a) && mergeable(l) && a.src_stride == l.extent * l.src_stride &&
          a.dst_stride == l.extent * l.dst_stride) {
        if (a.dim >= 0) plan.known[a.dim] = false;
        if (l.dim >= 0) plan.known[l.dim] = false;
        a.extent *= l.extent;
        a.src_stride = l.src_stride;
        a.dst_stride = l.dst_stride;
        a.dim = -1;
        a.mult = 0;
        continue;
      }
    }
    plan.loops.push_back(l);
  }
  if (plan.loops.empty()) plan.loops.push_back(walk_loop{1, 0, 0, -1, 0});
  const walk_loop& j = plan.loops.back();
  if (j.dst_stride == 1 && j.src_stride != 1) {
    for (std::size_t k = 0; k + 1 < plan.loops.size(); ++k) {
      if (plan.loops[k].src_stride == 1) {
        walk_loop i = plan.loops[k];
        plan.loops.erase(plan.loops.begin() + static_cast<std::ptrdiff_t>(k));
        plan.loops.insert(plan.loops.end() - 1, i);
        plan.inner = walk_plan::inner_kind::tile;
        break;
      }
    }
  }
  return plan;
}

void emit_walk_function(llvm::Module& m, const std::string& symbol, const walk_plan& plan,
                        const walk_codegen& g) {
  walk_emitter(m, plan, g).emit(symbol);
}

// ---------------------------------------------------------------------------
// The kernel.

void reorder_problem::write_key(key_writer& w) const {
  w.str("reorder");
  src.write_key(w);
  dst.write_key(w);
  w.enumeration(scales).i32(scales == reorder_scales::per_dim ? scale_dim : 0).i32(nthr);
}

void reorder_config::write_key(key_writer& w) const {
  w.i32(tile).i32(vector_lanes).i32(unroll).i64(chunk).boolean(use_memcpy);
}

reorder_config default_reorder_config(const reorder_problem& p, cpu_isa isa) {
  reorder_config c;
  const unsigned bits = isa_vector_bits(isa);
  c.tile = bits >= 512 ? 16 : 8;
  const bool raw = is_raw(p);
  std::size_t widest = 4;
  if (raw && p.src.is_blocked()) widest = size_of(p.src.data_type());
  c.vector_lanes = static_cast<int>(std::clamp<std::size_t>(bits / (8 * widest), 4, 64));
  c.unroll = raw ? 4 : 2;
  if (!validate(p)) return c;
  auto plan = plan_walk(p.src, p.dst, keep_mask(p));
  if (!plan) return c;
  const walk_plan& w = plan.value();
  if (w.inner == walk_plan::inner_kind::stream) canonicalize(c, w.loops.back().extent);
  if (p.nthr <= 1) return c;
  // Enough work items for the threads to balance (4 per thread), each at
  // least a few thousand elements.
  const std::int64_t outer = w.work_items(w.loops[w.split_loop()].extent);
  const std::int64_t want = 4 * static_cast<std::int64_t>(p.nthr);
  if (outer < want) {
    const std::int64_t extent = w.loops[w.split_loop()].extent;
    std::int64_t inner_elems = 1;
    for (std::size_t k = w.split_loop() + 1; k < w.loops.size(); ++k) {
      inner_elems *= w.loops[k].extent;
    }
    const std::int64_t min_chunk = std::max<std::int64_t>(1, 4096 / inner_elems);
    const std::int64_t chunk = std::max(min_chunk, ceil_div(extent, ceil_div(want, outer)));
    c.chunk = walk_chunk(w, chunk, chunk_unit(w, c));
    if (c.chunk >= extent) c.chunk = 0;
  }
  return c;
}

std::vector<reorder_config> reorder_config_candidates(const reorder_problem& p, cpu_isa isa) {
  const reorder_config def = default_reorder_config(p, isa);
  std::vector<reorder_config> out;
  auto plan = validate(p) ? plan_walk(p.src, p.dst, keep_mask(p)) : result<walk_plan>(failure{});
  if (!plan) return out;
  const walk_plan& w = plan.value();
  bool copies = is_raw(p) && w.inner == walk_plan::inner_kind::stream &&
                w.loops.back().src_stride == 1 && w.loops.back().dst_stride == 1;
  for (int d = 0; d < w.ndims; ++d) copies = copies && w.exact[d];
  auto add = [&](reorder_config c) {
    if (!validate(c)) return;
    if (!copies) c.use_memcpy = def.use_memcpy;  // no effect on the code
    if (w.inner == walk_plan::inner_kind::stream) canonicalize(c, w.loops.back().extent);
    // Normalize the chunk as create() will, so equal code means equal config.
    const std::int64_t extent = w.loops[w.split_loop()].extent;
    c.chunk = walk_chunk(w, c.chunk, chunk_unit(w, c));
    if (c.chunk >= extent) c.chunk = 0;
    if (c == def || std::find(out.begin(), out.end(), c) != out.end()) return;
    out.push_back(c);
  };
  const std::int64_t extent = w.loops[w.split_loop()].extent;
  if (w.inner == walk_plan::inner_kind::tile) {
    for (int t : {16, 8, 4}) {
      reorder_config c = def;
      c.tile = t;
      add(c);
    }
    reorder_config c = def;
    c.chunk = std::max<std::int64_t>(1, extent / 3);
    add(c);
  } else {
    // Vector code instead of memcpy, where memcpy applies; elsewhere the
    // flag changes nothing and these differ from the default by lanes.
    for (int lanes : {def.vector_lanes / 2, def.vector_lanes * 2, 4}) {
      reorder_config c = def;
      c.vector_lanes = lanes;
      c.use_memcpy = false;
      add(c);
    }
    for (int u : {1, 2, 8}) {
      reorder_config c = def;
      c.unroll = u;
      c.use_memcpy = false;
      add(c);
    }
    reorder_config c = def;
    c.chunk = std::max<std::int64_t>(1, extent / 3);
    add(c);
  }
  return out;
}

result<std::unique_ptr<reorder_kernel>> reorder_kernel::finish(const reorder_problem& p,
                                                               const reorder_config& c,
                                                               std::unique_ptr<jit_module> m,
                                                               std::int64_t work_items) {
  auto fn = m->lookup_function<fn_type>(kSymbol);
  if (!fn) return fn.why();
  std::unique_ptr<reorder_kernel> k(new reorder_kernel());
  k->problem_ = p;
  k->config_ = c;
  k->module_ = std::move(m);
  k->fn_ = fn.value();
  k->work_items_ = work_items;
  return k;
}

namespace {
struct prepared {
  walk_plan plan;
  walk_codegen gen;
  std::int64_t work_items;
};

result<prepared> prepare(const reorder_problem& p, const reorder_config& c) {
  if (auto ok = validate(p); !ok) return ok.why();
  if (auto ok = validate(c); !ok) return ok.why();
  auto plan = plan_walk(p.src, p.dst, keep_mask(p));
  if (!plan) return plan.why();
  prepared out{std::move(plan).value(), {}, 0};
  walk_codegen& g = out.gen;
  g.src_dt = p.src.data_type();
  g.dst_dt = p.dst.data_type();
  g.scales = p.scales;
  g.scale_dim = p.scale_dim;
  g.tile = c.tile;
  g.vector_lanes = c.vector_lanes;
  g.unroll = c.unroll;
  g.chunk = walk_chunk(out.plan, c.chunk, chunk_unit(out.plan, c));
  g.use_memcpy = c.use_memcpy;
  out.work_items = out.plan.work_items(g.chunk);
  return out;
}

std::string kernel_name(const reorder_problem& p) {
  return "reorder_" + p.src.to_string() + "_to_" + p.dst.to_string();
}
}  // namespace

result<std::unique_ptr<reorder_kernel>> reorder_kernel::create(const reorder_problem& p,
                                                               const reorder_config& c,
                                                               cpu_isa isa) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  const prepared& pr = prep.value();
  auto m = jit_module::compile(kernel_name(p), isa, [&](llvm::Module& mod) {
    emit_walk_function(mod, kSymbol, pr.plan, pr.gen);
  });
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), pr.work_items);
}

result<std::unique_ptr<reorder_kernel>> reorder_kernel::load(const reorder_problem& p,
                                                             const reorder_config& c,
                                                             std::span<const std::byte> object) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  auto m = jit_module::load(kernel_name(p), object);
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), prep.value().work_items);
}

void reorder_kernel::execute(const reorder_args& args, void* /*scratchpad*/,
                             thread_pool& pool) const {
  const std::int64_t n = work_items_;
  fn_type* fn = fn_;
  const int nthr = static_cast<int>(std::min<std::int64_t>(problem_.nthr, n));
  if (nthr <= 1) {
    fn(args.src, args.dst, args.scales, nullptr, 0, n);
    return;
  }
  pool.parallel_for(nthr, [&](int ithr, int nt) {
    const range r = balance(n, ithr, nt);
    if (r.begin < r.end) fn(args.src, args.dst, args.scales, nullptr, r.begin, r.end);
  });
}

result<bool> check_reorder_problem(const reorder_problem& p) {
  if (auto ok = validate(p); !ok) return ok.why();
  auto plan = plan_walk(p.src, p.dst, keep_mask(p));
  if (!plan) return plan.why();
  return true;
}

void reorder_reference(const reorder_problem& p, const reorder_args& args) {
  const memory_desc& s = p.src;
  const memory_desc& d = p.dst;
  const int nd = d.ndims();
  const bool raw = is_raw(p);
  const std::size_t es = size_of(d.data_type());
  dims_array i{};
  const auto bound = d.padded_dims();
  for (;;) {
    bool real = true;
    for (int k = 0; k < nd; ++k) real = real && i[k] < d.dims()[k];
    const std::int64_t doff = d.offset_of(dims_view(std::span(i.data(), nd)));
    if (!real) {
      std::memset(static_cast<char*>(args.dst) + doff * static_cast<std::int64_t>(es), 0, es);
    } else {
      const std::int64_t soff = s.offset_of(dims_view(std::span(i.data(), nd)));
      if (raw) {
        std::memcpy(static_cast<char*>(args.dst) + doff * static_cast<std::int64_t>(es),
                    static_cast<const char*>(args.src) + soff * static_cast<std::int64_t>(es), es);
      } else {
        float v = read_f32(args.src, s.data_type(), soff);
        if (p.scales == reorder_scales::common) v *= args.scales[0];
        if (p.scales == reorder_scales::per_dim) v *= args.scales[i[p.scale_dim]];
        write_f32(args.dst, d.data_type(), doff, v);
      }
    }
    int k = nd - 1;
    for (; k >= 0; --k) {
      if (++i[k] < bound[k]) break;
      i[k] = 0;
    }
    if (k < 0) break;
  }
}

}  // namespace primcache::cpu_internal
