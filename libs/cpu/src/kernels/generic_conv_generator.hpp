// kernels/generic_conv_generator.hpp — the LLVM IR of the shape-generic
// convolution kernel: the register tile of conv_generator.cpp (ow_block
// output pixels of one row x `blocks` 16-channel output blocks, held in
// registers for the whole reduction) with every size, stride, padding,
// dilation, layout and post-op read from a parameter block at run time
// instead of baked in, for one ISA. Compiled once, when the library is
// built (tools/generic_kernels_aot.cpp), and run by tiered convolutions
// until their specialized kernel is installed (tiered/tiered_impl.hpp).
//
//   compile_object(generic_conv_name(isa), isa, generic_conv_compile_settings,
//                  [&](llvm::Module& m) { generate_generic_conv(isa, m); });
//
// One exported function per tile: ow_block pixels x `blocks` output blocks
// (generic_conv_tiles) x {interior, edge}. An interior tile's taps all fall
// inside the image: no checks. An edge tile has taps in the padding; each of
// its multiply-adds is kept only where the tap is inside (a select on the
// accumulator; the load reads a clamped, valid address), so the skipped taps
// change nothing, exactly as the specialized kernel leaves them out at
// generation time. The driver (generic_conv_kernel.cpp) walks rows and tiles
// in C++ as the specialized code does (the same tile widths where the
// specialized tile is one of the generic ones) and computes each tile's kh
// range as it does.
//
// Results equal the specialized kernel's bit for bit: each output starts at
// its bias (or +0) and accumulates one fused multiply-add per tap inside the
// image in the same order — kh ascending, then input channels ascending,
// then kw ascending — whatever the register tile or the input-channel
// unroll; its post-ops are the IR emit_post_ops emits (the eltwise math from
// the same emitters; relu, linear and clip take their constants as values);
// stores follow the same rules (whole vectors where 16 channels are
// consecutive, blocked channel padding kept at zero, else lane by lane).
//
// Depthwise convolutions (groups == IC == OC) have tiles of their own
// (generic_dw_symbol): conv_generator.cpp's depthwise reduction, which reads
// each tap as a vector of the output's own 16 channels instead of
// broadcasting one input channel. Each output starts at its bias (or +0)
// and accumulates one fused multiply-add per tap inside the image, kh
// ascending then kw ascending, as the specialized kernel does whatever its
// tile. They have no edge form: a depthwise tile runs the kw range
// [gt_kw_lo, gt_kw_hi) it is given, and the driver runs a pixel whose taps
// reach into the padding alone, with the kw range inside the image (taps
// outside are left out, so a -0 bias stays -0 as it does there). Five forms
// of reading a source vector (generic_dw_load), chosen by the driver from
// the source layout and stride.
//
// Thread-safety: generate_generic_conv touches only the module it is given.
// Exceptions: what LLVM's allocation throws.
#pragma once

#include <cstdint>
#include <string>

#include "jit/compiler.hpp"
#include "kernels/generic_post_ops.hpp"
#include "primcache/cpu/cpu.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace primcache::cpu_internal {

// The register tiles the generic kernel of an ISA is built with: every
// ow_block x blocks with blocks <= max_blocks and ow_block * blocks <=
// budget (the tiles default_conv_config chooses from, and their narrower
// edge and tail tiles).
struct generic_conv_tiles {
  int max_blocks;  // 16-channel output blocks
  int budget;      // accumulators (16-float vectors)
  bool has(int ow_block, int blocks) const noexcept {
    return ow_block >= 1 && blocks >= 1 && blocks <= max_blocks && ow_block * blocks <= budget;
  }
};
generic_conv_tiles generic_conv_tiles_for(cpu_isa isa) noexcept;

// The exported tile function for ow_block pixels x `blocks` output blocks,
// interior or edge.
std::string generic_conv_symbol(int ow_block, int blocks, bool interior);

