#include "kernels/eltwise_generator.hpp"

#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "kernels/post_ops.hpp"

namespace primcache::cpu_internal {
namespace {

// n lanes of f32 starting at element `first`, `step` apart; with `live`
// (an <n x i1> mask), zero in the lanes it leaves out, which are not read.
llvm::Value* load_f32_lanes(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* first,
                            std::int64_t step, unsigned n, llvm::Value* live = nullptr) {
  llvm::Type* f32 = b.getFloatTy();
  if (live && n > 1) {
    auto* vt = llvm::FixedVectorType::get(f32, n);
    llvm::Value* none = llvm::Constant::getNullValue(vt);
    if (step == 1) {
      return b.CreateMaskedLoad(vt, b.CreateGEP(f32, base, first), llvm::Align(4), live, none);
    }
    // Strided or broadcast (step 0: every lane the same element, read only
    // when some lane is live): gathered under the mask.
    std::vector<llvm::Constant*> at;
    for (unsigned e = 0; e < n; ++e) at.push_back(b.getInt64(e * static_cast<std::uint64_t>(step)));
    llvm::Value* ptrs = b.CreateGEP(
        f32, base, b.CreateAdd(b.CreateVectorSplat(n, first), llvm::ConstantVector::get(at)));
    return b.CreateMaskedGather(vt, ptrs, llvm::Align(4), live, none);
  }
  if (n == 1 || step == 0) {
    llvm::Value* s = b.CreateAlignedLoad(f32, b.CreateGEP(f32, base, first), llvm::Align(4));
    return n == 1 ? s : b.CreateVectorSplat(n, s);
  }
  if (step == 1) {
    return b.CreateAlignedLoad(llvm::FixedVectorType::get(f32, n), b.CreateGEP(f32, base, first),
                               llvm::Align(4));
  }
  llvm::Value* v = llvm::PoisonValue::get(llvm::FixedVectorType::get(f32, n));
  for (unsigned e = 0; e < n; ++e) {
    llvm::Value* p = b.CreateGEP(f32, base, b.CreateAdd(first, b.getInt64(e * step)));
    v = b.CreateInsertElement(v, b.CreateAlignedLoad(f32, p, llvm::Align(4)), e);
  }
  return v;
}

}  // namespace

void generate_eltwise(llvm::Module& m, const eltwise_problem& p, const walk_plan& plan,
                      walk_codegen& gen) {
  gen.transform = [&p](llvm::IRBuilderBase& b, llvm::Value* x, const walk_lanes& lanes) {
    const unsigned n = x->getType()->isVectorTy()
                           ? llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements()
                           : 1;
    llvm::Value* y = emit_eltwise(b, x, p.op);
    return emit_post_ops(b, y, p.post_ops, [&](int, const binary_add_op& op) -> llvm::Value* {
      llvm::Type* ptr = llvm::PointerType::get(b.getContext(), 0);
      llvm::Value* base = b.CreateAlignedLoad(
          ptr,
          b.CreateGEP(ptr, lanes.operands, b.getInt64(static_cast<std::uint64_t>(op.arg_index))),
          llvm::Align(8));
      switch (op.broadcast) {
        case binary_broadcast::per_channel:
          return load_f32_lanes(b, base, lanes.index[1], lanes.index_step[1], n, lanes.live);
        case binary_broadcast::scalar: return load_f32_lanes(b, base, b.getInt64(0), 0, n);
        default: return load_f32_lanes(b, base, lanes.dst_offset, lanes.dst_step, n, lanes.live);
      }
    });
  };
  emit_walk_function(m, eltwise_symbol, plan, gen);
}

}  // namespace primcache::cpu_internal
