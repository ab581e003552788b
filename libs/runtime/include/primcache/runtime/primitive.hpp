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
// invalid_arguments for malformed descriptors or execution arguments that do
// not match the primitive descriptor, unimplemented
// when no implementation accepts the op, runtime_error when code generation
// fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/cache/lookup_result.hpp"
#include "primcache/runtime/args.h"
#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/stream.hpp"

namespace primcache {

class primitive;
class primitive_desc;

namespace backend {
class primitive_desc_impl;
class primitive_impl;
// primitive::execute without the argument checks, for backends that compose
// primitives whose arguments they have already checked, and for the
// benchmark that measures what the checks cost (BM_Execute/unchecked).
PRIMCACHE_API void execute_unchecked(const primitive& prim, const stream& strm,
                                     const std::unordered_map<int, memory>& arguments);
// A user-facing primitive descriptor for a descriptor a backend accepted
// itself (outside the op constructors), on `eng`.
PRIMCACHE_API primitive_desc make_primitive_desc(std::shared_ptr<const primitive_desc_impl> impl,
                                                 engine eng);
// The backend's descriptor behind a primitive descriptor (throws
// primcache::error for an empty one).
PRIMCACHE_API const primitive_desc_impl& impl_of(const primitive_desc& pd);
PRIMCACHE_API const std::shared_ptr<const primitive_desc_impl>& impl_ptr_of(
    const primitive_desc& pd) noexcept;
}  // namespace backend

class PRIMCACHE_API primitive_desc {
 public:
  primitive_desc() = default;

  // Resolved descriptors of the arguments; empty when there is none.
  memory::desc query_md(int arg) const;
  memory::desc src_desc() const { return query_md(PRIMCACHE_ARG_SRC); }
  memory::desc weights_desc() const { return query_md(PRIMCACHE_ARG_WEIGHTS); }
  memory::desc bias_desc() const { return query_md(PRIMCACHE_ARG_BIAS); }
  memory::desc dst_desc() const { return query_md(PRIMCACHE_ARG_DST); }
  // The chosen implementation's registered name.
  std::string impl_info_str() const;
  std::size_t scratchpad_size() const;
  // The name of this primitive's code outside the process: the primitive key
  // (descriptor, attributes, implementation, configuration, thread count,
  // device) with the library version and build identity. Equal ids in two
  // processes mean interchangeable blobs (primitive::cache_blob()); stable
  // across runs of one build.
  std::vector<std::uint8_t> cache_blob_id() const;
  // The engine the primitive runs on.
  const engine& get_engine() const;
  // The engines of the source and destination memory: a reorder's own, the
  // primitive's engine for every other primitive.
  const engine& get_src_engine() const;
  const engine& get_dst_engine() const;

  explicit operator bool() const noexcept { return impl_ != nullptr; }

 protected:
  // The op descriptors' constructors make theirs from what the backend
  // registry accepted.
  primitive_desc(std::shared_ptr<const backend::primitive_desc_impl> impl, engine eng);
  // A reorder's: it runs on `eng` and reads from `src_engine`'s memory into
  // `dst_engine`'s.
  primitive_desc(std::shared_ptr<const backend::primitive_desc_impl> impl, engine eng,
                 engine src_engine, engine dst_engine);

 private:
  friend primitive_desc backend::make_primitive_desc(
      std::shared_ptr<const backend::primitive_desc_impl>, engine);
  friend const backend::primitive_desc_impl& backend::impl_of(const primitive_desc&);
  friend const std::shared_ptr<const backend::primitive_desc_impl>& backend::impl_ptr_of(
      const primitive_desc&) noexcept;
  std::shared_ptr<const backend::primitive_desc_impl> impl_;
  std::optional<engine> engine_;
  std::optional<engine> src_engine_;  // a reorder's; empty: engine_
  std::optional<engine> dst_engine_;
};

class PRIMCACHE_API primitive {
 public:
  using args = std::unordered_map<int, memory>;

  primitive() = default;
  explicit primitive(const primitive_desc& pd);
  // The primitive from a blob cache_blob() gave (here or in another process
  // of the same build, on a host that runs its code), through the global
  // primitive cache: a hit ignores the blob; a miss loads the code from it
  // without compiling. A blob that is damaged (corrupt_data), of another
  // format version or an ISA above this process's cap (unimplemented), or
  // of another descriptor (invalid_arguments) throws primcache::error and
  // loads nothing.
  primitive(const primitive_desc& pd, const std::vector<std::uint8_t>& cache_blob);

  // Runs the primitive. Every argument the primitive descriptor names (src,
  // weights, bias, dst, each binary post-op's operand) must be passed, with
  // exactly the descriptor the primitive descriptor reports for it
  // (query_md), on the engine it expects, with a buffer; the stream must be
  // of the primitive's engine. Anything else is an error(invalid_arguments)
  // naming the argument, thrown before any data is touched. Arguments the
  // primitive does not take are ignored.
  void execute(const stream& strm, const args& arguments) const;
  const primitive_desc& get_primitive_desc() const;
  // How creation went: hit (taken from the cache), miss (compiled by this
  // call) or waited (compiled by a concurrent creation of the same key).
  lookup_outcome creation_outcome() const;
  // The primitive's code as a versioned blob (magic, format, implementation,
  // key, ISA, configuration, object code, nested primitives' blobs,
  // checksum), to keep under primitive_desc::cache_blob_id(). Throws
  // primcache::error (unimplemented) for an implementation that cannot be
  // serialized.
  std::vector<std::uint8_t> cache_blob() const;
  // Tiered creation (jit_mode.hpp): whether the primitive runs its
  // specialized code yet, and a wait until it does. wait_until_specialized
  // returns at once for a primitive compiled synchronously or loaded from a
  // blob; for one created in tiered mode it returns when the background
  // compilation has installed the specialized code (running a compilation
  // still queued on the caller's thread), or when that compilation failed
  // (the generic code then stays). Benchmarks of kernel speed call it.
  bool specialized() const;
  void wait_until_specialized() const;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  primitive(const primitive_desc& pd, const std::span<const std::uint8_t>* blob);
  friend void backend::execute_unchecked(const primitive&, const stream&, const args&);
  struct state;
  std::shared_ptr<const state> state_;
};

}  // namespace primcache
