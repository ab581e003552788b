// kernels/reorder_config.hpp — the facts about a reorder problem that its
// configuration heuristic, its kernel and its reference share. The
// heuristic (default_reorder_config) and the candidate space
// (reorder_config_candidates) are declared with the configuration in
// reorder_kernel.hpp and defined in reorder_config.cpp.
//
//   auto plan = reorder_walk_plan(p);  // the specialized kernel's walk
//
// Thread-safety: pure functions. Exceptions: none.
#pragma once

#include <cstdint>

#include "kernels/layout_walk.hpp"
#include "kernels/reorder_kernel.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"

namespace primcache::cpu_internal {

// Same data type and no scales: elements are copied bit for bit.
bool reorder_is_raw(const reorder_problem& p);

// The dims the walk must keep apart (bit d): the per-dim scale's.
unsigned reorder_keep_mask(const reorder_problem& p);

// The specialized kernel's walk: plan_walk's, its padded block batched
// (batch_padded_block), a short block that one layout continues and the
// other does not joined with the loop that continues it (join_runs). The
// generic kernel walks plan_walk's own, joined (join_runs) where its vectors
// fit the joined loop.
result<walk_plan> reorder_walk_plan(const reorder_problem& p);

// The unit a work item's chunk is rounded to: a tile edge or an unrolled
// vector.
int reorder_chunk_unit(const walk_plan& plan, const reorder_config& c);

// The default blocks of a transposing walk (reorder_config::block_i and
// block_j, for c.tile; zeros for a streaming walk): I blocks of 4 KiB of src
// rows walked J tile by J tile when dst rows are no longer than src rows, J
// blocks walked I tile by I tile otherwise.
struct reorder_tile_blocks {
  std::int64_t i = 0;
  std::int64_t j = 0;
};
reorder_tile_blocks tile_blocks_for(const reorder_problem& p, const walk_plan& w,
                                    const reorder_config& c);

// Whether src and dst together exceed reorder_streaming_bytes: the walk then
// writes dst with non-temporal stores (walk_codegen::nontemporal), which
// skip reading dst's lines before writing them and leave the cache alone.
// A fixed figure, a last-level cache of today's x86 parts (32 MiB here; a
// VM's sysconf reports the host's 320 MiB), so that the code depends on the
// kernel's key alone, the same on every host that shares a persistent cache.
inline constexpr std::int64_t reorder_streaming_bytes = std::int64_t{32} << 20;
bool reorder_streams_past_cache(const reorder_problem& p);

// A config's blocks in the form create() gives them meaning: none for a
// streaming walk; for a transposing one block_j only where it is set, each
// at most the loop it blocks (rounded up to a tile), and a block of one
// tile or less is none. Values must already be multiples of c.tile.
void canonicalize_tile_blocks(reorder_config& c, const walk_plan& w);

// The configuration as backend fields (tile, vector_lanes, unroll, chunk,
// use_memcpy, block_i, block_j) and back; from_fields checks the names and
// ranges.
backend::kernel_config to_fields(const reorder_config& c);
result<reorder_config> reorder_config_from_fields(const backend::kernel_config& f);
// Whether create() builds `c` for `p` at `isa`, without compiling.
result<bool> validate_reorder_config_for(const reorder_problem& p, const reorder_config& c,
                                         cpu_isa isa);

}  // namespace primcache::cpu_internal
