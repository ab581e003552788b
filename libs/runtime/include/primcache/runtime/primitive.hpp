// primcache/runtime/primitive.hpp — primitive descriptors and primitives.
//
// A primitive_desc is the accepted form of an op descriptor on an engine:
// an implementation was chosen, `any` layouts were resolved, and the
// primitive key was computed. A primitive is made from it through the global
// primitive cache: creating the same primitive again (same key) costs a
// cache lookup, not a compilation.
//
//   primcache::matmul::primitive_desc pd(desc, attr, eng);
//   primcache::memory::desc wmd = pd.weights_desc();   // resolved layout
//   primcache::matmul prim(pd);                         // cached
//   prim.execute(strm, {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b},
//                       {PRIMCACHE_ARG_DST, c}});
//
// Thread-safety: primitive descriptors and primitives are immutable handles;
// execute() may be called on one primitive from many threads at once (each
// call uses its own scratchpad). Exceptions: primcache::error —
// invalid_arguments for malformed descriptors or arguments, unimplemented
// when no implementation accepts the op, runtime_error when code generation
// fails.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "primcache/base/export.hpp"
#include "primcache/cache/lookup_result.hpp"
#include "primcache/runtime/args.h"
#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/stream.hpp"

namespace primcache {

namespace runtime_internal {
class primitive_desc_impl;
class primitive_impl;
}  // namespace runtime_internal

class PRIMCACHE_API primitive_desc {
 public:
  primitive_desc() = default;
  primitive_desc(std::shared_ptr<const runtime_internal::primitive_desc_impl> impl, engine eng);

  // Resolved descriptors of the arguments; empty when there is none.
  memory::desc query_md(int arg) const;
  memory::desc src_desc() const { return query_md(PRIMCACHE_ARG_SRC); }
  memory::desc weights_desc() const { return query_md(PRIMCACHE_ARG_WEIGHTS); }
  memory::desc bias_desc() const { return query_md(PRIMCACHE_ARG_BIAS); }
  memory::desc dst_desc() const { return query_md(PRIMCACHE_ARG_DST); }
  // The chosen implementation's registered name.
  std::string impl_info_str() const;
  std::size_t scratchpad_size() const;
  const engine& get_engine() const;

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  const runtime_internal::primitive_desc_impl& impl() const;
  const std::shared_ptr<const runtime_internal::primitive_desc_impl>& impl_ptr() const noexcept {
    return impl_;
  }

 private:
  std::shared_ptr<const runtime_internal::primitive_desc_impl> impl_;
  std::optional<engine> engine_;
};

class PRIMCACHE_API primitive {
 public:
  using args = std::unordered_map<int, memory>;

  primitive() = default;
  explicit primitive(const primitive_desc& pd);

  void execute(const stream& strm, const args& arguments) const;
  const primitive_desc& get_primitive_desc() const;
  // How creation went: hit (taken from the cache), miss (compiled by this
  // call) or waited (compiled by a concurrent creation of the same key).
  lookup_outcome creation_outcome() const;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  struct state;
  std::shared_ptr<const state> state_;
};

}  // namespace primcache
