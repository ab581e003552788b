#include "jit/compiler.hpp"

#include <atomic>
#include <ctime>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassTimingInfo.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCContext.h>
#include <llvm/Pass.h>
#include <llvm/PassInfo.h>
#include <llvm/PassRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/StandardInstrumentations.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "jit/object_capture.hpp"
#include "jit/process_jit.hpp"
#include "jit/target.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "text.hpp"

namespace primcache::cpu_internal {
namespace {

// The matmul: its generator emits vector code with the unrolling decided,
// no calls and no allocas, and steps the K loop's pointers itself, so no IR
// pass runs. The cleanup pipeline it had (early-cse, simplifycfg, licm,
// early-cse: 0.7-1.0 ms of a 5 ms creation) changed one K loop of the
// 52 micro-kernels in the 34 matmul objects bench_matmul,
// bench_const_cache and primcached's two workloads make: a 6x64 one with a
// gelu_erf epilogue, which spilled an accumulator in the K loop with it
// and two without (the epilogue now leaves the K loop's registers alone:
// matmul_generator.cpp); what else differs is outside the K loops (the
// driver's address arithmetic, a tail's branches); docs/PERFORMANCE.md,
// "Where a compilation goes, sixth pass". Code generation runs at None
// (FastISel, none of the machine-level optimizations) with the greedy
// register allocator (process_jit.cpp sets it for level None): half the
// time of Default, and the micro-kernel's K loop is the same instructions
// (the fast allocator, None's own, spilled the accumulators at every block
// boundary); the kernels run as fast (bench_matmul, alternating runs;
// docs/PERFORMANCE.md, fourth pass). No loop strength reduction (the
// generator's addresses are already a carried pointer plus a constant) and
// no machine scheduler (None runs neither).
constexpr std::string_view k_matmul_prefix = "matmul_";
constexpr compile_settings k_matmul{"", 0, false, false};
// The shape-generic matmul (compiled ahead of time under a name with this
// prefix) keeps the settings it was measured with: its generator computes
// its addresses from run-time strides and leaves loop strength reduction
// to find the stepped form.
constexpr std::string_view k_generic_matmul_prefix = "matmul_generic_";
constexpr compile_settings k_generic_matmul{
    "function(mem2reg,early-cse<memssa>,instcombine,simplifycfg,loop-mssa(licm),"
    "early-cse<memssa>)",
    2, true, true};
// Every other kernel that states no settings keeps LLVM's default
// optimizing pipeline.
constexpr compile_settings k_default{};

thread_local compile_probe* t_probe = nullptr;

// The probe measures the compiling thread's CPU time: on a shared machine
// its wall time measures the other processes as much as the compiler.
struct thread_cpu_clock {
  using time_point = double;  // milliseconds
  static time_point now() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
};
using probe_clock = thread_cpu_clock;
double ms_since(probe_clock::time_point start) {
  return probe_clock::now() - start;
}

std::size_t instruction_count(const llvm::Module& module) {
  std::size_t n = 0;
  for (const llvm::Function& f : module) n += f.getInstructionCount();
  return n;
}

// Target machines cost about a millisecond to create (subtarget, cost
// tables) and are not thread-safe, so each compilation borrows one from this
// pool for its own and returns it; the pool holds at most what was used at
// once. Never destroyed (as the process JIT): no order to get right at exit.
class target_machine_pool {
 public:
  using machine = std::unique_ptr<llvm::TargetMachine>;

  result<machine> take(cpu_isa isa) {
    {
      lock_guard guard(mu_);
      auto& free = free_[static_cast<std::size_t>(isa)];
      if (!free.empty()) {
        machine tm = std::move(free.back());
        free.pop_back();
        return tm;
      }
    }
    auto jtmb = target_machine_builder(isa);
    if (!jtmb) return jtmb.why();
    auto tm = jtmb.value().createTargetMachine();
    if (!tm) {
      return failure{status::runtime_error, "no LLVM target machine for " +
                                                std::string(to_string(isa)) + ": " +
                                                llvm::toString(tm.takeError())};
    }
    return std::move(*tm);
  }

