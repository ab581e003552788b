// OpenCL primitives through the persistent cache: the blob API
// (cache_blob_id, cache_blob, a primitive from (pd, blob)) and the runtime's
// store (read before compiling, write behind), with results bit-identical
// to freshly built primitives and foreign or altered blobs refused.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "binary_record.hpp"
#include "cl_error.hpp"
#include "host_reference.hpp"
#include "kernel_primitive.hpp"
#include "ocl_engine.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

using namespace primcache;

namespace {

// The OpenCL error the next clCreateProgramWithBinary returns instead of
// loading (CL_SUCCESS: none), then back to CL_SUCCESS.
std::atomic<cl_int> fail_next_binary_load{CL_SUCCESS};

}  // namespace

// The backend's objects are linked into this program, so their calls reach
// this definition instead of the ICD loader's (hidden: nothing outside the
// program sees it); it fails one load as told, the way a device out of
// resources would, and passes every other call on to the loader.
extern "C" cl_program clCreateProgramWithBinary(cl_context context, cl_uint num_devices,
                                                const cl_device_id* devices, const size_t* lengths,
                                                const unsigned char** binaries,
                                                cl_int* binary_status, cl_int* errcode_ret) {
  static const auto real = reinterpret_cast<decltype(&clCreateProgramWithBinary)>(
      ::dlsym(RTLD_NEXT, "clCreateProgramWithBinary"));
  if (const cl_int e = fail_next_binary_load.exchange(CL_SUCCESS); e != CL_SUCCESS) {
    if (errcode_ret != nullptr) *errcode_ret = e;
    return nullptr;
  }
  return real(context, num_devices, devices, lengths, binaries, binary_status, errcode_ret);
}

namespace {

// One primitive with its tensors: run() writes the inputs from a fixed
// pattern, executes, and returns dst's bytes.
struct subject {
  std::string what;
  std::function<primitive_desc(const engine&)> make_pd;
  std::vector<std::pair<int, memory::desc>> inputs;
  int output_arg = PRIMCACHE_ARG_DST;
  memory::desc output;
};

std::vector<float> run(const subject& s, const primitive& prim, const engine& eng) {
  stream strm(eng);
  std::unordered_map<int, memory> args;
  std::uint32_t seed = 3;
  for (const auto& [arg, md] : s.inputs) {
    memory m(md, eng);
    ocl_test::write_all(m, ocl_test::pattern(md.size_bytes() / 4, seed++));
    args.emplace(arg, m);
  }
  memory out(s.output, eng);
  ocl_test::write_all(out, std::vector<float>(s.output.size_bytes() / 4, -7.0f));
  args.emplace(s.output_arg, out);
  prim.execute(strm, args);
  strm.wait();
  return ocl_test::read_all(out);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Shapes no other test uses, so each key starts cold in this process.
std::vector<subject> subjects() {
  std::vector<subject> v;
  {
    const memory::desc a({19, 23}, data_type::f32, format_tag::ab);
    const memory::desc w({23, 29}, data_type::f32, format_tag::ab);
    const memory::desc b({1, 29}, data_type::f32, format_tag::ab);
    const memory::desc c({19, 29}, data_type::f32, format_tag::ab);
    v.push_back({"matmul with bias and a post-op",
                 [=](const engine& eng) -> primitive_desc {
                   post_ops po;
                   po.append_eltwise(1.0f, algorithm::eltwise_relu, 0.25f, 0.0f);
                   primitive_attr attr;
                   attr.set_post_ops(po);
                   return matmul::primitive_desc(matmul::desc(a, w, b, c), attr, eng);
                 },
                 {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, w}, {PRIMCACHE_ARG_BIAS, b}},
                 PRIMCACHE_ARG_DST,
                 c});
  }
  {
    const memory::desc src({1, 5, 11, 9}, data_type::f32, format_tag::nchw);
    const memory::desc wei({7, 5, 3, 3}, data_type::f32, format_tag::oihw);
    const memory::desc dst({1, 7, 11, 9}, data_type::f32, format_tag::nhwc);
    v.push_back({"convolution",
                 [=](const engine& eng) -> primitive_desc {
                   return convolution_forward::primitive_desc(
                       convolution_forward::desc(prop_kind::forward_inference,
                                                 algorithm::convolution_direct, src, wei,
                                                 memory::desc(), dst, {1, 1}, {1, 1}, {1, 1}),
                       eng);
                 },
                 {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}},
                 PRIMCACHE_ARG_DST,
                 dst});
  }
  {
    const memory::desc md({3, 17, 5, 2}, data_type::f32, format_tag::nchw);
    v.push_back({"eltwise",
                 [=](const engine& eng) -> primitive_desc {
                   return eltwise_forward::primitive_desc(
                       eltwise_forward::desc(prop_kind::forward_inference,
                                             algorithm::eltwise_linear, md, 0.75f, -0.5f),
                       eng);
                 },
                 {{PRIMCACHE_ARG_SRC, md}},
                 PRIMCACHE_ARG_DST,
                 md});
  }
  {
    const memory::desc from({2, 19, 3, 5}, data_type::f32, format_tag::nchw);
    const memory::desc to({2, 19, 3, 5}, data_type::f32, format_tag::nChw8c);
    v.push_back({"reorder",
                 [=](const engine& eng) -> primitive_desc {
                   return reorder::primitive_desc(eng, from, eng, to);
                 },
                 {{PRIMCACHE_ARG_FROM, from}},
                 PRIMCACHE_ARG_TO,
                 to});
  }
  return v;
}

