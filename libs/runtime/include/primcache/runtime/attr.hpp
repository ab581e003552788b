// primcache/runtime/attr.hpp — algorithms, propagation kinds and primitive
// attributes (post-ops, output scales, constant weights, tunable).
//
//   primcache::post_ops ops;
//   ops.append_eltwise(1.f, primcache::algorithm::eltwise_relu, 0.f, 0.f);
//   ops.append_binary(primcache::algorithm::binary_add, addend_md);
//   primcache::primitive_attr attr;
//   attr.set_post_ops(ops);
//   attr.set_output_scales(0, {0.5f});          // reorder: dst = src * 0.5
//   attr.set_constant_weights(true);            // matmul/conv: weights never change
//
// Post-ops run in order on each destination value after the operation
// itself: eltwise replaces v by scale * f(v, alpha, beta); binary_add adds
// the matching element of its operand (passed at execution as
// PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(i) | PRIMCACHE_ARG_SRC_1), which has
// dst's shape or broadcasts over it (size-1 dimensions).
//
// Thread-safety: value types. Exceptions: the setters throw primcache::error
// (invalid_arguments) for an algorithm of the wrong family or a malformed
// scale mask.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache {

enum class algorithm : int {
  undef = 0,
  eltwise_relu,       // v > 0 ? v : alpha * v
  eltwise_gelu_erf,   // 0.5 v (1 + erf(v / sqrt 2))
  eltwise_gelu_tanh,  // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
  eltwise_tanh,
  eltwise_logistic,  // sigmoid
  eltwise_exp,
  eltwise_linear,  // alpha * v + beta
  eltwise_clip,    // min(max(v, alpha), beta)
  binary_add,
  convolution_direct,
  convolution_auto,
  eltwise_gelu = eltwise_gelu_tanh,
  eltwise_sigmoid = eltwise_logistic,
};
PRIMCACHE_API std::string_view to_string(algorithm alg) noexcept;
PRIMCACHE_API bool is_eltwise(algorithm alg) noexcept;

enum class prop_kind : int {
  forward_training = 1,
  forward_inference = 2,
  forward = forward_training
};

class PRIMCACHE_API post_ops {
 public:
  enum class kind : int { eltwise, binary };
  struct entry {
    post_ops::kind kind = post_ops::kind::eltwise;
    algorithm alg = algorithm::undef;
    float scale = 1.f;
    float alpha = 0.f;
    float beta = 0.f;
    memory_desc src1;  // binary only
    friend bool operator==(const entry&, const entry&) = default;
  };

  void append_eltwise(float scale, algorithm alg, float alpha, float beta);
  void append_binary(algorithm alg, const memory_desc& src1);
  int len() const noexcept { return static_cast<int>(entries_.size()); }
  kind kind(int index) const { return at(index).kind; }
  const entry& at(int index) const;
  const std::vector<entry>& entries() const noexcept { return entries_; }
  friend bool operator==(const post_ops&, const post_ops&) = default;

 private:
  std::vector<entry> entries_;
};

class PRIMCACHE_API primitive_attr {
 public:
  void set_post_ops(post_ops ops) { post_ops_ = std::move(ops); }
  const post_ops& get_post_ops() const noexcept { return post_ops_; }

  // dst = src * scale. mask 0: one scale for every element (scales.size()
  // must be 1); mask (1 << d): one scale per index of dimension d (checked
  // against the tensor when the primitive descriptor is created).
  void set_output_scales(int mask, std::vector<float> scales);
  int get_output_scales_mask() const noexcept { return scales_mask_; }
  const std::vector<float>& get_output_scales() const noexcept { return scales_; }
  bool has_output_scales() const noexcept { return !scales_.empty(); }

  // Weights are constant (matmul, convolution): the contents of the
  // weights memory do not change between executions unless its data handle
  // does (memory::set_data_handle, or another memory object). The first
  // execution packs them into the kernel's layout and keeps the result in
  // the engine's constant tensor cache, keyed by the packing and the
  // memory's id (memory::get_id); later executions, of this primitive and of
  // any other with the same weights memory and packing, reuse it. Other
  // primitive kinds ignore it. Default false.
  void set_constant_weights(bool constant) noexcept { constant_weights_ = constant; }
  bool get_constant_weights() const noexcept { return constant_weights_; }

  // Tunable (tuning.hpp): whether the first execution of a primitive made
  // with these attributes tunes it. Unset (nullopt, the default): it follows
  // the global switch (set_tune, PRIMCACHE_TUNE) at that execution. Not part
  // of the primitive key: a tuned and an untuned primitive of one
  // descriptor share code.
  void set_tunable(bool tunable) noexcept { tunable_ = tunable; }
  std::optional<bool> get_tunable() const noexcept { return tunable_; }

  // The attribute's part of a primitive key (floats by bit pattern). Values
  // kernels take at run time (the output scales) enter only as their mask
  // and count: primitives that differ only in them share compiled code.
  // Constant weights do not enter it either: a backend whose code differs
  // for constant weights writes that difference into its own op key.
  void write_key(key_writer& w) const;
  // Those run-time values and the constant-weights and tunable flags, for
  // keys that must tell them apart (the cache of primitive descriptors,
  // which hold them).
  void write_run_time_values(key_writer& w) const;
  friend bool operator==(const primitive_attr&, const primitive_attr&) = default;

 private:
  post_ops post_ops_;
  int scales_mask_ = 0;
  std::vector<float> scales_;
  bool constant_weights_ = false;
  std::optional<bool> tunable_;
};

}  // namespace primcache
