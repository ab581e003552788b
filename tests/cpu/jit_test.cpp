#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/CommandLine.h>

#include "jit/compiler.hpp"
#include "jit/ir_loop.hpp"
#include "jit/jit_module.hpp"
#include "jit/process_jit.hpp"
#include "kernels.hpp"
#include "primcache/base/error.hpp"
#include "primcache/cpu/cpu.hpp"

namespace {

using primcache::cpu_isa;
using primcache::cpu_internal::jit_module;

std::unique_ptr<jit_module> compile_axpy(cpu_isa isa, const std::string& name = "axpy") {
  auto m = jit_module::compile(name, isa,
                               [&](llvm::Module& mod) { cpu_test::build_axpy(mod, isa, name); });
  INFO((m ? std::string() : m.why().message));
  REQUIRE(m.has_value());
  return std::move(m).value();
}

std::vector<float> iota_input(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 0.37f - 11.0f;
  return x;
}

std::vector<float> run_axpy(const jit_module& m, const std::vector<float>& x, float a, float b,
                            const std::string& name = "axpy") {
  auto fn = m.lookup_function<cpu_test::axpy_fn>(name);
  REQUIRE(fn.has_value());
  // One guard element on each side catches writes out of bounds.
  std::vector<float> y(x.size() + 2, -7.0f);
  fn.value()(y.data() + 1, x.data(), a, b, static_cast<std::int64_t>(x.size()));
  CHECK(y.front() == -7.0f);
  CHECK(y.back() == -7.0f);
  return std::vector<float>(y.begin() + 1, y.end() - 1);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool host_has(cpu_isa isa) {
  return primcache::detected_isa() >= isa;
}

}  // namespace

TEST_CASE("a vectorized axpy built with IRBuilder compiles, loads and computes a*x + b",
          "[cpu][jit]") {
  const cpu_isa isa = primcache::effective_isa();
  auto m = compile_axpy(isa);
  CHECK(m->name() == "axpy");
  CHECK_FALSE(m->object().empty());

  // Sizes around the vector width exercise the vector body and the tail.
  auto n = GENERATE(0, 1, 7, 8, 15, 16, 17, 1000, 1027);
  auto x = iota_input(static_cast<std::size_t>(n));
  auto y = run_axpy(*m, x, 2.5f, -1.0f);
  for (int i = 0; i < n; ++i) {
    INFO("i = " << i);
    CHECK(y[i] == 2.5f * x[i] + -1.0f);
  }
}

TEST_CASE("the same IR compiled for avx2 and avx512_core gives different code, same results",
          "[cpu][jit][isa]") {
  if (!host_has(cpu_isa::avx512_core)) {
    WARN("host lacks AVX-512 (detected " << primcache::to_string(primcache::detected_isa())
                                         << "): only the AVX2 path runs");
  }
  REQUIRE(host_has(cpu_isa::avx2));
  auto avx2 = compile_axpy(cpu_isa::avx2);
  auto x = iota_input(1027);
  auto y2 = run_axpy(*avx2, x, 0.75f, 3.0f);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(y2[i] == 0.75f * x[i] + 3.0f);

  if (host_has(cpu_isa::avx512_core)) {
    auto avx512 = compile_axpy(cpu_isa::avx512_core);
    CHECK(avx2->object() != avx512->object());
    CHECK(bitwise_equal(run_axpy(*avx512, x, 0.75f, 3.0f), y2));
  }
}

TEST_CASE("a kernel rebuilt from its captured object in a fresh JITDylib gives identical results",
          "[cpu][jit][object]") {
  auto isa = GENERATE(cpu_isa::x86_64, cpu_isa::sse41, cpu_isa::avx2, cpu_isa::avx512_core);
  if (!host_has(isa)) return;  // a level above the host cannot run here
  INFO("isa " << primcache::to_string(isa));
  auto original = compile_axpy(isa);
  auto reloaded = jit_module::load("axpy", original->object());
  REQUIRE(reloaded.has_value());
  CHECK(reloaded.value()->object() == original->object());
  CHECK(reloaded.value()->lookup("axpy").value() != original->lookup("axpy").value());

  auto x = iota_input(531);
  auto expected = run_axpy(*original, x, -1.5f, 0.25f);
  CHECK(bitwise_equal(run_axpy(*reloaded.value(), x, -1.5f, 0.25f), expected));

  SECTION("and keeps working when the original is gone") {
    original.reset();
    CHECK(bitwise_equal(run_axpy(*reloaded.value(), x, -1.5f, 0.25f), expected));
  }
}

TEST_CASE("code memory returns to its baseline when the last module of a kernel goes",
          "[cpu][jit][memory]") {
  const cpu_isa isa = primcache::effective_isa();
  // Warm the JIT so its creation is not part of the measurement.
  REQUIRE(primcache::cpu_internal::process_jit().has_value());
  const std::size_t baseline = primcache::cpu_internal::code_bytes_in_use();
  const std::size_t baseline_blocks = primcache::cpu_internal::code_blocks_in_use();

  SECTION("one module") {
    auto m = compile_axpy(isa);
    CHECK(primcache::cpu_internal::code_bytes_in_use() > baseline);
    m.reset();
  }
  SECTION("an evicted module still held and its recreation coexist") {
    auto held = compile_axpy(isa);
    const std::size_t one = primcache::cpu_internal::code_bytes_in_use() - baseline;
    auto recreated = jit_module::load("axpy", held->object());
    REQUIRE(recreated.has_value());
    CHECK(primcache::cpu_internal::code_bytes_in_use() == baseline + 2 * one);

    auto x = iota_input(100);
    auto expected = run_axpy(*held, x, 3.0f, 1.0f);
    held.reset();  // the old user goes first
    CHECK(primcache::cpu_internal::code_bytes_in_use() == baseline + one);
    CHECK(bitwise_equal(run_axpy(*recreated.value(), x, 3.0f, 1.0f), expected));
    recreated.value().reset();
  }
  SECTION("many modules of different kernels") {
    std::vector<std::unique_ptr<jit_module>> modules;
    for (int i = 0; i < 8; ++i) modules.push_back(compile_axpy(isa, "axpy_" + std::to_string(i)));
    CHECK(primcache::cpu_internal::code_bytes_in_use() > baseline);
    modules.clear();
  }
  CHECK(primcache::cpu_internal::code_bytes_in_use() == baseline);
  CHECK(primcache::cpu_internal::code_blocks_in_use() == baseline_blocks);
}

TEST_CASE("a kernel that calls memset links against the runtime symbols and runs",
          "[cpu][jit][symbols]") {
  auto m = jit_module::compile("fill", primcache::effective_isa(),
                               [](llvm::Module& mod) { cpu_test::build_fill_zero(mod); });
  INFO((m ? std::string() : m.why().message));
  REQUIRE(m.has_value());
  std::vector<float> data(1000, 5.0f);
  m.value()->lookup_function<cpu_test::fill_fn>("fill_zero").value()(data.data(), 999);
  CHECK(std::count(data.begin(), data.end(), 0.0f) == 999);
  CHECK(data.back() == 5.0f);
}

TEST_CASE("a kernel that needs a libm function is refused at load, naming the function",
          "[cpu][jit][symbols]") {
  SECTION("a direct call to expf") {
    auto m = jit_module::compile("libm_caller", primcache::effective_isa(),
                                 [](llvm::Module& mod) { cpu_test::build_libm_caller(mod); });
    REQUIRE_FALSE(m.has_value());
    CHECK(m.why().code == primcache::status::permission_denied);
    CHECK(m.why().message.find("'expf'") != std::string::npos);
    CHECK(m.why().message.find("'libm_caller'") != std::string::npos);
  }
  SECTION("llvm.exp on a vector, which LLVM 15 expands into expf calls") {
    auto m = jit_module::compile("exp_intrinsic", primcache::effective_isa(),
                                 [](llvm::Module& mod) { cpu_test::build_exp_intrinsic(mod); });
    REQUIRE_FALSE(m.has_value());
    CHECK(m.why().code == primcache::status::permission_denied);
    CHECK(m.why().message.find("'expf'") != std::string::npos);
  }
}

TEST_CASE("invalid IR is an error value carrying the verifier's message", "[cpu][jit][errors]") {
  auto r = primcache::cpu_internal::compile_object(
      "broken", primcache::effective_isa(), [](llvm::Module& mod) {
        llvm::LLVMContext& ctx = mod.getContext();
        auto* fn =
            llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false),
                                   llvm::Function::ExternalLinkage, "no_terminator", mod);
        llvm::BasicBlock::Create(ctx, "entry", fn);  // and no return
      });
  REQUIRE_FALSE(r.has_value());
  CHECK(r.why().code == primcache::status::invalid_arguments);
  CHECK(r.why().message.find("'broken'") != std::string::npos);
  CHECK(r.why().message.find("terminator") != std::string::npos);
}

