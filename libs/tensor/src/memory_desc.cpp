#include "primcache/tensor/memory_desc.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "element_size.hpp"
#include "tag_layout.hpp"

namespace primcache {

namespace {

using tensor_internal::element_size;
using tensor_internal::layout_of;
using tensor_internal::tag_layout;

std::string join(std::span<const std::int64_t> values, char sep) {
  std::string s;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) s += sep;
    s += std::to_string(values[i]);
  }
  return s;
}

// Records the message (formatted only when someone asked for it) and fails.
template <typename Message>
bool fail(std::string* why, Message&& message) {
  if (why) *why = "memory_desc: " + message();
  return false;
}

// Dims of at most max_ndims entries, each positive, and a known data type.
bool check_dims_and_type(std::span<const std::int64_t> dims, data_type dt, std::string* why) {
  if (dims.empty() || dims.size() > static_cast<std::size_t>(max_ndims)) {
    return fail(why, [&] {
      return std::to_string(dims.size()) + " dimensions given; a descriptor has 1 to " +
             std::to_string(max_ndims);
    });
  }
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] <= 0) {
      return fail(why, [&] {
        return "dimension " + std::to_string(d) + " of " + join(dims, 'x') + " is " +
               std::to_string(dims[d]) + "; dimensions must be positive";
      });
    }
  }
  if (element_size(dt) == 0) {
    return fail(why, [&] {
      if (dt == data_type::undef) return std::string("data type undef is not an element type");
      return "data type " + std::to_string(static_cast<int>(dt)) + " is not a known data type";
    });
  }
  return true;
}

// Each dimension's total inner block size, and the product of all blocks.
std::int64_t block_sizes(const blocking_desc& b, dims_array& per_dim) {
  per_dim.fill(1);
  std::int64_t product = 1;
  for (int k = 0; k < b.inner_nblks; ++k) {
    per_dim[static_cast<std::size_t>(b.inner_idxs[k])] *= b.inner_blks[k];
    product *= b.inner_blks[k];
  }
  return product;
}

// Elements from offset0 that a buffer must hold: every addressable element,
// and at least outer count * stride for each dimension of padded size > 1.
// False on overflow.
bool physical_extent(const memory_desc& md, std::int64_t& extent) {
  dims_array block;
  const std::int64_t inner = block_sizes(md.blocking(), block);
  std::int64_t last = inner - 1;  // offset of the last element, relative
  std::int64_t span = inner;
  const auto padded = md.padded_dims();
  const auto strides = md.strides();
  for (std::size_t d = 0; d < padded.size(); ++d) {
    // A stride of a size-1 dimension addresses nothing, and equal
    // descriptors (which ignore it) must have equal sizes.
    if (padded[d] == 1) continue;
    const std::int64_t outer = padded[d] / block[d];
    std::int64_t term, whole;
    if (__builtin_mul_overflow(outer - 1, strides[d], &term)) return false;
    if (__builtin_add_overflow(last, term, &last)) return false;
    if (__builtin_mul_overflow(outer, strides[d], &whole)) return false;
    span = std::max(span, whole);
  }
  if (__builtin_add_overflow(last, 1, &last)) return false;
  extent = std::max(span, last);
  return true;
}

// The layout part of equality: padded dims and offsets, inner blocks, and
// the strides of dimensions whose padded size is not 1.
bool same_layout(const memory_desc& a, const memory_desc& b) noexcept {
  if (a.ndims() != b.ndims()) return false;
  if (!std::ranges::equal(a.padded_dims(), b.padded_dims())) return false;
  if (!std::ranges::equal(a.padded_offsets(), b.padded_offsets())) return false;
  const blocking_desc& x = a.blocking();
  const blocking_desc& y = b.blocking();
  if (x.inner_nblks != y.inner_nblks || x.inner_blks != y.inner_blks ||
      x.inner_idxs != y.inner_idxs) {
    return false;
  }
  const auto padded = a.padded_dims();
  for (std::size_t d = 0; d < padded.size(); ++d) {
    if (padded[d] != 1 && x.strides[d] != y.strides[d]) return false;
  }
  return true;
}

const tag_layout* matching_tag(const memory_desc& md) noexcept {
  for (int v = static_cast<int>(format_tag::a);; ++v) {
    const tag_layout* l = layout_of(static_cast<format_tag>(v));
    if (!l) return nullptr;
    if (l->ndims == md.ndims() && md.matches(static_cast<format_tag>(v))) return l;
  }
}

