#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>

#include "cl_error.hpp"
#include "device_list.hpp"
#include "host_reference.hpp"
#include "primcache/base/env.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/primcache.h"

using namespace primcache;

namespace {

ocl_internal::device_entry fake_device(const char* platform, const char* name,
                                       cl_device_type type) {
  ocl_internal::device_entry e;
  e.platform_name = platform;
  e.device_name = name;
  e.type = type;
  return e;
}

std::vector<std::string> names(const std::vector<ocl_internal::device_entry>& devices) {
  std::vector<std::string> out;
  for (const auto& d : devices) out.push_back(d.device_name);
  return out;
}

// Every device of every platform, as OpenCL lists them (no
// PRIMCACHE_OCL_DEVICE), in engine order: GPUs first.
std::vector<cl_device_id> every_device_gpus_first() {
  std::vector<cl_device_id> gpus, others;
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return {};
  std::vector<cl_platform_id> platforms(np);
  REQUIRE(clGetPlatformIDs(np, platforms.data(), nullptr) == CL_SUCCESS);
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devices(nd);
    REQUIRE(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr) == CL_SUCCESS);
    for (cl_device_id d : devices) {
      cl_device_type type = 0;
      REQUIRE(clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, nullptr) == CL_SUCCESS);
      ((type & CL_DEVICE_TYPE_GPU) ? gpus : others).push_back(d);
    }
  }
  gpus.insert(gpus.end(), others.begin(), others.end());
  return gpus;
}

}  // namespace

TEST_CASE("the OpenCL backend sees at least one device as a gpu engine", "[ocl][engine]") {
  REQUIRE(engine::get_count(engine_kind::gpu) >= 1);
  engine eng(engine_kind::gpu, 0);
  REQUIRE(eng.get_kind() == engine_kind::gpu);
  SECTION("its identity names the device and never a pointer") {
    key_writer a, b;
    backend::impl_of(eng).write_identity(a);
    backend::impl_of(
        ocl_interop::make_engine(ocl_interop::get_device(eng), ocl_interop::get_context(eng)))
        .write_identity(b);
    REQUIRE(a.finish() == b.finish());
    REQUIRE(backend::impl_of(eng).describe().rfind("ocl:", 0) == 0);
  }
  SECTION("a device index past the last one is a clear error") {
    REQUIRE_THROWS_WITH(engine(engine_kind::gpu, 1000), Catch::Contains("out of range"));
  }
}

TEST_CASE("device memory round-trips through map and unmap", "[ocl][memory]") {
  engine eng(engine_kind::gpu, 0);
  memory::desc md({3, 7}, data_type::f32, format_tag::ab);
  memory m(md, eng);
  REQUIRE(m.get_data_handle() != nullptr);
  const auto values = ocl_test::pattern(21, 1);
  ocl_test::write_all(m, values);
  REQUIRE(ocl_test::read_all(m) == values);
}

TEST_CASE("an OpenCL failure is a primcache error naming the CL code", "[ocl][errors]") {
  engine eng(engine_kind::gpu, 0);
  cl_int err = CL_SUCCESS;
  // A queue of another device is refused by OpenCL; a null device is the
  // portable way to provoke CL_INVALID_DEVICE.
  cl_command_queue q = clCreateCommandQueue(ocl_interop::get_context(eng), nullptr, 0, &err);
  REQUIRE(q == nullptr);
  REQUIRE_THROWS_WITH(ocl_interop::make_engine(nullptr, ocl_interop::get_context(eng)),
                      Catch::Contains("CL_INVALID_DEVICE"));
}

