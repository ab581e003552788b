#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fake_backend.hpp"
#include "primcache/runtime/primcache.h"

namespace {
std::string last_error() {
  return pc_last_error_message();
}
}  // namespace

TEST_CASE("the C API creates, caches and runs primitives", "[runtime][c_api]") {
  fake::install();
  pc_engine_t eng = nullptr;
  REQUIRE(pc_engine_create(&eng, pc_engine_gpu, 0) == pc_success);
  pc_stream_t strm = nullptr;
  REQUIRE(pc_stream_create(&strm, eng) == pc_success);
  const int64_t dims[2] = {5, 3};
  pc_memory_desc_t md = nullptr;
  REQUIRE(pc_memory_desc_create_with_tag(&md, 2, dims, pc_f32, pc_tag_ab) == pc_success);
  size_t bytes = 0;
  REQUIRE(pc_memory_desc_get_size(&bytes, md) == pc_success);
  CHECK(bytes == 60);

  REQUIRE(pc_set_primitive_cache_capacity(16) == pc_success);
  int capacity = 0;
  REQUIRE(pc_get_primitive_cache_capacity(&capacity) == pc_success);
  CHECK(capacity == 16);

  pc_primitive_desc_t pd = nullptr;
  REQUIRE(pc_reorder_primitive_desc_create(&pd, md, eng, md, eng, nullptr) == pc_success);
  pc_memory_desc_t queried = nullptr;
  REQUIRE(pc_primitive_desc_query_md(&queried, pd, PRIMCACHE_ARG_TO) == pc_success);
  int equal = 0;
  REQUIRE(pc_memory_desc_equal(&equal, queried, md) == pc_success);
  CHECK(equal == 1);

  pc_primitive_t prim = nullptr;
  REQUIRE(pc_primitive_create(&prim, pd) == pc_success);
  int size = 0;
  REQUIRE(pc_get_primitive_cache_size(&size) == pc_success);
  CHECK(size >= 1);

  float src_buf[15], dst_buf[15] = {};
  for (int i = 0; i < 15; ++i) src_buf[i] = static_cast<float>(i) * 0.5f;
  pc_memory_t src = nullptr, dst = nullptr;
  REQUIRE(pc_memory_create(&src, md, eng, src_buf) == pc_success);
  REQUIRE(pc_memory_create(&dst, md, eng, PC_MEMORY_ALLOCATE) == pc_success);
  void* dst_handle = nullptr;
  REQUIRE(pc_memory_get_data_handle(dst, &dst_handle) == pc_success);
  CHECK(dst_handle != nullptr);
  REQUIRE(pc_memory_set_data_handle(dst, dst_buf) == pc_success);
  pc_exec_arg_t args[2] = {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}};
  REQUIRE(pc_primitive_execute(prim, strm, 2, args) == pc_success);
  REQUIRE(pc_stream_wait(strm) == pc_success);
  CHECK(std::memcmp(src_buf, dst_buf, sizeof src_buf) == 0);

  SECTION("errors come back as statuses with a message") {
    CHECK(pc_primitive_execute(prim, strm, 1, args) == pc_invalid_arguments);
    CHECK(last_error().find("missing") != std::string::npos);
    pc_exec_arg_t null_memory[1] = {{PRIMCACHE_ARG_FROM, nullptr}};
    CHECK(pc_primitive_execute(prim, strm, 1, null_memory) == pc_invalid_arguments);
    CHECK(last_error().find("NULL memory") != std::string::npos);
    CHECK(pc_primitive_execute(prim, strm, 2, nullptr) == pc_invalid_arguments);
    CHECK(pc_primitive_execute(nullptr, strm, 0, nullptr) == pc_invalid_arguments);
    CHECK(last_error() == "primitive or stream is NULL");
    CHECK(pc_set_primitive_cache_capacity(-3) == pc_invalid_arguments);
    CHECK(last_error() == "primitive cache capacity -3 is negative");
    CHECK(pc_get_primitive_cache_size(nullptr) == pc_invalid_arguments);

    pc_engine_t none = nullptr;
    CHECK(pc_engine_create(&none, pc_engine_cpu, 0) == pc_unimplemented);
    CHECK(pc_engine_create(&none, pc_engine_gpu, 9) == pc_invalid_arguments);
    CHECK(pc_engine_create(nullptr, pc_engine_gpu, 0) == pc_invalid_arguments);
    CHECK(pc_engine_create(&none, static_cast<pc_engine_kind_t>(7), 0) == pc_invalid_arguments);
    CHECK(last_error() == "unknown engine kind 7");
    std::size_t count = 0;
    CHECK(pc_engine_get_count(&count, static_cast<pc_engine_kind_t>(7)) == pc_invalid_arguments);
    // The allocate sentinel is not a buffer: refused, and the memory keeps
    // its buffer (an execution through it would write to address -1).
    CHECK(pc_memory_set_data_handle(dst, PC_MEMORY_ALLOCATE) == pc_invalid_arguments);
    CHECK(last_error().find("PC_MEMORY_ALLOCATE") != std::string::npos);
    void* kept = nullptr;
    CHECK(pc_memory_get_data_handle(dst, &kept) == pc_success);
    CHECK(kept == dst_buf);

    pc_memory_desc_t bad = nullptr;
    CHECK(pc_memory_desc_create_with_tag(&bad, 2, dims, static_cast<pc_data_type_t>(99),
                                         pc_tag_ab) == pc_invalid_arguments);
    CHECK(last_error().find("unknown data type") != std::string::npos);
    CHECK(pc_memory_desc_create_with_tag(&bad, 2, dims, pc_f32, static_cast<pc_format_tag_t>(99)) ==
          pc_invalid_arguments);
    CHECK(pc_memory_desc_create_with_tag(&bad, 9, dims, pc_f32, pc_tag_ab) == pc_invalid_arguments);
    CHECK(pc_memory_desc_create_with_tag(&bad, 2, nullptr, pc_f32, pc_tag_ab) ==
          pc_invalid_arguments);
    const int64_t negative[2] = {-1, 3};
    CHECK(pc_memory_desc_create_with_tag(&bad, 2, negative, pc_f32, pc_tag_ab) ==
          pc_invalid_arguments);

    pc_primitive_attr_t attr = nullptr;
    REQUIRE(pc_primitive_attr_create(&attr) == pc_success);
    CHECK(pc_primitive_attr_append_eltwise(attr, 1.f, pc_binary_add, 0, 0) == pc_invalid_arguments);
    CHECK(pc_primitive_attr_append_eltwise(attr, 1.f, static_cast<pc_algorithm_t>(77), 0, 0) ==
          pc_invalid_arguments);
    CHECK(pc_primitive_attr_set_output_scales(attr, 0, 0, nullptr) == pc_invalid_arguments);
    const float scale = 2.f;
    CHECK(pc_primitive_attr_set_output_scales(attr, 1, 0, &scale) == pc_success);
    CHECK(pc_primitive_attr_append_eltwise(attr, 1.f, pc_eltwise_relu, 0, 0) == pc_success);
    CHECK(pc_primitive_attr_append_binary(attr, pc_binary_add, md) == pc_success);
    pc_primitive_desc_t pd2 = nullptr;
    const int64_t other_dims[2] = {3, 5};
    pc_memory_desc_t other = nullptr;
    REQUIRE(pc_memory_desc_create_with_tag(&other, 2, other_dims, pc_f32, pc_tag_ab) == pc_success);
    CHECK(pc_reorder_primitive_desc_create(&pd2, md, eng, other, eng, attr) ==
          pc_invalid_arguments);
    CHECK(last_error().find("differ in shape") != std::string::npos);
    CHECK(pc_matmul_primitive_desc_create(&pd2, eng, md, md, nullptr, md, nullptr) ==
          pc_invalid_arguments);
    CHECK(last_error().find("disagree on K") != std::string::npos);
    const int64_t ones[2] = {1, 1};
    CHECK(pc_convolution_forward_primitive_desc_create(&pd2, eng, pc_convolution_direct, md, md,
                                                       nullptr, md, ones, nullptr, ones, ones,
                                                       nullptr) == pc_invalid_arguments);
    CHECK(pc_eltwise_forward_primitive_desc_create(&pd2, eng, pc_eltwise_relu, md, other, 0, 0,
                                                   nullptr) == pc_invalid_arguments);
    pc_memory_desc_destroy(other);
    pc_primitive_attr_destroy(attr);
  }

  pc_primitive_destroy(prim);
  pc_memory_destroy(src);
  pc_memory_destroy(dst);
  pc_memory_desc_destroy(queried);
  pc_primitive_desc_destroy(pd);
  pc_memory_desc_destroy(md);
  pc_stream_destroy(strm);
  pc_engine_destroy(eng);
  pc_set_primitive_cache_capacity(1024);
}

