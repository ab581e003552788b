// kernels/conv_kernel.hpp — the 2-D forward-inference convolution kernel (f32)
// of the CPU backend: direct convolution generated as IR with every shape
// baked in, register-blocked over output pixels x output channels.
//
// The kernel computes, for each image n, group g, output channel oc of the
// group and output pixel (oh, ow):
//   dst = post_ops(bias[oc] + sum over ic, kh, kw of
//                  src[n, g*IC_g + ic, oh*SH - PT + kh*(DH+1), ow*SW - PL + kw*(DW+1)]
//                  * wei[g, oc, ic, kh, kw])
// with taps outside the image contributing nothing (zero padding). Dilation is
// 0-based: 0 is a dense kernel.
//
// Layouts. Activations (src and dst, chosen independently) may be any plain
// 4-D layout (nchw, nhwc, or explicit strides) or nChw16c (one inner block of
// 16 channels). Output channels are mapped to 16-lane vectors; nhwc and
// nChw16c store whole vectors, other layouts store lane by lane. Weights may
// be in any layout the tensor library describes; unless they already are in
// preferred_weights_desc() (Ohwi16o, or Goihw16g for depthwise), execute()
// packs them into the scratchpad first, on every call.
//
//   conv_problem p;                                   // shapes, layouts, post-ops
//   p.src = memory_desc({1, 64, 56, 56}, data_type::f32, format_tag::nChw16c);
//   ... weights, dst, strides, padding, groups, nthr ...
//   auto k = conv_kernel::create(p, default_conv_config(p, effective_isa()), effective_isa());
//   if (!k) return k.why();
//   std::vector<std::byte, ...> scratch(k.value()->scratchpad_bytes());   // 64-byte aligned
//   k.value()->execute({src, wei, bias, dst, binary}, scratch.data(), default_thread_pool());
//
// Thread-safety: a kernel is immutable after creation; execute() may run on
// any number of threads at once, each with its own scratchpad. Exceptions:
// create() and load() return failures as values (std::bad_alloc aside);
// execute() does not throw unless the thread pool does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/config_space.hpp"
#include "kernels/post_ops.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::cpu_internal {

class jit_module;
class conv_walk;
struct conv_geometry;

struct conv_problem {
  // (N, IC, IH, IW): plain layout or nChw16c.
  memory_desc src;
  // (OC, IC, KH, KW) when groups == 1, else (G, OC/G, IC/G, KH, KW); any
  // resolved layout.
  memory_desc weights;
  // Empty (no bias) or 1-D (OC), dense. Its offset0 is not the kernel's:
  // conv_args::bias points at element 0 (the primitive applies it).
  memory_desc bias;
  // (N, OC, OH, OW): plain layout or nChw16c, independent of src's.
  memory_desc dst;
  std::int64_t stride_h = 1, stride_w = 1;
  // 0-based: the distance between taps is dilation + 1.
  std::int64_t dilation_h = 0, dilation_w = 0;
  std::int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  std::int64_t groups = 1;
  post_op_chain post_ops;
  int nthr = 1;

  void write_key(key_writer& w) const;
};

// Which loop runs outermost over the work items (image, group, output
// channel chunk, output row) that threads share: output-channel chunks
// outermost keeps one chunk's weights hot while rows stream by; rows
// outermost keeps one input row hot while the weights stream by.
enum class conv_loop_order : std::uint8_t { oc_outer = 0, spatial_outer = 1 };

struct conv_config {
  // Output pixels of one row held in registers at once.
  int ow_block = 14;
  // 16-channel output blocks held in registers at once (a register tile is
  // ow_block x oc_blocks vectors of 16 floats).
  int oc_blocks = 2;
  // Input channels per iteration of the reduction loop (1, 2, 4, 8 or 16).
  int ic_unroll = 1;
  conv_loop_order order = conv_loop_order::oc_outer;
  // Cache blocking, K panel: input channels of the group per pass over a
  // row's tiles (a multiple of ic_unroll); 0 (or at least the group's
  // channels): one pass. Between passes the partial sums wait in dst; the
  // last pass adds the post-ops. Not depthwise.
  int ic_block = 0;
  // Cache blocking, N panel (spatial_outer only): output-channel chunks (of
  // oc_blocks 16-channel blocks each) per panel; a thread walks its rows
  // once per panel, the panel's chunks innermost. 0: one panel.
  int oc_panel = 0;
  // Thread partition. 0: the work items, in the loop order, split into
  // nthr balanced ranges. T >= 1 (dividing nthr): a grid of T parts of the
  // output-channel chunks by nthr / T parts of the output rows. Either way
  // a thread that finishes its part takes what others have not started.
  int thr_oc = 0;

  void write_key(key_writer& w) const;
  friend bool operator==(const conv_config&, const conv_config&) = default;
};

struct conv_args {
  const void* src = nullptr;
  const void* weights = nullptr;  // in problem.weights' layout
  // Element 0 of the bias (its offset0 already applied); null when
  // problem.bias is empty. src, weights and dst are buffer starts: the
  // kernel adds their descriptors' offset0.
  const void* bias = nullptr;
  void* dst = nullptr;
  // Indexed by binary_add_op::arg_index; a `none` operand is laid out as
  // dst (its buffer start: read at dst's offset, offset0 included), a
  // per_channel or scalar one points at its element 0.
  const float* const* binary_operands = nullptr;
  // When set: the weights already packed by pack_weights() (packed_bytes()
  // bytes); execute() reads them and skips packing (weights is unused).
  const float* packed_weights = nullptr;
};

