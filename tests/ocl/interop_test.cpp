#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <optional>
#include <vector>

#include "host_reference.hpp"
#include "ocl_engine.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"

using namespace primcache;

namespace {

// A fresh context and queue on the device of gpu engine 0.
struct user_context {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  explicit user_context(cl_command_queue_properties props = 0) {
    device = ocl_interop::get_device(engine(engine_kind::gpu, 0));
    cl_int err = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    queue = clCreateCommandQueue(context, device, props, &err);
    REQUIRE(err == CL_SUCCESS);
  }
  ~user_context() {
    if (queue) clReleaseCommandQueue(queue);
    if (context) clReleaseContext(context);
  }
};

// Runs relu with slope `alpha` on `eng`/`strm` over `n` values; checks them.
void check_relu(const eltwise_forward& prim, const engine& eng, stream& strm, float alpha) {
  const auto md = prim.get_primitive_desc().src_desc();
  memory src(md, eng), dst(md, eng);
  const auto in = ocl_test::pattern(md.size_bytes() / 4, 11);
  ocl_test::write_all(src, in);
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  strm.wait();
  const auto out = ocl_test::read_all(dst);
  for (std::size_t i = 0; i < in.size(); ++i) {
    REQUIRE(out[i] == (in[i] > 0 ? in[i] : alpha * in[i]));  // one product: exact
  }
}

}  // namespace

TEST_CASE("two contexts on one device share one cache entry, realized in each",
          "[ocl][interop][cache]") {
  set_primitive_cache_capacity(1024);
  user_context c1, c2;
  std::optional<engine> e1 = ocl_interop::make_engine(c1.device, c1.context);
  engine e2 = ocl_interop::make_engine(c2.device, c2.context);
  REQUIRE_FALSE(*e1 == e2);
  std::optional<stream> s1 = ocl_interop::make_stream(*e1, c1.queue);
  stream s2 = ocl_interop::make_stream(e2, c2.queue);
  REQUIRE(ocl_interop::get_queue(s2) == c2.queue);

  // An alpha no other test uses: a key of its own.
  const float alpha = 0.3125f;
  const memory::desc md({5, 37}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md, alpha);
  const auto before = ocl_interop::get_program_counts();
  const int size_before = get_primitive_cache_size();

  std::optional<eltwise_forward> p1(eltwise_forward::primitive_desc(d, *e1));
  eltwise_forward p2(eltwise_forward::primitive_desc(d, e2));

  const auto after = ocl_interop::get_program_counts();
  REQUIRE(get_primitive_cache_size() == size_before + 1);
  REQUIRE(after.source_builds == before.source_builds + 1);
  REQUIRE(after.binary_loads == before.binary_loads + 2);

  check_relu(*p1, *e1, *s1, alpha);
  check_relu(p2, e2, s2, alpha);

  SECTION("destroying one engine leaves the other's primitives working") {
    p1.reset();
    s1.reset();
    e1.reset();
    check_relu(p2, e2, s2, alpha);
  }
}

TEST_CASE("engines sharing one context share one realized program", "[ocl][interop][cache]") {
  set_primitive_cache_capacity(1024);
  user_context c;
  const engine e1 = ocl_interop::make_engine(c.device, c.context);
  const engine e2 = ocl_interop::make_engine(c.device, c.context);
  REQUIRE_FALSE(e1 == e2);
  const float alpha = 0.34375f;  // a key of its own
  const memory::desc md({4, 23}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md, alpha);
  const auto before = ocl_interop::get_program_counts();
  const eltwise_forward p1(eltwise_forward::primitive_desc(d, e1));
  const eltwise_forward p2(eltwise_forward::primitive_desc(d, e2));
  const auto after = ocl_interop::get_program_counts();
  // The source build's own program, then one program in the shared context
  // (PoCL 3.1 without its kernel cache aborts when programs of one binary in
  // one context are created and released concurrently: docs/ocl.md).
  CHECK(after.source_builds == before.source_builds + 1);
  CHECK(after.binary_loads == before.binary_loads + 1);
  stream s1(e1), s2(e2);
  check_relu(p1, e1, s1, alpha);
  check_relu(p2, e2, s2, alpha);
}