#if PRIMCACHE_TEST_REPLACES_NEW
#include "support/allocation_counter.hpp"

TEST_CASE("the C API's error path survives running out of memory at every allocation",
          "[runtime][c_api][oom]") {
  fake::install();
  // A call that fails with a long message: every allocation on its way out
  // (the error's message, its copies) is made to fail in turn. Each must give
  // an error status and a message, never terminate the process.
  const int64_t dims[2] = {5, 3};
  auto call = [&] {
    pc_memory_desc_t md = nullptr;
    return pc_memory_desc_create_with_tag(&md, 2, dims, pc_f32, static_cast<pc_format_tag_t>(999));
  };
  std::size_t allocations = 0;
  {
    primcache_test::allocation_scope scope;
    REQUIRE(call() != pc_success);
    allocations = scope.count();
  }
  REQUIRE(allocations > 0);
  for (std::size_t n = 0; n < allocations; ++n) {
    primcache_test::allocation_scope scope;
    scope.fail_after(n);
    const pc_status_t s = call();
    CHECK(s != pc_success);
    CHECK(std::strlen(pc_last_error_message()) > 0);
  }
}
#endif

TEST_CASE("the C API's cache blob functions report sizes and refuse what they cannot do",
          "[runtime][c_api][blob]") {
  fake::install();
  pc_engine_t eng = nullptr;
  REQUIRE(pc_engine_create(&eng, pc_engine_gpu, 0) == pc_success);
  const int64_t dims[2] = {5, 3};
  pc_memory_desc_t md = nullptr;
  REQUIRE(pc_memory_desc_create_with_tag(&md, 2, dims, pc_f32, pc_tag_ab) == pc_success);
  pc_primitive_desc_t pd = nullptr;
  REQUIRE(pc_reorder_primitive_desc_create(&pd, md, eng, md, eng, nullptr) == pc_success);

  size_t size = 0;
  REQUIRE(pc_primitive_desc_get_cache_blob_id(pd, &size, nullptr) == pc_success);
  CHECK(size > 16);
  std::vector<uint8_t> id(size);
  REQUIRE(pc_primitive_desc_get_cache_blob_id(pd, &size, id.data()) == pc_success);
  CHECK(size == id.size());
  size_t small = size - 1;
  CHECK(pc_primitive_desc_get_cache_blob_id(pd, &small, id.data()) == pc_invalid_arguments);
  CHECK(pc_primitive_desc_get_cache_blob_id(pd, nullptr, nullptr) == pc_invalid_arguments);

  pc_primitive_t prim = nullptr;
  REQUIRE(pc_primitive_create(&prim, pd) == pc_success);
  // The fake implementation cannot serialize.
  CHECK(pc_primitive_get_cache_blob(prim, &size, nullptr) == pc_unimplemented);
  pc_primitive_t from_blob = nullptr;
  const uint8_t garbage[4] = {1, 2, 3, 4};
  REQUIRE(pc_set_primitive_cache_capacity(0) == pc_success);
  CHECK(pc_primitive_create_from_cache_blob(&from_blob, pd, sizeof garbage, garbage) ==
        pc_corrupt_data);
  CHECK(from_blob == nullptr);
  CHECK(pc_primitive_create_from_cache_blob(&from_blob, pd, 4, nullptr) == pc_invalid_arguments);
  REQUIRE(pc_set_primitive_cache_capacity(1024) == pc_success);

  CHECK(pc_primitive_destroy(prim) == pc_success);
  CHECK(pc_primitive_desc_destroy(pd) == pc_success);
  CHECK(pc_memory_desc_destroy(md) == pc_success);
  CHECK(pc_engine_destroy(eng) == pc_success);
}

