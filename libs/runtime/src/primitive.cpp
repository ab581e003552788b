#include "primcache/runtime/primitive.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "persistent_cache_internal.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/version.hpp"
#include "primitive_cache_internal.hpp"
#include "tuning_internal.hpp"

namespace primcache {
namespace backend {
using namespace runtime_internal;

primitive_desc_impl::~primitive_desc_impl() = default;
resource::~resource() = default;
primitive_impl::~primitive_impl() = default;

void primitive_desc_impl::finalize(const engine_impl& eng, int nthr) {
  finalize_keys(eng, nthr, nullptr);
}

void primitive_desc_impl::finalize_with_config(const engine_impl& eng, int nthr,
                                               const kernel_config& cfg) {
  if (!default_config()) {
    throw error(status::invalid_arguments,
                std::string(name_) + " has no kernel configurations to be given one");
  }
  if (auto ok = validate_config(cfg); !ok) {
    throw error(status::invalid_arguments,
                std::string(name_) + " cannot take the configuration given: " + ok.why().message);
  }
  finalize_keys(eng, nthr, &cfg);
}

void primitive_desc_impl::finalize_keys(const engine_impl& eng, int nthr,
                                        const kernel_config* forced) {
  nthr_ = nthr;
  key_writer w;
  w.enumeration(kind_);
  write_op_key(w);
  attr_.write_key(w);
  w.str(name_);
  w.i32(nthr);
  w.enumeration(eng.kind());
  eng.write_identity(w);
  problem_key_ = w.finish();
  // The configuration is chosen on the complete problem key (what a tune
  // table is indexed by) and appended after it.
  config_ = default_config();
  if (config_) {
    if (forced != nullptr) {
      config_ = *forced;
    } else if (auto chosen = config_from_source(*this)) {
      config_ = std::move(chosen);
    } else if (auto tuned = runtime_internal::tuned_config(*this, eng)) {
      config_ = std::move(tuned);  // the tune table's winner (tuning.cpp)
    }
    w.raw(problem_key_.bytes());
    w.str("config");
    config_->write_key(w);
    key_ = w.finish();
  } else {
    key_ = problem_key_;
  }

  required_.clear();
  auto add = [&](int index, required_arg::on engine) {
    memory_desc md = arg_md(index);
    if (!md.is_zero()) required_.push_back({index, std::move(md), engine, -1});
  };
  add(PRIMCACHE_ARG_SRC, required_arg::on::src_engine);
  add(PRIMCACHE_ARG_WEIGHTS, required_arg::on::primitive_engine);
  add(PRIMCACHE_ARG_BIAS, required_arg::on::primitive_engine);
  add(PRIMCACHE_ARG_DST, required_arg::on::dst_engine);
  const auto& ops = attr_.get_post_ops().entries();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind != post_ops::kind::binary) continue;
    const int index =
        PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | PRIMCACHE_ARG_SRC_1;
    required_.push_back(
        {index, ops[i].src1, required_arg::on::primitive_engine, static_cast<int>(i)});
  }
}

result<bool> primitive_desc_impl::validate_config(const kernel_config&) const {
  return failure{status::unimplemented,
                 std::string(name_) + " has no kernel configurations to choose from"};
}

std::shared_ptr<const primitive_impl> primitive_desc_impl::create_impl_with(
    const engine&, const kernel_config&) const {
  throw error(status::unimplemented,
              std::string(name_) + " has no kernel configurations to build with");
}

std::shared_ptr<const primitive_impl> primitive_desc_impl::load_impl(const engine&,
                                                                     const impl_blob&) const {
  throw error(status::unimplemented,
              std::string(name_) + " cannot be created from a blob (it is not serializable)");
}

std::vector<std::uint8_t> primitive_impl::serialize() const {
  throw error(status::unimplemented,
              std::string(pd().name()) + " cannot be serialized into a blob");
}