TEST_CASE("an exception from the IR builder becomes a failure", "[cpu][jit][errors]") {
  SECTION("primcache::error keeps its status") {
    auto r = jit_module::compile("refuses", primcache::effective_isa(), [](llvm::Module&) {
      throw primcache::error(primcache::status::unimplemented, "no kernel for this shape");
    });
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == primcache::status::unimplemented);
    CHECK(r.why().message.find("no kernel for this shape") != std::string::npos);
  }
  SECTION("any other exception is a runtime error with its message") {
    auto r = jit_module::compile("throws", primcache::effective_isa(),
                                 [](llvm::Module&) { throw std::runtime_error("boom"); });
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == primcache::status::runtime_error);
    CHECK(r.why().message.find("boom") != std::string::npos);
  }
}

TEST_CASE("bytes that are not an object are refused as corrupt data", "[cpu][jit][errors]") {
  const std::size_t baseline = primcache::cpu_internal::code_bytes_in_use();
  SECTION("garbage") {
    std::vector<std::byte> garbage(256, std::byte{0x5A});
    auto r = jit_module::load("garbage", garbage);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == primcache::status::corrupt_data);
    CHECK(r.why().message.find("'garbage'") != std::string::npos);
  }
  SECTION("a truncated object") {
    auto m = compile_axpy(primcache::effective_isa());
    std::vector<std::byte> half(m->object().begin(), m->object().begin() + m->object().size() / 2);
    auto r = jit_module::load("truncated", half);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == primcache::status::corrupt_data);
  }
  SECTION("nothing") {
    auto r = jit_module::load("empty", std::vector<std::byte>{});
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == primcache::status::corrupt_data);
  }
  CHECK(primcache::cpu_internal::code_bytes_in_use() == baseline);
}

