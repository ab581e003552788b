// bench_ocl_tune_flag.hpp — the --tune-max-nconfigs=N flag of bench_ocl_conv
// and bench_ocl_matmul: tune mode's candidate budget per primitive
// (set_tune_max_nconfigs) for a run under PRIMCACHE_TUNE=1 that fills
// PRIMCACHE_TUNE_TABLE. In such a run each primitive's warm-up execution
// tunes it (the timed loop still runs the primitive created before, with
// the default configuration) and the table is written at exit; a later run
// with PRIMCACHE_TUNE_TABLE and tuning off creates every primitive with its
// tuned configuration (docs/PERFORMANCE.md, "Run 8").
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "primcache/runtime/tuning.hpp"

namespace bench_ocl {

// Takes the flag out of argv (call after benchmark::Initialize, before
// ReportUnrecognizedArguments); false, with a message, for a value outside
// 1..1000.
inline bool take_tune_flag(int& argc, char** argv) {
  constexpr std::string_view flag = "--tune-max-nconfigs=";
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.substr(0, flag.size()) != flag) {
      argv[out++] = argv[i];
      continue;
    }
    const std::string v(a.substr(flag.size()));
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 1 || n > 1000) {
      std::fprintf(stderr, "%s: expected a number of candidates in 1..1000\n", argv[i]);
      return false;
    }
    primcache::set_tune_max_nconfigs(static_cast<std::size_t>(n));
  }
  argc = out;
  argv[argc] = nullptr;
  return true;
}

}  // namespace bench_ocl
