// A kernel launch that the driver accepts and that then fails while it
// runs (a negative CL_EVENT_COMMAND_EXECUTION_STATUS; neither the enqueue
// nor clFinish has to report it): the capture launch made while building a
// primitive must fail the creation, so that no binary of a launch that
// never completed is cached or persisted.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <atomic>
#include <string>

#include "host_reference.hpp"
#include "primcache/ocl/ocl.hpp"

using namespace primcache;

namespace {

// The status the next clEnqueueNDRangeKernel's command ends with instead of
// running (CL_SUCCESS: none), then back to CL_SUCCESS.
std::atomic<cl_int> fail_next_launch{CL_SUCCESS};

}  // namespace

// The backend's objects are linked into this program, so their calls reach
// this definition instead of the ICD loader's (as persist_test.cpp's
// clCreateProgramWithBinary). When told, it accepts the launch and hands
// back an event that has already failed with the given status, the way a
// command that fails on the device ends; every other call goes to the loader.
extern "C" cl_int clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel, cl_uint work_dim,
                                         const size_t* global_offset, const size_t* global_size,
                                         const size_t* local_size, cl_uint num_events,
                                         const cl_event* wait_list, cl_event* event) {
  static const auto real = reinterpret_cast<decltype(&clEnqueueNDRangeKernel)>(
      ::dlsym(RTLD_NEXT, "clEnqueueNDRangeKernel"));
  const cl_int fail = fail_next_launch.exchange(CL_SUCCESS);
  if (fail == CL_SUCCESS) {
    return real(queue, kernel, work_dim, global_offset, global_size, local_size, num_events,
                wait_list, event);
  }
  if (event != nullptr) {
    cl_context context = nullptr;
    clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context, nullptr);
    cl_int err = CL_SUCCESS;
    *event = clCreateUserEvent(context, &err);
    if (err != CL_SUCCESS) return err;
    clSetUserEventStatus(*event, fail);
  }
  return CL_SUCCESS;
}

TEST_CASE("a capture launch that fails on the device fails the creation and caches nothing",
          "[ocl][errors][capture]") {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  // A shape and slope no other test uses: the key starts cold.
  const memory::desc md({2, 7, 3, 11}, data_type::f32, format_tag::nchw);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, md,
                                0.3671875f);
  const auto pd = eltwise_forward::primitive_desc(d, eng);
  const auto before = ocl_interop::get_program_counts();
  fail_next_launch.store(CL_OUT_OF_RESOURCES);
  try {
    eltwise_forward p(pd);
    FAIL("the primitive was created from a launch that did not complete");
  } catch (const error& e) {
    INFO(e.what());
    CHECK(e.code() == status::runtime_error);
    CHECK_THAT(e.message(), Catch::Contains("capture launch") &&
                                Catch::Contains("on the device failed: CL_OUT_OF_RESOURCES"));
  }
  CHECK(fail_next_launch.load() == CL_SUCCESS);  // the capture launch met the failure
  fail_next_launch.store(CL_SUCCESS);
  CHECK(ocl_interop::get_program_counts().source_builds == before.source_builds + 1);
  CHECK_FALSE(primitive_cache_contains(pd));

  // The next creation builds afresh and computes relu.
  const eltwise_forward again(pd);
  CHECK(ocl_interop::get_program_counts().source_builds == before.source_builds + 2);
  stream strm(eng);
  memory src(md, eng), dst(md, eng);
  const auto in = ocl_test::pattern(md.size_bytes() / 4, 41);
  ocl_test::write_all(src, in);
  again.execute(strm, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  strm.wait();
  const auto out = ocl_test::read_all(dst);
  for (std::size_t i = 0; i < in.size(); ++i) {
    REQUIRE(out[i] == (in[i] > 0 ? in[i] : 0.3671875f * in[i]));
  }
}