// Empties the in-memory primitive cache (the capacity it had stays).
void empty_primitive_cache() {
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(capacity);
}

bool contains(const std::vector<std::uint8_t>& hay, const std::string& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

// A private directory for a directory store (mode 0700).
std::string temp_dir() {
  char tmpl[] = "/tmp/primcache-ocl-persist-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

// `blob` with its object (the binary record) replaced by `object`,
// re-encoded with a valid checksum.
std::vector<std::uint8_t> with_object(const std::vector<std::uint8_t>& blob,
                                      std::vector<std::byte> object) {
  auto decoded = backend::impl_blob::decode(blob);
  REQUIRE(decoded);
  backend::impl_blob b = decoded.value();
  b.object = std::move(object);
  return b.encode();
}

ocl_internal::device_identity identity_of(const engine& eng) {
  return ocl_internal::device_identity::of(
      ocl_internal::ocl_engine_of(backend::impl_of(eng)).device_info());
}

// The program binary inside a blob, and the source digest's bytes kept.
ocl_internal::program_binary binary_of(const std::vector<std::uint8_t>& blob, const engine& eng,
                                       const std::string& source) {
  auto decoded = backend::impl_blob::decode(blob);
  REQUIRE(decoded);
  auto binary = ocl_internal::read_binary_record(decoded.value().object, identity_of(eng), source);
  REQUIRE(binary);
  return binary.value();
}

// `blob` with the first 16 bytes of its program binary overwritten, as a
// driver of another build would find it, in a record that passes every
// check but the driver's (identity, source digest, checksum).
std::vector<std::uint8_t> with_binary_the_driver_refuses(const std::vector<std::uint8_t>& blob,
                                                         const engine& eng,
                                                         const std::string& source) {
  auto binary = binary_of(blob, eng, source);
  REQUIRE(binary.size() > 16);
  std::fill_n(binary.begin(), 16, static_cast<unsigned char>(0x5a));
  return with_object(blob, ocl_internal::write_binary_record(identity_of(eng), source, binary));
}

// A redis-server on a free loopback port for one test (no persistence),
// killed at the end. A missing server fails the test (never a skip), naming
// scripts/install-deps, as the persist tests do.
class redis_server {
 public:
  redis_server() {
    const char* exe = "/usr/bin/redis-server";
    if (::access(exe, X_OK) != 0) {
      FAIL("redis-server is not installed (scripts/install-deps installs it)");
    }
    for (int attempt = 0; attempt < 5 && pid_ < 0; ++attempt) start(exe);
    REQUIRE(pid_ > 0);
  }
  ~redis_server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Generous timeouts: a loaded CI machine must not open the breaker.
  std::string url() const {
    return "redis://127.0.0.1:" + std::to_string(port_) +
           "/ocl-test?connect_timeout_ms=5000&command_timeout_ms=5000";
  }

 private:
  void start(const char* exe) {
    port_ = free_port();
    const std::string port = std::to_string(port_);
    const char* argv[] = {exe,      "--port", port.c_str(),   "--bind", "127.0.0.1",
                          "--save", "",       "--appendonly", "no",     nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe, &fa, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return;
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (connects(port_)) {
        pid_ = pid;
        return;
      }
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return;  // lost the port: try another
      ::usleep(10000);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  static bool connects(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("OpenCL primitives round-trip through the blob API without building from source",
          "[ocl][persist][blob]") {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  for (const subject& s : subjects()) {
    DYNAMIC_SECTION(s.what) {
      const primitive_desc pd = s.make_pd(eng);
      std::vector<float> fresh_out;
      std::vector<std::uint8_t> blob;
      {
        primitive fresh(pd);
        fresh_out = run(s, fresh, eng);
        blob = fresh.cache_blob();
      }
      empty_primitive_cache();
      const auto before = ocl_interop::get_program_counts();
      primitive loaded(pd, blob);
      const auto after = ocl_interop::get_program_counts();
      CHECK(after.source_builds == before.source_builds);
      CHECK(after.binary_loads == before.binary_loads + 1);
      CHECK(same_bits(run(s, loaded, eng), fresh_out));
      // The loaded primitive serializes to the same blob.
      CHECK(loaded.cache_blob() == blob);
    }
  }
}

TEST_CASE("an OpenCL blob id names the platform, device, driver, versions and build",
          "[ocl][persist][blob]") {
  engine eng(engine_kind::gpu, 0);
  const auto id = identity_of(eng);
  const memory::desc md({4, 4}, data_type::f32, format_tag::ab);
  const auto pd = eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_tanh, md), eng);
  const std::vector<std::uint8_t> blob_id = pd.cache_blob_id();
  CHECK(contains(blob_id, id.platform));
  CHECK(contains(blob_id, id.device));
  CHECK(contains(blob_id, id.driver));
  CHECK(contains(blob_id, id.versions));
  CHECK(contains(blob_id, version().build_identity));
  CHECK(contains(blob_id, version().version));
  // Another descriptor, another id.
  const auto other = eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_exp, md), eng);
  CHECK(other.cache_blob_id() != blob_id);
  CHECK(pd.cache_blob_id() == blob_id);
}

TEST_CASE("OpenCL blobs that are altered or made elsewhere are refused, never loaded",
          "[ocl][persist][blob][errors]") {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  const memory::desc a({13, 11}, data_type::f32, format_tag::ab);
  const memory::desc w({11, 31}, data_type::f32, format_tag::ab);
  const memory::desc c({13, 31}, data_type::f32, format_tag::ab);
  const auto pd = matmul::primitive_desc(matmul::desc(a, w, c), eng);
  std::vector<std::uint8_t> blob;
  {
    primitive fresh(pd);
    blob = fresh.cache_blob();
  }
  empty_primitive_cache();
  const auto& plan = dynamic_cast<const ocl_internal::kernel_pd&>(backend::impl_of(pd)).plan();
  const auto id = identity_of(eng);
  const auto binary = binary_of(blob, eng, plan.source);

  auto refused = [&](const std::vector<std::uint8_t>& bad, status code, const std::string& why) {
    const auto before = ocl_interop::get_program_counts();
    const int size = get_primitive_cache_size();
    try {
      primitive p(pd, bad);
      FAIL("the blob was loaded");
    } catch (const error& e) {
      INFO(e.what());
      CHECK(e.code() == code);
      CHECK_THAT(e.message(), Catch::Contains(why));
    }
    const auto after = ocl_interop::get_program_counts();
    CHECK(after.source_builds == before.source_builds);
    CHECK(after.binary_loads == before.binary_loads);
    CHECK(get_primitive_cache_size() == size);
  };

  SECTION("a flipped bit in the binary") {
    auto bad = blob;
    bad[bad.size() / 2] ^= 0x10;
    refused(bad, status::corrupt_data, "checksum");
  }
  SECTION("truncated") {
    refused(std::vector<std::uint8_t>(blob.begin(), blob.end() - 40), status::corrupt_data,
            "checksum");
  }
  SECTION("built for another driver version of this device") {
    auto other = id;
    other.driver += "-other";
    refused(with_object(blob, ocl_internal::write_binary_record(other, plan.source, binary)),
            status::invalid_arguments, "driver '" + other.driver + "'");
  }
  SECTION("built by this driver with another LLVM, or for another CPU (its versions)") {
    auto other = id;
    other.versions += " LLVM 16.0.6";
    refused(with_object(blob, ocl_internal::write_binary_record(other, plan.source, binary)),
            status::invalid_arguments, "versions '" + other.versions + "'");
  }
  SECTION("built for another device") {
    auto other = id;
    other.device = "Some Other GPU";
    refused(with_object(blob, ocl_internal::write_binary_record(other, plan.source, binary)),
            status::invalid_arguments, "Some Other GPU");
  }
  SECTION("keyed for another driver (the key's device identity differs)") {
    auto decoded = backend::impl_blob::decode(blob);
    REQUIRE(decoded);
    backend::impl_blob b = decoded.value();
    const std::string driver = id.driver;
    auto* k = reinterpret_cast<char*>(b.key_bytes.data());
    auto* end = k + b.key_bytes.size();
    auto at = std::search(k, end, driver.begin(), driver.end());
    REQUIRE(at != end);
    std::fill(at, at + driver.size(), 'X');
    refused(b.encode(), status::invalid_arguments, "another primitive descriptor");
  }
  SECTION("built from other OpenCL C source (another generator)") {
    refused(with_object(blob, ocl_internal::write_binary_record(id, plan.source + "\n", binary)),
            status::invalid_arguments, "other OpenCL C source");
  }
  SECTION("an object that is not a binary record") {
    std::vector<std::byte> junk(64, std::byte{0x5a});
    refused(with_object(blob, junk), status::corrupt_data, "magic");
  }
  SECTION("a record with bytes after its binary") {
    auto record = ocl_internal::write_binary_record(id, plan.source, binary);
    record.push_back(std::byte{0});
    refused(with_object(blob, record), status::corrupt_data, "unexpected bytes");
  }
  SECTION("a record cut short") {
    auto record = ocl_internal::write_binary_record(id, plan.source, binary);
    record.resize(record.size() - 1);
    refused(with_object(blob, record), status::corrupt_data, "truncated in its binary");
  }
  SECTION("another primitive's blob") {
    const auto elt = eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_tanh, c), eng);
    primitive p(elt);
    refused(p.cache_blob(), status::invalid_arguments, "ocl:eltwise");
  }
  SECTION("the good blob still loads") {
    primitive p(pd, blob);
    CHECK(p.cache_blob() == blob);
  }
}

