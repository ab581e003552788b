// Private to the C API's source files (c_api*.cpp): how a C entry point
// turns the C++ exceptions of the call it wraps into a status, and records
// the message for pc_last_error_message().
#pragma once

#include <new>
#include <stdexcept>
#include <string_view>

#include "primcache/base/error.hpp"
#include "primcache/runtime/primcache.h"

namespace primcache::runtime_internal {

// Records `message` in the calling thread's last-error buffer (a fixed
// buffer: never allocates) and returns `s`. Defined in c_api.cpp.
pc_status_t c_api_fail(pc_status_t s, std::string_view message) noexcept;

// Runs f, which returns nothing, mapping what it throws to a status.
template <typename F>
pc_status_t c_api_guarded(F&& f) noexcept {
  try {
    f();
    return pc_success;
  } catch (const primcache::error& e) {
    return c_api_fail(static_cast<pc_status_t>(e.code()), e.message());
  } catch (const std::bad_alloc&) {
    return c_api_fail(pc_out_of_memory, "out of memory");
  } catch (const std::exception& e) {
    return c_api_fail(pc_runtime_error, e.what());
  } catch (...) {
    return c_api_fail(pc_runtime_error, "unknown exception");
  }
}

}  // namespace primcache::runtime_internal
