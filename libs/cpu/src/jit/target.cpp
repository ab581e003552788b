#include "jit/target.hpp"

#include <array>

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/Triple.h>
#include <llvm/Support/Host.h>

namespace primcache::cpu_internal {
namespace {

using namespace std::string_view_literals;

constexpr std::array kX86_64 = {"sse2"sv};
constexpr std::array kSse41 = {"sse3"sv, "ssse3"sv, "sse4.1"sv};
constexpr std::array kAvx = {"sse4.2"sv, "popcnt"sv, "avx"sv};
constexpr std::array kAvx2 = {"avx2"sv, "fma"sv, "f16c"sv, "bmi"sv, "bmi2"sv, "lzcnt"sv, "movbe"sv};
constexpr std::array kAvx512Core = {"avx512f"sv, "avx512cd"sv, "avx512bw"sv, "avx512dq"sv,
                                    "avx512vl"sv};
constexpr std::array kAvx512Vnni = {"avx512vnni"sv};
constexpr std::array kAvx512Bf16 = {"avx512bf16"sv};
constexpr std::array kAvx512Fp16 = {"avx512fp16"sv};

}  // namespace

std::span<const std::string_view> isa_added_features(cpu_isa isa) noexcept {
  switch (isa) {
    case cpu_isa::x86_64: return kX86_64;
    case cpu_isa::sse41: return kSse41;
    case cpu_isa::avx: return kAvx;
    case cpu_isa::avx2: return kAvx2;
    case cpu_isa::avx512_core: return kAvx512Core;
    case cpu_isa::avx512_core_vnni: return kAvx512Vnni;
    case cpu_isa::avx512_core_bf16: return kAvx512Bf16;
    case cpu_isa::avx512_core_fp16: return kAvx512Fp16;
  }
  return {};
}

std::vector<std::string> isa_features(cpu_isa isa) {
  std::vector<std::string> out;
  for (int level = 0; level <= static_cast<int>(isa); ++level) {
    for (std::string_view f : isa_added_features(static_cast<cpu_isa>(level))) {
      out.push_back("+" + std::string(f));
    }
  }
  return out;
}

cpu_isa detect_host_isa() {
  if (!llvm::Triple(llvm::sys::getProcessTriple()).isX86()) return cpu_isa::x86_64;
  llvm::StringMap<bool> host;
  if (!llvm::sys::getHostCPUFeatures(host)) return cpu_isa::x86_64;
  cpu_isa best = cpu_isa::x86_64;
  for (int level = 1; level <= static_cast<int>(max_known_cpu_isa); ++level) {
    for (std::string_view f : isa_added_features(static_cast<cpu_isa>(level))) {
      auto it = host.find(llvm::StringRef(f.data(), f.size()));
      if (it == host.end() || !it->second) return best;
    }
    best = static_cast<cpu_isa>(level);
  }
  return best;
}

unsigned isa_vector_bits(cpu_isa isa) noexcept {
  if (isa >= cpu_isa::avx512_core) return 512;
  if (isa >= cpu_isa::avx) return 256;
  return 128;
}

result<llvm::orc::JITTargetMachineBuilder> target_machine_builder(cpu_isa isa) {
  llvm::Triple triple(llvm::sys::getProcessTriple());
  if (triple.getArch() != llvm::Triple::x86_64) {
    return failure{status::unimplemented,
                   "the CPU backend generates x86-64 code; this host is " + triple.str()};
  }
  llvm::orc::JITTargetMachineBuilder jtmb(triple);
  jtmb.setCPU("x86-64");
  std::vector<std::string> features = isa_features(isa);
  jtmb.addFeatures(features);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Default);
  jtmb.setCodeModel(llvm::CodeModel::Large);
  jtmb.setRelocationModel(llvm::Reloc::Static);
  return jtmb;
}

}  // namespace primcache::cpu_internal
