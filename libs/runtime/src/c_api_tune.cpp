// The C API of tune mode (primcache_tune.h) over tuning.hpp.
#include "primcache/runtime/primcache_tune.h"

#include <string>

#include "c_api_guard.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/tuning.hpp"

using primcache::runtime_internal::c_api_guarded;

pc_status_t pc_set_tune(int tune) {
  return c_api_guarded([&] { primcache::set_tune(tune != 0); });
}

pc_status_t pc_get_tune(int* tune) {
  return c_api_guarded([&] {
    if (tune == nullptr)
      throw primcache::error(primcache::status::invalid_arguments, "tune is NULL");
    *tune = primcache::get_tune() ? 1 : 0;
  });
}

pc_status_t pc_set_tune_max_nconfigs(size_t n) {
  return c_api_guarded([&] { primcache::set_tune_max_nconfigs(n); });
}

pc_status_t pc_save_tune_table(const char* path, size_t* entries) {
  return c_api_guarded([&] {
    const std::size_t n = primcache::save_tune_table(path ? std::string(path) : std::string());
    if (entries != nullptr) *entries = n;
  });
}
