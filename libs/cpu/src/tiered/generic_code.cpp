#include "tiered/generic_code.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/jit_module.hpp"
#include "jit/process_jit.hpp"
#include "primcache/base/thread_annotations.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr int k_kernels = 4;
constexpr int k_isas = static_cast<int>(max_known_cpu_isa) + 1;

struct loaded {
  const embedded_object* object = nullptr;
  std::unique_ptr<jit_module> module;  // linked on first use
  std::optional<failure> failed;       // the link failed (kept: not retried)
};

// Never destroyed: generic code runs until the process ends (primitives
// released during exit included). Its lock is held across fork()
// (process_jit.hpp): a child forked while another thread linked a kernel
// here would otherwise wait for that thread's lock forever.
struct registry {
  mutex mu;
  loaded table[k_kernels][k_isas] PRIMCACHE_GUARDED_BY(mu);
};

// Made at the first call, which comes when the library loads (the generated
// objects' static initializer, or k_registry_made below), before any thread
// of the process can fork: a function-local static's initialization guard,
// held while it allocates, would be held across a fork that caught it
// waiting for the allocator, and the child would wait for it for ever.
registry& the_registry() {
  static registry* r = [] {
    auto* made = new registry;
    hold_across_fork(jit_fork_lock::generic_code, made->mu);
    return made;
  }();
  return *r;
}

[[maybe_unused]] const bool k_registry_made = (the_registry(), true);

}  // namespace

void register_generic_objects(std::span<const embedded_object> objects) noexcept {
  registry& r = the_registry();
  lock_guard guard(r.mu);
  for (const embedded_object& o : objects) {
    const int k = static_cast<int>(o.kernel);
    const int i = static_cast<int>(o.isa);
    if (k < 0 || k >= k_kernels || i < 0 || i >= k_isas) continue;
    r.table[k][i].object = &o;
  }
}

result<cpu_isa> generic_isa_for(generic_kernel kernel, cpu_isa isa) {
  registry& r = the_registry();
  lock_guard guard(r.mu);
  for (int i = static_cast<int>(isa); i >= 0; --i) {
    if (r.table[static_cast<int>(kernel)][i].object != nullptr) return static_cast<cpu_isa>(i);
  }
  return failure{status::not_found, "no generic kernel is built in at or below " +
                                        std::string(to_string(isa)) +
                                        " (the program links the backend without them)"};
}

result<void*> generic_symbol(generic_kernel kernel, cpu_isa isa, const char* symbol) {
  registry& r = the_registry();
  // Held while linking, once per kernel and ISA for the life of the process:
  // concurrent first uses wait for the one link instead of linking twice.
  lock_guard guard(r.mu);
  loaded& l = r.table[static_cast<int>(kernel)][static_cast<int>(isa)];
  if (l.object == nullptr) {
    return failure{status::not_found,
                   "no generic kernel is built in for " + std::string(to_string(isa))};
  }
  if (l.failed) return *l.failed;
  if (!l.module) {
    auto m = jit_module::load_built_in(
        "generic_" + std::string(to_string(isa)),
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(l.object->bytes),
                                   l.object->size));
    if (!m) {
      l.failed = m.why();
      return m.why();
    }
    l.module = std::move(m).value();
  }
  return l.module->lookup(symbol);
}

}  // namespace primcache::cpu_internal