TEST_CASE("OpenCL devices take engine indices GPUs first, each group in discovery order",
          "[ocl][engine][devices]") {
  using ocl_internal::gpus_first;
  // Platform then device order, as discover() lists them: PoCL's CPU
  // device, then two GPUs of another platform, an accelerator, and a GPU
  // that is also the default device.
  const std::vector<ocl_internal::device_entry> discovered = {
      fake_device("Portable Computing Language", "pthread-cpu", CL_DEVICE_TYPE_CPU),
      fake_device("NVIDIA CUDA", "gpu-a", CL_DEVICE_TYPE_GPU),
      fake_device("NVIDIA CUDA", "gpu-b", CL_DEVICE_TYPE_GPU),
      fake_device("Other", "accelerator", CL_DEVICE_TYPE_ACCELERATOR),
      fake_device("Other", "gpu-c", CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_DEFAULT)};
  CHECK(names(gpus_first(discovered)) ==
        std::vector<std::string>{"gpu-a", "gpu-b", "gpu-c", "pthread-cpu", "accelerator"});
  CHECK(names(gpus_first({discovered[0], discovered[3]})) ==
        std::vector<std::string>{"pthread-cpu", "accelerator"});  // no GPU: every device counts
  CHECK(gpus_first({}).empty());

  SECTION("the engines of this machine follow that order") {
    if (const auto v = env_string("PRIMCACHE_OCL_DEVICE"); v && !v->empty()) {
      WARN("PRIMCACHE_OCL_DEVICE=" << *v << " narrows the engines: their order is not checked");
      return;
    }
    const auto expected = every_device_gpus_first();
    REQUIRE(engine::get_count(engine_kind::gpu) == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(ocl_interop::get_device(engine(engine_kind::gpu, i)) == expected[i]);
    }
  }
}

TEST_CASE("discovery leaves out a platform or device whose query fails and keeps the others",
          "[ocl][engine][devices]") {
  // Made-up handles: the queries below are the only ones that see them.
  auto id = [](std::uintptr_t n) { return reinterpret_cast<cl_device_id>(n); };
  const auto p0 = reinterpret_cast<cl_platform_id>(std::uintptr_t{0x100});
  const auto p1 = reinterpret_cast<cl_platform_id>(std::uintptr_t{0x200});
  std::set<cl_device_id> failing_devices;
  std::set<cl_platform_id> failing_platforms;
  bool platforms_fail = false;
  ocl_internal::discovery_queries queries;
  queries.platforms = [&] {
    if (platforms_fail) ocl_internal::throw_cl_error(CL_OUT_OF_HOST_MEMORY, "clGetPlatformIDs");
    return std::vector<cl_platform_id>{p0, p1};
  };
  queries.devices = [&](cl_platform_id p) {
    if (failing_platforms.count(p)) {
      ocl_internal::throw_cl_error(CL_INVALID_PLATFORM, "clGetDeviceIDs");
    }
    return p == p0 ? std::vector<cl_device_id>{id(1), id(2)} : std::vector<cl_device_id>{id(3)};
  };
  queries.describe = [&](cl_device_id d) {
    if (failing_devices.count(d)) {
      ocl_internal::throw_cl_error(CL_INVALID_DEVICE, "clGetDeviceInfo(CL_DRIVER_VERSION)");
    }
    auto e = fake_device("P", ("dev" + std::to_string(reinterpret_cast<std::uintptr_t>(d))).c_str(),
                         CL_DEVICE_TYPE_GPU);
    e.device = d;
    return e;
  };

  SECTION("nothing fails: every device, in platform then device order") {
    const auto found = ocl_internal::discover(queries);
    CHECK(names(found.devices) == std::vector<std::string>{"dev1", "dev2", "dev3"});
    CHECK(found.skipped.empty());
    CHECK_FALSE(found.failure());
  }
  SECTION("a device whose query fails") {
    failing_devices = {id(1)};
    const auto found = ocl_internal::discover(queries);
    CHECK(names(found.devices) == std::vector<std::string>{"dev2", "dev3"});
    REQUIRE(found.skipped.size() == 1);
    CHECK_THAT(found.skipped[0], Catch::StartsWith("device 0 of OpenCL platform 0: ") &&
                                     Catch::Contains("clGetDeviceInfo(CL_DRIVER_VERSION)") &&
                                     Catch::Contains("CL_INVALID_DEVICE (-33)"));
    CHECK_FALSE(found.failure());  // devices are left
  }
  SECTION("a platform whose device list fails") {
    failing_platforms = {p0};
    const auto found = ocl_internal::discover(queries);
    CHECK(names(found.devices) == std::vector<std::string>{"dev3"});
    REQUIRE(found.skipped.size() == 1);
    CHECK_THAT(found.skipped[0],
               Catch::StartsWith("OpenCL platform 0: ") && Catch::Contains("CL_INVALID_PLATFORM"));
  }
  SECTION("every device fails: the failure names each CL error") {
    failing_devices = {id(1), id(2), id(3)};
    const auto found = ocl_internal::discover(queries);
    CHECK(found.devices.empty());
    CHECK(found.skipped.size() == 3);
    REQUIRE(found.failure());
    CHECK_THAT(*found.failure(), Catch::StartsWith("no OpenCL device could be listed: ") &&
                                     Catch::Contains("device 1 of OpenCL platform 0") &&
                                     Catch::Contains("device 0 of OpenCL platform 1") &&
                                     Catch::Contains("CL_INVALID_DEVICE"));
  }
  SECTION("the platforms cannot be listed") {
    platforms_fail = true;
    const auto found = ocl_internal::discover(queries);
    CHECK(found.devices.empty());
    REQUIRE(found.failure());
    CHECK_THAT(*found.failure(), Catch::Contains("clGetPlatformIDs failed: CL_OUT_OF_HOST_MEMORY"));
  }
  SECTION("no platform or no device is no failure") {
    queries.platforms = [] { return std::vector<cl_platform_id>{}; };
    CHECK_FALSE(ocl_internal::discover(queries).failure());
  }
  SECTION("this machine's ICD loader: every device, nothing left out") {
    const auto found = ocl_internal::discover(ocl_internal::icd_queries());
    CHECK(found.skipped.empty());
    CHECK_FALSE(ocl_internal::discovery_failure());
    std::vector<cl_device_id> devices;
    for (const auto& e : ocl_internal::gpus_first(found.devices)) devices.push_back(e.device);
    CHECK(devices == every_device_gpus_first());
  }
}