TEST_CASE("a primitive made from a cached impl after the last one went away loads nothing",
          "[ocl][interop][cache]") {
  // The impl keeps its realized program: before, the program went with the
  // last primitive, and every later one loaded and built the binary again
  // (a graph's per-run transforms did, every run).
  set_primitive_cache_capacity(1024);
  user_context c;
  const engine e = ocl_interop::make_engine(c.device, c.context);
  stream s(e);
  const float alpha = 0.40625f;  // a key of its own
  const memory::desc md({5, 19}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md, alpha);
  { check_relu(eltwise_forward(eltwise_forward::primitive_desc(d, e)), e, s, alpha); }
  const auto before = ocl_interop::get_program_counts();
  for (int i = 0; i < 3; ++i) {
    check_relu(eltwise_forward(eltwise_forward::primitive_desc(d, e)), e, s, alpha);
  }
  const auto after = ocl_interop::get_program_counts();
  CHECK(after.source_builds == before.source_builds);
  CHECK(after.binary_loads == before.binary_loads);
}

TEST_CASE("a cached impl keeps the programs of its latest contexts only", "[ocl][interop][cache]") {
  // A program retains its context: an impl that kept every program would
  // keep every context an application made per session.
  set_primitive_cache_capacity(1024);
  const float alpha = 0.46875f;  // a key of its own
  const memory::desc md({3, 7}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md, alpha);
  auto references = [](cl_context c) {
    cl_uint n = 0;
    REQUIRE(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, nullptr) == CL_SUCCESS);
    return n;
  };
  auto run_in = [&](const user_context& c) {
    const engine e = ocl_interop::make_engine(c.device, c.context);
    stream s(e);
    check_relu(eltwise_forward(eltwise_forward::primitive_desc(d, e)), e, s, alpha);
  };
  user_context first;
  const cl_uint alone = references(first.context);
  run_in(first);
  CHECK(references(first.context) > alone);  // its program, kept by the impl
  for (int i = 0; i < 6; ++i) {
    user_context other;
    run_in(other);
  }
  CHECK(references(first.context) == alone);
}

// Run by CTest with POCL_DEBUG (see CMakeLists.txt), which fails the test if
// PoCL generates code between the markers: a primitive realized from a
// cached binary and run once compiles nothing.
TEST_CASE("a primitive realized from a cached binary runs without compiling",
          "[.][ocl][interop][binary_load]") {
  set_primitive_cache_capacity(1024);
  user_context c1, c2;
  engine e1 = ocl_interop::make_engine(c1.device, c1.context);
  engine e2 = ocl_interop::make_engine(c2.device, c2.context);
  stream s1 = ocl_interop::make_stream(e1, c1.queue);
  stream s2 = ocl_interop::make_stream(e2, c2.queue);
  const float alpha = 0.1875f;
  const memory::desc md({3, 61}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md, alpha);
  eltwise_forward p1(eltwise_forward::primitive_desc(d, e1));  // source build + capture
  check_relu(p1, e1, s1, alpha);
  std::cerr << "BEGIN-FROM-BINARY" << std::endl;
  const auto before = ocl_interop::get_program_counts();
  eltwise_forward p2(eltwise_forward::primitive_desc(d, e2));  // from the binary
  check_relu(p2, e2, s2, alpha);
  const auto after = ocl_interop::get_program_counts();
  std::cerr << "END-FROM-BINARY" << std::endl;
  REQUIRE(after.source_builds == before.source_builds);
  REQUIRE(after.binary_loads == before.binary_loads + 1);
}

TEST_CASE("a stream times its kernels with profiling events", "[ocl][stream][profiling]") {
  const engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const memory::desc md({64, 129}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md, 0.f);
  const eltwise_forward prim(eltwise_forward::primitive_desc(d, eng));
  memory src(md, eng), dst(md, eng);
  ocl_test::write_all(src, ocl_test::pattern(md.size_bytes() / 4, 5));
  const primitive::args args{{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}};

  // No measurement started: nothing to say.
  CHECK_FALSE(strm.profiled_ns().has_value());
  REQUIRE(strm.reset_profiling());
  CHECK(strm.profiled_ns() == std::optional<std::int64_t>(0));  // nothing ran yet

  const auto t0 = std::chrono::steady_clock::now();
  prim.execute(strm, args);
  const std::optional<std::int64_t> one = strm.profiled_ns();  // waits for the kernel
  const auto wall =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  REQUIRE(one.has_value());
  CHECK(*one > 0);
  CHECK(*one <= wall.count());  // the kernel alone, inside the launch-to-wait time

  SECTION("the measurement sums later kernels until it is reset") {
    prim.execute(strm, args);
    prim.execute(strm, args);
    const std::optional<std::int64_t> three = strm.profiled_ns();
    REQUIRE(three.has_value());
    CHECK(*three > *one);
    REQUIRE(strm.reset_profiling());
    CHECK(strm.profiled_ns() == std::optional<std::int64_t>(0));
  }
  SECTION("more kernels than the stream holds events for are folded into the sum") {
    std::int64_t previous = *one;
    for (std::size_t i = 0; i < 2 * 1024 + 3; ++i) prim.execute(strm, args);
    const std::optional<std::int64_t> many = strm.profiled_ns();
    REQUIRE(many.has_value());
    CHECK(*many > previous);
  }
  SECTION("stop_profiling ends the measurement") {
    strm.stop_profiling();
    prim.execute(strm, args);
    strm.wait();
    CHECK_FALSE(strm.profiled_ns().has_value());
  }
  SECTION("copies of a stream share its measurement") {
    stream copy = strm;
    prim.execute(copy, args);
    const std::optional<std::int64_t> two = strm.profiled_ns();
    REQUIRE(two.has_value());
    CHECK(*two > *one);
  }
}

