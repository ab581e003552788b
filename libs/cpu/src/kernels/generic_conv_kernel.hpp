// kernels/generic_conv_kernel.hpp — the shape-generic convolution kernel
// built into the library (generic_conv_generator.hpp), bound to one problem:
// its parameter block, register tile and work partition, with the interface
// of conv_kernel that a primitive's execution uses (execute, weight packing,
// scratchpad).
//
//   auto g = generic_conv_kernel::create(p, specialized_cfg, isa);  // no compilation
//   if (!g) return sync_creation();   // g.why() says why this problem has none
//   g.value()->execute(args, scratchpad, pool);   // bit-identical to the specialized
//
// It reads the weights in the specialized kernel's packed layout (Ohwi16o),
// packs them the same way when they arrive in another layout, and shares
// their constant-cache key (write_packing_key), so constant weights packed
// for one kernel serve the other. The thread partition is over the same
// kind of work items (rows x images x groups x channel chunks), in the
// specialized configuration's loop order, with the generic tile.
//
// Depthwise convolutions (groups == IC == OC) run the depthwise tiles
// (generic_dw_symbol) over the same kind of work items (rows x images x
// chunks of the tensor's channels), with the weights in Goihw16g as the
// specialized kernel packs them; those with 3-tap kernel rows (no dilation
// along w) over an nChw16c source at stride 1 or 2 run whole rows instead
// (generic_dw_row_symbol): a thread's items in as few calls as the chunks
// allow (the rows of a chunk, or whole chunks of an image, per call), each
// row split into tiles of two widths one apart, the edge pixels of padding
// 1 inside the first and last tile.
//
// create() declines (unimplemented), so that the convolution is created
// synchronously, what it cannot run with results bit-identical to the
// specialized kernel, or at all: more than gc_max_post_ops post-ops, an ISA
// below avx2, a program without the built-in code, a specialized
// configuration with K panels over a kernel of several rows
// (conv_config_sums_as_generic).
//
// Thread-safety: immutable after creation; execute() may run on any number
// of threads at once, each with its own scratchpad. Exceptions: none from
// create(); execute() throws only what the pool rethrows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/conv_geometry.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/generic_conv_generator.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

class generic_conv_kernel {
 public:
  // `specialized`: the configuration the specialized kernel of `p` builds
  // with (its loop order is reused).
  static result<std::unique_ptr<generic_conv_kernel>> create(const conv_problem& p,
                                                             const conv_config& specialized,
                                                             cpu_isa isa);

  const conv_problem& problem() const noexcept { return problem_; }
  // The ISA of the built-in code it runs.
  cpu_isa isa() const noexcept { return isa_; }
  // Its register tile and loop order (ic_unroll unused).
  const conv_config& tile() const noexcept { return tile_; }
  // As conv_kernel's: the packed weights' bytes when it packs, else 0.
  std::size_t scratchpad_bytes() const noexcept { return packs_weights_ ? packed_bytes_ : 0; }
  bool packs_weights() const noexcept { return packs_weights_; }
  std::size_t packed_bytes() const noexcept { return packed_bytes_; }
  void pack_weights(const float* user, float* packed, thread_pool& pool) const;
  void write_packing_key(key_writer& w) const;
  void execute(const conv_args& args, void* scratchpad, thread_pool& pool) const;

 private:
  // The tile functions of a kernel: [width - 1][full chunk, last chunk][edge,
  // interior], widths 1 to its ow_block (depthwise: generic_dw_symbol's).
  using tile_table = std::vector<std::array<std::array<generic_conv_function*, 2>, 2>>;
  generic_conv_kernel(const conv_problem& p, const conv_geometry& g, const conv_geometry& flat,
                      const conv_config& tile, cpu_isa isa, tile_table tiles);
  static result<std::unique_ptr<generic_conv_kernel>> create_depthwise(
      const conv_problem& p, const conv_geometry& g, const conv_geometry& flat,
      const conv_config& specialized, cpu_isa code_isa);
  void run_items(const float* src, const float* wei, const float* bias, float* dst,
                 const float* const* binary, std::int64_t begin, std::int64_t end) const;
  // One row of a depthwise item (t: its tile block, row fields set): the
  // pixels whose taps are all inside in tiles of ow_block, the others one
  // by one over their kw range inside the image.
  void run_depthwise_row(std::int64_t* t, const float* src_img, const float* wei_chunk,
                         const float* bias, float* dst, const float* const* binary,
                         bool last_chunk) const;
  // The items [begin, end) of a depthwise problem the row functions take,
  // numbered with the rows innermost, then the chunks, then the images
  // (the results do not depend on the order): one call per run of rows of
  // a chunk, or per run of whole chunks of an image.
  void run_depthwise_rows(const float* src, const float* wei, const float* bias, float* dst,
                          const float* const* binary, std::int64_t begin, std::int64_t end) const;
  void zero_dst_padding(float* dst) const;

  conv_problem problem_;
  conv_geometry geometry_;  // as analyzed (the packer's)
  conv_geometry flat_;      // as run (flatten_conv_pointwise)
  conv_config tile_;        // ow_block, oc_blocks, order (as the specialized's where it can)
  cpu_isa isa_;
  tile_table tiles_;
  std::array<std::int64_t, gc_slot_count> params_{};
  bool packs_weights_ = false;
  bool zeroes_dst_padding_ = false;
  std::size_t packed_bytes_ = 0;
  std::int64_t chunks_ = 0;  // output-channel chunks per group
  // Output pixels [inside_lo_, inside_hi_) have every tap inside the image.
  std::int64_t inside_lo_ = 0, inside_hi_ = 0;
  std::int64_t work_items_ = 0;
  // Depthwise problems the row functions take (generic_dw_row_symbol): the
  // row function of a full chunk and of the last, and the split of a row
  // (the tile slots gt_dw_left to gt_dw_ow); null where the tiles run
  // instead.
  std::array<generic_conv_function*, 2> dw_rows_{};
  std::array<std::int64_t, gt_dw_chunks - gt_dw_left> dw_split_{};
  // Whether the last chunk is like the others (as many blocks, 16 valid
  // lanes), so that one call may run it with them.
  bool dw_uniform_chunks_ = false;
};

}  // namespace primcache::cpu_internal
