// primcache/transform/transform_plan.hpp — a chain of transform steps from
// an actual kernel type to an expected one, and running it on a memory.
//
//   auto plan = primcache::plan_transform(actual, expected);   // cached
//   for (const auto& s : plan->steps) log(s.to_string());
//   primcache::memory out = primcache::execute_plan(*plan, in);   // in: actual
//
// A step is one reorder primitive (layout, data type, or both fused in one
// kernel; on one device, or a host <-> device copy between engines), a user
// transform, or a library relabel (same bytes, another reader: no work).
// Reorders go through primcache::reorder, so their kernels are compiled and
// cached by the primitive cache like every other primitive's.
//
// Thread-safety: a plan is immutable; execute_plan may run one plan from
// many threads at once (each call makes its own memories and streams).
// Exceptions: execute_plan throws primcache::error — invalid_arguments when
// the input's data type, layout or place is not the plan's actual kernel
// type, and whatever a reorder or a user transform throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/transform/kernel_type.hpp"

namespace primcache {

// A user's transform: fills `dst` (allocated by the executor in the step's
// target kernel type, on an engine of its place; see execute_plan) from
// `src`. `strm` is a stream of dst's engine or src's: the GPU one when
// either side is on a GPU, else the CPU one; the executor waits on it after
// the call.
using transform_function =
    std::function<void(const memory& src, const memory& dst, const stream& strm)>;

enum class transform_kind : unsigned char {
  layout,                // a reorder on one device, same data type
  data_type,             // a reorder on one device, same layout
  layout_and_data_type,  // one reorder kernel doing both
  place,                 // a copy between engines (host <-> device), same layout and type
  library,               // another library reads the same bytes: nothing runs
  user,                  // a registered user transform
};
PRIMCACHE_API std::string_view to_string(transform_kind kind) noexcept;

struct PRIMCACHE_API transform_step {
  transform_kind kind = transform_kind::library;
  kernel_type from;
  kernel_type to;
  // Bytes read plus bytes written per logical element (padding not counted).
  std::size_t bytes_per_element = 0;
  // For a plan made for dims: the bytes this step reads plus writes, the
  // padding of blocked layouts included (0 in a plan made without dims).
  std::size_t bytes = 0;
  // For user steps: the name it was registered with, and the function.
  std::string user_name;
  std::shared_ptr<const transform_function> function;

  // "layout cpu/f32/abcd/jit -> cpu/f32/acdb/jit (8 B/elem)", with
  // ", 12800 B" after B/elem in a plan made for dims.
  std::string to_string() const;
};

struct PRIMCACHE_API transform_plan {
  kernel_type from;
  kernel_type to;
  std::vector<transform_step> steps;  // empty when from == to
  // The dims the plan was made for; empty for a plan made per logical
  // element (transform_registry::plan without dims).
  std::vector<std::int64_t> dims;

  std::size_t bytes_per_element() const noexcept;
  // Bytes read plus written by all steps, padding included (0 without dims).
  std::size_t bytes() const noexcept;
  std::string to_string() const;  // one step per line
};

// Runs `plan` on `src` (whose kernel type must be plan.from, library aside)
// and returns a memory in plan.to; `src` itself when the plan has no step
// that moves data. Blocks until the data is in place.
//
// Engines: a place has many (its default engine, and one per user OpenCL
// context from ocl_interop::make_engine), and a kernel reads only memory of
// its own. So a step within one place writes a memory on the engine of the
// memory it reads, and a step to another place writes on the engine of the
// caller's memory there: dst's, else src's (a round trip through the host
// comes back to src's engine), else the place's default engine. Streams
// are made on those engines, never from the plan's places.
PRIMCACHE_API memory execute_plan(const transform_plan& plan, const memory& src);
// The same into the caller's `dst`, which must be of plan.to (the
// descriptor its layout and data type give for src's dims, on its place):
// the last step writes there, intermediate steps into fresh memories; a plan
// that moves nothing copies src into dst. When the last step's engine is
// not dst's (src and dst on two engines of one GPU: two OpenCL contexts),
// it writes a fresh memory that is then copied into dst through the host.
// Throws invalid_arguments for a dst of another kernel type.
PRIMCACHE_API void execute_plan(const transform_plan& plan, const memory& src, const memory& dst);

}  // namespace primcache
