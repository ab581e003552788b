#include "kernels.hpp"

#include <llvm/IR/Function.h>
#include <llvm/IR/Intrinsics.h>

#include "jit/target.hpp"

namespace cpu_test {
namespace {

unsigned lanes_of(primcache::cpu_isa isa) {
  return primcache::cpu_internal::isa_vector_bits(isa) / 32;
}

llvm::Type* type_of(llvm::LLVMContext& ctx, elem e) {
  switch (e) {
    case elem::f32: return llvm::Type::getFloatTy(ctx);
    case elem::i8: return llvm::Type::getInt8Ty(ctx);
    case elem::i16: return llvm::Type::getInt16Ty(ctx);
    case elem::i32: return llvm::Type::getInt32Ty(ctx);
  }
  return nullptr;
}

llvm::Type* shaped(llvm::Type* scalar, unsigned lanes) {
  return lanes == 1 ? scalar : llvm::FixedVectorType::get(scalar, lanes);
}

llvm::Function* declare(llvm::Module& m, const std::string& name, llvm::Type* ret,
                        llvm::ArrayRef<llvm::Type*> params) {
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(ret, params, false),
                                    llvm::Function::ExternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  return fn;
}

// for (i = 0; i < n rounded down to lanes; i += lanes) body(i, lanes);
// for (; i < n; ++i) body(i, 1);
void emit_strip_loop(
    llvm::IRBuilderBase& b, llvm::Value* n, unsigned lanes,
    const std::function<void(llvm::IRBuilderBase&, llvm::Value*, unsigned)>& body) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = fn->getContext();
  llvm::Type* i64 = b.getInt64Ty();
  llvm::BasicBlock* entry = b.GetInsertBlock();
  auto* vhead = llvm::BasicBlock::Create(ctx, "vector.head", fn);
  auto* vbody = llvm::BasicBlock::Create(ctx, "vector.body", fn);
  auto* shead = llvm::BasicBlock::Create(ctx, "scalar.head", fn);
  auto* sbody = llvm::BasicBlock::Create(ctx, "scalar.body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", fn);
  llvm::Value* nvec = b.CreateAnd(n, llvm::ConstantInt::get(i64, ~std::uint64_t(lanes - 1)));
  b.CreateBr(vhead);

  b.SetInsertPoint(vhead);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(llvm::ConstantInt::get(i64, 0), entry);
  b.CreateCondBr(b.CreateICmpULT(i, nvec), vbody, shead);

  b.SetInsertPoint(vbody);
  body(b, i, lanes);
  i->addIncoming(b.CreateAdd(i, llvm::ConstantInt::get(i64, lanes)), b.GetInsertBlock());
  b.CreateBr(vhead);

  b.SetInsertPoint(shead);
  llvm::PHINode* j = b.CreatePHI(i64, 2, "j");
  j->addIncoming(i, vhead);
  b.CreateCondBr(b.CreateICmpULT(j, n), sbody, exit);

  b.SetInsertPoint(sbody);
  body(b, j, 1);
  j->addIncoming(b.CreateAdd(j, llvm::ConstantInt::get(i64, 1)), b.GetInsertBlock());
  b.CreateBr(shead);

  b.SetInsertPoint(exit);
}

llvm::Value* load(llvm::IRBuilderBase& b, llvm::Type* scalar, llvm::Value* base, llvm::Value* i,
                  unsigned lanes) {
  llvm::Value* p = b.CreateGEP(scalar, base, i);
  return b.CreateAlignedLoad(shaped(scalar, lanes), p,
                             llvm::Align(scalar->getPrimitiveSizeInBits() / 8));
}

void store(llvm::IRBuilderBase& b, llvm::Value* v, llvm::Type* scalar, llvm::Value* base,
           llvm::Value* i) {
  llvm::Value* p = b.CreateGEP(scalar, base, i);
  b.CreateAlignedStore(v, p, llvm::Align(scalar->getPrimitiveSizeInBits() / 8));
}

}  // namespace

