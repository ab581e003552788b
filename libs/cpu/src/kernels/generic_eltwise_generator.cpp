#include "kernels/generic_eltwise_generator.hpp"

#include <string>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "jit/ir_loop.hpp"
#include "kernels/generic_reorder_generator.hpp"

namespace primcache::cpu_internal {
namespace {

const char* form_name(generic_eltwise_form f) {
  switch (f) {
    case generic_eltwise_form::relu_zero: return "relu0";
    case generic_eltwise_form::relu_alpha: return "relu";
    case generic_eltwise_form::gelu_erf: return "gelu_erf";
    case generic_eltwise_form::gelu_tanh: return "gelu_tanh";
    case generic_eltwise_form::tanh: return "tanh";
    case generic_eltwise_form::sigmoid: return "sigmoid";
    case generic_eltwise_form::exp: return "exp";
    case generic_eltwise_form::linear: return "linear";
    case generic_eltwise_form::clip: return "clip";
  }
  return "?";
}

llvm::Value* splat_as(llvm::IRBuilderBase& b, llvm::Value* like, llvm::Value* s) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType())) {
    return b.CreateVectorSplat(vt->getNumElements(), s);
  }
  return s;
}

llvm::Value* param_f32(llvm::IRBuilderBase& b, llvm::Value* params, llvm::Value* slot) {
  return b.CreateAlignedLoad(b.getFloatTy(), b.CreateGEP(b.getInt64Ty(), params, slot),
                             llvm::Align(8));
}
llvm::Value* param_i64(llvm::IRBuilderBase& b, llvm::Value* params, llvm::Value* slot) {
  return b.CreateAlignedLoad(b.getInt64Ty(), b.CreateGEP(b.getInt64Ty(), params, slot),
                             llvm::Align(8));
}

// emit_eltwise's relu, linear and clip with alpha and beta as values.
llvm::Value* relu_alpha(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* alpha) {
  llvm::Value* zero = llvm::Constant::getNullValue(x->getType());
  return b.CreateSelect(b.CreateFCmpOGT(x, zero), x, b.CreateFMul(x, splat_as(b, x, alpha)));
}
llvm::Value* linear(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* alpha, llvm::Value* beta) {
  return b.CreateFAdd(b.CreateFMul(x, splat_as(b, x, alpha)), splat_as(b, x, beta));
}
llvm::Value* clip(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* alpha, llvm::Value* beta) {
  llvm::Value* lo = splat_as(b, x, alpha);
  llvm::Value* hi = splat_as(b, x, beta);
  llvm::Value* above = b.CreateSelect(b.CreateFCmpOLT(x, lo), lo, x);
  return b.CreateSelect(b.CreateFCmpOGT(above, hi), hi, above);
}