// Whether the edge tiles of an ISA are the masked form (a per-call table of
// each pixel's tap offsets and inside-the-image masks, one masked FMA per
// multiply-add: AVX-512's mask registers), fast enough to run a whole row
// tile that holds edge pixels; else (avx2: a blend per multiply-add) each
// multiply-add checks its tap, and the driver gives the edge form only
// the edge pixels.
bool generic_conv_masked_edges(cpu_isa isa) noexcept;
// The widest kernel the masked edge form takes: its table lives on the
// stack (10 bytes per kw and pixel: 15 KiB at 64 x 24). Wider kernels
// that have edge pixels are created synchronously (the generic kernel
// declines them).
inline constexpr std::int64_t generic_conv_max_masked_kw = 64;

// The depthwise tiles of an ISA: every ow_block x blocks with blocks <=
// max_blocks, ow_block <= max_width and ow_block * blocks <= budget.
struct generic_dw_tiles {
  int max_blocks;
  int max_width;
  int budget;
  bool has(int ow_block, int blocks) const noexcept {
    return ow_block >= 1 && blocks >= 1 && blocks <= max_blocks && ow_block <= max_width &&
           ow_block * blocks <= budget;
  }
};
generic_dw_tiles generic_dw_tiles_for(cpu_isa isa) noexcept;

// How a depthwise tile reads a source pixel's 16 channels of a block:
// vector: whole vectors (16 consecutive floats; a blocked source, whose
// channel padding may be read, or every block full); masked: whole vectors
// but the tile's last block, masked to its valid lanes (a plain source with
// consecutive channels and a partial last block); lanes: lane by lane at the
// source's channel stride (nchw and other strided channels).
// blocked_s1, blocked_s2: as vector, for a source whose pixels are 16
// floats apart (nChw16c) at stride 1 or 2: its addresses are constant
// offsets from one pointer per block (with run-time strides, loop strength
// reduction keeps one pointer per pixel and block, and the 8x2 tile spilled
// them: 0.27-0.6x the specialized kernel).
enum class generic_dw_load : int {
  vector = 0,
  masked = 1,
  lanes = 2,
  blocked_s1 = 3,
  blocked_s2 = 4
};
inline constexpr int generic_dw_load_count = 5;

// The exported depthwise tile function, with the same signature as the
// others (generic_conv_function; gt_c_in0 unused, gc_icg 1, gt_kw_lo and
// gt_kw_hi read). Every tap of the kw range must be inside the image.
std::string generic_dw_symbol(int ow_block, int blocks, generic_dw_load load);

// The exported depthwise row function: whole output rows of a depthwise
// convolution whose kernel rows have 3 taps with no dilation along w, over
// an nChw16c source (16 floats a pixel) at stride 1 or 2 (the MobileNet
// shapes): gt_dw_rows rows from gt_dw_oh0 of gt_dw_chunks consecutive
// chunks (wei_chunk: the first's weights; gt_last_lanes holds for each),
// in one call, the chunks outer, each row's kh range found in the code
// (gc_ih, gc_kh, gc_sh, gc_pt, gc_dh1) and its dst offset from the
// image's (gt_dst_row_off + oh * gc_dst_h_stride). A row is split as the
// gt_dw_* slots say: pixels alone over their kw range, a first tile of
// ow_block pixels, tiles of ow_block and ow_block - 1 pixels, a last tile,
// pixels alone. A tile loads each source vector of a kernel row once for
// the taps that share it; the first and last tile may hold the edge
// pixels of padding 1 (their one tap in the padding left out).
// gt_iw0: pixel 0's first tap (-pad_l). Same signature as the others;
// ow_block x blocks as generic_dw_tiles has them.
std::string generic_dw_row_symbol(int ow_block, int blocks, int stride);

// params: a generic_conv_slot-indexed block of int64 slots (floats in the
// low four bytes of theirs); tile: a generic_conv_tile-indexed block;
// src_img: src at image n (offset0 applied); wei_chunk: the packed weights
// of the tile's first output block; dst: dst's base (the tile's row offset
// in gt_dst_row_off); binary: as conv_args::binary_operands.
using generic_conv_function = void(const std::int64_t* params, const float* src_img,
                                   const float* wei_chunk, const float* bias, float* dst,
                                   const float* const* binary, const std::int64_t* tile);