TEST_CASE("a user's queue made without profiling cannot time kernels", "[ocl][stream][profiling]") {
  user_context c;  // its queue has no CL_QUEUE_PROFILING_ENABLE
  const engine eng = ocl_interop::make_engine(c.device, c.context);
  stream strm = ocl_interop::make_stream(eng, c.queue);
  CHECK_FALSE(strm.reset_profiling());
  CHECK_FALSE(strm.profiled_ns().has_value());
  strm.stop_profiling();  // harmless
}

TEST_CASE("an interop engine and stream keep the user's context and queue alive",
          "[ocl][interop]") {
  user_context c;
  std::optional<engine> eng = ocl_interop::make_engine(c.device, c.context);
  std::optional<stream> strm = ocl_interop::make_stream(*eng, c.queue);
  REQUIRE(ocl_interop::get_context(*eng) == c.context);
  REQUIRE(ocl_interop::get_device(*eng) == c.device);
  REQUIRE(ocl_interop::get_queue(*strm) == c.queue);
  // The user lets go of theirs: the engine and the stream hold references.
  clReleaseCommandQueue(c.queue);
  clReleaseContext(c.context);
  cl_context ctx = c.context;
  c.queue = nullptr;
  c.context = nullptr;
  const float alpha = 0.40625f;
  const memory::desc md({2, 45}, data_type::f32, format_tag::ab);
  const eltwise_forward prim(eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, md, alpha),
      *eng));
  check_relu(prim, *eng, *strm, alpha);
  cl_uint refs = 0;
  REQUIRE(clGetContextInfo(ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, nullptr) ==
          CL_SUCCESS);
  CHECK(refs >= 1);
}

TEST_CASE("a primitive runs on the user's own buffers through the user's queue",
          "[ocl][interop][memory]") {
  user_context c;
  const engine eng = ocl_interop::make_engine(c.device, c.context);
  stream strm = ocl_interop::make_stream(eng, c.queue);
  const memory::desc md({7, 11}, data_type::f32, format_tag::ab);
  const std::vector<float> in = ocl_test::pattern(77, 41);
  cl_int err = CL_SUCCESS;
  cl_mem src_buf = clCreateBuffer(c.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                  md.size_bytes(), const_cast<float*>(in.data()), &err);
  REQUIRE(err == CL_SUCCESS);
  cl_mem dst_buf = clCreateBuffer(c.context, CL_MEM_READ_WRITE, md.size_bytes(), nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  {
    memory src(md, eng, src_buf), dst(md, eng, dst_buf);
    REQUIRE(src.get_data_handle() == src_buf);
    const eltwise_forward prim(eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear, md, 0.5f,
                              -1.f),
        eng));
    prim.execute(strm, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
    // The user's queue is in order: a read enqueued after the primitive
    // sees its result without stream::wait().
    std::vector<float> out(in.size());
    REQUIRE(clEnqueueReadBuffer(c.queue, dst_buf, CL_TRUE, 0, md.size_bytes(), out.data(), 0,
                                nullptr, nullptr) == CL_SUCCESS);
    for (std::size_t i = 0; i < in.size(); ++i) REQUIRE(out[i] == 0.5f * in[i] - 1.f);
  }
  // The memories did not own the buffers: they are still the user's.
  cl_uint refs = 0;
  REQUIRE(clGetMemObjectInfo(dst_buf, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, nullptr) ==
          CL_SUCCESS);
  CHECK(refs == 1);
  REQUIRE(clReleaseMemObject(src_buf) == CL_SUCCESS);
  REQUIRE(clReleaseMemObject(dst_buf) == CL_SUCCESS);
}