TEST_CASE("looking up a symbol the kernel does not define is not_found", "[cpu][jit][errors]") {
  auto m = compile_axpy(primcache::effective_isa());
  auto r = m->lookup("saxpy");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.why().code == primcache::status::not_found);
  CHECK(r.why().message.find("'saxpy'") != std::string::npos);
  CHECK(r.why().message.find("axpy") != std::string::npos);
}

TEST_CASE("a module still held at exit is unloaded after main returns", "[cpu][jit][exit]") {
  // Like a primitive kept in a static cache: its destructor runs during
  // static destruction, when the process JIT (never destroyed) must still be
  // there. A crash would fail the test binary's exit status.
  static std::unique_ptr<jit_module> held_until_exit = compile_axpy(primcache::effective_isa());
  auto x = iota_input(33);
  auto y = run_axpy(*held_until_exit, x, 2.0f, 0.5f);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(y[i] == 2.0f * x[i] + 0.5f);
}

TEST_CASE("a captured object records its ISA, and loading refuses one above the cap or host",
          "[cpu][jit][object][isa]") {
  if (!host_has(cpu_isa::avx2)) return;
  auto original = compile_axpy(cpu_isa::avx2);
  CHECK(original->isa() == cpu_isa::avx2);
  SECTION("a load under a lower cap is refused, naming both ISAs") {
    primcache::set_max_cpu_isa(cpu_isa::sse41);
    auto r = jit_module::load("axpy", original->object());
    primcache::clear_max_cpu_isa();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == primcache::status::unimplemented);
    CHECK_THAT(r.why().message, Catch::Matchers::Contains("compiled for avx2") &&
                                    Catch::Matchers::Contains("sse41") &&
                                    Catch::Matchers::Contains("cap"));
  }
  SECTION("a load at or above the object's ISA succeeds and reports it") {
    primcache::set_max_cpu_isa(cpu_isa::avx2);
    auto r = jit_module::load("axpy", original->object());
    primcache::clear_max_cpu_isa();
    REQUIRE(r.has_value());
    CHECK(r.value()->isa() == cpu_isa::avx2);
  }
  SECTION("an object compiled for an ISA the host lacks is refused") {
    if (host_has(primcache::max_known_cpu_isa)) return;
    const cpu_isa above = primcache::max_known_cpu_isa;
    auto object = primcache::cpu_internal::compile_object(
        "axpy", above, [&](llvm::Module& mod) { cpu_test::build_axpy(mod, above, "axpy"); });
    REQUIRE(object.has_value());
    auto r = jit_module::load("axpy", object.value());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == primcache::status::unimplemented);
    CHECK_THAT(r.why().message, Catch::Matchers::Contains("this host supports"));
  }
}

