// primcache/runtime/backend/primitive_impl.hpp — the interface between the
// runtime and a backend's implementations of a primitive.
//
// Three objects, as the design lays out:
// - primitive_desc_impl: the engine-independent result of accepting an op
//   descriptor — resolved memory descriptors, the attributes, the
//   implementation's stable name, the scratchpad size and the primitive key.
//   Immutable once made; shared by every primitive_desc handle and by the
//   primitive_impl made from it.
// - primitive_impl: the compiled primitive — kernel code, chosen config,
//   nested impls. Immutable and engine-independent, so the global primitive
//   cache shares one among every primitive with the same key. Holds no
//   scratchpad and no engine pointer.
// - resource: per-engine state of an impl (realized device kernels,
//   constant buffers), owned by the user-facing primitive through its
//   resource_mapper.
//
// Creation: primitive_desc_impl::create_impl runs on a cache miss, with no
// runtime lock held; it may create nested impls through
// create_nested_impl(), which goes through the same global cache.
//
// Thread-safety: primitive_impl::execute is const and must be safe to call
// from many threads at once (each call gets its own scratchpad).
// Exceptions: create_impl and execute report failures by throwing
// primcache::error; the runtime passes them on to the caller.
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/cache/lookup_result.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/args.h"
#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/stream.hpp"

namespace primcache::backend {

class primitive_impl;

class PRIMCACHE_API primitive_desc_impl : public std::enable_shared_from_this<primitive_desc_impl> {
 public:
  primitive_desc_impl(primitive_kind kind, primitive_attr attr, const char* impl_name)
      : kind_(kind), attr_(std::move(attr)), name_(impl_name) {}
  virtual ~primitive_desc_impl();

  primitive_kind kind() const noexcept { return kind_; }
  const primitive_attr& attr() const noexcept { return attr_; }
  // The implementation's stable registered name ("jit:avx512_core", "ref").
  const char* name() const noexcept { return name_; }
  // The resolved descriptor of an execution argument (PRIMCACHE_ARG_*), or
  // an empty descriptor when the primitive takes no such argument.
  virtual memory_desc arg_md(int arg) const = 0;
  // Scratch bytes one execution needs, nested primitives included.
  virtual std::size_t scratchpad_bytes() const { return 0; }
  // The op descriptor part of the key, in resolved form (no tags, no any).
  virtual void write_op_key(key_writer& w) const = 0;
  // Compiles the primitive. Called at most once per cache miss.
  virtual std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const = 0;

  // The primitive key (DESIGN.md step 3). Valid after finalize().
  const key& cache_key() const noexcept { return key_; }
  // Computes the key: kind, op (resolved), attributes, implementation name,
  // thread count, engine kind and identity. Factories call it last.
  void finalize(const engine_impl& eng, int nthr);
  int nthr() const noexcept { return nthr_; }

  // One argument execute() requires: its index (PRIMCACHE_ARG_*), its
  // descriptor, and which engine its memory must be on. Computed once by
  // finalize(), so checking a primitive's arguments allocates nothing.
  struct required_arg {
    enum class on { primitive_engine, src_engine, dst_engine };
    int index;
    memory_desc md;
    on engine;
    int post_op;  // the binary post-op whose operand it is, else -1
  };
  const std::vector<required_arg>& required_args() const noexcept { return required_; }

 private:
  primitive_kind kind_;
  primitive_attr attr_;
  const char* name_;
  int nthr_ = 1;
  key key_;
  std::vector<required_arg> required_;
};

// Per-engine state of one primitive_impl.
class PRIMCACHE_API resource {
 public:
  virtual ~resource();
};

// Maps each impl of a primitive (outer and nested) to its resource. Owned by
// one user-facing primitive; read-only during execution.
class PRIMCACHE_API resource_mapper {
 public:
  bool has(const primitive_impl* impl) const { return map_.count(impl) != 0; }
  void add(const primitive_impl* impl, std::unique_ptr<resource> r) {
    map_.emplace(impl, std::move(r));
  }
  template <typename T>
  const T* get(const primitive_impl* impl) const {
    auto it = map_.find(impl);
    return it == map_.end() ? nullptr : static_cast<const T*>(it->second.get());
  }

 private:
  std::unordered_map<const primitive_impl*, std::unique_ptr<resource>> map_;
};

// One execution: the arguments, the resources and the scratchpad.
struct PRIMCACHE_API exec_ctx {
  const stream* strm = nullptr;
  const std::unordered_map<int, memory>* args = nullptr;
  const resource_mapper* resources = nullptr;
  void* scratchpad = nullptr;  // scratchpad_bytes() bytes, 64-byte aligned
  // The attributes of the primitive being executed, or nullptr in a nested
  // execution. Values a kernel takes at run time (output scales) are read
  // through run_time_attr(), never from the impl's own descriptor alone: the
  // impl is shared by every primitive with its key, and such values are not
  // part of the key. (A composing impl whose nested primitive takes run-time
  // values passes them in the nested context.)
  const primitive_attr* attr = nullptr;
  const primitive_attr& run_time_attr(const primitive_desc_impl& own) const;

  // The host buffer of argument `arg`, or nullptr if it was not passed (or
  // lives on a device: device kernels use arg_storage).
  void* arg_ptr(int arg) const;
  // The backend storage of argument `arg`, or nullptr if it was not passed.
  const memory_storage* arg_storage(int arg) const;
  const memory* arg(int arg) const;
  // The same arguments renamed for a nested primitive, with a part of the
  // scratchpad. Used by implementations that compose nested primitives.
  exec_ctx nested(const std::unordered_map<int, memory>* nested_args, void* nested_scratch,
                  const primitive_attr* nested_attr = nullptr) const {
    return exec_ctx{strm, nested_args, resources, nested_scratch, nested_attr};
  }
};

class PRIMCACHE_API primitive_impl {
 public:
  explicit primitive_impl(std::shared_ptr<const primitive_desc_impl> pd) : pd_(std::move(pd)) {}
  virtual ~primitive_impl();

  const primitive_desc_impl& pd() const noexcept { return *pd_; }
  // Makes this impl's per-engine resource (and its nested impls') in
  // `mapper`. The default needs none.
  virtual void create_resource(const engine& eng, resource_mapper& mapper) const;
  virtual void execute(const exec_ctx& ctx) const = 0;
  virtual std::vector<const primitive_impl*> nested() const { return {}; }
  // Scratch bytes one execution needs (nested impls included); known
  // exactly once the code exists. Defaults to the descriptor's estimate.
  virtual std::size_t scratchpad_bytes() const { return pd().scratchpad_bytes(); }

 private:
  std::shared_ptr<const primitive_desc_impl> pd_;
};

// Gets the impl for `pd` from the global primitive cache, creating it (and
// recording a nested creation for verbose output) on a miss. For
// implementations composing nested primitives.
PRIMCACHE_API lookup_result<std::shared_ptr<const primitive_impl>> create_nested_impl(
    const primitive_desc_impl& pd, const engine& eng);

}  // namespace primcache::backend