std::shared_ptr<const primitive_impl> primitive_desc_impl::create_impl_from_blob(
    const engine& eng, std::span<const std::uint8_t> bytes) const {
  const std::string who = std::string(to_string(kind_)) + " (" + name_ + ")";
  auto decoded = impl_blob::decode(bytes);
  if (!decoded) throw error(decoded.why().code, who + ": " + decoded.why().message);
  const impl_blob& blob = decoded.value();
  if (blob.name != name_) {
    throw error(status::invalid_arguments, who + ": the blob holds an implementation '" +
                                               blob.name + "', not '" + name_ + "'");
  }
  if (blob.config != config_) {
    throw error(status::invalid_arguments,
                who + ": the blob's configuration " +
                    (blob.config ? blob.config->to_json() : std::string("(none)")) +
                    " is not this descriptor's " +
                    (config_ ? config_->to_json() : std::string("(none)")));
  }
  const auto k = key_.bytes();
  if (!std::equal(k.begin(), k.end(), blob.key_bytes.begin(), blob.key_bytes.end())) {
    throw error(status::invalid_arguments,
                who + ": the blob was made for another primitive descriptor (its key differs)");
  }
  // A backend's loader reports failures as primcache::error; anything else
  // it lets escape becomes one here, so that callers (the persistent cache
  // deciding whether to erase an entry, a user loading a blob) see a status.
  try {
    return load_impl(eng, blob);
  } catch (const error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::logic_error& e) {
    // std::length_error, std::out_of_range: a size or an index the blob's
    // bytes gave, which the standard library refused.
    throw error(status::corrupt_data, who + ": " + e.what());
  } catch (const std::exception& e) {
    throw error(status::runtime_error, who + ": " + e.what());
  }
}

bool primitive_impl::specialized() const {
  for (const primitive_impl* n : nested()) {
    if (!n->specialized()) return false;
  }
  return true;
}

void primitive_impl::wait_until_specialized() const {
  for (const primitive_impl* n : nested()) n->wait_until_specialized();
}

void primitive_impl::create_resource(const engine& eng, resource_mapper& mapper) const {
  for (const primitive_impl* n : nested()) n->create_resource(eng, mapper);
}

const primitive_attr& exec_ctx::run_time_attr(const primitive_desc_impl& own) const {
  return attr != nullptr ? *attr : own.attr();
}

const memory* exec_ctx::arg(int index) const {
  if (args == nullptr) return nullptr;
  auto it = args->find(index);
  return it == args->end() || !it->second ? nullptr : &it->second;
}

const memory_storage* exec_ctx::arg_storage(int index) const {
  const memory* m = arg(index);
  return m == nullptr ? nullptr : storage_of(*m);
}

void* exec_ctx::arg_ptr(int index) const {
  const memory_storage* s = arg_storage(index);
  return s == nullptr ? nullptr : s->host_ptr();
}