// The output size the problem's shapes imply along one axis, or a failure
// when the kernel does not fit in the padded input.
result<std::int64_t> conv_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                      std::int64_t dilation, std::int64_t pad_before,
                                      std::int64_t pad_after);

// The weights layout the kernel reads directly: Ohwi16o (groups == 1),
// Goihw16g (depthwise: groups == IC == OC), goihw otherwise (grouped weights
// are always packed). The problem's weights dims must be valid.
result<memory_desc> preferred_weights_desc(const conv_problem& p);

conv_config default_conv_config(const conv_problem& p, cpu_isa isa);
// The candidate space: every register tile (ow_block x oc_blocks) within the
// ISA's accumulator budget and the problem's extents, times input-channel
// unrolls and loop orders, times K panels (ic_block), N panels (oc_panel,
// spatial_outer) and thread partitions (thr_oc), each in the form the
// generator uses (distinct candidates: distinct code, or the same code
// walking its items in another order). Every candidate validates.
enumerated_configs<conv_config> conv_config_candidates(const conv_problem& p, cpu_isa isa);
// A few valid configurations other than the default, each different code:
// what the kernel tests compile.
std::vector<conv_config> conv_config_variants(const conv_problem& p, cpu_isa isa);

class conv_kernel {
 public:
  static result<std::unique_ptr<conv_kernel>> create(const conv_problem& p, const conv_config& c,
                                                     cpu_isa isa);
  static result<std::unique_ptr<conv_kernel>> load(const conv_problem& p, const conv_config& c,
                                                   std::span<const std::byte> object,
                                                   cpu_isa highest = effective_isa());
  ~conv_kernel();
  conv_kernel(const conv_kernel&) = delete;
  conv_kernel& operator=(const conv_kernel&) = delete;

  const std::vector<std::byte>& object() const;
  // The ISA the object was compiled for (recorded in it).
  cpu_isa isa() const;
  // The packed weights' bytes when the weights are not in the preferred
  // layout, else 0.
  std::size_t scratchpad_bytes() const;
  bool packs_weights() const noexcept { return packs_weights_; }
  // Bytes of the packed weights (whether or not execute() packs).
  std::size_t packed_bytes() const noexcept { return packed_bytes_; }
  // Packs weights in problem.weights' layout into `packed` (packed_bytes(),
  // 4-byte aligned), in parallel on `pool`. The layout's analysis was done
  // once, at creation.
  void pack_weights(const float* user, float* packed, thread_pool& pool) const;
  // What identifies the packed bytes besides the weights' identity: the
  // weights' descriptor and the groups (the packed layout follows from them).
  void write_packing_key(key_writer& w) const;
  void execute(const conv_args& args, void* scratchpad, thread_pool& pool) const;

  const conv_problem& problem() const noexcept { return problem_; }
  const conv_config& config() const noexcept { return config_; }

 private:
  using entry_fn = void(const float* src, const float* wei, const float* bias, float* dst,
                        const float* const* binary, std::int64_t begin, std::int64_t end);
  conv_kernel(const conv_problem& p, const conv_config& c, std::unique_ptr<jit_module> m,
              entry_fn* fn);
  static result<std::unique_ptr<conv_kernel>> finish(const conv_problem& p, const conv_config& c,
                                                     std::unique_ptr<jit_module> m);
  // Runs every item in walk_'s order on up to nthr threads of the pool.
  void run_walk(const conv_args& args, const float* wei, int nthr, thread_pool& pool) const;
  // Writes zeros into the channel padding of an nChw16c dst (the lanes past
  // OC in its last 16-channel block), for the configurations whose generated
  // code stores lane by lane and leaves them unwritten.
  void zero_dst_padding(float* dst) const;

  conv_problem problem_;
  conv_config config_;
  std::unique_ptr<jit_module> module_;
  entry_fn* fn_ = nullptr;
  // The problem's geometry, analyzed once (the packer's offsets and blocks).
  std::unique_ptr<const conv_geometry> geometry_;
  // The order of the items when the configuration has an N panel or a
  // thread partition (conv_walk.hpp); null: the items in loop order.
  std::unique_ptr<const conv_walk> walk_;
  bool packs_weights_ = false;
  bool zeroes_dst_padding_ = false;
  std::int64_t work_items_ = 0;
  std::int64_t item_fmas_ = 0;  // conv_item_fmas: what a chunk of items weighs
  std::size_t packed_bytes_ = 0;
};

// What create() checks of the problem alone (no configuration, no ISA, no
// compilation): layouts, data types, shapes. conv_reference() needs the same.
result<bool> check_conv_problem(const conv_problem& p);

// Plain loops (double accumulation); writes zeros into the channel padding of
// an nChw16c dst, as the kernel does.
void conv_reference(const conv_problem& p, const conv_args& args);

}  // namespace primcache::cpu_internal