TEST_CASE("a blob whose binary the OpenCL driver refuses is refused and caches nothing",
          "[ocl][persist][blob][errors]") {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  // A shape no other test uses: the key starts cold.
  const memory::desc from({1, 3, 7, 5}, data_type::f32, format_tag::nchw);
  const memory::desc to({1, 3, 7, 5}, data_type::f32, format_tag::nhwc);
  const auto pd = reorder::primitive_desc(eng, from, eng, to);
  std::vector<std::uint8_t> blob;
  {
    primitive fresh(pd);
    blob = fresh.cache_blob();
  }
  empty_primitive_cache();
  const auto& plan = dynamic_cast<const ocl_internal::kernel_pd&>(backend::impl_of(pd)).plan();
  const auto bad = with_binary_the_driver_refuses(blob, eng, plan.source);
  const int size = get_primitive_cache_size();
  const auto before = ocl_interop::get_program_counts();
  try {
    primitive p(pd, bad);
    FAIL("the blob was loaded");
  } catch (const error& e) {
    INFO(e.what());
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.message(), Catch::Contains("refuses the blob's program binary"));
  }
  CHECK(ocl_interop::get_program_counts().source_builds == before.source_builds);
  CHECK_FALSE(primitive_cache_contains(pd));
  CHECK(get_primitive_cache_size() == size);
  // Later creations of the primitive are unharmed: compiled afresh, correct.
  const primitive again(pd);
  CHECK(ocl_interop::get_program_counts().source_builds == before.source_builds + 1);
  stream strm(eng);
  memory src(from, eng), dst(to, eng);
  const auto in = ocl_test::pattern(from.size_bytes() / 4, 23);
  ocl_test::write_all(src, in);
  again.execute(strm, {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}});
  strm.wait();
  const auto out = ocl_test::read_all(dst);
  for (const auto& i : ocl_test::all_indices({1, 3, 7, 5})) {
    REQUIRE(out[static_cast<std::size_t>(to.offset_of(i))] ==
            in[static_cast<std::size_t>(from.offset_of(i))]);
  }
}