namespace {

// How deep in nested creation this thread is: verbose lines of nested
// creations say nested_cache_hit / nested_cache_miss.
// initial-exec: the runtime is linked, not dlopened, so its TLS is static
// and reads need no __tls_get_addr call.
__attribute__((tls_model("initial-exec"))) thread_local int tl_creation_depth = 0;
// Counts this thread's creations; one in kMemorySampleEvery is timed for
// primcache_primitive_create_seconds{source="memory"}.
__attribute__((tls_model("initial-exec"))) thread_local unsigned tl_creation_count = 0;

// The keys this thread is creating right now, innermost last. A creator
// that asks the cache for a key it is itself creating would wait on its own
// future forever; that is refused instead. (Only nested creations look.)
__attribute__((tls_model("initial-exec"))) thread_local std::vector<const key*>* tl_creating =
    nullptr;

struct creation_frame {
  explicit creation_frame(const key& k) {
    static thread_local std::vector<const key*> stack;
    tl_creating = &stack;
    stack.push_back(&k);
  }
  ~creation_frame() { tl_creating->pop_back(); }
  creation_frame(const creation_frame&) = delete;
  creation_frame& operator=(const creation_frame&) = delete;
};

void refuse_own_key(const primitive_desc_impl& pd) {
  if (tl_creating == nullptr) return;
  for (const key* k : *tl_creating) {
    if (*k == pd.cache_key()) {
      throw error(status::runtime_error,
                  "creating a " + std::string(to_string(pd.kind())) + " (" + pd.name() +
                      ") asked the primitive cache for the key it is itself creating: a "
                      "primitive cannot nest itself (this would wait forever)");
    }
  }
}

std::string describe(const primitive_desc_impl& pd) {
  std::string s;
  static constexpr std::pair<int, const char*> kArgs[] = {{PRIMCACHE_ARG_SRC, "src"},
                                                          {PRIMCACHE_ARG_WEIGHTS, "wei"},
                                                          {PRIMCACHE_ARG_BIAS, "bia"},
                                                          {PRIMCACHE_ARG_DST, "dst"}};
  for (auto [arg, name] : kArgs) {
    memory_desc md = pd.arg_md(arg);
    if (md.is_zero()) continue;
    s.append(s.empty() ? "" : " ").append(name).append(":").append(md.to_string());
  }
  return s;
}

lookup_result<std::shared_ptr<const primitive_impl>> get_or_create(
    const primitive_desc_impl& pd, const engine& eng,
    const std::span<const std::uint8_t>* blob = nullptr) {
  const bool verbose = verbose_level() >= 1;
  const bool sampled = ++tl_creation_count % runtime_metrics::kMemorySampleEvery == 0;
  const auto start = verbose || sampled ? std::chrono::steady_clock::now()
                                        : std::chrono::steady_clock::time_point{};
  const bool nested = tl_creation_depth > 0;
  ++tl_creation_depth;
  struct depth_guard {
    ~depth_guard() { --tl_creation_depth; }
  } guard;
  if (nested) refuse_own_key(pd);
  // Building a tuning candidate: its nested impls live in the tuning's
  // private cache, never in the global (or persistent) one.
  if (auto* priv = runtime_internal::tuning_private_cache()) {
    if (auto it = priv->find(pd.cache_key()); it != priv->end()) {
      return {it->second, lookup_outcome::hit};
    }
    const creation_frame frame(pd.cache_key());
    auto made = blob ? pd.create_impl_from_blob(eng, *blob) : pd.create_impl(eng);
    priv->emplace(pd.cache_key(), made);
    return {std::move(made), lookup_outcome::miss};
  }
  persistent_outcome persistent = persistent_outcome::none;
  auto r = global_primitive_cache().get_or_add(pd.cache_key(), [&] {
    const creation_frame frame(pd.cache_key());
    // Timed here, on the miss path only: a hit reads no clock.
    const auto compile_start = std::chrono::steady_clock::now();
    // Without a blob: the persistent cache's, else a compilation.
    auto impl = blob ? pd.create_impl_from_blob(eng, *blob) : [&] {
      auto made = create_through_persistent_cache(pd, eng);
      persistent = made.outcome;
      return std::move(made.impl);
    }();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - compile_start).count();
    const bool from_store = persistent == persistent_outcome::hit;
    // A tiered creation compiled nothing (its compilation runs in the
    // background): it is not a sample of source="compile".
    const bool tiered = impl && impl->created_tiered();
    if (from_store) {
      metrics().from_persistent(eng.get_kind()).observe(seconds);
    } else if (!blob && !tiered) {
      metrics().create(eng.get_kind()).observe(seconds);
    }
    control().record_event({.kind = nested ? "create_nested" : "create",
                            .name = std::string(to_string(pd.kind())),
                            .source = blob         ? "blob"
                                      : from_store ? "persistent"
                                      : tiered     ? "tiered"
                                                   : "compile",
                            .duration_ms = seconds * 1e3,
                            .detail = std::string(pd.name()) + " " + describe(pd)});
    return impl;
  });
  if (sampled && r.outcome != lookup_outcome::miss) {
    metrics()
        .from_memory(eng.get_kind())
        .observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (verbose) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::string outcome = r.outcome == lookup_outcome::hit      ? "cache_hit"
                          : r.outcome == lookup_outcome::waited ? "cache_wait"
                                                                : "cache_miss";
    if (r.outcome == lookup_outcome::miss && persistent != persistent_outcome::none) {
      outcome =
          persistent == persistent_outcome::hit ? "persistent_cache_hit" : "persistent_cache_miss";
    }
    // Created in tiered mode: generic code now, the specialized code later
    // (the backend prints a "specialized" line when it is installed). Lines
    // of a persistent cache's misses keep their form (tools count them).
    if (r.outcome == lookup_outcome::miss && persistent == persistent_outcome::none && r.value &&
        r.value->created_tiered()) {
      outcome += ":tiered";
    }
    if (nested) outcome = "nested_" + outcome;
    if (blob && r.outcome == lookup_outcome::miss) outcome += "_from_blob";
    char time[32];
    std::snprintf(time, sizeof time, "%.3f", ms);
    verbose_print("primcache_verbose,create:" + outcome + "," + std::string(to_string(pd.kind())) +
                  "," + pd.name() + "," + describe(pd) + "," + time);
  }
  return r;
}

// Grow-only scratch buffer of the calling thread: a scratchpad belongs to one
// execution, never to the cache, and concurrent executions of one primitive
// on different threads each get their own.
struct thread_scratch {
  void* data = nullptr;
  std::size_t bytes = 0;
  ~thread_scratch() { std::free(data); }
  void* get(std::size_t need) {
    if (need <= bytes) return data;
    std::free(data);
    const std::size_t rounded = (need + 4095) & ~std::size_t{4095};
    data = std::aligned_alloc(4096, rounded);
    if (data == nullptr) {
      bytes = 0;
      throw error(status::out_of_memory,
                  "cannot allocate a scratchpad of " + std::to_string(need) + " bytes");
    }
    bytes = rounded;
    return data;
  }
};

}  // namespace

