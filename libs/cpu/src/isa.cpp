#include <algorithm>
#include <atomic>

#include "isa_cap.hpp"
#include "jit/target.hpp"
#include "primcache/base/env.hpp"
#include "primcache/cpu/cpu.hpp"
#include "text.hpp"

namespace primcache {
namespace {

using cpu_internal::iequals;

constexpr cpu_isa kAll[] = {cpu_isa::x86_64,
                            cpu_isa::sse41,
                            cpu_isa::avx,
                            cpu_isa::avx2,
                            cpu_isa::avx512_core,
                            cpu_isa::avx512_core_vnni,
                            cpu_isa::avx512_core_bf16,
                            cpu_isa::avx512_core_fp16};

// -1: no cap set through the API. Relaxed suffices: the cap is a lone value
// that guards no other data, and a kernel created concurrently with a change
// may see either cap (each kernel records the ISA it used).
std::atomic<int> g_api_cap{-1};

// The environment's cap, read at the first query: k_env_unread before, -1
// when there is none. An atomic, not a function-local static: a fork while
// another thread ran a static's initializer would leave the child waiting on
// its guard for ever. Threads that race to the first query each read the
// variable and store the same value (report_malformed_env reports once).
constexpr int k_env_unread = -2;
constinit std::atomic<int> g_env_cap{k_env_unread};

std::optional<cpu_isa> env_cap() {
  int cap = g_env_cap.load(std::memory_order_relaxed);
  if (cap == k_env_unread) {
    const auto read = cpu_internal::cap_from_env_value(env_string(cpu_internal::isa_env_name));
    cap = read ? static_cast<int>(*read) : -1;
    g_env_cap.store(cap, std::memory_order_relaxed);
  }
  if (cap < 0) return std::nullopt;
  return static_cast<cpu_isa>(cap);
}

// detected_isa(), -1 before the first query (an atomic for the reason above).
constinit std::atomic<int> g_detected{-1};

}  // namespace

std::string_view to_string(cpu_isa isa) noexcept {
  switch (isa) {
    case cpu_isa::x86_64: return "x86_64";
    case cpu_isa::sse41: return "sse41";
    case cpu_isa::avx: return "avx";
    case cpu_isa::avx2: return "avx2";
    case cpu_isa::avx512_core: return "avx512_core";
    case cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case cpu_isa::avx512_core_fp16: return "avx512_core_fp16";
  }
  return "unknown";
}

result<cpu_isa> parse_cpu_isa(std::string_view text) {
  if (iequals(text, "all")) return max_known_cpu_isa;
  std::string names;
  for (cpu_isa isa : kAll) {
    if (iequals(text, to_string(isa))) return isa;
    names.append(to_string(isa)).append(", ");
  }
  names.append("all");
  return failure{
      status::invalid_arguments,
      "'" + std::string(text) + "' is not an instruction set (use one of " + names + ")"};
}

cpu_isa detected_isa() noexcept {
  // Host detection reads CPUID at the first query; the answer never changes,
  // so racing first queries store the same value.
  int detected = g_detected.load(std::memory_order_relaxed);
  if (detected < 0) {
    cpu_isa found = cpu_isa::x86_64;
    try {
      found = cpu_internal::detect_host_isa();
    } catch (...) {
    }
    detected = static_cast<int>(found);
    g_detected.store(detected, std::memory_order_relaxed);
  }
  return static_cast<cpu_isa>(detected);
}

std::optional<cpu_isa> max_cpu_isa() noexcept {
  int api = g_api_cap.load(std::memory_order_relaxed);
  if (api >= 0) return static_cast<cpu_isa>(api);
  try {
    return env_cap();
  } catch (...) {
    return std::nullopt;
  }
}

void set_max_cpu_isa(cpu_isa cap) noexcept {
  g_api_cap.store(static_cast<int>(cap), std::memory_order_relaxed);
}

void clear_max_cpu_isa() noexcept {
  g_api_cap.store(-1, std::memory_order_relaxed);
}

cpu_isa effective_isa() noexcept {
  cpu_isa isa = detected_isa();
  if (auto cap = max_cpu_isa()) isa = std::min(isa, *cap);
  return isa;
}

namespace cpu_internal {

std::optional<cpu_isa> cap_from_env_value(const std::optional<std::string>& value) {
  if (!value) return std::nullopt;
  auto parsed = parse_cpu_isa(*value);
  if (!parsed) {
    report_malformed_env(isa_env_name, *value, parsed.why().message,
                         "the best instruction set the host supports");
    return std::nullopt;
  }
  return parsed.value();
}

}  // namespace cpu_internal
}  // namespace primcache
