// A backend that exists only in the runtime's tests: "gpu" engines whose
// reorder implementation copies f32 buffers, and whose creation can be
// slowed, made to fail, or made to create a nested primitive — so the
// runtime's caching, error and concurrency rules are tested without real
// kernels.
//
// The behaviour is chosen by the tensor's first dimension:
//   dims[0] == 13   create_impl throws (runtime_error)
//   dims[0] == 7    create_impl creates a nested reorder of dims {8, ...}
//                   through the global cache and records how that went
//   dims[0] == 11   create_impl creates a nested reorder of its own key
//   dims[0] == 19   the impl serializes (an impl blob with a fake object),
//                   and load_impl loads it back — or fails as
//                   load_failure says (persistent-cache tests)
//   dims[0] >= 100  create_impl sleeps 2 ms (a slow compile)
// Output scales (mask 0) multiply the copy, read at run time.
#pragma once

#include <atomic>

#include "primcache/cache/lookup_result.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"

namespace fake {

// Registers the fake engine and implementation (once).
void install();

// How many times create_impl ran, over the process.
extern std::atomic<int> creations;
// How many times a fake stream's wait() reached the backend.
extern std::atomic<int> stream_waits;
// A setting the fake engine's identity includes (as the CPU engine's
// includes the ISA cap); the first acceptance of a dims[0] == 17 descriptor
// changes it, as a concurrent set_max_cpu_isa would.
extern std::atomic<int> identity_setting;
extern std::atomic<int> factory_calls_17;
// The outcome of the last nested creation.
extern std::atomic<int> last_nested_outcome;
// How load_impl of a dims[0] == 19 blob fails: 0, it does not (it loads);
// a primcache::status value, it throws error(that status); -1, it throws
// std::bad_alloc; -2, std::length_error (a size read from the blob); -3,
// std::runtime_error (neither the blob's fault nor a primcache::error).
// Tests set it back to 0.
extern std::atomic<int> load_failure;
// How many times load_impl ran (loaded or failed), over the process.
extern std::atomic<int> loads;
// When true, create_impl of a dims[0] == 19 descriptor throws
// runtime_error (a compiler that cannot run here, as a driver whose own
// cache directory is full). Tests set it back to false.
extern std::atomic<bool> create_fails;

primcache::reorder::primitive_desc copy_pd(std::int64_t d0, std::int64_t d1 = 4);

// A copy descriptor under another implementation name (for tests that
// register more implementations).
std::shared_ptr<const primcache::backend::primitive_desc_impl> copy_pd_impl_for(
    const primcache::primitive_attr& attr, const primcache::backend::reorder_op& op,
    const primcache::backend::engine_impl& eng, const char* name);

}  // namespace fake