// Unsigned LEB128: 7 bits per byte, low first, high bit set on all but the
// last. Every value written is non-negative (validated at construction).
// Returns the byte after the last one written.
inline std::byte* put_uvar(std::byte* p, std::int64_t value) noexcept {
  auto v = static_cast<std::uint64_t>(value);
  while (v >= 0x80) {
    *p++ = static_cast<std::byte>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::byte>(v);
  return p;
}

inline std::byte* put_u8(std::byte* p, unsigned v) noexcept {
  *p = static_cast<std::byte>(v);
  return p + 1;
}

// The most bytes write_key emits: header 3 + flags and block count 2 + dims,
// strides, padded dims and offsets 4 * 6 * 10 + offset0 10 + blocks 6 * 11.
constexpr std::size_t max_key_bytes = 3 + 2 + 4 * max_ndims * 10 + 10 + max_ndims * 11;

}  // namespace

std::string_view to_string(format_kind kind) noexcept {
  switch (kind) {
    case format_kind::undef: return "undef";
    case format_kind::any: return "any";
    case format_kind::blocked: return "blocked";
  }
  return "unknown";
}

// Accepts exactly what init accepts and builds the same descriptor; the
// checks that init makes separately fold into one pass here. For a tag
// layout the extent of check_size is the padded element count (the layout
// is dense), which is the last stride product below, and it bounds the
// logical element count; so one overflow check of that count times the
// element size stands for all of check_size's.
[[gnu::always_inline]] inline bool memory_desc::build(dims_view dims, primcache::data_type dt,
                                                      format_tag tag, memory_desc& out) noexcept {
  const std::size_t n = dims.size();
  const auto elem = static_cast<std::int64_t>(element_size(dt));
  if (n - 1 >= static_cast<std::size_t>(max_ndims) || elem == 0) return false;  // n == 0 wraps
  const std::int64_t* d = dims.data();
  out.ndims_ = static_cast<int>(n);
  out.data_type_ = dt;
  std::int64_t count;  // elements the layout spans, padding included
  if (tag == format_tag::any) {
    out.format_kind_ = primcache::format_kind::any;
    count = 1;
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t v = d[i];
      if (v <= 0 || __builtin_mul_overflow(count, v, &count)) return false;
      out.dims_[i] = v;
      out.padded_dims_[i] = v;
    }
  } else {
    const tag_layout* l = layout_of(tag);
    if (!l || static_cast<std::size_t>(l->ndims) != n) return false;
    out.format_kind_ = primcache::format_kind::blocked;
    blocking_desc& b = out.blocking_;
    count = l->inner;
    if (l->nblks == 0) {
      for (std::size_t i = n; i-- > 0;) {
        const std::size_t a = l->outer[i];
        const std::int64_t v = d[a];
        if (v <= 0) return false;
        out.dims_[a] = v;
        out.padded_dims_[a] = v;
        b.strides[a] = count;
        if (__builtin_mul_overflow(count, v, &count)) return false;
      }
    } else {
      b.inner_nblks = l->nblks;
      b.inner_blks = l->blks;
      b.inner_idxs = l->idxs;
      for (std::size_t i = n; i-- > 0;) {
        const std::size_t a = l->outer[i];
        const std::int64_t v = d[a];
        const int shift = l->block_shift[a];
        std::int64_t rounded;  // v plus all but one of a block: 0 extra when unblocked
        if (v <= 0 || __builtin_add_overflow(v, l->block[a] - 1, &rounded)) return false;
        const std::int64_t outer = rounded >> shift;
        out.dims_[a] = v;
        out.padded_dims_[a] = outer << shift;
        b.strides[a] = count;
        if (__builtin_mul_overflow(count, outer, &count)) return false;
      }
    }
  }
  std::int64_t bytes;
  return !__builtin_mul_overflow(count, elem, &bytes);
}