TEST_CASE("PRIMCACHE_OCL_DEVICE picks by index or by name, and what picks nothing is refused",
          "[ocl][engine][env]") {
  using ocl_internal::select_devices;
  const std::vector<ocl_internal::device_entry> all = {
      fake_device("NVIDIA CUDA", "NVIDIA H200", CL_DEVICE_TYPE_GPU),
      fake_device("NVIDIA CUDA", "NVIDIA A100", CL_DEVICE_TYPE_GPU),
      fake_device("Portable Computing Language", "pthread-skylake-avx512-AMD EPYC",
                  CL_DEVICE_TYPE_CPU)};
  auto picked = [&](std::optional<std::string> value) {
    auto r = select_devices(all, value);
    REQUIRE(r.has_value());
    return names(r.value());
  };
  auto refused = [&](std::string value) {
    auto r = select_devices(all, value);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == status::invalid_arguments);
    return r.why().message;
  };
  SECTION("unset or empty keeps every device") {
    CHECK(picked(std::nullopt) == names(all));
    CHECK(picked("") == names(all));
  }
  SECTION("digits are an index into the engine order") {
    CHECK(picked("0") == std::vector<std::string>{"NVIDIA H200"});
    CHECK(picked("2") == std::vector<std::string>{"pthread-skylake-avx512-AMD EPYC"});
    CHECK(picked("01") == std::vector<std::string>{"NVIDIA A100"});
  }
  SECTION("anything else is a substring of the platform or the device name") {
    CHECK(picked("NVIDIA") == std::vector<std::string>{"NVIDIA H200", "NVIDIA A100"});
    CHECK(picked("A100") == std::vector<std::string>{"NVIDIA A100"});
    CHECK(picked("Portable") == std::vector<std::string>{"pthread-skylake-avx512-AMD EPYC"});
    CHECK(picked("EPYC") == std::vector<std::string>{"pthread-skylake-avx512-AMD EPYC"});
  }
  SECTION("an index past the last device is refused, naming the count") {
    CHECK_THAT(refused("3"), Catch::Contains("no OpenCL device has that index (3 found)"));
    CHECK_THAT(refused("99999999999999999999999"), Catch::Contains("index"));
  }
  SECTION("a name that matches nothing is refused (the match is case-sensitive)") {
    CHECK_THAT(refused("nvidia"), Catch::Contains("no OpenCL platform or device name"));
    CHECK_THAT(refused("-1"), Catch::Contains("no OpenCL platform or device name"));
    CHECK_THAT(refused(" 0"), Catch::Contains("no OpenCL platform or device name"));
  }
  SECTION("with no device at all, every value but none is refused") {
    CHECK(select_devices({}, std::nullopt).value().empty());
    CHECK_FALSE(select_devices({}, std::string("0")).has_value());
    CHECK_FALSE(select_devices({}, std::string("NVIDIA")).has_value());
  }
}