  void hold_across_fork() noexcept {
    cpu_internal::hold_across_fork(jit_fork_lock::target_machines, mu_);
  }

  void give_back(cpu_isa isa, machine tm) noexcept {
    try {
      lock_guard guard(mu_);
      free_[static_cast<std::size_t>(isa)].push_back(std::move(tm));
    } catch (...) {  // no memory to keep it: it is simply destroyed
    }
  }

 private:
  mutex mu_;
  std::vector<machine> free_[static_cast<std::size_t>(max_known_cpu_isa) + 1] PRIMCACHE_GUARDED_BY(
      mu_);
};

// Made when the library loads (k_machines_made), before any thread of the
// process can fork: a function-local static's initialization guard, held
// while it allocates, would be held across a fork that caught it there, and
// the child's first compilation would wait for it for ever. Its lock is held
// across fork() (process_jit.hpp) for the same reason.
target_machine_pool& machines() {
  static auto* pool = [] {
    auto* made = new target_machine_pool;
    made->hold_across_fork();
    return made;
  }();
  return *pool;
}

[[maybe_unused]] const bool k_machines_made = (machines(), true);

// A machine from the pool for one compilation, returned when it ends.
class borrowed_machine {
 public:
  borrowed_machine(cpu_isa isa, target_machine_pool::machine tm) : isa_(isa), tm_(std::move(tm)) {}
  ~borrowed_machine() { machines().give_back(isa_, std::move(tm_)); }
  borrowed_machine(const borrowed_machine&) = delete;
  borrowed_machine& operator=(const borrowed_machine&) = delete;
  llvm::TargetMachine& operator*() const noexcept { return *tm_; }

 private:
  cpu_isa isa_;
  target_machine_pool::machine tm_;
};

result<bool> optimize(std::string_view name, llvm::Module& module, llvm::TargetMachine& tm,
                      const std::string& pipeline) {
  if (pipeline.empty()) return true;
  // Declared in this order so that they are destroyed in the reverse one,
  // as the proxies between them require.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // Pass timing (-time-passes, which only the jit_profile tool sets) needs
  // the standard instrumentation; the library's path registers none.
  llvm::PassInstrumentationCallbacks pic;
  std::unique_ptr<llvm::StandardInstrumentations> si;
  if (llvm::TimePassesIsEnabled) {
    si = std::make_unique<llvm::StandardInstrumentations>(/*DebugLogging=*/false);
    si->registerCallbacks(pic, &fam);
  }
  llvm::PassBuilder pb(&tm, llvm::PipelineTuningOptions(), llvm::None,
                       si ? &pic : nullptr);  // registers the target's cost model (TTI)
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (pipeline == "O1" || pipeline == "O2" || pipeline == "O3") {
    mpm = pb.buildPerModuleDefaultPipeline(pipeline == "O1"   ? llvm::OptimizationLevel::O1
                                           : pipeline == "O2" ? llvm::OptimizationLevel::O2
                                                              : llvm::OptimizationLevel::O3);
  } else if (auto err = pb.parsePassPipeline(mpm, pipeline)) {
    return failure{status::invalid_arguments,
                   "the pipeline for kernel " + quoted(name) +
                       " does not parse: " + llvm::toString(std::move(err))};
  }
  mpm.run(module, mam);
  return true;
}

// The legacy pass manager code generation runs in, refusing the passes a
// kernel's settings drop. LLVM adds its code-generation passes inside
// addPassesToEmitMC, offering no switch for them but its process-wide
// command-line options; this pass manager drops them for one compilation
// and leaves every other compilation in the process (the host program's
// own LLVM included) as it was.
class filtered_pass_manager final : public llvm::legacy::PassManager {
 public:
  filtered_pass_manager(bool loop_strength_reduction, bool machine_scheduler)
      : loop_strength_reduction_(loop_strength_reduction), machine_scheduler_(machine_scheduler) {}