lookup_result<std::shared_ptr<const primitive_impl>> create_nested_impl(
    const primitive_desc_impl& pd, const engine& eng) {
  return get_or_create(pd, eng);
}

lookup_result<std::shared_ptr<const primitive_impl>> create_nested_impl(
    const primitive_desc_impl& pd, const engine& eng, std::span<const std::uint8_t> blob) {
  return get_or_create(pd, eng, &blob);
}

}  // namespace backend

// ---- primitive_desc -----------------------------------------------------------

primitive_desc::primitive_desc(std::shared_ptr<const backend::primitive_desc_impl> impl, engine eng)
    : impl_(std::move(impl)), engine_(std::move(eng)) {}

primitive_desc::primitive_desc(std::shared_ptr<const backend::primitive_desc_impl> impl, engine eng,
                               engine src_engine, engine dst_engine)
    : impl_(std::move(impl)),
      engine_(std::move(eng)),
      src_engine_(std::move(src_engine)),
      dst_engine_(std::move(dst_engine)) {}

primitive_desc backend::make_primitive_desc(std::shared_ptr<const primitive_desc_impl> impl,
                                            engine eng) {
  return primitive_desc(std::move(impl), std::move(eng));
}

const backend::primitive_desc_impl& backend::impl_of(const primitive_desc& pd) {
  if (!pd.impl_) throw error(status::invalid_arguments, "the primitive descriptor is empty");
  return *pd.impl_;
}

const std::shared_ptr<const backend::primitive_desc_impl>& backend::impl_ptr_of(
    const primitive_desc& pd) noexcept {
  return pd.impl_;
}

memory::desc primitive_desc::query_md(int arg) const {
  return backend::impl_of(*this).arg_md(arg);
}
std::string primitive_desc::impl_info_str() const {
  return backend::impl_of(*this).name();
}
std::vector<std::uint8_t> primitive_desc::cache_blob_id() const {
  // The library version, the build identity and the key (persistent_cache.cpp).
  return runtime_internal::cache_blob_id_of(backend::impl_of(*this));
}
std::size_t primitive_desc::scratchpad_size() const {
  return backend::impl_of(*this).scratchpad_bytes();
}
const engine& primitive_desc::get_engine() const {
  if (!engine_) throw error(status::invalid_arguments, "the primitive descriptor is empty");
  return *engine_;
}
const engine& primitive_desc::get_src_engine() const {
  return src_engine_ ? *src_engine_ : get_engine();
}
const engine& primitive_desc::get_dst_engine() const {
  return dst_engine_ ? *dst_engine_ : get_engine();
}

// ---- primitive ----------------------------------------------------------------

namespace {

using required_arg = backend::primitive_desc_impl::required_arg;

// Built only when a check fails: the hot path formats nothing.
std::string arg_name(const required_arg& a) {
  switch (a.index) {
    case PRIMCACHE_ARG_SRC: return "src (PRIMCACHE_ARG_SRC)";
    case PRIMCACHE_ARG_WEIGHTS: return "weights (PRIMCACHE_ARG_WEIGHTS)";
    case PRIMCACHE_ARG_BIAS: return "bias (PRIMCACHE_ARG_BIAS)";
    case PRIMCACHE_ARG_DST: return "dst (PRIMCACHE_ARG_DST)";
    default: break;
  }
  const std::string n = std::to_string(a.post_op);
  return "the operand of binary post-op " + n + " (PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(" + n +
         ") | PRIMCACHE_ARG_SRC_1)";
}

[[noreturn]] void bad_argument(const primitive_desc& pd, const required_arg& a,
                               const std::string& why) {
  throw error(status::invalid_arguments, std::string(to_string(backend::impl_of(pd).kind())) +
                                             " (" + backend::impl_of(pd).name() +
                                             "): " + arg_name(a) + " " + why);
}

}  // namespace

struct primitive::state {
  primitive_desc pd;
  std::shared_ptr<const backend::primitive_impl> impl;
  backend::resource_mapper resources;
  const metric_counter* executions = nullptr;  // never destroyed (metrics())
  lookup_outcome outcome = lookup_outcome::miss;
  mutable std::once_flag tune_once;  // tuning.hpp: the first execution that wants it tunes