TEST_CASE("a blob whose binary the device cannot load now fails with the device's status",
          "[ocl][persist][blob][errors]") {
  // Only the driver's verdict on the binary makes the blob bad
  // (invalid_arguments: a store erases it); a device out of resources or
  // memory says nothing about the blob (a store keeps it).
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  // A shape no other test uses: the key starts cold.
  const memory::desc from({1, 5, 3, 7}, data_type::f32, format_tag::nchw);
  const memory::desc to({1, 5, 3, 7}, data_type::f32, format_tag::nhwc);
  const auto pd = reorder::primitive_desc(eng, from, eng, to);
  std::vector<std::uint8_t> blob;
  {
    primitive fresh(pd);
    blob = fresh.cache_blob();
  }
  const auto [code, want] = GENERATE(table<cl_int, status>({
      {CL_OUT_OF_RESOURCES, status::runtime_error},
      {CL_OUT_OF_HOST_MEMORY, status::out_of_memory},
      {CL_DEVICE_NOT_AVAILABLE, status::runtime_error},
      {CL_INVALID_BINARY, status::invalid_arguments},
  }));
  INFO(ocl_internal::cl_error_name(code));
  empty_primitive_cache();
  fail_next_binary_load.store(code);
  try {
    primitive p(pd, blob);
    FAIL("the blob was loaded");
  } catch (const error& e) {
    INFO(e.what());
    CHECK(fail_next_binary_load.load() == CL_SUCCESS);  // the load met the failure
    CHECK(e.code() == want);
    CHECK_THAT(e.message(), Catch::Contains(std::string(ocl_internal::cl_error_name(code))));
  }
  fail_next_binary_load.store(CL_SUCCESS);
  CHECK_FALSE(primitive_cache_contains(pd));
  // The same blob loads once the device can.
  primitive p(pd, blob);
  CHECK(p.cache_blob() == blob);
}

