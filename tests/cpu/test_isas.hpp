// The ISA levels the CPU backend's kernel tests build and run their kernels
// at: avx2 and, where this machine has it, avx512_core.
#pragma once

#include <vector>

#include "primcache/cpu/cpu.hpp"

namespace cpu_test {

inline std::vector<primcache::cpu_isa> test_isas() {
  using primcache::cpu_isa;
  std::vector<cpu_isa> out;
  for (cpu_isa isa : {cpu_isa::avx2, cpu_isa::avx512_core}) {
    if (primcache::detected_isa() >= isa) out.push_back(isa);
  }
  return out;
}

}  // namespace cpu_test
