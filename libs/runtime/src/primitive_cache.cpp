#include "primcache/runtime/primitive_cache.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <string>

#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/runtime/version.hpp"
#include "primitive_cache_internal.hpp"

namespace primcache {
namespace runtime_internal {
using namespace backend;
namespace {

constexpr std::int64_t kDefaultCapacity = 1024;

std::size_t initial_capacity() {
  return static_cast<std::size_t>(env_int("PRIMCACHE_PRIMITIVE_CACHE_CAPACITY", kDefaultCapacity, 0,
                                          std::numeric_limits<int>::max()));
}

struct global_cache {
  global_cache()
      : cache(initial_capacity()),
        descs(cache.capacity()),
        registration(register_cache("primitive", cache, capacity_unit::entries)),
        desc_registration(register_cache("primitive_desc", descs, capacity_unit::entries)) {}
  primitive_cache_type cache;
  primitive_desc_cache_type descs;
  cache_registration registration;
  cache_registration desc_registration;
};

global_cache& instance() {
  // Never destroyed: impls in it hold code of the process JIT, which is
  // never destroyed either, and primitives may be released during exit.
  static global_cache* g = [] {
    metrics();  // the runtime's series exist (as 0) from first use on
    return new global_cache;
  }();
  return *g;
}

}  // namespace

primitive_cache_type& global_primitive_cache() {
  return instance().cache;
}
primitive_desc_cache_type& primitive_desc_cache() {
  return instance().descs;
}

const runtime_metrics& metrics() {
  static const runtime_metrics* m = [] {
    auto* r = new runtime_metrics;  // never destroyed: recorded during exit too
    control_registry& c = control();
    static constexpr const char* kEngines[] = {"cpu", "gpu"};
    for (int e = 0; e < 2; ++e) {
      static constexpr const char* kHelp =
          "Time to create a primitive, by where its code came from (memory: sampled)";
      r->create_seconds[e] = c.histogram("primcache_primitive_create_seconds", kHelp,
                                         {{"engine", kEngines[e]}, {"source", "compile"}});
      r->memory_seconds[e] = c.histogram("primcache_primitive_create_seconds", kHelp,
                                         {{"engine", kEngines[e]}, {"source", "memory"}});
      r->persistent_seconds[e] = c.histogram("primcache_primitive_create_seconds", kHelp,
                                             {{"engine", kEngines[e]}, {"source", "persistent"}});
    }
    for (primitive_kind k : {primitive_kind::matmul, primitive_kind::convolution,
                             primitive_kind::eltwise, primitive_kind::reorder}) {
      r->executions[static_cast<int>(k) - 1] =
          c.counter("primcache_primitive_executions_total", "Primitive executions",
                    {{"kind", std::string(to_string(k))}});
    }
    auto spec = setting_spec::integer(
        "num_threads", "threads of the default pool that CPU kernels run on (set_num_threads)",
        get_num_threads(), 1, 1023);
    spec.on_change = [](const setting_value& v) {
      default_thread_pool().resize(static_cast<int>(std::get<std::int64_t>(v)));
    };
    r->num_threads = c.register_setting(std::move(spec));
    const version_info& v = version();
    c.set_info("build", "version", v.version);
    c.set_info("build", "llvm", v.llvm);
    c.set_info("build", "build_identity", v.build_identity);
    return r;
  }();
  return *m;
}

int verbose_level() {
  // Read on first use (docs/CONFIGURATION.md) into an atomic, not a
  // function-local static: a fork() on another thread cannot catch a guard
  // held here (docs/runtime.md). Racing first readers read the same value.
  static constinit std::atomic<int> level{-1};
  int l = level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = static_cast<int>(env_int("PRIMCACHE_VERBOSE", 0, 0, 2));
    level.store(l, std::memory_order_relaxed);
  }
  return l;
}

void verbose_print(std::string_view line) {
  std::fprintf(stdout, "%.*s\n", static_cast<int>(line.size()), line.data());
  std::fflush(stdout);
}

}  // namespace runtime_internal

void set_primitive_cache_capacity(int capacity) {
  if (capacity < 0) {
    throw error(status::invalid_arguments,
                "primitive cache capacity " + std::to_string(capacity) + " is negative");
  }
  runtime_internal::global_primitive_cache().set_capacity(static_cast<std::size_t>(capacity));
  runtime_internal::primitive_desc_cache().set_capacity(static_cast<std::size_t>(capacity));
}

namespace {
// The capacity may be set above INT_MAX through primcache::control (which
// takes 64-bit capacities): report INT_MAX then, never a truncated value.
int saturated(std::size_t v) {
  return static_cast<int>(std::min<std::size_t>(v, std::numeric_limits<int>::max()));
}
}  // namespace

int get_primitive_cache_capacity() {
  return saturated(runtime_internal::global_primitive_cache().capacity());
}

int get_primitive_cache_size() {
  return saturated(runtime_internal::global_primitive_cache().size());
}

bool primitive_cache_contains(const primitive_desc& pd) {
  return runtime_internal::global_primitive_cache().contains(backend::impl_of(pd).cache_key());
}

}  // namespace primcache