  void add(llvm::Pass* pass) override {
    if ((!loop_strength_reduction_ && has_argument(*pass, "loop-reduce")) ||
        (!machine_scheduler_ && has_argument(*pass, "machine-scheduler"))) {
      delete pass;  // add() owns the pass it is given
      ++dropped_;
      return;
    }
    llvm::legacy::PassManager::add(pass);
  }

  std::size_t dropped() const noexcept { return dropped_; }

 private:
  static bool has_argument(const llvm::Pass& pass, llvm::StringRef argument) {
    const llvm::PassInfo* info =
        llvm::PassRegistry::getPassRegistry()->getPassInfo(pass.getPassID());
    return info != nullptr && info->getPassArgument() == argument;
  }

  bool loop_strength_reduction_;
  bool machine_scheduler_;
  std::size_t dropped_ = 0;
};

// Code generation into an object, as llvm::orc::SimpleCompiler does it, in a
// filtered_pass_manager; `capture` receives the object.
result<bool> emit_object(std::string_view name, llvm::Module& module, llvm::TargetMachine& tm,
                         bool loop_strength_reduction, bool machine_scheduler,
                         capturing_object_cache& capture, std::size_t& dropped) {
  llvm::SmallVector<char, 0> buffer;
  {
    llvm::raw_svector_ostream stream(buffer);
    filtered_pass_manager passes(loop_strength_reduction, machine_scheduler);
    llvm::MCContext* mc = nullptr;
    if (tm.addPassesToEmitMC(passes, mc, stream)) {
      return failure{status::runtime_error, "compiling kernel " + quoted(name) +
                                                " failed: the target cannot emit objects"};
    }
    passes.run(module);
    dropped = passes.dropped();
  }
  llvm::SmallVectorMemoryBuffer object(std::move(buffer), module.getModuleIdentifier(),
                                       /*RequiresNullTerminator=*/false);
  capture.notifyObjectCompiled(&module, object.getMemBufferRef());
  return true;
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

result<std::vector<std::byte>> compile_module(std::string_view name, cpu_isa isa,
                                              const compile_settings& settings, ir_builder build,
                                              llvm::Module& module) {
  auto taken = machines().take(isa);
  if (!taken) return taken.why();
  borrowed_machine tm(isa, std::move(taken).value());
  compile_probe* probe = t_probe;
  compile_profile profile;
  profile.name = std::string(name);

  (*tm).setOptLevel(static_cast<llvm::CodeGenOpt::Level>(
      probe && probe->codegen_level ? *probe->codegen_level : settings.codegen_level));
  (*tm).setFastISel(probe && probe->fast_isel && *probe->fast_isel);
  module.setTargetTriple((*tm).getTargetTriple().str());
  module.setDataLayout((*tm).createDataLayout());

  auto start = probe_clock::now();
  // The object records the ISA it is compiled for, so that load() can refuse
  // code this process may not run (an object from another host or cap);
  // defined before the builder runs, for generators that read it
  // (module_isa).
  if (module.getNamedValue(isa_symbol) == nullptr) {
    auto* i32 = llvm::Type::getInt32Ty(module.getContext());
    new llvm::GlobalVariable(module, i32, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                             llvm::ConstantInt::get(i32, static_cast<int>(isa)), isa_symbol);
  }
  if (auto built = run_builder(name, build, module); !built) return built.why();
  if (probe) {
    profile.build_ms = ms_since(start);
    profile.instructions_before = instruction_count(module);
    start = probe_clock::now();
  }

  std::string findings;
  llvm::raw_string_ostream os(findings);
  if (llvm::verifyModule(module, &os)) {
    os.flush();
    while (!findings.empty() && findings.back() == '\n') findings.pop_back();
    return failure{status::invalid_arguments,
                   "kernel " + quoted(name) + " has invalid IR: " + findings};
  }
  if (probe) {
    profile.verify_ms = ms_since(start);
    start = probe_clock::now();
  }

  auto optimized =
      optimize(name, module, *tm, probe && probe->pipeline ? *probe->pipeline : settings.pipeline);
  if (!optimized) return optimized.why();
  if (probe) {
    profile.optimize_ms = ms_since(start);
    profile.instructions_after = instruction_count(module);
    if (probe->keep_code) {
      llvm::raw_string_ostream ir(profile.ir);
      module.print(ir, nullptr);
    }
    start = probe_clock::now();
  }

  capturing_object_cache capture;
  const bool lsr = probe && probe->loop_strength_reduction ? *probe->loop_strength_reduction
                                                           : settings.loop_strength_reduction;
  const bool misched =
      probe && probe->machine_scheduler ? *probe->machine_scheduler : settings.machine_scheduler;
  std::size_t dropped = 0;
  if (auto emitted = emit_object(name, module, *tm, lsr, misched, capture, dropped); !emitted) {
    return emitted.why();
  }
  auto bytes = capture.take();
  if (probe && bytes) {
    profile.codegen_ms = ms_since(start);
    profile.object_bytes = bytes.value().size();
    profile.passes_dropped = dropped;
    if (probe->keep_code) profile.object = bytes.value();
    probe->profiles.push_back(std::move(profile));
  }
  return bytes;
}

std::atomic<std::uint64_t> compilations{0};

}  // namespace

std::optional<cpu_isa> module_isa(const llvm::Module& module) {
  const llvm::GlobalVariable* g = module.getNamedGlobal(isa_symbol);
  if (g == nullptr || !g->hasInitializer()) return std::nullopt;
  const auto* value = llvm::dyn_cast<llvm::ConstantInt>(g->getInitializer());
  if (value == nullptr) return std::nullopt;
  return static_cast<cpu_isa>(value->getSExtValue());
}

compile_settings default_compile_settings(std::string_view name) noexcept {
  if (name.starts_with(k_generic_matmul_prefix)) return k_generic_matmul;
  return name.starts_with(k_matmul_prefix) ? k_matmul : k_default;
}

const char* kernel_pipeline(std::string_view name) noexcept {
  return default_compile_settings(name).pipeline;
}

int kernel_codegen_level(std::string_view name) noexcept {
  return default_compile_settings(name).codegen_level;
}

compile_probe::compile_probe() noexcept : previous_(t_probe) {
  t_probe = this;
}

compile_probe::~compile_probe() {
  t_probe = previous_;
}

compile_probe* compile_probe::current() noexcept {
  return t_probe;
}

double compile_probe::thread_cpu_ms() noexcept {
  return thread_cpu_clock::now();
}

std::uint64_t objects_compiled() noexcept {
  return compilations.load(std::memory_order_relaxed);
}

result<std::vector<std::byte>> compile_object(std::string_view name, cpu_isa isa,
                                              ir_builder build) {
  return compile_object(name, isa, default_compile_settings(name), build);
}

result<std::vector<std::byte>> compile_object(std::string_view name, cpu_isa isa,
                                              const compile_settings& settings, ir_builder build) {
  compilations.fetch_add(1, std::memory_order_relaxed);
  // The process JIT initializes LLVM's native target, which code generation
  // needs even before anything is loaded.
  if (auto jit = process_jit(); !jit) return jit.why();

  try {
    llvm::orc::ThreadSafeContext context(std::make_unique<llvm::LLVMContext>());
    llvm::orc::ThreadSafeModule tsm(
        std::make_unique<llvm::Module>(llvm::StringRef(name.data(), name.size()),
                                       *context.getContext()),
        context);
    return tsm.withModuleDo(
        [&](llvm::Module& module) { return compile_module(name, isa, settings, build, module); });
  } catch (const std::bad_alloc&) {
    return failure{status::out_of_memory, "no memory to compile kernel " + quoted(name)};
  }
}

}  // namespace primcache::cpu_internal