TEST_CASE("a builder reads the ISA its module is compiled for; other modules have none",
          "[cpu][jit][isa]") {
  namespace ci = primcache::cpu_internal;
  for (cpu_isa isa : {cpu_isa::x86_64, cpu_isa::avx2, cpu_isa::avx512_core}) {
    std::optional<cpu_isa> seen;
    auto object = ci::compile_object("axpy", isa, [&](llvm::Module& mod) {
      seen = ci::module_isa(mod);
      cpu_test::build_axpy(mod, isa, "axpy");
    });
    REQUIRE(object.has_value());
    REQUIRE(seen.has_value());
    CHECK(*seen == isa);
  }
  llvm::LLVMContext ctx;
  llvm::Module bare("bare", ctx);
  CHECK_FALSE(ci::module_isa(bare).has_value());
  // A symbol of that name that is not a constant integer records nothing.
  new llvm::GlobalVariable(bare, llvm::Type::getFloatTy(ctx), true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantFP::get(llvm::Type::getFloatTy(ctx), 1.0), ci::isa_symbol);
  CHECK_FALSE(ci::module_isa(bare).has_value());
}

TEST_CASE("a compile_probe records each phase and the IR's size, and no probe records nothing",
          "[cpu][jit][probe]") {
  namespace ci = primcache::cpu_internal;
  const cpu_isa isa = primcache::effective_isa();
  REQUIRE(ci::compile_probe::current() == nullptr);
  {
    ci::compile_probe probe;
    REQUIRE(ci::compile_probe::current() == &probe);
    auto m = compile_axpy(isa, "axpy_probed");
    REQUIRE(probe.profiles.size() == 1);
    const ci::compile_profile& p = probe.profiles.front();
    CHECK(p.name == "axpy_probed");
    CHECK(p.instructions_before > 0);
    CHECK(p.instructions_after > 0);
    CHECK(p.object_bytes == m->object().size());
    CHECK(p.build_ms >= 0);
    CHECK(p.optimize_ms >= 0);
    CHECK(p.codegen_ms > 0);
    CHECK(p.link_ms > 0);  // jit_module::compile links, and says how long it took
    {
      ci::compile_probe inner;  // hides the outer one until it goes
      CHECK(ci::compile_probe::current() == &inner);
      compile_axpy(isa, "axpy_inner");
      CHECK(inner.profiles.size() == 1);
    }
    CHECK(ci::compile_probe::current() == &probe);
    CHECK(probe.profiles.size() == 1);
  }
  CHECK(ci::compile_probe::current() == nullptr);
}

TEST_CASE(
    "a probe's pipeline override runs instead of the kernel pipeline; O3 gives the same "
    "results",
    "[cpu][jit][probe]") {
  namespace ci = primcache::cpu_internal;
  const cpu_isa isa = primcache::effective_isa();
  const std::vector<float> x = iota_input(203);
  auto lean = compile_axpy(isa);
  std::vector<float> expected = run_axpy(*lean, x, 1.5f, -2.0f);
  for (const char* pipeline : {"", "O3", "function(instcombine)"}) {
    INFO(pipeline);
    ci::compile_probe probe;
    probe.pipeline = pipeline;
    probe.codegen_level = 3;
    auto m = compile_axpy(isa);
    REQUIRE(probe.profiles.size() == 1);
    if (std::string(pipeline).empty()) {
      CHECK(probe.profiles[0].instructions_after == probe.profiles[0].instructions_before);
    }
    CHECK(bitwise_equal(run_axpy(*m, x, 1.5f, -2.0f), expected));
  }
}

