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
// Configurations: an implementation whose code has a configuration
// (kernel_config.hpp) returns its heuristic's from default_config() and
// checks others in validate_config(); finalize() chooses the one the code
// is built with — the registry's config source's (a tune table) when it
// gives one this descriptor validates, else the heuristic's — and writes it
// into the key. problem_key() is the key without it (what tune tables are
// indexed by). Implementations without configurations change nothing.
//
// Blobs: primitive_impl::serialize() writes an impl as an impl_blob (magic,
// format version, implementation name, key, ISA, configuration, object
// code, nested impls' blobs, checksum); create_impl_from_blob() checks every
// part against this descriptor and hands the rest to load_impl(), which
// rebuilds the impl without compiling.
//
// Thread-safety: primitive_impl::execute is const and must be safe to call
// from many threads at once (each call gets its own scratchpad).
// Exceptions: create_impl and execute report failures by throwing
// primcache::error; the runtime passes them on to the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cache/lookup_result.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/args.h"
#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/stream.hpp"

namespace primcache::backend {

class primitive_impl;

// A serialized primitive impl. The bytes (encode) are, little-endian:
//   "PCIMPL\0\0"  magic (8 bytes)
//   u32           format version (format_version)
//   str           the library that made it: "VERSION+BUILD IDENTITY" (this_library())
//   str           implementation name            (u32 length, bytes)
//   bytes         primitive key                  (u64 length, bytes)
//   i32           ISA the object was built for (CPU: cpu_isa), -1 for none
//   u8, config    whether a configuration follows; u32 count, (str, i64)*
//   bytes         object code                    (u64 length, bytes)
//   u32, bytes*   nested impls' blobs            (each u64 length, bytes)
//   16 bytes      XXH3-128 of everything before it
// decode() refuses (corrupt_data) anything else: wrong magic, a truncated
// or altered byte, trailing bytes; (unimplemented) another format version;
// (invalid_arguments) a blob another library version or build made: object
// code and configurations are valid only for the code generators that made
// them, so a blob loads only in the build that made it.
struct PRIMCACHE_API impl_blob {
  static constexpr std::uint32_t format_version = 2;
  // "VERSION+BUILD IDENTITY" of this library (version()).
  static std::string this_library();
  std::string producer = this_library();
  std::string name;
  std::vector<std::byte> key_bytes;
  std::int32_t isa = -1;
  std::optional<kernel_config> config;
  std::vector<std::byte> object;
  std::vector<std::vector<std::uint8_t>> nested;

  std::vector<std::uint8_t> encode() const;
  static result<impl_blob> decode(std::span<const std::uint8_t> bytes);
};

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
  // Compiles the primitive (with config(), if any). Called at most once per
  // cache miss.
  virtual std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const = 0;

  // ---- configurations ----
  // The heuristic's configuration; nullopt (the default): the code of this
  // implementation has no configuration.
  virtual std::optional<kernel_config> default_config() const { return std::nullopt; }
  // The candidates a tuner may measure; empty by default.
  virtual config_space config_candidates() const { return {}; }
  // Whether this descriptor can build its code with `cfg` (no compilation):
  // invalid_arguments naming the reason when not. Default: unimplemented
  // (no configurations).
  virtual result<bool> validate_config(const kernel_config& cfg) const;
  // Compiles the primitive with `cfg` instead of config(), for measuring a
  // candidate: such an impl is never cached (its pd() names the chosen
  // configuration). Throws primcache::error for a configuration that does
  // not validate. Default: unimplemented. (Not an overload of create_impl:
  // backends overriding one would hide the other.)
  virtual std::shared_ptr<const primitive_impl> create_impl_with(const engine& eng,
                                                                 const kernel_config& cfg) const;
  // The configuration the code is built with, chosen by finalize(); nullopt
  // for implementations without configurations.
  const std::optional<kernel_config>& config() const noexcept { return config_; }