TEST_CASE("every OpenCL 1.2 error code has its CL_ name, and allocation failures are out_of_memory",
          "[ocl][errors]") {
  using ocl_internal::cl_error_name;
  std::set<std::string_view> seen;
  // OpenCL 1.2 defines -1..-19 and -30..-68.
  for (cl_int code = -1; code >= -68; --code) {
    if (code < -19 && code > -30) continue;
    const std::string_view name = cl_error_name(code);
    INFO("code " << code);
    CHECK(name.rfind("CL_", 0) == 0);
    CHECK(seen.insert(name).second);  // no two codes share a name
  }
  CHECK(cl_error_name(CL_SUCCESS) == "CL_SUCCESS");
  CHECK(cl_error_name(-1001) == "CL_PLATFORM_NOT_FOUND_KHR");
  CHECK(cl_error_name(-25) == "unknown OpenCL error");
  CHECK(cl_error_name(-9999) == "unknown OpenCL error");

  auto thrown = [](cl_int code, std::string_view detail) {
    try {
      ocl_internal::throw_cl_error(code, "clSomething of k", detail);
    } catch (const error& e) {
      return std::pair{e.code(), std::string(e.what())};
    }
    FAIL("nothing thrown");
    return std::pair{status::success, std::string()};
  };
  for (cl_int code : {CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY}) {
    const auto [st, what] = thrown(code, "");
    CHECK(st == status::out_of_memory);
    CHECK_THAT(what, Catch::Contains("clSomething of k failed: ") &&
                         Catch::Contains(std::string(cl_error_name(code))) &&
                         Catch::Contains("(" + std::to_string(code) + ")"));
  }
  const auto [st, what] = thrown(CL_BUILD_PROGRAM_FAILURE, "build log:\nerror: bad");
  CHECK(st == status::runtime_error);
  CHECK_THAT(what, Catch::Contains("CL_BUILD_PROGRAM_FAILURE (-11)\nbuild log:\nerror: bad"));
  CHECK_NOTHROW(ocl_internal::check(CL_SUCCESS, "clFinish"));
  CHECK_THROWS_WITH(ocl_internal::check(CL_INVALID_VALUE, "clFinish"),
                    Catch::Contains("clFinish failed: CL_INVALID_VALUE (-30)"));
}

// Run by CTest with PRIMCACHE_OCL_DEVICE set (the variable is read once per
// process): see tests/ocl/CMakeLists.txt.
TEST_CASE("PRIMCACHE_OCL_DEVICE narrows the devices to those whose names contain it",
          "[.][ocl][env][env_name]") {
  const auto wanted = env_string("PRIMCACHE_OCL_DEVICE");
  REQUIRE(wanted.has_value());
  const std::size_t count = engine::get_count(engine_kind::gpu);
  REQUIRE(count >= 1);
  for (std::size_t i = 0; i < count; ++i) {
    cl_device_id dev = ocl_interop::get_device(engine(engine_kind::gpu, i));
    cl_platform_id platform = nullptr;
    REQUIRE(clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr) ==
            CL_SUCCESS);
    char name[256] = {}, pname[256] = {};
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof pname - 1, pname, nullptr);
    INFO("device " << name << " on " << pname);
    REQUIRE((std::string(name).find(*wanted) != std::string::npos ||
             std::string(pname).find(*wanted) != std::string::npos));
  }
  REQUIRE(env_reports().empty());
}