// Post-op i of the chain, picked at run time (the generic matmul's
// apply_post_op over the walk's lanes).
llvm::Value* apply_post_op(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* i,
                           const generic_walk_lanes& lanes) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::Value* base =
      b.CreateAdd(b.getInt64(gw_post_ops), b.CreateMul(i, b.getInt64(gw_post_op_slots)));
  auto field = [&](int f) { return b.CreateAdd(base, b.getInt64(static_cast<std::uint64_t>(f))); };
  llvm::Value* code = param_i64(b, lanes.params, base);
  auto* done = llvm::BasicBlock::Create(ctx, "op.done", fn);
  auto* binary_bb = llvm::BasicBlock::Create(ctx, "op.binary", fn);
  llvm::SwitchInst* sw = b.CreateSwitch(code, binary_bb, 8);
  b.SetInsertPoint(done);
  llvm::PHINode* out = b.CreatePHI(x->getType(), 11);

  for (int a = 0; a <= static_cast<int>(eltwise_alg::clip); ++a) {
    const auto alg = static_cast<eltwise_alg>(a);
    auto* bb = llvm::BasicBlock::Create(ctx, "op.eltwise", fn);
    sw->addCase(b.getInt64(static_cast<std::uint64_t>(a)), bb);
    b.SetInsertPoint(bb);
    llvm::Value* alpha = param_f32(b, lanes.params, field(3));
    llvm::Value* beta = param_f32(b, lanes.params, field(4));
    llvm::Value* y = nullptr;
    switch (alg) {
      case eltwise_alg::relu: {
        llvm::Value* zero = llvm::Constant::getNullValue(x->getType());
        llvm::Value* y0 = b.CreateSelect(b.CreateFCmpUGT(x, zero), x, zero);
        llvm::Value* y1 = relu_alpha(b, x, alpha);
        y = b.CreateSelect(b.CreateFCmpOEQ(alpha, llvm::ConstantFP::get(b.getFloatTy(), 0.0)), y0,
                           y1);
        break;
      }
      case eltwise_alg::linear: y = linear(b, x, alpha, beta); break;
      case eltwise_alg::clip: y = clip(b, x, alpha, beta); break;
      default: y = emit_eltwise(b, x, eltwise_op{alg, 0.f, 0.f, 1.f}); break;
    }
    // scale * f(x), multiplied only when scale != 1 (as emit_eltwise).
    llvm::Value* scale = param_f32(b, lanes.params, field(5));
    llvm::Value* one = b.CreateFCmpOEQ(scale, llvm::ConstantFP::get(b.getFloatTy(), 1.0));
    y = b.CreateSelect(one, y, b.CreateFMul(y, splat_as(b, x, scale)));
    out->addIncoming(y, b.GetInsertBlock());
    b.CreateBr(done);
  }

  b.SetInsertPoint(binary_bb);
  llvm::Value* arg = param_i64(b, lanes.params, field(1));
  llvm::Value* bc = param_i64(b, lanes.params, field(2));
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Value* operand =
      b.CreateAlignedLoad(ptr, b.CreateGEP(ptr, lanes.operands, arg), llvm::Align(8));
  auto* none_bb = llvm::BasicBlock::Create(ctx, "op.binary.none", fn);
  auto* channel_bb = llvm::BasicBlock::Create(ctx, "op.binary.channel", fn);
  auto* scalar_bb = llvm::BasicBlock::Create(ctx, "op.binary.scalar", fn);
  llvm::SwitchInst* bsw = b.CreateSwitch(bc, none_bb, 2);
  bsw->addCase(b.getInt64(static_cast<std::uint64_t>(binary_broadcast::per_channel)), channel_bb);
  bsw->addCase(b.getInt64(static_cast<std::uint64_t>(binary_broadcast::scalar)), scalar_bb);
  b.SetInsertPoint(none_bb);
  llvm::Value* vn = b.CreateFAdd(x, emit_load_f32_lanes(b, operand, lanes.dst_offset,
                                                        lanes.dst_step, lanes.lanes, lanes.live));
  out->addIncoming(vn, b.GetInsertBlock());
  b.CreateBr(done);
  b.SetInsertPoint(channel_bb);
  llvm::Value* vc = b.CreateFAdd(x, emit_load_f32_lanes(b, operand, lanes.track_index,
                                                        lanes.track_step, lanes.lanes, lanes.live));
  out->addIncoming(vc, b.GetInsertBlock());
  b.CreateBr(done);
  b.SetInsertPoint(scalar_bb);
  llvm::Value* s = b.CreateAlignedLoad(b.getFloatTy(), operand, llvm::Align(4));
  out->addIncoming(b.CreateFAdd(x, splat_as(b, x, s)), scalar_bb);
  b.CreateBr(done);

  b.SetInsertPoint(done);
  return out;
}

// float chain(<n x float> x, i64 count, ptr params, ptr operands, i64
// dst_offset, i64 dst_step, i64 track, i64 track_step[, i64 live]): the
// post-op chain applied to x (internal, not inlined: one copy per width and
// module, and one that reads the operands of `live` lanes only, for vectors
// clipped to their real part).
llvm::Function* chain_function(llvm::Module& m, int n, bool clipped) {
  const std::string name =
      std::string(clipped ? "gw_eltwise_chain_live_" : "gw_eltwise_chain_") + std::to_string(n);
  if (llvm::Function* f = m.getFunction(name)) return f;
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  llvm::Type* vt = n == 1 ? f32 : llvm::FixedVectorType::get(f32, static_cast<unsigned>(n));
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  std::vector<llvm::Type*> args = {vt, i64, ptr, ptr, i64, i64, i64, i64};
  if (clipped) args.push_back(i64);
  llvm::Function* f = llvm::Function::Create(llvm::FunctionType::get(vt, args, false),
                                             llvm::Function::InternalLinkage, name, m);
  f->addFnAttr(llvm::Attribute::NoInline);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", f));
  generic_walk_lanes lanes;
  lanes.params = f->getArg(2);
  lanes.operands = f->getArg(3);
  lanes.dst_offset = f->getArg(4);
  lanes.dst_step = f->getArg(5);
  lanes.track_index = f->getArg(6);
  lanes.track_step = f->getArg(7);
  lanes.lanes = n;
  if (clipped) lanes.live = f->getArg(8);
  llvm::Value* y = emit_counted_loop(
                       b, b.getInt64(0), f->getArg(1), 1, {f->getArg(0)},
                       [&](llvm::Value* i, const ir_values& cur) {
                         return ir_values{apply_post_op(b, cur[0], i, lanes)};
                       },
                       loop_test::index_below_end, "ops")
                       .carried[0];
  b.CreateRet(y);
  return f;
}