TEST_CASE(
    "explicit compile settings are used as given: without loop strength reduction the pass is "
    "left out and the kernel computes the same",
    "[cpu][jit][settings]") {
  namespace ci = primcache::cpu_internal;
  const cpu_isa isa = primcache::effective_isa();
  const std::vector<float> x = iota_input(203);
  const std::vector<float> expected = run_axpy(*compile_axpy(isa), x, 1.5f, -2.0f);
  for (bool lsr : {true, false}) {
    INFO("loop strength reduction " << lsr);
    const ci::compile_settings settings{"function(mem2reg,early-cse<memssa>)", 2, lsr};
    ci::compile_probe probe;
    auto m = jit_module::compile(
        "axpy", isa, settings, [&](llvm::Module& mod) { cpu_test::build_axpy(mod, isa, "axpy"); });
    REQUIRE(m.has_value());
    REQUIRE(probe.profiles.size() == 1);
    CHECK(probe.profiles[0].passes_dropped == (lsr ? 0u : 1u));
    CHECK(bitwise_equal(run_axpy(*m.value(), x, 1.5f, -2.0f), expected));
  }
  SECTION("a probe's override wins over the settings") {
    ci::compile_probe probe;
    probe.loop_strength_reduction = true;
    auto m =
        jit_module::compile("axpy", isa, ci::compile_settings{"", 2, false},
                            [&](llvm::Module& mod) { cpu_test::build_axpy(mod, isa, "axpy"); });
    REQUIRE(m.has_value());
    REQUIRE(probe.profiles.size() == 1);
    CHECK(probe.profiles[0].passes_dropped == 0u);
  }
  SECTION("kernels that state no settings get the defaults by name") {
    CHECK(ci::default_compile_settings("conv_fwd_f32").loop_strength_reduction);
    CHECK(std::string(ci::default_compile_settings("conv_fwd_f32").pipeline) == "O3");
    CHECK(ci::default_compile_settings("matmul_f32_1x2x3x4").codegen_level == 0);
    CHECK(std::string(ci::default_compile_settings("matmul_f32_1x2x3x4").pipeline) != "O3");
  }
}

TEST_CASE(
    "explicit compile settings without the machine scheduler leave the pass out and the kernel "
    "computes the same",
    "[cpu][jit][settings]") {
  namespace ci = primcache::cpu_internal;
  const cpu_isa isa = primcache::effective_isa();
  const std::vector<float> x = iota_input(203);
  const std::vector<float> expected = run_axpy(*compile_axpy(isa), x, 1.5f, -2.0f);
  for (bool lsr : {true, false}) {
    INFO("loop strength reduction " << lsr);
    const ci::compile_settings settings{"function(mem2reg,early-cse<memssa>)", 2, lsr, false};
    ci::compile_probe probe;
    auto m = jit_module::compile(
        "axpy", isa, settings, [&](llvm::Module& mod) { cpu_test::build_axpy(mod, isa, "axpy"); });
    REQUIRE(m.has_value());
    REQUIRE(probe.profiles.size() == 1);
    CHECK(probe.profiles[0].passes_dropped == (lsr ? 1u : 2u));
    CHECK(bitwise_equal(run_axpy(*m.value(), x, 1.5f, -2.0f), expected));
  }
  SECTION("a probe's override wins over the settings") {
    ci::compile_probe probe;
    probe.machine_scheduler = true;
    auto m =
        jit_module::compile("axpy", isa, ci::compile_settings{"", 2, true, false},
                            [&](llvm::Module& mod) { cpu_test::build_axpy(mod, isa, "axpy"); });
    REQUIRE(m.has_value());
    REQUIRE(probe.profiles.size() == 1);
    CHECK(probe.profiles[0].passes_dropped == 0u);
  }
  SECTION("the specialized matmul drops both passes; the shape-generic matmul keeps them") {
    const ci::compile_settings specialized = ci::default_compile_settings("matmul_f32_1x2x3x4");
    CHECK_FALSE(specialized.loop_strength_reduction);
    CHECK_FALSE(specialized.machine_scheduler);
    const ci::compile_settings generic = ci::default_compile_settings("matmul_generic_avx2");
    CHECK(generic.loop_strength_reduction);
    CHECK(generic.machine_scheduler);
    CHECK(std::string(generic.pipeline).find("mem2reg") != std::string::npos);
    CHECK(ci::default_compile_settings("conv_fwd_f32").machine_scheduler);
  }
}

