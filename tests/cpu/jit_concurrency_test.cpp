#include <catch2/catch.hpp>

#include <latch>
#include <string>
#include <thread>
#include <vector>

#include <llvm/IR/Module.h>

#include "jit/ir_math.hpp"
#include "jit/jit_module.hpp"
#include "jit/process_jit.hpp"
#include "kernels.hpp"
#include "primcache/cpu/cpu.hpp"

// Worker threads record what they saw in plain data; the main thread asserts
// after join (Catch2's assertions are not thread-safe).

namespace {

using primcache::cpu_isa;
namespace ci = primcache::cpu_internal;

constexpr int kThreads = 8;

struct outcome {
  int kernels_run = 0;
  int wrong_results = 0;
  std::vector<std::string> errors;
};

std::vector<cpu_isa> runnable_isas() {
  std::vector<cpu_isa> isas;
  for (cpu_isa isa : {cpu_isa::avx2, cpu_isa::avx512_core}) {
    if (primcache::detected_isa() >= isa) isas.push_back(isa);
  }
  if (isas.empty()) isas.push_back(primcache::detected_isa());
  return isas;
}

std::vector<float> input(int n) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i % 97) - 40.0f;
  return x;
}

// Runs the scale kernel of `m` and counts elements that differ from x*k + k.
int wrong_elements(const ci::jit_module& m, const std::string& name, float k,
                   const std::vector<float>& x) {
  auto fn = m.lookup_function<cpu_test::scale_fn>(name);
  if (!fn) return static_cast<int>(x.size());
  std::vector<float> y(x.size());
  fn.value()(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
  int wrong = 0;
  for (std::size_t i = 0; i < x.size(); ++i) wrong += y[i] != x[i] * k + k;
  return wrong;
}

}  // namespace

TEST_CASE("kernels compile, load, run and unload on 8 threads at once", "[cpu][concurrency]") {
  REQUIRE(ci::process_jit().has_value());
  const std::size_t baseline = ci::code_bytes_in_use();
  const std::vector<cpu_isa> isas = runnable_isas();
  constexpr int kRounds = 3;
  const auto x = input(1000);

  std::vector<outcome> outcomes(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      outcome& out = outcomes[static_cast<std::size_t>(t)];
      start.arrive_and_wait();
      for (int round = 0; round < kRounds; ++round) {
        // Threads t and t + 4 build the same kernel; ISAs alternate.
        const float k = static_cast<float>(t % 4 + 1);
        const std::string name = "scale_" + std::to_string(t % 4);
        const cpu_isa isa = isas[static_cast<std::size_t>(t + round) % isas.size()];
        auto m = ci::jit_module::compile(
            name, isa, [&](llvm::Module& mod) { cpu_test::build_scale(mod, isa, k, name); });
        if (!m) {
          out.errors.push_back(m.why().message);
          continue;
        }
        out.wrong_results += wrong_elements(*m.value(), name, k, x);
        auto copy = ci::jit_module::load(name, m.value()->object());
        if (!copy) {
          out.errors.push_back(copy.why().message);
          continue;
        }
        m.value().reset();  // the copy outlives the original
        out.wrong_results += wrong_elements(*copy.value(), name, k, x);
        ++out.kernels_run;
      }
    });
  }
  for (auto& th : threads) th.join();

  for (int t = 0; t < kThreads; ++t) {
    const outcome& out = outcomes[static_cast<std::size_t>(t)];
    INFO("thread " << t << ": " << (out.errors.empty() ? std::string() : out.errors.front()));
    CHECK(out.errors.empty());
    CHECK(out.kernels_run == kRounds);
    CHECK(out.wrong_results == 0);
  }
  CHECK(ci::code_bytes_in_use() == baseline);
}

TEST_CASE("a module runs on many threads while copies of it load and unload",
          "[cpu][concurrency]") {
  REQUIRE(ci::process_jit().has_value());
  const std::size_t baseline = ci::code_bytes_in_use();
  const cpu_isa isa = primcache::effective_isa();
  const float k = 3.0f;
  auto shared = ci::jit_module::compile(
      "scale_shared", isa, [&](llvm::Module& mod) { cpu_test::build_scale(mod, isa, k, "scale"); });
  REQUIRE(shared.has_value());
  const ci::jit_module& module = *shared.value();
  const auto x = input(4096);

  std::vector<outcome> outcomes(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      outcome& out = outcomes[static_cast<std::size_t>(t)];
      start.arrive_and_wait();
      for (int i = 0; i < 20; ++i) {
        if (t % 2 == 0) {
          out.wrong_results += wrong_elements(module, "scale", k, x);
        } else {
          auto copy = ci::jit_module::load("scale_copy", module.object());
          if (!copy) {
            out.errors.push_back(copy.why().message);
            continue;
          }
          out.wrong_results += wrong_elements(*copy.value(), "scale", k, x);
        }
        ++out.kernels_run;
      }
    });
  }
  for (auto& th : threads) th.join();

  for (int t = 0; t < kThreads; ++t) {
    const outcome& out = outcomes[static_cast<std::size_t>(t)];
    INFO("thread " << t << ": " << (out.errors.empty() ? std::string() : out.errors.front()));
    CHECK(out.errors.empty());
    CHECK(out.kernels_run == 20);
    CHECK(out.wrong_results == 0);
  }
  shared.value().reset();
  CHECK(ci::code_bytes_in_use() == baseline);
}

TEST_CASE("math kernels for different ISAs compile in parallel with identical objects",
          "[cpu][concurrency]") {
  // Compilation is deterministic: the same IR and ISA give the same bytes
  // whichever thread compiles them, alongside others.
  const std::vector<cpu_isa> isas = runnable_isas();
  std::vector<std::vector<std::byte>> objects(kThreads);
  std::vector<std::string> errors(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const cpu_isa isa = isas[static_cast<std::size_t>(t) % isas.size()];
      start.arrive_and_wait();
      auto object = ci::compile_object("gelu", isa, [&](llvm::Module& mod) {
        cpu_test::build_map(mod, isa, "gelu", cpu_test::elem::f32, cpu_test::elem::f32,
                            ci::emit_gelu_erf);
      });
      if (object) {
        objects[static_cast<std::size_t>(t)] = std::move(object).value();
      } else {
        errors[static_cast<std::size_t>(t)] = object.why().message;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << errors[static_cast<std::size_t>(t)]);
    CHECK(errors[static_cast<std::size_t>(t)].empty());
    CHECK_FALSE(objects[static_cast<std::size_t>(t)].empty());
    std::size_t same_isa = static_cast<std::size_t>(t) % isas.size();
    CHECK(objects[static_cast<std::size_t>(t)] == objects[same_isa]);
  }
}