bool memory_desc::init(dims_view dims, primcache::data_type dt, format_tag tag, memory_desc& out,
                       std::string* why) {
  if (!check_dims_and_type(dims, dt, why)) return false;
  const int n = static_cast<int>(dims.size());
  out = memory_desc();
  out.ndims_ = n;
  out.data_type_ = dt;
  std::copy(dims.begin(), dims.end(), out.dims_.begin());
  out.padded_dims_ = out.dims_;
  if (tag == format_tag::any) {
    out.format_kind_ = primcache::format_kind::any;
    return out.check_size(why);
  }

  const tag_layout* l = layout_of(tag);
  if (!l) {
    return fail(why, [&] {
      if (tag == format_tag::undef) return std::string("format tag undef does not give a layout");
      return "format tag " + std::to_string(static_cast<int>(tag)) + " is not a known tag";
    });
  }
  if (l->ndims != n) {
    return fail(why, [&] {
      return "format tag " + std::string(l->name) + " lays out " + std::to_string(l->ndims) +
             " dimensions, but dims " + join(dims, 'x') + " has " + std::to_string(n);
    });
  }

  out.format_kind_ = primcache::format_kind::blocked;
  blocking_desc& b = out.blocking_;
  b.inner_nblks = l->nblks;
  for (int k = 0; k < l->nblks; ++k) {
    b.inner_blks[k] = l->blks[k];
    b.inner_idxs[k] = l->idxs[k];
  }
  dims_array block;
  std::int64_t stride = block_sizes(b, block);
  const auto too_large = [&] {
    return std::string(primcache::to_string(dt)) + " tensor " + join(dims, 'x') + " in " +
           std::string(l->name) + " is too large: its size in bytes overflows int64";
  };
  for (int d = 0; d < n; ++d) {
    std::int64_t rounded;
    if (__builtin_add_overflow(dims[d], block[d] - 1, &rounded)) return fail(why, too_large);
    out.padded_dims_[d] = rounded / block[d] * block[d];
  }
  for (int i = n - 1; i >= 0; --i) {
    const int d = l->outer[i];
    b.strides[d] = stride;
    if (__builtin_mul_overflow(stride, out.padded_dims_[d] / block[d], &stride)) {
      return fail(why, too_large);
    }
  }
  return out.check_size(why);
}

bool memory_desc::init(dims_view dims, primcache::data_type dt, dims_view strides, memory_desc& out,
                       std::string* why) {
  if (!check_dims_and_type(dims, dt, why)) return false;
  if (strides.size() != dims.size()) {
    return fail(why, [&] {
      return std::to_string(strides.size()) + " strides given for " + std::to_string(dims.size()) +
             " dimensions (" + join(dims, 'x') + ")";
    });
  }
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (strides[d] < 0) {
      return fail(why, [&] {
        return "stride " + std::to_string(d) + " is " + std::to_string(strides[d]) +
               "; strides must not be negative";
      });
    }
    if (strides[d] == 0 && dims[d] > 1) {
      return fail(why, [&] {
        return "stride " + std::to_string(d) + " is 0 but dimension " + std::to_string(d) +
               " has size " + std::to_string(dims[d]) +
               "; only a dimension of size 1 may have stride 0";
      });
    }
  }
  out = memory_desc();
  out.ndims_ = static_cast<int>(dims.size());
  out.data_type_ = dt;
  out.format_kind_ = primcache::format_kind::blocked;
  std::copy(dims.begin(), dims.end(), out.dims_.begin());
  out.padded_dims_ = out.dims_;
  std::copy(strides.begin(), strides.end(), out.blocking_.strides.begin());
  return out.check_size(why);
}

bool memory_desc::check_size(std::string* why) const {
  const auto too_large = [&] {
    std::string s = std::string(primcache::to_string(data_type_)) + " tensor " + join(dims(), 'x');
    if (is_blocked()) s += " with strides " + join(strides(), ',');
    if (offset0_ != 0) s += " at offset " + std::to_string(offset0_);
    return s + " is too large: its size in bytes overflows int64";
  };
  const auto elem = static_cast<std::int64_t>(element_size(data_type_));
  std::int64_t n = elem;
  for (int d = 0; d < ndims_; ++d) {
    if (__builtin_mul_overflow(n, dims_[d], &n)) return fail(why, too_large);
  }
  if (!is_blocked()) return true;
  std::int64_t extent, bytes;
  if (!physical_extent(*this, extent) || __builtin_add_overflow(extent, offset0_, &extent) ||
      __builtin_mul_overflow(extent, elem, &bytes)) {
    return fail(why, too_large);
  }
  return true;
}

// The constructors and make() try the path that formats nothing first; only
// a failure runs the validating init again for its message (init accepts
// exactly what build and the unexplained init accept, so it fails again).
// The failure paths are out-of-line lambdas so the success path saves no
// registers for them.
memory_desc::memory_desc(dims_view dims, primcache::data_type dt, format_tag tag) {
  if (build(dims, dt, tag, *this)) [[likely]]
    return;
  const auto explain = [&]() __attribute__((noinline, cold)) {
    std::string why;
    if (!init(dims, dt, tag, *this, &why)) throw error(status::invalid_arguments, std::move(why));
  };
  explain();
}

memory_desc::memory_desc(dims_view dims, primcache::data_type dt, dims_view strides) {
  if (init(dims, dt, strides, *this, nullptr)) [[likely]]
    return;
  const auto explain = [&]() __attribute__((noinline, cold)) {
    std::string why;
    if (!init(dims, dt, strides, *this, &why)) {
      throw error(status::invalid_arguments, std::move(why));
    }
  };
  explain();
}