TEST_CASE("a malformed PRIMCACHE_OCL_DEVICE is reported once and every device stays",
          "[.][ocl][env][env_malformed]") {
  const std::size_t count = engine::get_count(engine_kind::gpu);
  REQUIRE(count >= 1);
  engine eng(engine_kind::gpu, 0);
  const auto reports = env_reports();
  REQUIRE(reports.size() == 1);
  REQUIRE(reports[0].find("PRIMCACHE_OCL_DEVICE") != std::string::npos);
  REQUIRE(reports[0].find(*env_string("PRIMCACHE_OCL_DEVICE")) != std::string::npos);
  const auto every = every_device_gpus_first();
  REQUIRE(count == every.size());
  for (std::size_t i = 0; i < count; ++i) {
    CHECK(ocl_interop::get_device(engine(engine_kind::gpu, i)) == every[i]);
  }
}

// Run by CTest with PRIMCACHE_OCL_DEVICE=0: only the device of that index in
// engine order stays, and nothing is reported.
TEST_CASE("PRIMCACHE_OCL_DEVICE as an index leaves that one device", "[.][ocl][env][env_index]") {
  const auto value = env_string("PRIMCACHE_OCL_DEVICE");
  REQUIRE(value.has_value());
  const auto index = parse_int(*value, 0, 1 << 20);
  REQUIRE(index.has_value());
  const auto every = every_device_gpus_first();
  REQUIRE(static_cast<std::size_t>(index.value()) < every.size());
  REQUIRE(engine::get_count(engine_kind::gpu) == 1);
  CHECK(ocl_interop::get_device(engine(engine_kind::gpu, 0)) ==
        every[static_cast<std::size_t>(index.value())]);
  CHECK(env_reports().empty());
}

// Run by CTest with tests/ocl/failing_queries.cpp preloaded, two PoCL
// devices (POCL_DEVICES="pthread basic") and the basic device's
// clGetDeviceInfo(CL_DRIVER_VERSION) failing; CTest also looks for the
// report on stderr (see tests/ocl/CMakeLists.txt).
TEST_CASE("a device whose query fails is left out and the others stay",
          "[.][ocl][env][discovery_device_fails]") {
  const std::size_t count = engine::get_count(engine_kind::gpu);
  REQUIRE(count == every_device_gpus_first().size() - 1);
  for (std::size_t i = 0; i < count; ++i) {
    CHECK_THAT(backend::impl_of(engine(engine_kind::gpu, i)).describe(), !Catch::Contains("basic"));
  }
  CHECK_FALSE(ocl_internal::discovery_failure());
}

// Run by CTest with failing_queries.cpp making clGetPlatformIDs fail.
TEST_CASE("when no device can be listed, the count is 0 and engine creation names the CL error",
          "[.][ocl][env][discovery_fails]") {
  // A count is a question, not a request: 0, as with no platform at all
  // (callers check it before they make an engine).
  CHECK(engine::get_count(engine_kind::gpu) == 0);
  std::size_t count = 7;
  CHECK(pc_engine_get_count(&count, pc_engine_gpu) == pc_success);
  CHECK(count == 0);
  // Named: Catch's && keeps references to the matchers it combines.
  const auto none_listed = Catch::Contains("no OpenCL device could be listed");
  const auto cl_error = Catch::Contains("clGetPlatformIDs failed: CL_OUT_OF_HOST_MEMORY (-6)");
  for (const std::size_t index : {0, 1}) {
    INFO("engine(gpu, " << index << ")");
    try {
      engine eng(engine_kind::gpu, index);
      FAIL("an engine was made");
    } catch (const error& e) {
      CHECK(e.code() == status::runtime_error);
      CHECK_THAT(e.message(), none_listed && cl_error);
    }
  }
}