  // ---- blobs ----
  // The impl from a blob primitive_impl::serialize() wrote, without
  // compiling. Checks the blob (decode), that it names this implementation,
  // this descriptor's key and configuration, then calls load_impl. Throws
  // primcache::error: corrupt_data for damaged bytes, invalid_arguments for
  // a blob of another descriptor, what load_impl throws. Of other
  // exceptions from load_impl, std::bad_alloc passes; a std::logic_error
  // (std::length_error: a size from the blob) becomes corrupt_data, any
  // other std::exception runtime_error.
  std::shared_ptr<const primitive_impl> create_impl_from_blob(
      const engine& eng, std::span<const std::uint8_t> bytes) const;

  // The primitive key (DESIGN.md step 3), configuration included. Valid
  // after finalize().
  const key& cache_key() const noexcept { return key_; }
  // The key without the configuration: what a tune table is indexed by
  // (descriptor and device). Equal to cache_key() for implementations
  // without configurations. Valid after finalize().
  const key& problem_key() const noexcept { return problem_key_; }
  // Computes the keys: kind, op (resolved), attributes, implementation
  // name, thread count, engine kind and identity (problem_key), then
  // chooses the configuration and appends it (cache_key). Factories call it
  // last, on a fully built descriptor (it calls default_config and
  // validate_config).
  void finalize(const engine_impl& eng, int nthr);
  // finalize() with `cfg` as the configuration instead of the config
  // source's, the tune table's or the heuristic's: for a composing
  // implementation whose configuration is its nested primitive's (the key
  // carries `cfg`, so the nested impl is cached under it like any other).
  // Throws primcache::error (invalid_arguments) when this descriptor has no
  // configurations or does not validate `cfg`.
  void finalize_with_config(const engine_impl& eng, int nthr, const kernel_config& cfg);
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

 protected:
  // The impl from a blob that create_impl_from_blob checked (name, key and
  // configuration match this descriptor). Loads the object code without
  // compiling and checks what only the backend knows (the ISA). Default:
  // unimplemented.
  virtual std::shared_ptr<const primitive_impl> load_impl(const engine& eng,
                                                          const impl_blob& blob) const;

 private:
  // finalize()'s work; `forced`, when given, is the configuration.
  void finalize_keys(const engine_impl& eng, int nthr, const kernel_config* forced);

  primitive_kind kind_;
  primitive_attr attr_;
  const char* name_;
  int nthr_ = 1;
  key key_;
  key problem_key_;
  std::optional<kernel_config> config_;
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
  // The configuration the code was built with; defaults to the
  // descriptor's.
  virtual std::optional<kernel_config> config() const { return pd().config(); }
  // This impl as impl_blob bytes that pd().create_impl_from_blob() turns
  // back into an equal impl without compiling. Default: throws
  // primcache::error (unimplemented: not serializable).
  virtual std::vector<std::uint8_t> serialize() const;

  // ---- tiered creation (jit_mode.hpp) ----
  // Whether the impl (and every nested impl) runs its specialized code. An
  // impl created in tiered mode runs shape-generic code until a background
  // compilation installs the specialized code; the default (and every impl
  // compiled synchronously or loaded from a blob) is specialized from the
  // start. Executions already running when the code is swapped finish on
  // the code they started with; results are bit-identical either way.
  virtual bool specialized() const;
  // Whether the impl was created with generic code (tiered), whether or not
  // the specialized code has arrived since. Default: false.
  virtual bool created_tiered() const { return false; }
  // Returns once specialized() holds or the specialized code can never come
  // (its compilation failed: the generic code stays). A compilation still
  // queued runs on the caller's thread. The default waits for the nested
  // impls. Exceptions: none.
  virtual void wait_until_specialized() const;

 private:
  std::shared_ptr<const primitive_desc_impl> pd_;
};

// Gets the impl for `pd` from the global primitive cache, creating it (and
// recording a nested creation for verbose output) on a miss. For
// implementations composing nested primitives.
PRIMCACHE_API lookup_result<std::shared_ptr<const primitive_impl>> create_nested_impl(
    const primitive_desc_impl& pd, const engine& eng);
// The same, but a miss loads the impl from `blob` (create_impl_from_blob)
// instead of compiling; a hit ignores the blob. For load_impl of composing
// implementations.
PRIMCACHE_API lookup_result<std::shared_ptr<const primitive_impl>> create_nested_impl(
    const primitive_desc_impl& pd, const engine& eng, std::span<const std::uint8_t> blob);

}  // namespace primcache::backend
