#include "jit/compiler.hpp"

#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "jit/object_capture.hpp"
#include "jit/process_jit.hpp"
#include "jit/target.hpp"
#include "primcache/base/error.hpp"
#include "text.hpp"

namespace primcache::cpu_internal {
namespace {

void optimize(llvm::Module& module, llvm::TargetMachine& tm) {
  // Declared in this order so that they are destroyed in the reverse one,
  // as the proxies between them require.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);  // registers the target's cost model (TTI)
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

// Runs the caller's IR builder; its exceptions stop here.
result<bool> run_builder(std::string_view name, ir_builder build, llvm::Module& module) {
  try {
    build(module);
    return true;
  } catch (const error& e) {
    return failure{e.code(),
                   "building the IR of kernel " + quoted(name) + " failed: " + e.message()};
  } catch (const std::exception& e) {
    return failure{status::runtime_error,
                   "building the IR of kernel " + quoted(name) + " failed: " + e.what()};
  } catch (...) {
    return failure{status::runtime_error,
                   "building the IR of kernel " + quoted(name) + " failed: unknown exception"};
  }
}

result<std::vector<std::byte>> compile_module(std::string_view name, cpu_isa isa, ir_builder build,
                                              llvm::Module& module,
                                              llvm::orc::JITTargetMachineBuilder& jtmb) {
  auto tm = jtmb.createTargetMachine();
  if (!tm) {
    return failure{status::runtime_error, "no LLVM target machine for " +
                                              std::string(to_string(isa)) + ": " +
                                              llvm::toString(tm.takeError())};
  }
  module.setTargetTriple((*tm)->getTargetTriple().str());
  module.setDataLayout((*tm)->createDataLayout());

  if (auto built = run_builder(name, build, module); !built) return built.why();
  // The object records the ISA it is compiled for, so that load() can refuse
  // code this process may not run (an object from another host or cap).
  if (module.getNamedValue(isa_symbol) == nullptr) {
    auto* i32 = llvm::Type::getInt32Ty(module.getContext());
    new llvm::GlobalVariable(module, i32, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                             llvm::ConstantInt::get(i32, static_cast<int>(isa)), isa_symbol);
  }

  std::string findings;
  llvm::raw_string_ostream os(findings);
  if (llvm::verifyModule(module, &os)) {
    os.flush();
    while (!findings.empty() && findings.back() == '\n') findings.pop_back();
    return failure{status::invalid_arguments,
                   "kernel " + quoted(name) + " has invalid IR: " + findings};
  }

  optimize(module, **tm);

  capturing_object_cache capture;
  llvm::orc::ConcurrentIRCompiler compiler(jtmb, &capture);
  auto object = compiler(module);
  if (!object) {
    return failure{status::runtime_error, "compiling kernel " + quoted(name) +
                                              " failed: " + llvm::toString(object.takeError())};
  }
  return capture.take();
}

std::atomic<std::uint64_t> compilations{0};

}  // namespace

std::uint64_t objects_compiled() noexcept {
  return compilations.load(std::memory_order_relaxed);
}

result<std::vector<std::byte>> compile_object(std::string_view name, cpu_isa isa,
                                              ir_builder build) {
  compilations.fetch_add(1, std::memory_order_relaxed);
  // The process JIT initializes LLVM's native target, which code generation
  // needs even before anything is loaded.
  if (auto jit = process_jit(); !jit) return jit.why();
  auto jtmb = target_machine_builder(isa);
  if (!jtmb) return jtmb.why();

  try {
    llvm::orc::ThreadSafeContext context(std::make_unique<llvm::LLVMContext>());
    llvm::orc::ThreadSafeModule tsm(
        std::make_unique<llvm::Module>(llvm::StringRef(name.data(), name.size()),
                                       *context.getContext()),
        context);
    return tsm.withModuleDo([&](llvm::Module& module) {
      return compile_module(name, isa, build, module, jtmb.value());
    });
  } catch (const std::bad_alloc&) {
    return failure{status::out_of_memory, "no memory to compile kernel " + quoted(name)};
  }
}

}  // namespace primcache::cpu_internal