void build_axpy(llvm::Module& m, primcache::cpu_isa isa, const std::string& name) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* f32 = b.getFloatTy();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Function* fn = declare(m, name, b.getVoidTy(), {ptr, ptr, f32, f32, b.getInt64Ty()});
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* y = fn->getArg(0);
  llvm::Value* x = fn->getArg(1);
  llvm::Value* a = fn->getArg(2);
  llvm::Value* c = fn->getArg(3);
  emit_strip_loop(b, fn->getArg(4), lanes_of(isa),
                  [&](llvm::IRBuilderBase& b, llvm::Value* i, unsigned lanes) {
                    llvm::Value* av = lanes == 1 ? a : b.CreateVectorSplat(lanes, a);
                    llvm::Value* cv = lanes == 1 ? c : b.CreateVectorSplat(lanes, c);
                    llvm::Value* v = load(b, f32, x, i, lanes);
                    store(b, b.CreateFAdd(b.CreateFMul(av, v), cv), f32, y, i);
                  });
  b.CreateRetVoid();
}

void build_scale(llvm::Module& m, primcache::cpu_isa isa, float k, const std::string& name) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* f32 = b.getFloatTy();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Function* fn = declare(m, name, b.getVoidTy(), {ptr, ptr, b.getInt64Ty()});
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  emit_strip_loop(b, fn->getArg(2), lanes_of(isa),
                  [&](llvm::IRBuilderBase& b, llvm::Value* i, unsigned lanes) {
                    llvm::Value* kv = llvm::ConstantFP::get(shaped(f32, lanes), k);
                    llvm::Value* v = load(b, f32, fn->getArg(1), i, lanes);
                    store(b, b.CreateFAdd(b.CreateFMul(v, kv), kv), f32, fn->getArg(0), i);
                  });
  b.CreateRetVoid();
}

void build_map(llvm::Module& m, primcache::cpu_isa isa, const std::string& name, elem in, elem out,
               const unary_op& op) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* in_ty = type_of(ctx, in);
  llvm::Type* out_ty = type_of(ctx, out);
  llvm::Function* fn = declare(m, name, b.getVoidTy(), {ptr, ptr, b.getInt64Ty()});
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  emit_strip_loop(b, fn->getArg(2), lanes_of(isa),
                  [&](llvm::IRBuilderBase& b, llvm::Value* i, unsigned lanes) {
                    llvm::Value* v = load(b, in_ty, fn->getArg(0), i, lanes);
                    store(b, op(b, v), out_ty, fn->getArg(1), i);
                  });
  b.CreateRetVoid();
}

void build_fill_zero(llvm::Module& m) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Function* fn = declare(m, "fill_zero", b.getVoidTy(), {ptr, b.getInt64Ty()});
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* bytes = b.CreateMul(fn->getArg(1), b.getInt64(sizeof(float)));
  b.CreateMemSet(fn->getArg(0), b.getInt8(0), bytes, llvm::MaybeAlign(4));
  b.CreateRetVoid();
}

void build_libm_caller(llvm::Module& m) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* f32 = b.getFloatTy();
  llvm::FunctionCallee expf = m.getOrInsertFunction("expf", f32, f32);
  llvm::Function* fn = declare(m, "call_expf", f32, {f32});
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  b.CreateRet(b.CreateCall(expf, {fn->getArg(0)}));
}

void build_exp_intrinsic(llvm::Module& m) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* v16 = llvm::FixedVectorType::get(b.getFloatTy(), 16);
  llvm::Function* fn = declare(m, "exp_intrinsic", b.getVoidTy(), {ptr, ptr});
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* x = b.CreateAlignedLoad(v16, fn->getArg(1), llvm::Align(4));
  b.CreateAlignedStore(b.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x), fn->getArg(0),
                       llvm::Align(4));
  b.CreateRetVoid();
}

}  // namespace cpu_test