TEST_CASE("a memory refuses a user's cl_mem of another context or smaller than its descriptor",
          "[ocl][interop][memory][errors]") {
  user_context mine, other;
  const engine eng = ocl_interop::make_engine(mine.device, mine.context);
  // Channels padded to a block of 16: size_bytes() (1280) is more than the
  // dense 1x3x4x5 floats (240).
  const memory::desc md({1, 3, 4, 5}, data_type::f32, format_tag::nChw16c);
  REQUIRE(md.size_bytes() == 1 * 16 * 4 * 5 * 4);
  auto buffer = [](cl_context context, std::size_t bytes) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    return m;
  };
  auto refused = [](const std::function<void()>& wrap, const std::string& why) {
    try {
      wrap();
      FAIL("the cl_mem was accepted");
    } catch (const error& e) {
      INFO(e.what());
      CHECK(e.code() == status::invalid_arguments);
      CHECK_THAT(e.message(), Catch::Contains(why));
    }
  };
  cl_mem foreign = buffer(other.context, md.size_bytes());
  cl_mem dense = buffer(mine.context, 240);
  cl_mem exact = buffer(mine.context, md.size_bytes());
  cl_mem larger = buffer(mine.context, md.size_bytes() + 64);

  SECTION("wrapped by the constructor") {
    refused([&] { memory m(md, eng, foreign); }, "another OpenCL context");
    refused([&] { memory m(md, eng, dense); }, "holds 240 bytes; the memory descriptor needs 1280");
    CHECK(memory(md, eng, exact).get_data_handle() == exact);
    CHECK(memory(md, eng, larger).get_data_handle() == larger);
    CHECK(memory(md, eng, nullptr).get_data_handle() == nullptr);
  }
  SECTION("set as the data handle: a refused handle leaves the memory's buffer") {
    memory m(md, eng);
    void* own = m.get_data_handle();
    refused([&] { m.set_data_handle(foreign); }, "another OpenCL context");
    refused([&] { m.set_data_handle(dense); }, "holds 240 bytes; the memory descriptor needs 1280");
    CHECK(m.get_data_handle() == own);
    m.set_data_handle(exact);
    CHECK(m.get_data_handle() == exact);
  }
  SECTION("an image is not a buffer") {
    cl_bool images = CL_FALSE;
    REQUIRE(clGetDeviceInfo(mine.device, CL_DEVICE_IMAGE_SUPPORT, sizeof images, &images,
                            nullptr) == CL_SUCCESS);
    if (images == CL_FALSE) {
      WARN("the device has no images: nothing to refuse");
    } else {
      const cl_image_format format{CL_RGBA, CL_FLOAT};
      cl_image_desc desc{};
      desc.image_type = CL_MEM_OBJECT_IMAGE2D;
      desc.image_width = 64;
      desc.image_height = 64;
      cl_int err = CL_SUCCESS;
      cl_mem image = clCreateImage(mine.context, CL_MEM_READ_WRITE, &format, &desc, nullptr, &err);
      REQUIRE(err == CL_SUCCESS);
      refused([&] { memory m(md, eng, image); }, "not a buffer");
      clReleaseMemObject(image);
    }
  }
  for (cl_mem m : {foreign, dense, exact, larger}) clReleaseMemObject(m);
}

TEST_CASE("a stream refuses a queue that is not an in-order queue of its engine",
          "[ocl][interop][errors]") {
  user_context mine, other;
  const engine eng = ocl_interop::make_engine(mine.device, mine.context);
  SECTION("a queue of another context") {
    REQUIRE_THROWS_MATCHES(ocl_interop::make_stream(eng, other.queue), error,
                           Catch::Predicate<error>([](const error& e) {
                             return e.code() == status::invalid_arguments &&
                                    std::string(e.what()).find("another cl_context") !=
                                        std::string::npos;
                           }));
  }
  SECTION("an out-of-order queue") {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(mine.context, mine.device,
                                              CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err == CL_INVALID_QUEUE_PROPERTIES) {
      WARN("the device has no out-of-order queues: nothing to refuse");
      return;
    }
    REQUIRE(err == CL_SUCCESS);
    try {
      ocl_interop::make_stream(eng, q);
      FAIL("an out-of-order queue was accepted");
    } catch (const error& e) {
      CHECK(e.code() == status::invalid_arguments);
      CHECK_THAT(std::string(e.what()), Catch::Contains("out of order"));
    }
    clReleaseCommandQueue(q);
  }
  SECTION("no queue") {
    REQUIRE_THROWS_WITH(ocl_interop::make_stream(eng, nullptr),
                        Catch::Contains("CL_INVALID_COMMAND_QUEUE"));
  }
  SECTION("an engine on no context") {
    REQUIRE_THROWS_WITH(ocl_interop::make_engine(mine.device, nullptr),
                        Catch::Contains("CL_INVALID_CONTEXT"));
  }
}

