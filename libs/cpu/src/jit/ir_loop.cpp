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

loop_exit emit_bottom_tested_loop(llvm::IRBuilderBase& b, llvm::Value* begin, llvm::Value* end,
                                  std::int64_t step, const ir_values& init, const loop_body& body,
                                  bool guarded, std::string_view name) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  const std::string prefix(name);
  auto* loop = llvm::BasicBlock::Create(ctx, prefix + ".body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, prefix + ".exit", fn);
  if (guarded) {
    b.CreateCondBr(b.CreateICmpSLT(begin, end), loop, exit);
  } else {
    b.CreateBr(loop);
  }
  b.SetInsertPoint(loop);
  llvm::PHINode* index = b.CreatePHI(b.getInt64Ty(), 2, prefix);
  index->addIncoming(begin, pre);
  std::vector<llvm::PHINode*> phis;
  ir_values current;
  for (llvm::Value* v : init) {
    llvm::PHINode* phi = b.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, pre);
    phis.push_back(phi);
    current.push_back(phi);
  }
  const ir_values next = body(index, current);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  llvm::Value* next_index = b.CreateAdd(index, b.getInt64(static_cast<std::uint64_t>(step)));
  index->addIncoming(next_index, latch);
  for (std::size_t j = 0; j < phis.size(); ++j) phis[j]->addIncoming(next[j], latch);
  b.CreateCondBr(b.CreateICmpSLT(next_index, end), loop, exit);

  b.SetInsertPoint(exit);
  loop_exit out;
  if (!guarded) {
    out.index = next_index;
    out.carried = next;
    return out;
  }
  llvm::PHINode* last = b.CreatePHI(b.getInt64Ty(), 2);
  last->addIncoming(begin, pre);
  last->addIncoming(next_index, latch);
  out.index = last;
  for (std::size_t j = 0; j < init.size(); ++j) {
    llvm::PHINode* phi = b.CreatePHI(init[j]->getType(), 2);
    phi->addIncoming(init[j], pre);
    phi->addIncoming(next[j], latch);
    out.carried.push_back(phi);
  }
  return out;
}

}  // namespace primcache::cpu_internal