TEST_CASE("binary records refuse every malformed form", "[ocl][persist][record]") {
  const ocl_internal::device_identity id{"P", "D", "1.0", "V"};
  const ocl_internal::program_binary binary = {1, 2, 3, 4};
  const auto record = ocl_internal::write_binary_record(id, "src", binary);
  auto good = ocl_internal::read_binary_record(record, id, "src");
  REQUIRE(good);
  CHECK(good.value() == binary);

  auto fails = [&](std::vector<std::byte> r, status code, const std::string& why) {
    auto got = ocl_internal::read_binary_record(r, id, "src");
    REQUIRE_FALSE(got);
    CHECK(got.why().code == code);
    CHECK_THAT(got.why().message, Catch::Contains(why));
  };
  fails({}, status::corrupt_data, "magic");
  fails(std::vector<std::byte>(record.begin(), record.begin() + 10), status::corrupt_data,
        "truncated");
  fails(std::vector<std::byte>(record.begin(), record.begin() + 20), status::corrupt_data,
        "truncated in its header");
  auto other_version = record;
  other_version[8] = std::byte{1};  // before the identity carried versions
  fails(other_version, status::unimplemented, "version 1; this library reads 2");
  fails(ocl_internal::write_binary_record(id, "src", {}), status::corrupt_data, "empty binary");
  fails(ocl_internal::write_binary_record({"Q", "D", "1.0", "V"}, "src", binary),
        status::invalid_arguments, "platform 'Q'");
  fails(ocl_internal::write_binary_record({"P", "D", "1.0", "W"}, "src", binary),
        status::invalid_arguments, "versions 'W'");
}

