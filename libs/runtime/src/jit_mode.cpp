#include "primcache/runtime/jit_mode.hpp"

#include <atomic>
#include <string>

#include "primcache/base/env.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/backend/verbose.hpp"
#include "primitive_cache_internal.hpp"

namespace primcache {
namespace {

jit_mode from_environment() {
  const auto text = env_string("PRIMCACHE_JIT_MODE");
  if (!text || *text == "tiered") return jit_mode::tiered;
  if (*text == "sync") return jit_mode::sync;
  report_malformed_env("PRIMCACHE_JIT_MODE", *text, "not one of tiered, sync", "tiered");
  return jit_mode::tiered;
}

// The mode lives in an atomic (read on every creation that misses the
// caches); the control setting "jit_mode" is its operator-facing face and
// stores into it from on_change, so set_jit_mode, the console and the
// environment all end in one place. Never destroyed: creations may run
// during exit.
struct mode_state {
  std::atomic<int> mode;
  setting_registration setting;

  mode_state() : mode(static_cast<int>(from_environment())) {
    auto spec = setting_spec::choice(
        "jit_mode",
        "how a primitive that misses every cache gets its code: tiered (generic kernel now, "
        "specialized in the background) or sync (compiled before creation returns)",
        to_string(static_cast<jit_mode>(mode.load())), {"tiered", "sync"});
    spec.on_change = [this](const setting_value& v) {
      mode.store(std::get<std::string>(v) == "sync" ? static_cast<int>(jit_mode::sync)
                                                    : static_cast<int>(jit_mode::tiered),
                 std::memory_order_relaxed);
    };
    setting = control().register_setting(std::move(spec));
  }
};

mode_state& state() {
  static mode_state* s = new mode_state;
  return *s;
}

// The setting exists from the runtime's load on, so that an operator's
// console shows (and may flip) the mode before the first creation.
[[maybe_unused]] const bool k_registered = (state(), true);

}  // namespace

const char* to_string(jit_mode mode) noexcept {
  return mode == jit_mode::sync ? "sync" : "tiered";
}

void set_jit_mode(jit_mode mode) noexcept {
  mode_state& s = state();
  try {
    control().set_setting("jit_mode", std::string(to_string(mode)));
  } catch (...) {
    // The setting always accepts both values; should the registry fail
    // (no memory), the mode still changes.
    s.mode.store(static_cast<int>(mode), std::memory_order_relaxed);
  }
}

jit_mode get_jit_mode() noexcept {
  // Relaxed: the mode is a preference read at creation; no data is
  // published through it.
  return static_cast<jit_mode>(state().mode.load(std::memory_order_relaxed));
}

namespace backend {

int verbose_level() noexcept {
  return runtime_internal::verbose_level();
}

void verbose_print(std::string_view line) noexcept {
  runtime_internal::verbose_print(line);
}

}  // namespace backend
}  // namespace primcache