llvm::Value* apply_form(llvm::IRBuilderBase& b, llvm::Value* x, generic_eltwise_form f,
                        llvm::Value* params) {
  auto alpha = [&] { return param_f32(b, params, b.getInt64(gw_alpha)); };
  auto beta = [&] { return param_f32(b, params, b.getInt64(gw_beta)); };
  switch (f) {
    case generic_eltwise_form::relu_zero:
      return emit_eltwise(b, x, eltwise_op{eltwise_alg::relu, 0.f, 0.f, 1.f});
    case generic_eltwise_form::relu_alpha: return relu_alpha(b, x, alpha());
    case generic_eltwise_form::gelu_erf:
      return emit_eltwise(b, x, eltwise_op{eltwise_alg::gelu_erf, 0.f, 0.f, 1.f});
    case generic_eltwise_form::gelu_tanh:
      return emit_eltwise(b, x, eltwise_op{eltwise_alg::gelu_tanh, 0.f, 0.f, 1.f});
    case generic_eltwise_form::tanh:
      return emit_eltwise(b, x, eltwise_op{eltwise_alg::tanh, 0.f, 0.f, 1.f});
    case generic_eltwise_form::sigmoid:
      return emit_eltwise(b, x, eltwise_op{eltwise_alg::sigmoid, 0.f, 0.f, 1.f});
    case generic_eltwise_form::exp:
      return emit_eltwise(b, x, eltwise_op{eltwise_alg::exp, 0.f, 0.f, 1.f});
    case generic_eltwise_form::linear: return linear(b, x, alpha(), beta());
    case generic_eltwise_form::clip: return clip(b, x, alpha(), beta());
  }
  return x;
}

}  // namespace

generic_eltwise_form generic_eltwise_form_of(const eltwise_op& op) noexcept {
  switch (op.alg) {
    case eltwise_alg::relu:
      return op.alpha == 0.f ? generic_eltwise_form::relu_zero : generic_eltwise_form::relu_alpha;
    case eltwise_alg::gelu_erf: return generic_eltwise_form::gelu_erf;
    case eltwise_alg::gelu_tanh: return generic_eltwise_form::gelu_tanh;
    case eltwise_alg::tanh: return generic_eltwise_form::tanh;
    case eltwise_alg::sigmoid: return generic_eltwise_form::sigmoid;
    case eltwise_alg::exp: return generic_eltwise_form::exp;
    case eltwise_alg::linear: return generic_eltwise_form::linear;
    case eltwise_alg::clip: return generic_eltwise_form::clip;
  }
  return generic_eltwise_form::relu_zero;
}

std::string generic_eltwise_symbol(generic_eltwise_form form, data_type src, data_type dst) {
  return std::string("eltwise_generic_") + form_name(form) + "_" + std::string(to_string(src)) +
         "_" + std::string(to_string(dst));
}

std::string generic_eltwise_name(cpu_isa isa) {
  return "eltwise_generic_" + std::string(to_string(isa));
}

void generate_generic_eltwise(cpu_isa isa, llvm::Module& m) {
  const generic_walk_shape shape = generic_walk_shape_for(isa);
  for (int f = 0; f < generic_eltwise_form_count; ++f) {
    const auto form = static_cast<generic_eltwise_form>(f);
    for (data_type src : {data_type::f32, data_type::bf16}) {
      for (data_type dst : {data_type::f32, data_type::bf16}) {
        generic_walk_variant v;
        v.src_dt = src;
        v.dst_dt = dst;
        // The chain's dispatch once per 4 vectors (bench_reorder's
        // BM_Eltwise/primcache_generic: a binary add ran at 0.36 of the
        // specialized speed with one dispatch per vector).
        v.wide = 4;
        v.transform = [form](llvm::IRBuilderBase& b, llvm::Value* x,
                             const generic_walk_lanes& lanes) {
          llvm::Value* y = apply_form(b, x, form, lanes.params);
          llvm::Value* count = param_i64(b, lanes.params, b.getInt64(gw_post_op_count));
          // The chain, when there is one, in a function shared by every
          // algorithm form and data type pair of this width (inline, each
          // of the 36 functions carried every post-op's code).
          llvm::BasicBlock* from = b.GetInsertBlock();
          llvm::Function* fn = from->getParent();
          auto* call_bb = llvm::BasicBlock::Create(b.getContext(), "chain", fn);
          auto* done = llvm::BasicBlock::Create(b.getContext(), "chain.done", fn);
          b.CreateCondBr(b.CreateICmpSGT(count, b.getInt64(0)), call_bb, done);
          b.SetInsertPoint(call_bb);
          std::vector<llvm::Value*> args = {y,
                                            count,
                                            lanes.params,
                                            lanes.operands,
                                            lanes.dst_offset,
                                            lanes.dst_step,
                                            lanes.track_index,
                                            lanes.track_step};
          if (lanes.live) args.push_back(lanes.live);
          llvm::Value* z = b.CreateCall(
              chain_function(*fn->getParent(), lanes.lanes, lanes.live != nullptr), args);
          b.CreateBr(done);
          b.SetInsertPoint(done);
          llvm::PHINode* out = b.CreatePHI(y->getType(), 2);
          out->addIncoming(y, from);
          out->addIncoming(z, call_bb);
          return static_cast<llvm::Value*>(out);
        };
        emit_generic_walk(m, generic_eltwise_symbol(form, src, dst), shape, v);
      }
    }
  }
}

}  // namespace primcache::cpu_internal