TEST_CASE("a probe's pipeline that does not parse is an invalid_arguments failure",
          "[cpu][jit][probe][errors]") {
  namespace ci = primcache::cpu_internal;
  ci::compile_probe probe;
  probe.pipeline = "function(no-such-pass)";
  const cpu_isa isa = primcache::effective_isa();
  auto m = jit_module::compile("axpy", isa,
                               [&](llvm::Module& mod) { cpu_test::build_axpy(mod, isa, "axpy"); });
  REQUIRE_FALSE(m.has_value());
  CHECK(m.why().code == primcache::status::invalid_arguments);
  CHECK_THAT(m.why().message, Catch::Contains("does not parse") && Catch::Contains("axpy"));
  CHECK(probe.profiles.empty());
}

TEST_CASE("target machines reused across compilations and ISAs give the same bytes", "[cpu][jit]") {
  const cpu_isa isa = primcache::effective_isa();
  auto first = compile_axpy(isa);
  // Another ISA in between: a machine of one level never serves another.
  if (isa > cpu_isa::avx2 && host_has(cpu_isa::avx2)) compile_axpy(cpu_isa::avx2);
  compile_axpy(cpu_isa::sse41);
  auto again = compile_axpy(isa);
  CHECK(first->object() == again->object());
}

TEST_CASE(
    "the process JIT turns on the greedy register allocator for code generation at level None, "
    "and a kernel compiled at None computes the same",
    "[cpu][jit][settings]") {
  namespace ci = primcache::cpu_internal;
  const cpu_isa isa = primcache::effective_isa();
  REQUIRE(ci::process_jit().has_value());
  auto& options = llvm::cl::getRegisteredOptions();
  REQUIRE(options.count("optimize-regalloc") == 1);
  CHECK(options["optimize-regalloc"]->getNumOccurrences() == 1);
  const std::vector<float> x = iota_input(203);
  const std::vector<float> expected = run_axpy(*compile_axpy(isa), x, 1.5f, -2.0f);
  ci::compile_probe probe;
  auto m = jit_module::compile("axpy", isa, ci::compile_settings{"", 0, false, false},
                               [&](llvm::Module& mod) { cpu_test::build_axpy(mod, isa, "axpy"); });
  REQUIRE(m.has_value());
  REQUIRE(probe.profiles.size() == 1);
  CHECK(bitwise_equal(run_axpy(*m.value(), x, 1.5f, -2.0f), expected));
}

namespace {

// i64 f(i64 begin, i64 end): 1000 * (iterations run) + the index the loop
// returns, from emit_bottom_tested_loop (step 2), guarded or not.
using loop_fn = std::int64_t(std::int64_t, std::int64_t);
void build_bottom_tested(llvm::Module& m, bool guarded) {
  llvm::IRBuilder<> b(m.getContext());
  auto* i64 = b.getInt64Ty();
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(i64, {i64, i64}, false),
                                    llvm::Function::ExternalLinkage, "count", m);
  b.SetInsertPoint(llvm::BasicBlock::Create(m.getContext(), "entry", fn));
  auto out = primcache::cpu_internal::emit_bottom_tested_loop(
      b, fn->getArg(0), fn->getArg(1), 2, {b.getInt64(0)},
      [&](llvm::Value*, const primcache::cpu_internal::ir_values& c) {
        return primcache::cpu_internal::ir_values{b.CreateAdd(c[0], b.getInt64(1000))};
      },
      guarded, "count");
  b.CreateRet(b.CreateAdd(out.carried[0], out.index));
}

}  // namespace

TEST_CASE("a bottom-tested loop runs its iterations, and none when guarded and empty",
          "[cpu][jit][loop]") {
  for (bool guarded : {true, false}) {
    auto m = jit_module::compile("count", primcache::effective_isa(),
                                 [&](llvm::Module& mod) { build_bottom_tested(mod, guarded); });
    REQUIRE(m.has_value());
    auto f = m.value()->lookup_function<loop_fn>("count").value();
    CHECK(f(0, 6) == 3 * 1000 + 6);
    CHECK(f(1, 6) == 3 * 1000 + 7);
    CHECK(f(5, 6) == 1 * 1000 + 7);
    if (guarded) {
      CHECK(f(6, 6) == 6);  // no iteration: init and begin
      CHECK(f(9, 2) == 9);
    } else {
      CHECK(f(6, 6) == 1 * 1000 + 8);  // unguarded: one iteration always
    }
  }
}
