#include "jit/ir_loop.hpp"

#include <string>

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>

namespace primcache::cpu_internal {

loop_exit emit_counted_loop(llvm::IRBuilderBase& b, llvm::Value* begin, llvm::Value* end,
                            std::int64_t step, const ir_values& init, const loop_body& body,
                            loop_test test, std::string_view name) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  const std::string prefix(name);
  auto* head = llvm::BasicBlock::Create(ctx, prefix + ".head", fn);
  auto* loop = llvm::BasicBlock::Create(ctx, prefix + ".body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, prefix + ".exit", fn);
  b.CreateBr(head);
  b.SetInsertPoint(head);
  llvm::PHINode* index = b.CreatePHI(b.getInt64Ty(), 2, prefix);
  index->addIncoming(begin, pre);
  loop_exit out{index, {}};
  std::vector<llvm::PHINode*> phis;
  for (llvm::Value* v : init) {
    llvm::PHINode* phi = b.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, pre);
    phis.push_back(phi);
    out.carried.push_back(phi);
  }
  llvm::Value* step_value = b.getInt64(static_cast<std::uint64_t>(step));
  llvm::Value* more = test == loop_test::index_below_end
                          ? b.CreateICmpSLT(index, end)
                          : b.CreateICmpSLE(b.CreateAdd(index, step_value), end);
  b.CreateCondBr(more, loop, exit);
  b.SetInsertPoint(loop);
  const ir_values next = body(index, out.carried);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  index->addIncoming(b.CreateAdd(index, step_value), latch);
  for (std::size_t j = 0; j < phis.size(); ++j) phis[j]->addIncoming(next[j], latch);
  b.CreateBr(head);
  b.SetInsertPoint(exit);
  return out;
}

}  // namespace primcache::cpu_internal