enum generic_conv_slot : int {
  gc_ih,
  gc_iw,
  gc_kh,
  gc_kw,
  gc_icg,
  gc_sh,
  gc_sw,
  gc_pt,   // padding at the top
  gc_dh1,  // dilation + 1: the distance between taps
  gc_dw1,
  gc_src_c_stride,
  gc_src_h_stride,
  gc_src_w_stride,
  gc_src_blocked,       // 0 or 1: nChw16c
  gc_wei_block_stride,  // floats between two output blocks of packed weights
  gc_wei_kh_stride,     // kw * icg * 16
  gc_dst_c_stride,
  gc_dst_h_stride,
  gc_dst_w_stride,
  gc_dst_blocked,     // 0 or 1
  gc_dst_contiguous,  // 0 or 1: 16 channels of a block are 16 consecutive floats
  gc_with_bias,       // 0 or 1
  gc_post_op_count,
  gc_post_ops,  // gc_post_op_slots per post-op
};
// The post-op chain: generic_post_op_slots per post-op (generic_post_ops.hpp).
inline constexpr int gc_post_op_slots = generic_post_op_slots;
inline constexpr int gc_max_post_ops = generic_max_post_ops;
inline constexpr int gc_slot_count = gc_post_ops + gc_post_op_slots * gc_max_post_ops;
inline constexpr std::int64_t gc_binary_code = generic_binary_code;

enum generic_conv_tile : int {
  gt_ih0,    // oh * sh - pt
  gt_kh_lo,  // the kh range whose rows fall inside the image
  gt_kh_hi,
  gt_iw0,  // ow0 * sw - pl
  gt_ow0,
  gt_len,          // pixels of the tile (ow_block for an interior tile)
  gt_c_in0,        // the group's first input channel
  gt_c_first,      // the tile's first output channel (tensor-wide)
  gt_last_lanes,   // valid lanes of its last block (1..16)
  gt_dst_row_off,  // dst's offset0 + n * n_stride + oh * h_stride
  gt_kw_lo,        // depthwise tiles: the kw range they run (taps inside the image)
  gt_kw_hi,
  // Depthwise rows (generic_dw_row_symbol), in the order they run:
  gt_dw_left,      // pixels [0, left) alone, over their kw range
  gt_dw_first,     // 0 or 1: a first tile of ow_block pixels
  gt_dw_first_lo,  // 0 or 1: its first pixel leaves out tap kw 0
  gt_dw_first_hi,  // 0 or 1: its last pixel leaves out tap kw 2
  gt_dw_wide,      // tiles of ow_block pixels
  gt_dw_narrow,    // tiles of ow_block - 1 pixels
  gt_dw_last,      // the last tile's width: 0 (none), ow_block - 1 or ow_block
  gt_dw_last_hi,   // 0 or 1: its last pixel leaves out tap kw 2
  gt_dw_ow,        // pixels from the tiles' end to ow alone
  gt_dw_chunks,    // this many chunks of `blocks` blocks from gt_c_first
  gt_dw_oh0,       // the first output row of each chunk
  gt_dw_rows,      // the rows from gt_dw_oh0 (gt_dst_row_off: the image's row 0)
  gt_count,
};

// How the AOT tool compiles it: the convolution's cleanup pipeline
// (conv_generator.hpp) with loop strength reduction.
inline constexpr compile_settings generic_conv_compile_settings{
    "function(mem2reg,early-cse<memssa>,instcombine,simplifycfg,loop(loop-rotate),"
    "loop-mssa(licm),early-cse<memssa>)",
    2, true};

// Defines every generic_conv_symbol and generic_dw_symbol in m, for `isa`
// (avx2 or above).
void generate_generic_conv(cpu_isa isa, llvm::Module& m);

// The kernel's name for the compiler and the JIT: "conv_generic_<isa>".
std::string generic_conv_name(cpu_isa isa);

}  // namespace primcache::cpu_internal