TEST_CASE("C: the constant-weights attribute and memory ids", "[runtime][c_api][constant]") {
  fake::install();
  pc_primitive_attr_t attr = nullptr;
  REQUIRE(pc_primitive_attr_create(&attr) == pc_success);
  int constant = -1;
  REQUIRE(pc_primitive_attr_get_constant_weights(attr, &constant) == pc_success);
  CHECK(constant == 0);
  REQUIRE(pc_primitive_attr_set_constant_weights(attr, 7) == pc_success);  // nonzero is true
  REQUIRE(pc_primitive_attr_get_constant_weights(attr, &constant) == pc_success);
  CHECK(constant == 1);
  REQUIRE(pc_primitive_attr_set_constant_weights(attr, 0) == pc_success);
  REQUIRE(pc_primitive_attr_get_constant_weights(attr, &constant) == pc_success);
  CHECK(constant == 0);

  pc_engine_t eng = nullptr;
  REQUIRE(pc_engine_create(&eng, pc_engine_gpu, 0) == pc_success);
  const int64_t dims[2] = {2, 2};
  pc_memory_desc_t md = nullptr;
  REQUIRE(pc_memory_desc_create_with_tag(&md, 2, dims, pc_f32, pc_tag_ab) == pc_success);
  float buf[4] = {};
  pc_memory_t a = nullptr, b = nullptr;
  REQUIRE(pc_memory_create(&a, md, eng, buf) == pc_success);
  REQUIRE(pc_memory_create(&b, md, eng, buf) == pc_success);
  uint64_t id_a = 0, id_b = 0, again = 0;
  REQUIRE(pc_memory_get_id(a, &id_a) == pc_success);
  REQUIRE(pc_memory_get_id(b, &id_b) == pc_success);
  CHECK(id_a != 0);
  CHECK(id_a != id_b);  // one buffer, two memories: two ids
  REQUIRE(pc_memory_set_data_handle(a, buf) == pc_success);
  REQUIRE(pc_memory_get_id(a, &again) == pc_success);
  CHECK(again != id_a);  // renewed, even for the same pointer

  CHECK(pc_primitive_attr_set_constant_weights(nullptr, 1) == pc_invalid_arguments);
  CHECK(last_error() == "attr is NULL");
  CHECK(pc_primitive_attr_get_constant_weights(attr, nullptr) == pc_invalid_arguments);
  CHECK(last_error() == "attr or constant is NULL");
  CHECK(pc_primitive_attr_get_constant_weights(nullptr, &constant) == pc_invalid_arguments);
  CHECK(pc_memory_get_id(nullptr, &again) == pc_invalid_arguments);
  CHECK(last_error() == "memory or id is NULL");
  CHECK(pc_memory_get_id(a, nullptr) == pc_invalid_arguments);

  pc_memory_destroy(a);
  pc_memory_destroy(b);
  pc_memory_desc_destroy(md);
  pc_engine_destroy(eng);
  pc_primitive_attr_destroy(attr);
}

