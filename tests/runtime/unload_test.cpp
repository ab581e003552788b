// dlclose of a primcache library. The libraries hold process-wide state that
// other libraries point into (the runtime's registry holds the CPU backend's
// factories, the primitive cache its impls, control its callbacks; the CPU
// backend's background compiler thread and JIT code live in it), so they are
// linked NODELETE: dlclose never unmaps one, and everything loaded keeps
// working. This binary links the runtime alone and loads the rest itself.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <primcache/runtime/runtime.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace primcache;

std::vector<std::string> split_paths(const char* joined) {
  std::vector<std::string> paths;
  std::stringstream in(joined);
  for (std::string path; std::getline(in, path, ':');) paths.push_back(path);
  return paths;
}

// relu over a width × 4 tensor (a new width is a new kernel) and checks it.
void run_relu(const engine& eng, int width) {
  memory::desc md({width, 4}, data_type::f32, format_tag::ab);
  eltwise_forward relu(eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, md), eng));
  memory src(md, eng), dst(md, eng);
  auto* in = static_cast<float*>(src.get_data_handle());
  const int n = width * 4;
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i - n / 2);
  relu.execute(stream(eng), {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  const auto* out = static_cast<const float*>(dst.get_data_handle());
  for (int i = 0; i < n; ++i) REQUIRE(out[i] == (i < n / 2 ? 0.f : static_cast<float>(i - n / 2)));
}

}  // namespace

TEST_CASE("the CPU backend loaded with dlopen keeps working after dlclose", "[unload]") {
  INFO(PRIMCACHE_TEST_CPU_LIBRARY);
  // Loaded and first used on a thread that then exits: the thread_local
  // objects the backend registered on it no longer keep it loaded.
  void* cpu = nullptr;
  std::thread([&cpu] {
    cpu = dlopen(PRIMCACHE_TEST_CPU_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (cpu == nullptr) return;
    // Cached impls of the backend (and, in tiered mode, their specialized
    // compilations on the backend's thread) outlive the handle.
    run_relu(engine(engine_kind::cpu, 0), 3);
  }).join();
  REQUIRE(cpu != nullptr);
  REQUIRE(engine::get_count(engine_kind::cpu) == 1);
  REQUIRE(dlclose(cpu) == 0);

  void* still = dlopen(PRIMCACHE_TEST_CPU_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  CHECK(still != nullptr);
  if (still != nullptr) dlclose(still);
  engine eng(engine_kind::cpu, 0);
  run_relu(eng, 3);  // the cached impl
  run_relu(eng, 5);  // a new creation through the registered factories
}

TEST_CASE("every primcache library stays loaded after dlclose", "[unload]") {
  const auto paths = split_paths(PRIMCACHE_TEST_LIBRARIES);
  REQUIRE(paths.size() >= 10);
  for (const auto& path : paths) {
    INFO(path);
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle != nullptr);
    REQUIRE(dlclose(handle) == 0);
    void* again = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    CHECK(again != nullptr);
    if (again != nullptr) dlclose(again);
  }
}
