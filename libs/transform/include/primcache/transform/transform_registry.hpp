// primcache/transform/transform_registry.hpp — the process-wide registry of
// transforms between kernel types, and the planner over it.
//
//   auto& reg = primcache::transform_registry::global();
//   reg.add(from, to, "my_pack", [](const memory& src, const memory& dst,
//                                    const stream& s) { /* ... */ });
//   auto plan = reg.plan(actual, expected);      // or primcache::plan_transform
//   primcache::memory out = primcache::transform(in, actual, expected);
//
// Built-in transforms (rules, not a table, so every pair is covered):
// - on the CPU, any layout to any layout and any data type of f32, bf16,
//   f16, s8, u8, s32 to any other, in one reorder (round to nearest even,
//   then saturate), with the quantization scales of the two ends (a reorder
//   output scale of from.scale / to.scale; a change of scale alone is a
//   data-type step: requantization);
// - on an OpenCL GPU, layout changes of f32 data (the OpenCL reorder's
//   reach today);
// - between the CPU and a GPU, a copy of the same layout, data type and
//   scale (the OpenCL backend's cross-engine reorder);
// - a library change alone: nothing runs.
// A user transform registered for a pair (from, to) replaces the built-in
// step for that pair, and when the pair is (actual, expected) it is the
// whole plan.
//
// Planning: a shortest path over kernel types whose places, data types,
// layouts and libraries come from the two ends (plus the CPU and f32 as
// stopovers), weighing each step by bytes read plus written per element.
// Ties go to fewer steps, then to the fixed order layout, data type, place.
// So a conversion narrows before a host <-> device copy and widens after
// it, and a layout change with a type change is one fused reorder.
// Plans are cached (a concurrent_cache keyed by the pair and the registry's
// generation, so that add and remove invalidate every plan made before).
// The global registry's plan cache is registered in control as
// "transform_plan" (entries), so metrics, the admin API and the console see
// its counters and can resize or flush it.
//
// Thread-safety: every member may be called concurrently. add/remove take
// an exclusive lock held for the map update only; plan never holds it
// while searching. Exceptions: plan throws primcache::error(unimplemented)
// naming both kernel types when no chain joins them, invalid_arguments
// naming the end (actual or expected) that add() would refuse as well, in
// the words add() uses: an unknown data type, a layout that is undef or
// `any`, a scale that does not fit its type (kernel_type::scale_problem),
// a library name that is empty or has a '/' (library::problem).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "primcache/base/export.hpp"
#include "primcache/cache/cache_stats.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/transform/kernel_type.hpp"
#include "primcache/transform/transform_plan.hpp"

namespace primcache {

class PRIMCACHE_API transform_registry {
 public:
  // A registry with only the built-in rules; plan_cache_capacity in plans.
  explicit transform_registry(std::size_t plan_cache_capacity = 1024);
  ~transform_registry();
  transform_registry(const transform_registry&) = delete;
  transform_registry& operator=(const transform_registry&) = delete;

  // The one the free functions below use.
  static transform_registry& global();

  // Registers (or replaces) the user transform for (from, to). Throws
  // invalid_arguments for an empty function, from == to, an end with an
  // unknown data type, a layout that is undef or `any` (no memory can be
  // allocated in it), a scale that does not fit its type
  // (kernel_type::scale_problem) or a library name that does not print and
  // parse back (library::problem: empty, or with a '/'), and for ends whose
  // layouts lay out different ranks (a plan keeps a tensor's dims, so no
  // plan could use it).
  void add(const kernel_type& from, const kernel_type& to, std::string name,
           transform_function function);
  // Removes the user transform for (from, to); false when there was none.
  bool remove(const kernel_type& from, const kernel_type& to);

  // The cheapest chain by bytes read plus written per logical element.
  // Throws invalid_arguments for an end add() would refuse (see above).
  std::shared_ptr<const transform_plan> plan(const kernel_type& actual,
                                             const kernel_type& expected);
  // The same for a tensor of `dims`, weighing each step by the bytes it
  // really moves: a blocked layout's padding counts (nChw16c with 3
  // channels moves 16/3 times the bytes of nchw), so a chain may relay out
  // before a copy where the per-element plan would copy the padded data.
  // Throws invalid_arguments, naming both kernel types and the reason, when
  // a layout cannot describe `dims` (another rank, a dimension that is not
  // positive).
  std::shared_ptr<const transform_plan> plan(const kernel_type& actual, const kernel_type& expected,
                                             dims_view dims);
  // Counters of the plan cache (hits, misses, size).
  cache_stats plan_cache_stats() const noexcept;
  void clear_plan_cache();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

// transform_registry::global().plan(actual, expected).
PRIMCACHE_API std::shared_ptr<const transform_plan> plan_transform(const kernel_type& actual,
                                                                   const kernel_type& expected);
// Plans with the global registry and executes: `src` holds data of kernel
// type `actual`; the result is in `expected`.
PRIMCACHE_API memory transform(const memory& src, const kernel_type& actual,
                               const kernel_type& expected);

}  // namespace primcache
