// primcache/transform/kernel_type.hpp — what a kernel expects of its input:
// where the data lives, its element type, its layout and the library whose
// kernel reads it (the data-transform design's kernel type).
//
//   using primcache::kernel_type;
//   kernel_type a{primcache::place::cpu(), primcache::data_type::f32,
//                 primcache::layout(primcache::format_tag::nchw), primcache::library::jit()};
//   a.to_string();                                   // "cpu/f32/abcd/jit"
//   kernel_type b = kernel_type::parse("gpu:0/f32/aBcd16b/reference");
//   std::unordered_set<kernel_type> seen{a, b};
//   kernel_type c = kernel_type::of(mem, primcache::library::jit());  // from a memory
//   kernel_type q = kernel_type::parse("cpu/s8*0.05/abcd/jit");  // int8, 0.05 per step
//
// A layout is a format tag (kept in canonical form: nchw and abcd are one
// layout) or, for a plain layout no tag names, its strides in elements
// (printed "s64,1"; none negative). parse(t.to_string()) == t for every
// kernel type t whose library name and scale fit (library::problem and
// kernel_type::scale_problem are empty): the checks parse makes itself, and
// transform_registry::add makes of the kernel types it is given.
//
// Integer data (s8, u8, s32) may carry a quantization scale: a stored q
// stands for the real value q * scale ("s8*0.05"; 1 when absent, and not
// printed then). Floating-point data has scale 1. A transform between two
// scales multiplies by from.scale / to.scale, rounds to nearest even and
// saturates.
//
// Thread-safety: values; copies are independent. Exceptions: parse,
// layout::strided and layout::desc_for throw primcache::error(
// invalid_arguments) naming the bad text or the mismatch (parse also refuses
// a scale that is not finite and positive, a scale on floating-point data,
// or an empty library name; strided refuses a negative stride);
// kernel_type::of throws for an empty memory or a layout neither a tag nor
// plain strides describe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/tensor/data_type.hpp"
#include "primcache/tensor/format_tag.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache {

// A device: the CPU, or GPU number N ("cpu", "gpu:N").
struct PRIMCACHE_API place {
  engine_kind kind = engine_kind::cpu;
  std::size_t index = 0;

  static place cpu() noexcept { return {engine_kind::cpu, 0}; }
  static place gpu(std::size_t n) noexcept { return {engine_kind::gpu, n}; }
  static place of(const engine& eng) noexcept { return {eng.get_kind(), eng.get_index()}; }
  bool is_cpu() const noexcept { return kind == engine_kind::cpu; }
  // The engine for this place (throws as engine's constructor does when no
  // backend serves it).
  engine get_engine() const { return engine(kind, index); }

  std::string to_string() const;
  static place parse(std::string_view text);
  friend bool operator==(const place&, const place&) = default;
};

// A layout: a canonical format tag, or the strides of a plain layout.
class PRIMCACHE_API layout {
 public:
  layout() = default;               // format_tag::undef: no layout
  layout(format_tag tag) noexcept;  // NOLINT: a tag is a layout
  // 1 to max_ndims strides, none negative (invalid_arguments otherwise).
  static layout strided(std::vector<std::int64_t> strides);
  // The layout of a resolved descriptor: the canonical tag it matches
  // (trying the plain tags first), else its strides when it is plain.
  static layout of(const memory_desc& md);

  bool is_tag() const noexcept { return strides_.empty(); }
  // Dimensions the layout lays out (0 for undef and any).
  int ndims() const noexcept;
  format_tag tag() const noexcept { return tag_; }
  const std::vector<std::int64_t>& strides() const noexcept { return strides_; }

  // A descriptor of `dims` and `dt` in this layout.
  memory_desc desc_for(dims_view dims, data_type dt) const;

  // The tag's canonical name, or "s<stride>,<stride>,..."; parse inverts it.
  std::string to_string() const;
  static layout parse(std::string_view text);
  friend bool operator==(const layout&, const layout&) = default;

 private:
  format_tag tag_ = format_tag::undef;
  std::vector<std::int64_t> strides_;
};

// The library whose kernels read the data: "jit", "generic", "reference" or
// any other non-empty name a user gives without '/' (the separator of a
// kernel type's text).
struct PRIMCACHE_API library {
  std::string name;

  static library jit() { return {"jit"}; }
  static library generic() { return {"generic"}; }
  static library reference() { return {"reference"}; }
  const std::string& to_string() const noexcept { return name; }
  // Empty when the name prints and parses back (non-empty, no '/'), else
  // why not.
  std::string problem() const;
  friend bool operator==(const library&, const library&) = default;
};

struct PRIMCACHE_API kernel_type {
  primcache::place place;
  primcache::data_type data_type = primcache::data_type::undef;
  primcache::layout layout;
  primcache::library library;
  // Quantization scale of integer data (see above); 1 for every other type.
  float scale = 1.f;

  // The kernel type of the data `mem` holds, read by `lib`'s kernels (scale 1).
  static kernel_type of(const memory& mem, primcache::library lib);
  // "<place>/<data type>[*<scale>]/<layout>/<library>":
  // "gpu:1/bf16/aBcd16b/jit", "cpu/u8*0.5/acdb/jit".
  std::string to_string() const;
  // Empty when the scale fits the data type (finite, positive, and 1 unless
  // the type is an integer one), else why not.
  std::string scale_problem() const;
  static kernel_type parse(std::string_view text);
  std::size_t hash() const noexcept;
  friend bool operator==(const kernel_type&, const kernel_type&) = default;
};

}  // namespace primcache

template <>
struct std::hash<primcache::kernel_type> {
  std::size_t operator()(const primcache::kernel_type& t) const noexcept { return t.hash(); }
};
