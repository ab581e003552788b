#include <catch2/catch.hpp>

#include <string>

#include "host_reference.hpp"
#include "primcache/base/env.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"

using namespace primcache;

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