// The device's identity (platform, device, driver version, the platform's
// and device's versions) is in every key: an engine whose device reports
// another platform, model, driver or versions never
// shares a cache entry with this one, even on the same cl_device_id (made
// here by describing the device with one field changed).
TEST_CASE(
    "engines of devices that differ in platform, model, driver or versions never share an entry",
    "[ocl][interop][cache]") {
  set_primitive_cache_capacity(1024);
  const engine base(engine_kind::gpu, 0);
  const auto& real = ocl_internal::ocl_engine_of(backend::impl_of(base)).device_info();
  const auto field = GENERATE(0, 1, 2, 3);
  ocl_internal::device_entry other = real;
  const char* what = field == 0   ? "platform"
                     : field == 1 ? "device"
                     : field == 2 ? "driver"
                                  : "versions";
  (field == 0   ? other.platform_name
   : field == 1 ? other.device_name
   : field == 2 ? other.driver_version
                : other.versions) += " (another)";
  INFO("changed: " << what);
  const engine changed =
      backend::wrap_engine(std::make_shared<const ocl_internal::ocl_engine>(0, other));
  const float alpha = 0.15625f + 0.0078125f * static_cast<float>(field);  // a key per round
  const memory::desc md({3, 19}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md, alpha);
  const auto before = ocl_interop::get_program_counts();
  const int size_before = get_primitive_cache_size();
  const eltwise_forward p1(eltwise_forward::primitive_desc(d, base));
  const eltwise_forward p2(eltwise_forward::primitive_desc(d, changed));
  CHECK(get_primitive_cache_size() == size_before + 2);
  CHECK(ocl_interop::get_program_counts().source_builds == before.source_builds + 2);
  CHECK(eltwise_forward::primitive_desc(d, base).cache_blob_id() !=
        eltwise_forward::primitive_desc(d, changed).cache_blob_id());
  stream s1(base), s2(changed);
  check_relu(p1, base, s1, alpha);
  check_relu(p2, changed, s2, alpha);
}

// Run by CTest with two PoCL devices (POCL_DEVICES="pthread basic") and
// PRIMCACHE_OCL_DEVICE=pthread, which leaves the basic device out of
// engine(gpu, i)'s list: see tests/ocl/CMakeLists.txt.
TEST_CASE("an interop engine on a device engine(gpu, i) does not list has an index of its own",
          "[.][ocl][interop][env_unlisted]") {
  const std::size_t count = engine::get_count(engine_kind::gpu);
  REQUIRE(count >= 1);
  std::vector<cl_device_id> listed;
  for (std::size_t i = 0; i < count; ++i) {
    listed.push_back(ocl_interop::get_device(engine(engine_kind::gpu, i)));
  }
  cl_platform_id platform = nullptr;
  REQUIRE(clGetDeviceInfo(listed[0], CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr) ==
          CL_SUCCESS);
  cl_uint n = 0;
  REQUIRE(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) == CL_SUCCESS);
  std::vector<cl_device_id> all(n);
  REQUIRE(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, all.data(), nullptr) == CL_SUCCESS);
  cl_device_id unlisted = nullptr;
  for (cl_device_id d : all) {
    if (std::find(listed.begin(), listed.end(), d) == listed.end()) unlisted = d;
  }
  REQUIRE(unlisted != nullptr);  // PRIMCACHE_OCL_DEVICE left one out

  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &unlisted, nullptr, nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  cl_context ctx2 = clCreateContext(nullptr, 1, &unlisted, nullptr, nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  {
    const engine mine = ocl_interop::make_engine(unlisted, ctx);
    // Past the listed devices: engine(gpu, that index) names no device.
    CHECK(mine.get_index() >= count);
    CHECK_THROWS_WITH(engine(engine_kind::gpu, mine.get_index()), Catch::Contains("out of range"));
    // The same device in another context keeps the index; a listed device
    // keeps its place.
    CHECK(ocl_interop::make_engine(unlisted, ctx2).get_index() == mine.get_index());
    CHECK(ocl_interop::make_engine(listed[0], ocl_interop::get_context(engine(engine_kind::gpu, 0)))
              .get_index() == 0);
    // Each index has its own constant tensor cache: the unlisted device's
    // packed weights are not charged to engine 0's device.
    CHECK(&constant_tensor_cache_for(mine) !=
          &constant_tensor_cache_for(engine(engine_kind::gpu, 0)));
  }
  clReleaseContext(ctx);
  clReleaseContext(ctx2);
}
