#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "isa_cap.hpp"
#include "jit/target.hpp"
#include "primcache/base/env.hpp"
#include "primcache/cpu/cpu.hpp"

namespace {

using primcache::cpu_isa;

constexpr cpu_isa kAll[] = {cpu_isa::x86_64,
                            cpu_isa::sse41,
                            cpu_isa::avx,
                            cpu_isa::avx2,
                            cpu_isa::avx512_core,
                            cpu_isa::avx512_core_vnni,
                            cpu_isa::avx512_core_bf16,
                            cpu_isa::avx512_core_fp16};

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Clears the API cap (no test leaves one set) whatever a test does with it.
struct cap_restorer {
  ~cap_restorer() { primcache::clear_max_cpu_isa(); }
};

}  // namespace

TEST_CASE("every ISA name parses back to its level, in any case", "[cpu][isa]") {
  for (cpu_isa isa : kAll) {
    std::string name(primcache::to_string(isa));
    CHECK(primcache::parse_cpu_isa(name).value() == isa);
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    CHECK(primcache::parse_cpu_isa(name).value() == isa);
  }
  CHECK(primcache::parse_cpu_isa("all").value() == primcache::max_known_cpu_isa);
  CHECK(primcache::parse_cpu_isa("ALL").value() == primcache::max_known_cpu_isa);
}

TEST_CASE("an unknown ISA name fails and lists the accepted ones", "[cpu][isa]") {
  auto text = GENERATE(as<std::string>{}, "", "bogus", "avx3", "avx2 ", "avx512");
  auto r = primcache::parse_cpu_isa(text);
  INFO("text: '" << text << "'");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.why().code == primcache::status::invalid_arguments);
  CHECK(r.why().message.find("'" + text + "'") != std::string::npos);
  CHECK(r.why().message.find("avx512_core") != std::string::npos);
}

TEST_CASE("PRIMCACHE_CPU_ISA: a malformed value is reported and ignored", "[cpu][isa]") {
  SECTION("unset: no cap") {
    CHECK_FALSE(primcache::cpu_internal::cap_from_env_value({}));
  }
  SECTION("a level name: that cap") {
    CHECK(primcache::cpu_internal::cap_from_env_value(std::string("avx2")) == cpu_isa::avx2);
    CHECK(primcache::cpu_internal::cap_from_env_value(std::string("AVX512_CORE")) ==
          cpu_isa::avx512_core);
  }
  SECTION("bogus: no cap, and a report naming the variable and the value") {
    CHECK_FALSE(primcache::cpu_internal::cap_from_env_value(std::string("bogus")));
    auto reports = primcache::env_reports();
    bool found = std::any_of(reports.begin(), reports.end(), [](const std::string& m) {
      return m.find("PRIMCACHE_CPU_ISA") != std::string::npos &&
             m.find("'bogus'") != std::string::npos;
    });
    CHECK(found);
  }
}

TEST_CASE("the effective ISA is the detected one lowered by the cap; the API cap wins",
          "[cpu][isa]") {
  cap_restorer restore;
  const cpu_isa detected = primcache::detected_isa();
  CHECK(detected == primcache::cpu_internal::detect_host_isa());

  SECTION("a cap below the host lowers the effective ISA") {
    primcache::set_max_cpu_isa(cpu_isa::sse41);
    CHECK(primcache::max_cpu_isa() == cpu_isa::sse41);
    CHECK(primcache::effective_isa() == std::min(detected, cpu_isa::sse41));
  }
  SECTION("a cap above the host changes nothing") {
    primcache::set_max_cpu_isa(primcache::max_known_cpu_isa);
    CHECK(primcache::effective_isa() == detected);
  }
  SECTION("clearing the API cap returns to the environment's") {
    primcache::set_max_cpu_isa(cpu_isa::x86_64);
    primcache::clear_max_cpu_isa();
    auto env = primcache::cpu_internal::cap_from_env_value(
        primcache::env_string(primcache::cpu_internal::isa_env_name));
    CHECK(primcache::max_cpu_isa() == env);
  }
}

TEST_CASE("each ISA level's features include the level below and nothing above", "[cpu][isa]") {
  for (std::size_t i = 1; i < std::size(kAll); ++i) {
    auto lower = primcache::cpu_internal::isa_features(kAll[i - 1]);
    auto upper = primcache::cpu_internal::isa_features(kAll[i]);
    INFO(primcache::to_string(kAll[i]));
    CHECK(upper.size() > lower.size());
    for (const auto& f : lower) CHECK(has(upper, f));
  }
  auto avx2 = primcache::cpu_internal::isa_features(cpu_isa::avx2);
  CHECK(has(avx2, "+avx2"));
  CHECK(has(avx2, "+fma"));
  CHECK_FALSE(has(avx2, "+avx512f"));
  CHECK(has(primcache::cpu_internal::isa_features(cpu_isa::avx512_core), "+avx512bw"));
  CHECK(primcache::cpu_internal::isa_vector_bits(cpu_isa::sse41) == 128);
  CHECK(primcache::cpu_internal::isa_vector_bits(cpu_isa::avx2) == 256);
  CHECK(primcache::cpu_internal::isa_vector_bits(cpu_isa::avx512_core) == 512);
}

TEST_CASE("the target machine for a level is the generic x86-64 CPU with its features",
          "[cpu][isa]") {
  auto jtmb = primcache::cpu_internal::target_machine_builder(cpu_isa::avx2);
  REQUIRE(jtmb.has_value());
  CHECK(jtmb.value().getCPU() == "x86-64");
  auto features = jtmb.value().getFeatures().getString();
  CHECK(features.find("+avx2") != std::string::npos);
  CHECK(features.find("avx512") == std::string::npos);
}