// primcache.h: "Values match primcache::algorithm" (the ends of the
// families, and both convolution algorithms).
static_assert(pc_eltwise_relu == static_cast<int>(primcache::algorithm::eltwise_relu));
static_assert(pc_eltwise_clip == static_cast<int>(primcache::algorithm::eltwise_clip));
static_assert(pc_binary_add == static_cast<int>(primcache::algorithm::binary_add));
static_assert(pc_convolution_direct == static_cast<int>(primcache::algorithm::convolution_direct));
static_assert(pc_convolution_auto == static_cast<int>(primcache::algorithm::convolution_auto));

TEST_CASE("C: every convolution algorithm of the C++ API has its C value",
          "[runtime][c_api][convolution]") {
  fake::install();
  pc_engine_t eng = nullptr;
  REQUIRE(pc_engine_create(&eng, pc_engine_gpu, 0) == pc_success);
  const int64_t src_dims[4] = {1, 16, 5, 5}, weights_dims[4] = {16, 16, 3, 3},
                dst_dims[4] = {1, 16, 3, 3};
  pc_memory_desc_t src = nullptr, weights = nullptr, dst = nullptr;
  REQUIRE(pc_memory_desc_create_with_tag(&src, 4, src_dims, pc_f32, pc_tag_nchw) == pc_success);
  REQUIRE(pc_memory_desc_create_with_tag(&weights, 4, weights_dims, pc_f32, pc_tag_oihw) ==
          pc_success);
  REQUIRE(pc_memory_desc_create_with_tag(&dst, 4, dst_dims, pc_f32, pc_tag_nchw) == pc_success);
  const int64_t strides[2] = {1, 1}, padding[2] = {0, 0};

  // The fake backend has no convolution: a descriptor the C++ API accepts
  // gets as far as the search for an implementation (unimplemented); an
  // algorithm the C API does not know stops before (invalid_arguments).
  const pc_algorithm_t alg = GENERATE(pc_convolution_direct, pc_convolution_auto);
  CAPTURE(static_cast<int>(alg));
  pc_primitive_desc_t pd = nullptr;
  CHECK(pc_convolution_forward_primitive_desc_create(&pd, eng, alg, src, weights, nullptr, dst,
                                                     strides, nullptr, padding, padding,
                                                     nullptr) == pc_unimplemented);
  CHECK(last_error().find("no convolution implementation") != std::string::npos);
  CHECK(pd == nullptr);

  pc_memory_desc_destroy(src);
  pc_memory_desc_destroy(weights);
  pc_memory_desc_destroy(dst);
  pc_engine_destroy(eng);
}

TEST_CASE("C: pc_set_persistent_cache_dir refuses with the statuses its header names",
          "[runtime][c_api][persistent]") {
  char dir_template[] = "/tmp/primcache-c-api-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const std::string file = dir + "/a-file";
  std::ofstream(file) << "x";

  CHECK(pc_set_persistent_cache_dir(file.c_str(), 10) == pc_invalid_arguments);
  CHECK(last_error().find("is not a directory") != std::string::npos);

  REQUIRE(::setenv("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE", (dir + "/no-key").c_str(), 1) == 0);
  CHECK(pc_set_persistent_cache_dir((dir + "/store").c_str(), 10) == pc_not_found);
  CHECK(last_error().find("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE") != std::string::npos);
  ::unsetenv("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE");

  std::filesystem::remove_all(dir);
}
