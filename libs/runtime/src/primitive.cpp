#include "primcache/runtime/primitive.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primitive_cache_internal.hpp"

namespace primcache {
namespace runtime_internal {

primitive_desc_impl::~primitive_desc_impl() = default;
resource::~resource() = default;
primitive_impl::~primitive_impl() = default;

void primitive_desc_impl::finalize(const engine_impl& eng, int nthr) {
  nthr_ = nthr;
  key_writer w;
  w.enumeration(kind_);
  write_op_key(w);
  attr_.write_key(w);
  w.str(name_);
  w.i32(nthr);
  w.enumeration(eng.kind());
  eng.write_identity(w);
  key_ = w.finish();
}

void primitive_impl::create_resource(const engine& eng, resource_mapper& mapper) const {
  for (const primitive_impl* n : nested()) n->create_resource(eng, mapper);
}

const memory* exec_ctx::arg(int index) const {
  if (args == nullptr) return nullptr;
  auto it = args->find(index);
  return it == args->end() || !it->second ? nullptr : &it->second;
}

void* exec_ctx::arg_ptr(int index) const {
  const memory* m = arg(index);
  return m == nullptr ? nullptr : m->get_data_handle();
}

namespace {

// How deep in nested creation this thread is: verbose lines of nested
// creations say nested_cache_hit / nested_cache_miss.
// initial-exec: the runtime is linked, not dlopened, so its TLS is static
// and reads need no __tls_get_addr call.
__attribute__((tls_model("initial-exec"))) thread_local int tl_creation_depth = 0;

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

lookup_result<std::shared_ptr<const primitive_impl>> get_or_create(const primitive_desc_impl& pd,
                                                                   const engine& eng) {
  const bool verbose = verbose_level() >= 1;
  const auto start =
      verbose ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const bool nested = tl_creation_depth > 0;
  ++tl_creation_depth;
  struct depth_guard {
    ~depth_guard() { --tl_creation_depth; }
  } guard;
  auto r = global_primitive_cache().get_or_add(pd.cache_key(), [&] { return pd.create_impl(eng); });
  if (verbose) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::string outcome = r.outcome == lookup_outcome::hit      ? "cache_hit"
                          : r.outcome == lookup_outcome::waited ? "cache_wait"
                                                                : "cache_miss";
    if (nested) outcome = "nested_" + outcome;
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

}  // namespace runtime_internal

// ---- primitive_desc -----------------------------------------------------------

primitive_desc::primitive_desc(std::shared_ptr<const runtime_internal::primitive_desc_impl> impl,
                               engine eng)
    : impl_(std::move(impl)), engine_(std::move(eng)) {}

const runtime_internal::primitive_desc_impl& primitive_desc::impl() const {
  if (!impl_) throw error(status::invalid_arguments, "the primitive descriptor is empty");
  return *impl_;
}

memory::desc primitive_desc::query_md(int arg) const {
  return impl().arg_md(arg);
}
std::string primitive_desc::impl_info_str() const {
  return impl().name();
}
std::size_t primitive_desc::scratchpad_size() const {
  return impl().scratchpad_bytes();
}
const engine& primitive_desc::get_engine() const {
  if (!engine_) throw error(status::invalid_arguments, "the primitive descriptor is empty");
  return *engine_;
}

// ---- primitive ----------------------------------------------------------------

struct primitive::state {
  primitive_desc pd;
  std::shared_ptr<const runtime_internal::primitive_impl> impl;
  runtime_internal::resource_mapper resources;
  lookup_outcome outcome = lookup_outcome::miss;
};

primitive::primitive(const primitive_desc& pd) {
  const auto& pd_impl = pd.impl();
  auto r = runtime_internal::get_or_create(pd_impl, pd.get_engine());
  auto s = std::make_shared<state>();
  s->pd = pd;
  s->impl = std::move(r.value);
  s->outcome = r.outcome;
  s->impl->create_resource(pd.get_engine(), s->resources);
  state_ = std::move(s);
}

const primitive_desc& primitive::get_primitive_desc() const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  return state_->pd;
}

lookup_outcome primitive::creation_outcome() const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  return state_->outcome;
}

void primitive::execute(const stream& strm, const args& arguments) const {
  if (!state_) throw error(status::invalid_arguments, "the primitive is empty");
  if (!(strm.get_engine() == state_->pd.get_engine()) &&
      strm.get_engine().get_kind() != state_->pd.get_engine().get_kind()) {
    throw error(status::invalid_arguments, "the stream's engine is not the primitive's engine");
  }
  static thread_local runtime_internal::thread_scratch scratch;
  const std::size_t scratch_bytes = state_->impl->scratchpad_bytes();
  runtime_internal::exec_ctx ctx{&strm, &arguments, &state_->resources,
                                 scratch_bytes ? scratch.get(scratch_bytes) : nullptr};
  if (runtime_internal::verbose_level() >= 2) {
    const auto start = std::chrono::steady_clock::now();
    state_->impl->execute(ctx);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    char time[32];
    std::snprintf(time, sizeof time, "%.3f", ms);
    runtime_internal::verbose_print("primcache_verbose,exec," +
                                    std::string(to_string(state_->pd.impl().kind())) + "," +
                                    state_->pd.impl().name() + "," +
                                    runtime_internal::describe(state_->pd.impl()) + "," + time);
    return;
  }
  state_->impl->execute(ctx);
}

}  // namespace primcache
