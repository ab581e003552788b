// isa_cap.hpp — reading the ISA cap from PRIMCACHE_CPU_ISA.
//
// Split from isa.cpp so tests can feed values without setenv: the public
// functions read the variable once per process.
//
//   auto cap = primcache::cpu_internal::cap_from_env_value(primcache::env_string(
//       primcache::cpu_internal::isa_env_name));
//
// Thread-safety: may be called from any thread. Exceptions: none beyond
// std::bad_alloc.
#pragma once

#include <optional>
#include <string>

#include "primcache/cpu/cpu.hpp"

namespace primcache::cpu_internal {

inline constexpr const char* isa_env_name = "PRIMCACHE_CPU_ISA";

// Unset: no cap. A name parse_cpu_isa accepts: that cap. Anything else is
// reported through report_malformed_env (once per process) and gives no cap.
std::optional<cpu_isa> cap_from_env_value(const std::optional<std::string>& value);

}  // namespace primcache::cpu_internal