TEST_CASE("OpenCL primitives go through the runtime's directory store", "[ocl][persist][store]") {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  const std::string dir = temp_dir();
  set_persistent_cache(open_persistent_cache_dir(dir, 64));
  for (const subject& s : subjects()) {
    DYNAMIC_SECTION(s.what) {
      // Cold: not in memory, not in the store (a fresh directory).
      const primitive_desc pd = s.make_pd(eng);
      empty_primitive_cache();
      get_persistent_cache()->erase(
          std::as_bytes(std::span<const std::uint8_t>(pd.cache_blob_id())));
      const auto s0 = get_persistent_cache_stats();
      const auto c0 = ocl_interop::get_program_counts();
      std::vector<float> fresh_out;
      {
        primitive fresh(pd);
        fresh_out = run(s, fresh, eng);
      }
      flush_persistent_cache_writes();
      const auto s1 = get_persistent_cache_stats();
      const auto c1 = ocl_interop::get_program_counts();
      CHECK(c1.source_builds == c0.source_builds + 1);
      CHECK(s1.misses == s0.misses + 1);
      CHECK(s1.writes_stored == s0.writes_stored + 1);

      // A new process would find it there: the memory cache emptied.
      empty_primitive_cache();
      primitive again(pd);
      const auto s2 = get_persistent_cache_stats();
      const auto c2 = ocl_interop::get_program_counts();
      CHECK(c2.source_builds == c1.source_builds);
      CHECK(c2.binary_loads == c1.binary_loads + 1);
      CHECK(s2.hits == s1.hits + 1);
      CHECK(same_bits(run(s, again, eng), fresh_out));
    }
  }
  SECTION("a well-formed entry holding a foreign binary is rejected, erased and compiled") {
    const subject s = subjects().front();
    const primitive_desc pd = s.make_pd(eng);
    std::vector<std::uint8_t> blob;
    std::vector<float> fresh_out;
    {
      primitive fresh(pd);
      fresh_out = run(s, fresh, eng);
      blob = fresh.cache_blob();
    }
    flush_persistent_cache_writes();
    const auto& plan = dynamic_cast<const ocl_internal::kernel_pd&>(backend::impl_of(pd)).plan();
    auto other = identity_of(eng);
    other.driver = "0.0-elsewhere";
    const auto bad = with_object(blob, ocl_internal::write_binary_record(
                                           other, plan.source, binary_of(blob, eng, plan.source)));
    const auto id = pd.cache_blob_id();
    auto store = get_persistent_cache();
    store->erase(std::as_bytes(std::span(id)));
    REQUIRE(store->put(std::as_bytes(std::span(id)), std::as_bytes(std::span(bad))).status ==
            put_status::stored);
    empty_primitive_cache();
    const auto s0 = get_persistent_cache_stats();
    const auto c0 = ocl_interop::get_program_counts();
    primitive p(pd);
    const auto s1 = get_persistent_cache_stats();
    CHECK(s1.rejected == s0.rejected + 1);
    CHECK(ocl_interop::get_program_counts().source_builds == c0.source_builds + 1);
    CHECK(same_bits(run(s, p, eng), fresh_out));
  }
  SECTION(
      "a well-formed entry holding a binary the driver refuses is rejected, erased and "
      "compiled") {
    const subject s = subjects()[2];
    const primitive_desc pd = s.make_pd(eng);
    std::vector<std::uint8_t> blob;
    std::vector<float> fresh_out;
    {
      primitive fresh(pd);
      fresh_out = run(s, fresh, eng);
      blob = fresh.cache_blob();
    }
    flush_persistent_cache_writes();
    const auto& plan = dynamic_cast<const ocl_internal::kernel_pd&>(backend::impl_of(pd)).plan();
    const auto bad = with_binary_the_driver_refuses(blob, eng, plan.source);
    const auto id = pd.cache_blob_id();
    auto store = get_persistent_cache();
    store->erase(std::as_bytes(std::span(id)));
    REQUIRE(store->put(std::as_bytes(std::span(id)), std::as_bytes(std::span(bad))).status ==
            put_status::stored);
    empty_primitive_cache();
    const auto s0 = get_persistent_cache_stats();
    const auto c0 = ocl_interop::get_program_counts();
    {
      primitive p(pd);
      const auto s1 = get_persistent_cache_stats();
      CHECK(s1.rejected == s0.rejected + 1);
      CHECK(s1.hits == s0.hits);
      CHECK(ocl_interop::get_program_counts().source_builds == c0.source_builds + 1);
      CHECK(same_bits(run(s, p, eng), fresh_out));
    }
    // The refused entry was replaced by the compiled primitive's: the next
    // process loads it.
    flush_persistent_cache_writes();
    empty_primitive_cache();
    const auto c1 = ocl_interop::get_program_counts();
    primitive again(pd);
    CHECK(get_persistent_cache_stats().hits == s0.hits + 1);
    CHECK(ocl_interop::get_program_counts().source_builds == c1.source_builds);
    CHECK(same_bits(run(s, again, eng), fresh_out));
  }
  SECTION(
      "a well-formed entry whose binary the device cannot load now is kept, and the primitive "
      "compiled") {
    const subject s = subjects()[3];
    const primitive_desc pd = s.make_pd(eng);
    const auto id = pd.cache_blob_id();
    auto store = get_persistent_cache();
    empty_primitive_cache();
    store->erase(std::as_bytes(std::span(id)));
    std::vector<float> fresh_out;
    {
      primitive fresh(pd);
      fresh_out = run(s, fresh, eng);
    }
    flush_persistent_cache_writes();
    const auto entry = store->get(std::as_bytes(std::span(id)));
    REQUIRE(entry);
    for (const cl_int code : {CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY}) {
      INFO(ocl_internal::cl_error_name(code));
      empty_primitive_cache();
      const auto s0 = get_persistent_cache_stats();
      const auto c0 = ocl_interop::get_program_counts();
      fail_next_binary_load.store(code);
      {
        primitive p(pd);
        CHECK(fail_next_binary_load.load() == CL_SUCCESS);  // the load met the failure
        fail_next_binary_load.store(CL_SUCCESS);
        const auto s1 = get_persistent_cache_stats();
        CHECK(s1.load_failed == s0.load_failed + 1);
        CHECK(s1.rejected == s0.rejected);
        CHECK(s1.hits == s0.hits);
        CHECK(s1.writes_queued == s0.writes_queued);  // nothing written over the entry
        CHECK(ocl_interop::get_program_counts().source_builds == c0.source_builds + 1);
        CHECK(same_bits(run(s, p, eng), fresh_out));
      }
      flush_persistent_cache_writes();
      const auto kept = store->get(std::as_bytes(std::span(id)));
      REQUIRE(kept);
      CHECK(*kept == *entry);
    }
    // Once the device can, the entry loads: nothing built from source.
    empty_primitive_cache();
    const auto s2 = get_persistent_cache_stats();
    const auto c2 = ocl_interop::get_program_counts();
    primitive again(pd);
    CHECK(get_persistent_cache_stats().hits == s2.hits + 1);
    CHECK(ocl_interop::get_program_counts().source_builds == c2.source_builds);
    CHECK(same_bits(run(s, again, eng), fresh_out));
  }
  detach_persistent_cache();
  std::filesystem::remove_all(dir);
}

TEST_CASE("OpenCL primitives go through the runtime's Redis store", "[ocl][persist][redis]") {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  redis_server redis;
  set_persistent_cache(open_persistent_cache("", 64, redis.url()));
  for (const subject& s : {subjects()[0], subjects()[1]}) {
    DYNAMIC_SECTION(s.what) {
      const primitive_desc pd = s.make_pd(eng);
      empty_primitive_cache();
      const auto c0 = ocl_interop::get_program_counts();
      std::vector<float> fresh_out;
      {
        primitive fresh(pd);
        fresh_out = run(s, fresh, eng);
      }
      flush_persistent_cache_writes();
      const auto s1 = get_persistent_cache_stats();
      const auto c1 = ocl_interop::get_program_counts();
      CHECK(c1.source_builds == c0.source_builds + 1);

      empty_primitive_cache();
      primitive again(pd);
      const auto s2 = get_persistent_cache_stats();
      CHECK(ocl_interop::get_program_counts().source_builds == c1.source_builds);
      CHECK(s2.hits == s1.hits + 1);
      CHECK(same_bits(run(s, again, eng), fresh_out));
    }
  }
  detach_persistent_cache();
}