TEST_CASE("a buffer larger than the device can hold is an out-of-memory error",
          "[ocl][memory][errors]") {
  engine eng(engine_kind::gpu, 0);
  cl_ulong max_alloc = 0;
  REQUIRE(clGetDeviceInfo(ocl_interop::get_device(eng), CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                          sizeof max_alloc, &max_alloc, nullptr) == CL_SUCCESS);
  // One f32 row more than the largest allocation.
  const auto elems = static_cast<std::int64_t>(max_alloc / 4 + 1);
  memory::desc md({elems}, data_type::f32, format_tag::a);
  try {
    memory m(md, eng);
    FAIL("the allocation succeeded");
  } catch (const error& e) {
    REQUIRE(e.code() == status::out_of_memory);
    REQUIRE_THAT(e.message(), Catch::Contains("CL_DEVICE_MAX_MEM_ALLOC_SIZE") &&
                                  Catch::Contains(std::to_string(elems * 4)));
  }
}

// The part of the suite only a GPU can check: it runs where the ICD loader
// lists one (the NVIDIA machine of docs/PERFORMANCE.md's recipe) and
// reports itself skipped elsewhere (CTest: SKIP_REGULAR_EXPRESSION in
// tests/ocl/CMakeLists.txt). Every other test runs on engine 0, which is
// then the GPU.
TEST_CASE("GPU part: engine 0 is the GPU and its primitives take the GPU defaults", "[ocl][gpu]") {
  const auto& devices = ocl_internal::engine_devices();
  std::string listed;
  bool any_gpu = false;
  for (const auto& d : devices) {
    listed += (listed.empty() ? "" : ", ") + d.device_name;
    any_gpu = any_gpu || (d.type & CL_DEVICE_TYPE_GPU) != 0;
  }
  if (!any_gpu) {
    WARN("the GPU part is skipped: no OpenCL GPU among the "
         << devices.size() << " device(s) listed (" << listed << "); the suite ran on them");
    return;
  }
  const engine eng(engine_kind::gpu, 0);
  cl_device_type type = 0;
  REQUIRE(clGetDeviceInfo(ocl_interop::get_device(eng), CL_DEVICE_TYPE, sizeof type, &type,
                          nullptr) == CL_SUCCESS);
  REQUIRE((type & CL_DEVICE_TYPE_GPU) != 0);  // GPUs first
  const memory::desc md({256, 256}, data_type::f32, format_tag::ab);
  const matmul::primitive_desc mm(matmul::desc(md, md, md), eng);
  const auto mm_config = backend::impl_of(mm).config();
  REQUIRE(mm_config.has_value());
  CHECK(mm_config->get("local_tiling") == 1);
  const convolution_forward::primitive_desc conv(
      convolution_forward::desc(
          prop_kind::forward_inference, algorithm::convolution_direct,
          memory::desc({1, 64, 56, 56}, data_type::f32, format_tag::any),
          memory::desc({64, 64, 3, 3}, data_type::f32, format_tag::any), memory::desc(),
          memory::desc({1, 64, 56, 56}, data_type::f32, format_tag::any), {1, 1}, {1, 1}, {1, 1}),
      eng);
  CHECK(conv.src_desc() == memory::desc({1, 64, 56, 56}, data_type::f32, format_tag::nchw));
  const auto conv_config = backend::impl_of(conv).config();
  REQUIRE(conv_config.has_value());
  CHECK(conv_config->get("local_tiling") == 1);
  // The binary a GPU driver returns realizes in a second context without a
  // source build, and runs.
  const primitive built(mm);
  cl_device_id dev = ocl_interop::get_device(eng);
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  {
    const engine other = ocl_interop::make_engine(dev, ctx);
    const auto before = ocl_interop::get_program_counts();
    const matmul again(matmul::primitive_desc(matmul::desc(md, md, md), other));
    CHECK(ocl_interop::get_program_counts().source_builds == before.source_builds);
    stream strm(other);
    memory a(md, other), b(md, other), c(md, other);
    ocl_test::write_all(a, std::vector<float>(256 * 256, 1.f));
    ocl_test::write_all(b, std::vector<float>(256 * 256, 0.5f));
    again.execute(strm,
                  {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b}, {PRIMCACHE_ARG_DST, c}});
    strm.wait();
    CHECK(ocl_test::read_all(c) == std::vector<float>(256 * 256, 128.f));  // exact: sums of halves
  }
  clReleaseContext(ctx);
}