result<memory_desc> memory_desc::make(dims_view dims, primcache::data_type dt, format_tag tag) {
  memory_desc md;
  if (build(dims, dt, tag, md)) [[likely]]
    return md;
  std::string why;
  if (!init(dims, dt, tag, md, &why)) return failure{status::invalid_arguments, std::move(why)};
  return md;
}

result<memory_desc> memory_desc::make(dims_view dims, primcache::data_type dt, dims_view strides) {
  memory_desc md;
  if (init(dims, dt, strides, md, nullptr)) [[likely]]
    return md;
  std::string why;
  if (!init(dims, dt, strides, md, &why)) return failure{status::invalid_arguments, std::move(why)};
  return md;
}

bool memory_desc::is_dense(bool with_padding) const noexcept {
  if (!is_blocked()) return false;
  if (!with_padding && padded_dims_ != dims_) return false;
  dims_array block;
  std::int64_t expected = block_sizes(blocking_, block);
  // Dimensions with more than one outer step, by increasing stride; dense
  // means each stride is exactly the span of the ones inside it.
  std::array<std::pair<std::int64_t, std::int64_t>, max_ndims> steps;  // (stride, count)
  std::size_t n = 0;
  for (int d = 0; d < ndims_; ++d) {
    const std::int64_t outer = padded_dims_[d] / block[d];
    if (outer > 1) steps[n++] = {blocking_.strides[d], outer};
  }
  // Insertion sort: at most six entries (and std::sort's unrolled small-range
  // path trips GCC 12's -Warray-bounds on a six-element array).
  for (std::size_t i = 1; i < n; ++i) {
    for (std::size_t j = i; j > 0 && steps[j] < steps[j - 1]; --j)
      std::swap(steps[j], steps[j - 1]);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (steps[i].first != expected) return false;
    expected *= steps[i].second;
  }
  return true;
}

std::int64_t memory_desc::nelems(bool with_padding) const noexcept {
  if (ndims_ == 0) return 0;
  const dims_array& d = with_padding ? padded_dims_ : dims_;
  std::int64_t n = 1;
  for (int i = 0; i < ndims_; ++i) n *= d[i];
  return n;
}

std::size_t memory_desc::size_bytes() const noexcept {
  if (!is_blocked()) return 0;
  std::int64_t extent = 0;
  physical_extent(*this, extent);  // cannot overflow: checked at construction
  return static_cast<std::size_t>(offset0_ + extent) * element_size(data_type_);
}

bool memory_desc::matches(format_tag tag) const noexcept {
  if (!is_blocked()) return false;
  const tag_layout* l = layout_of(tag);
  if (!l || l->ndims != ndims_) return false;
  memory_desc gold;
  if (!build(dims(), data_type_, tag, gold)) return false;
  return same_layout(*this, gold);
}

std::int64_t memory_desc::offset_of(dims_view index) const {
  if (!is_blocked()) {
    throw error(status::invalid_arguments,
                "memory_desc::offset_of: descriptor " + to_string() + " has no resolved layout");
  }
  if (index.size() != count()) {
    throw error(status::invalid_arguments, "memory_desc::offset_of: index has " +
                                               std::to_string(index.size()) + " entries for a " +
                                               std::to_string(ndims_) + "-D descriptor");
  }
  dims_array pos{};
  for (int d = 0; d < ndims_; ++d) {
    if (index[d] < 0 || index[d] >= padded_dims_[d]) {
      throw error(status::invalid_arguments, "memory_desc::offset_of: index " +
                                                 std::to_string(index[d]) + " of dimension " +
                                                 std::to_string(d) + " is outside [0, " +
                                                 std::to_string(padded_dims_[d]) + ")");
    }
    pos[d] = index[d] + padded_offsets_[d];
  }
  std::int64_t off = offset0_;
  std::int64_t inner_stride = 1;
  for (int k = blocking_.inner_nblks - 1; k >= 0; --k) {
    const auto d = static_cast<std::size_t>(blocking_.inner_idxs[k]);
    const std::int64_t blk = blocking_.inner_blks[k];
    off += (pos[d] % blk) * inner_stride;
    pos[d] /= blk;
    inner_stride *= blk;
  }
  for (int d = 0; d < ndims_; ++d) off += pos[d] * blocking_.strides[d];
  return off;
}

