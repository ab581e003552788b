// primcache/tensor/memory_desc.hpp — memory descriptors: what a tensor's
// bytes mean.
//
// A memory_desc says how a tensor's logical elements (dims, data type) map to
// memory: a blocking descriptor of outer strides plus optional inner blocks,
// padded dims and an offset. A descriptor is built from a format tag or from
// explicit strides; either way it keeps only the resolved form, which is
// what equality, write_key and everything downstream see. A tag is never
// stored, so nchw and the strides it implies give equal descriptors with
// equal key bytes. format_tag::any gives a descriptor of format_kind::any,
// which a primitive descriptor later replaces with a resolved one.
//
// Addressing (the physical element offset of a logical index i):
//   p = i + padded_offsets
//   for each inner block k, innermost first:      // inner_idxs[k] = dim d
//     off += (p[d] % inner_blks[k]) * (product of inner blocks after k)
//     p[d] /= inner_blks[k]
//   off += offset0 + sum over d of p[d] * strides[d]
// so strides are outer strides in elements, and a tag such as aBcd16b has
// strides whose innermost outer stride is 16.
//
//   primcache::memory_desc src({1, 17, 5, 5}, primcache::data_type::f32,
//                              primcache::format_tag::nChw16c);
//   src.padded_dims();         // 1, 32, 5, 5
//   src.size_bytes();          // 1 * 32 * 5 * 5 * 4
//   src.offset_of({0, 16, 2, 3});  // 608: C block 1, h 2, w 3, c % 16 = 0
//   primcache::memory_desc same({2, 3}, primcache::data_type::f32, {3, 1});
//   same == primcache::memory_desc({2, 3}, primcache::data_type::f32,
//                                  primcache::format_tag::ab);   // true
//   primcache::key_writer w;
//   src.write_key(w);          // the resolved form, never the tag
//
// Building a valid descriptor, comparing and keying it never allocate: dims,
// strides and blocks live in fixed arrays of max_ndims entries (entries past
// ndims are zero); only a failure formats a message.
//
// Thread-safety: an immutable value once built; copies are independent.
// Exceptions: the constructors, with_data_type, with_offset0 and offset_of
// throw primcache::error(status::invalid_arguments) naming the problem; the
// static make() factories report the same failures as a result instead.
// Functions that format text (to_string, failures) and write_key (past a
// key's inline buffer) may throw std::bad_alloc; the rest is noexcept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/tensor/data_type.hpp"
#include "primcache/tensor/dims.hpp"
#include "primcache/tensor/format_tag.hpp"

namespace primcache {

// Values are stable: they are written into keys.
enum class format_kind : std::uint8_t {
  undef = 0,    // the empty descriptor
  any = 1,      // layout to be chosen by a primitive descriptor
  blocked = 2,  // resolved: strides and inner blocks
};

// "undef", "any", "blocked"; "unknown" for values outside the enum.
PRIMCACHE_API std::string_view to_string(format_kind kind) noexcept;

// The resolved layout of a blocked descriptor.
struct blocking_desc {
  // Outer strides in elements, one per logical dimension.
  dims_array strides{};
  // Inner blocks, outermost first: dimension inner_idxs[k] is split by
  // inner_blks[k]. Entries past inner_nblks are zero.
  int inner_nblks = 0;
  dims_array inner_blks{};
  dims_array inner_idxs{};

  // Field by field; memory_desc's == is the one that knows which strides
  // matter.
  friend bool operator==(const blocking_desc&, const blocking_desc&) = default;
};

class PRIMCACHE_API memory_desc {
 public:
  // The empty descriptor: ndims 0, data_type::undef, format_kind::undef,
  // size 0. It stands for an absent argument (a matmul without bias).
  memory_desc() noexcept = default;

  // dims laid out as `tag` says; format_tag::any gives format_kind::any.
  memory_desc(dims_view dims, primcache::data_type dt, format_tag tag);

  // A plain layout with one explicit stride (in elements) per dimension.
  // Strides may leave gaps (row padding); a stride may be 0 only for a
  // dimension of size 1.
  memory_desc(dims_view dims, primcache::data_type dt, dims_view strides);

  // The same as the constructors, with failures as values.
  static result<memory_desc> make(dims_view dims, primcache::data_type dt, format_tag tag);
  static result<memory_desc> make(dims_view dims, primcache::data_type dt, dims_view strides);

  int ndims() const noexcept { return ndims_; }
  std::span<const std::int64_t> dims() const noexcept { return {dims_.data(), count()}; }
  primcache::data_type data_type() const noexcept { return data_type_; }
  primcache::format_kind format_kind() const noexcept { return format_kind_; }
  // dims rounded up to whole inner blocks; equal to dims for plain layouts
  // and for format_kind::any.
  std::span<const std::int64_t> padded_dims() const noexcept {
    return {padded_dims_.data(), count()};
  }
  // Where the logical tensor starts inside the padded one; zero from every
  // factory here.
  std::span<const std::int64_t> padded_offsets() const noexcept {
    return {padded_offsets_.data(), count()};
  }
  // Elements between the start of the buffer and the element at index 0.
  std::int64_t offset0() const noexcept { return offset0_; }

