// A fork() can catch another thread inside a function-local static's
// initializer: the child inherits the static's guard marked "in progress",
// no thread of the child finishes it, and the child's first use of that
// static waits for ever. The libraries make the objects their create and
// execute paths need when they are loaded, so that a process's first
// primitives initialize no function-local static of the libraries but
// those below (before: six more, in the runtime, the cache and keyhash
// libraries).
//
// Some are still made on first use, and the case makes them before it
// records (docs/runtime.md lists them as the windows left): those that
// read environment variables docs/CONFIGURATION.md says are read on first
// use — the runtime's primitive caches (PRIMCACHE_PRIMITIVE_CACHE_CAPACITY),
// with the default pool and the cache library's fork registry they make,
// its metrics (the num_threads setting's value) and its tuning state
// (PRIMCACHE_TUNE, PRIMCACHE_TUNE_TABLE) — and the persistent-cache state,
// whose atfork handlers must be registered after the CPU backend's (made at
// load there, they ran first and waited for the persistent writer while the
// writer waited for a JIT lock the backend's handler held: fork_test's
// writer case hung in 2 runs of 3).
//
// Checked through the C++ runtime's guard function (guard_recorder.cpp).
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "guard_recorder.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/primitive_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

namespace pc = primcache;

namespace {

// "libprimcache_x.so+0x1234 (symbol)" for each caller inside a primcache
// library.
std::vector<std::string> in_primcache_libraries(const std::vector<void*>& callers) {
  std::vector<std::string> found;
  for (void* caller : callers) {
    Dl_info info{};
    if (::dladdr(caller, &info) == 0 || info.dli_fname == nullptr) continue;
    const std::string file = info.dli_fname;
    if (file.find("libprimcache") == std::string::npos) continue;
    std::ostringstream out;
    out << file.substr(file.rfind('/') + 1) << "+0x" << std::hex
        << (reinterpret_cast<std::uintptr_t>(caller) -
            reinterpret_cast<std::uintptr_t>(info.dli_fbase))
        << " (" << (info.dli_sname ? info.dli_sname : "?") << ")";
    found.push_back(out.str());
  }
  return found;
}

void run_each_kind(pc::engine& eng, std::int64_t size) {
  pc::stream s(eng);
  const pc::memory::desc a({size, 64}, pc::data_type::f32, pc::format_tag::ab);
  const pc::memory::desc b({64, 32}, pc::data_type::f32, pc::format_tag::ab);
  const pc::memory::desc c({size, 32}, pc::data_type::f32, pc::format_tag::ab);
  pc::memory ma(a, eng), mb(b, eng), mc(c, eng);
  pc::matmul(pc::matmul::primitive_desc(pc::matmul::desc(a, b, c), eng))
      .execute(s, {{PRIMCACHE_ARG_SRC, ma}, {PRIMCACHE_ARG_WEIGHTS, mb}, {PRIMCACHE_ARG_DST, mc}});

  pc::eltwise_forward(pc::eltwise_forward::primitive_desc(
                          pc::eltwise_forward::desc(pc::prop_kind::forward_inference,
                                                    pc::algorithm::eltwise_relu, a),
                          eng))
      .execute(s, {{PRIMCACHE_ARG_SRC, ma}, {PRIMCACHE_ARG_DST, ma}});

  const pc::memory::desc t({size, 64}, pc::data_type::f32, pc::format_tag::ba);
  pc::memory mt(t, eng);
  pc::reorder(pc::reorder::primitive_desc(eng, a, eng, t))
      .execute(s, {{PRIMCACHE_ARG_FROM, ma}, {PRIMCACHE_ARG_TO, mt}});

  const pc::memory::desc src({1, 16, 9, 9}, pc::data_type::f32, pc::format_tag::nchw);
  const pc::memory::desc wei({size, 16, 3, 3}, pc::data_type::f32, pc::format_tag::oihw);
  const pc::memory::desc bias({size}, pc::data_type::f32, pc::format_tag::a);
  const pc::memory::desc dst({1, size, 9, 9}, pc::data_type::f32, pc::format_tag::nchw);
  pc::memory msrc(src, eng), mwei(wei, eng), mbias(bias, eng), mdst(dst, eng);
  pc::convolution_forward(pc::convolution_forward::primitive_desc(
                              pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                                            pc::algorithm::convolution_direct, src,
                                                            wei, bias, dst, {1, 1}, {1, 1}, {1, 1}),
                              eng))
      .execute(s, {{PRIMCACHE_ARG_SRC, msrc},
                   {PRIMCACHE_ARG_WEIGHTS, mwei},
                   {PRIMCACHE_ARG_BIAS, mbias},
                   {PRIMCACHE_ARG_DST, mdst}});
}

}  // namespace

TEST_CASE("a process's first primitives initialize no function-local static of the libraries",
          "[fork][runtime][cpu]") {
  // Those made on first use (above).
  (void)pc::get_primitive_cache_capacity();
  (void)pc::global_tune_table();
  (void)pc::get_persistent_cache();

  primcache_test::start_recording_guard_initializations();
  pc::engine eng(pc::engine_kind::cpu, 0);
  pc::set_jit_mode(pc::jit_mode::tiered);
  run_each_kind(eng, 24);
  pc::set_jit_mode(pc::jit_mode::sync);
  run_each_kind(eng, 40);
  const std::vector<std::string> found =
      in_primcache_libraries(primcache_test::stop_recording_guard_initializations());
  for (const auto& f : found) UNSCOPED_INFO(f);
  CHECK(found.empty());
}