  // Every check happens before the impl sees a pointer: a mismatch must
  // never become an out-of-bounds read or write.
  void check(const stream& strm, const args& arguments) const {
    if (&backend::impl_of(strm.get_engine()) != &backend::impl_of(pd.get_engine())) {
      throw error(status::invalid_arguments,
                  std::string(to_string(backend::impl_of(pd).kind())) + " (" +
                      backend::impl_of(pd).name() +
                      "): the stream belongs to another engine than the primitive's (" +
                      std::string(to_string(pd.get_engine().get_kind())) + ":" +
                      std::to_string(pd.get_engine().get_index()) + ")");
    }
    const backend::engine_impl* engines[] = {&backend::impl_of(pd.get_engine()),
                                             &backend::impl_of(pd.get_src_engine()),
                                             &backend::impl_of(pd.get_dst_engine())};
    for (const required_arg& e : backend::impl_of(pd).required_args()) {
      auto it = arguments.find(e.index);
      if (it == arguments.end() || !it->second) bad_argument(pd, e, "is missing");
      const memory& m = it->second;
      const memory_desc& md = m.get_desc();
      if (!(md == e.md)) {
        bad_argument(
            pd, e,
            "has descriptor " + md.to_string() + ", the primitive expects " + e.md.to_string());
      }
      if (&backend::impl_of(m.get_engine()) != engines[static_cast<int>(e.engine)]) {
        bad_argument(pd, e, "is a memory of another engine than the one the primitive expects");
      }
      if (m.get_data_handle() == nullptr && md.size_bytes() != 0) {
        bad_argument(pd, e, "has no buffer (its data handle is null)");
      }
    }
  }
  void run(const stream& strm, const args& arguments) const;
};

primitive::primitive(const primitive_desc& pd)
    : primitive(pd, static_cast<const std::span<const std::uint8_t>*>(nullptr)) {}

primitive::primitive(const primitive_desc& pd, const std::vector<std::uint8_t>& cache_blob) {
  const std::span<const std::uint8_t> blob(cache_blob.data(), cache_blob.size());
  *this = primitive(pd, &blob);
}

std::vector<std::uint8_t> primitive::cache_blob() const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  return state_->impl->serialize();
}

primitive::primitive(const primitive_desc& pd, const std::span<const std::uint8_t>* blob) {
  const auto& pd_impl = backend::impl_of(pd);
  auto r = backend::get_or_create(pd_impl, pd.get_engine(), blob);
  auto s = std::make_shared<state>();
  s->pd = pd;
  s->impl = std::move(r.value);
  s->outcome = r.outcome;
  s->executions = &runtime_internal::metrics().executed(pd_impl.kind());
  s->impl->create_resource(pd.get_engine(), s->resources);
  state_ = std::move(s);
}

const primitive_desc& primitive::get_primitive_desc() const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  return state_->pd;
}

bool primitive::specialized() const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  return state_->impl->specialized();
}

void primitive::wait_until_specialized() const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  state_->impl->wait_until_specialized();
}

lookup_outcome primitive::creation_outcome() const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  return state_->outcome;
}

void primitive::state::run(const stream& strm, const args& arguments) const {
  static thread_local backend::thread_scratch scratch;
  const std::size_t scratch_bytes = impl->scratchpad_bytes();
  backend::exec_ctx ctx{&strm, &arguments, &resources,
                        scratch_bytes ? scratch.get(scratch_bytes) : nullptr,
                        &backend::impl_of(pd).attr()};
  if (runtime_internal::verbose_level() >= 2) {
    const auto start = std::chrono::steady_clock::now();
    impl->execute(ctx);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    char time[32];
    std::snprintf(time, sizeof time, "%.3f", ms);
    runtime_internal::verbose_print(
        "primcache_verbose,exec," + std::string(to_string(backend::impl_of(pd).kind())) + "," +
        backend::impl_of(pd).name() + "," + backend::describe(backend::impl_of(pd)) + "," + time);
    return;
  }
  impl->execute(ctx);
}

void primitive::execute(const stream& strm, const args& arguments) const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  state_->check(strm, arguments);
  if (runtime_internal::tuning_wanted(backend::impl_of(state_->pd).attr())) [[unlikely]] {
    // Once per primitive; concurrent first executions wait for the tuning.
    std::call_once(state_->tune_once,
                   [&] { runtime_internal::tune_on_first_execute(state_->pd, strm); });
  }
  state_->run(strm, arguments);
  state_->executions->add();
}

namespace backend {
void execute_unchecked(const primitive& prim, const stream& strm,
                       const std::unordered_map<int, memory>& arguments) {
  if (!prim.state_) throw error(status::invalid_arguments, "the primitive is empty");
  prim.state_->run(strm, arguments);
}
}  // namespace backend

}  // namespace primcache