  // The resolved layout; all zero unless format_kind() is blocked.
  const blocking_desc& blocking() const noexcept { return blocking_; }
  // Outer strides, ndims entries for a blocked descriptor, empty otherwise.
  std::span<const std::int64_t> strides() const noexcept {
    return {blocking_.strides.data(), is_blocked() ? count() : 0};
  }
  int inner_nblks() const noexcept { return blocking_.inner_nblks; }
  std::span<const std::int64_t> inner_blks() const noexcept {
    return {blocking_.inner_blks.data(), static_cast<std::size_t>(blocking_.inner_nblks)};
  }
  std::span<const std::int64_t> inner_idxs() const noexcept {
    return {blocking_.inner_idxs.data(), static_cast<std::size_t>(blocking_.inner_nblks)};
  }

  bool is_zero() const noexcept { return ndims_ == 0; }
  bool is_any() const noexcept { return format_kind_ == primcache::format_kind::any; }
  bool is_blocked() const noexcept { return format_kind_ == primcache::format_kind::blocked; }
  // Blocked with no inner blocks: strides alone describe the layout.
  bool is_plain() const noexcept { return is_blocked() && blocking_.inner_nblks == 0; }
  // Blocked, and the elements fill [offset0, offset0 + nelems) with neither
  // gaps nor overlap. Without with_padding a layout that pads a dimension
  // (nChw16c with C = 17) is not dense; with it, padding elements count.
  bool is_dense(bool with_padding = false) const noexcept;

  // Product of dims (or padded dims); 0 for the empty descriptor.
  std::int64_t nelems(bool with_padding = false) const noexcept;
  // Bytes a buffer for this descriptor needs: offset0 plus every addressable
  // element, padding included, and at least outer count * stride for each
  // dimension of padded size > 1 (so 2x3 with strides 4,1 takes 8 elements,
  // its last row's padding included). 0 unless format_kind() is blocked.
  std::size_t size_bytes() const noexcept;

  // Whether the layout (padded dims, strides, inner blocks) is the one `tag`
  // gives for these dims. The data type and offset0 are not compared; nor is
  // the stride of a dimension whose padded size is 1, which no address uses
  // (so 1x1x5x5 matches both nchw and nhwc). False for undef, any and a tag
  // of a different ndims.
  bool matches(format_tag tag) const noexcept;

  // The physical element offset (from the buffer start, offset0 included) of
  // a logical index. Each index entry may reach into the padding, up to
  // padded_dims. Throws when the descriptor is not blocked, when the index
  // has the wrong length, or an entry is out of range.
  std::int64_t offset_of(dims_view index) const;

  // A copy with another element type (and so another size_bytes).
  memory_desc with_data_type(primcache::data_type dt) const;
  // A copy whose element 0 sits `offset0` elements into the buffer.
  memory_desc with_offset0(std::int64_t offset0) const;

  // Appends the resolved form to a key; see docs/tensor.md for the bytes.
  // Cheap: one append of at most a few hundred bytes, no formatting.
  void write_key(key_writer& w) const;

  // For verbose logs:
  //   <data type>:<layout>:<dims>[:pad<padded dims>][:off<offset0>]
  // where layout is the canonical tag the descriptor matches ("abcd",
  // "aBcd16b"), "any", or s<strides>[/<inner blocks>] when no tag matches;
  // dims are joined by 'x'. "f32:aBcd16b:1x17x5x5", "f32:s4,1:2x3",
  // "s8:any:64x64". The empty descriptor prints "undef".
  std::string to_string() const;

 private:
  std::size_t count() const noexcept { return static_cast<std::size_t>(ndims_); }

  // The hot path: builds `out`, which must be freshly default-constructed,
  // from dims and a tag, or returns false — exactly when init would fail —
  // leaving `out` unspecified and formatting nothing. Inline, and defined
  // (and used) only in memory_desc.cpp.
  static inline bool build(dims_view dims, primcache::data_type dt, format_tag tag,
                           memory_desc& out) noexcept;

  // Build `out` or explain why not in *why (when why is non-null; the
  // message is only formatted then, so a probe allocates nothing). The
  // validating path, and the source of every failure message.
  static bool init(dims_view dims, primcache::data_type dt, format_tag tag, memory_desc& out,
                   std::string* why);
  static bool init(dims_view dims, primcache::data_type dt, dims_view strides, memory_desc& out,
                   std::string* why);
  bool check_size(std::string* why) const;

  int ndims_ = 0;
  primcache::data_type data_type_ = primcache::data_type::undef;
  primcache::format_kind format_kind_ = primcache::format_kind::undef;
  dims_array dims_{};
  dims_array padded_dims_{};
  dims_array padded_offsets_{};
  std::int64_t offset0_ = 0;
  // Default-initialized: its members zero themselves one by one, which
  // compilers emit as plain stores, where `{}` clears it as one block.
  blocking_desc blocking_;
};

// Compares the resolved form (ndims, dims, data type, format kind, padded
// dims and offsets, offset0, strides, inner blocks), ignoring the stride of
// a dimension whose padded size is 1, which no address uses. Equal
// descriptors have equal key bytes.
PRIMCACHE_API bool operator==(const memory_desc& a, const memory_desc& b) noexcept;

}  // namespace primcache