memory_desc memory_desc::with_data_type(primcache::data_type dt) const {
  if (is_zero()) {
    throw error(status::invalid_arguments,
                "memory_desc: the empty descriptor has no data type to change");
  }
  std::string why;
  if (!check_dims_and_type(dims(), dt, &why)) throw error(status::invalid_arguments, why);
  memory_desc out = *this;
  out.data_type_ = dt;
  if (!out.check_size(&why)) throw error(status::invalid_arguments, why);
  return out;
}

memory_desc memory_desc::with_offset0(std::int64_t offset0) const {
  if (!is_blocked()) {
    throw error(status::invalid_arguments,
                "memory_desc: offset0 needs a resolved layout, not " + to_string());
  }
  if (offset0 < 0) {
    throw error(status::invalid_arguments,
                "memory_desc: offset0 is " + std::to_string(offset0) + "; it must not be negative");
  }
  memory_desc out = *this;
  out.offset0_ = offset0;
  std::string why;
  if (!out.check_size(&why)) throw error(status::invalid_arguments, why);
  return out;
}

// The bytes go to a stack buffer through a local cursor (byte stores may
// alias anything, so a member cursor would be reloaded after each one),
// then to the key in one append. The flags that follow the dims are found in
// the same pass that writes the dims.
void memory_desc::write_key(key_writer& w) const {
  std::byte buf[max_key_bytes];
  std::byte* p = buf;
  const std::size_t n = count();
  p = put_u8(p, static_cast<std::uint8_t>(ndims_));
  p = put_u8(p, static_cast<std::uint8_t>(data_type_));
  p = put_u8(p, static_cast<std::uint8_t>(format_kind_));
  // Entries past ndims are zero in every array, so the first n decide.
  std::int64_t pad_bits = 0;
  std::int64_t shift_bits = 0;
  for (std::size_t d = 0; d < n; ++d) {
    p = put_uvar(p, dims_[d]);
    pad_bits |= padded_dims_[d] ^ dims_[d];
    shift_bits |= padded_offsets_[d];
  }
  if (is_blocked()) {
    const bool padded = pad_bits != 0;
    const bool shifted = shift_bits != 0;
    const bool offset = offset0_ != 0;
    const int nblks = blocking_.inner_nblks;
    p = put_u8(p, (padded ? 1u : 0u) | (shifted ? 2u : 0u) | (offset ? 4u : 0u));
    p = put_u8(p, static_cast<std::uint8_t>(nblks));
    for (std::size_t d = 0; d < n; ++d) {
      // A size-1 dimension's stride addresses nothing (and == ignores it).
      p = put_uvar(p, padded_dims_[d] == 1 ? 0 : blocking_.strides[d]);
    }
    if (padded) {
      for (std::size_t d = 0; d < n; ++d) p = put_uvar(p, padded_dims_[d]);
    }
    if (shifted) {
      for (std::size_t d = 0; d < n; ++d) p = put_uvar(p, padded_offsets_[d]);
    }
    if (offset) p = put_uvar(p, offset0_);
    for (int b = 0; b < nblks; ++b) {
      p = put_u8(p, static_cast<std::uint8_t>(blocking_.inner_idxs[b]));
      p = put_uvar(p, blocking_.inner_blks[b]);
    }
  }
  w.raw({buf, static_cast<std::size_t>(p - buf)});
}

std::string memory_desc::to_string() const {
  if (ndims_ == 0) return "undef";
  std::string s(primcache::to_string(data_type_));
  s += ':';
  const tag_layout* tag = nullptr;
  if (is_any()) {
    s += "any";
  } else if ((tag = matching_tag(*this))) {
    s += tag->name;
  } else {
    s += 's';
    s += join(strides(), ',');
    if (blocking_.inner_nblks > 0) s += '/';
    for (int b = 0; b < blocking_.inner_nblks; ++b) {
      s += std::to_string(blocking_.inner_blks[b]);
      s += static_cast<char>('a' + blocking_.inner_idxs[b]);
    }
  }
  s += ':';
  s += join(dims(), 'x');
  if (!tag && padded_dims_ != dims_) s += ":pad" + join(padded_dims(), 'x');
  if (offset0_ != 0) s += ":off" + std::to_string(offset0_);
  return s;
}

bool operator==(const memory_desc& a, const memory_desc& b) noexcept {
  return a.ndims() == b.ndims() && a.data_type() == b.data_type() &&
         a.format_kind() == b.format_kind() && std::ranges::equal(a.dims(), b.dims()) &&
         a.offset0() == b.offset0() && same_layout(a, b);
}

std::string dims_to_string(dims_view dims) {
  return dims.empty() ? "()" : join(dims, 'x');
}

}  // namespace primcache
