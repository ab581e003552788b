// PRIMCACHE_TUNE and PRIMCACHE_TUNE_TABLE: read when the runtime's tuning
// state is first used, so each case runs in a forked child that sets them
// first (this process never touches the runtime's tuning state itself).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"
#include "primcache/runtime/version.hpp"

using namespace primcache;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "primcache-tune-env-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const char* name) const { return (path / name).string(); }
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `body` in a child with its stderr in `err_path`; the child exits
// (running atexit hooks) with body's result: 0 when its checks held, else
// the number of the first that failed.
int in_child(const std::string& err_path, const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (std::freopen(err_path.c_str(), "w", stderr) == nullptr) std::_Exit(100);
    int code = 101;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child threw: %s\n", e.what());
      code = 102;
    }
    std::exit(code);  // atexit hooks run: the table is saved
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

// A small matmul on the CPU; executes it once. Returns its descriptor's
// configuration as JSON ("" without one).
std::string run_matmul() {
  engine eng(engine_kind::cpu, 0);
  memory::desc a({8, 16}, data_type::f32, format_tag::ab),
      b({16, 24}, data_type::f32, format_tag::ab), c({8, 24}, data_type::f32, format_tag::ab);
  memory src(a, eng), wei(b, eng), dst(c, eng);
  std::fill_n(static_cast<float*>(src.get_data_handle()), 8 * 16, 0.5f);
  std::fill_n(static_cast<float*>(wei.get_data_handle()), 16 * 24, 0.25f);
  const matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
  matmul(pd).execute(
      stream(eng),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  const auto& cfg = backend::impl_of(pd).config();
  return cfg ? cfg->to_json() : std::string();
}

bool jit() {
  return effective_isa() >= cpu_isa::avx2;
}

}  // namespace

TEST_CASE("PRIMCACHE_TUNE_TABLE is loaded at start and written at exit", "[autotune][env]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  temp_dir d;
  const std::string table = d.file("tune.json"), err = d.file("stderr");
  // First process: tunes one matmul (PRIMCACHE_TUNE=1) and exits.
  CHECK(in_child(err, [&] {
          ::setenv("PRIMCACHE_TUNE_TABLE", table.c_str(), 1);
          ::setenv("PRIMCACHE_TUNE", "1", 1);
          set_tune_max_nconfigs(3);
          if (!get_tune()) return 1;
          if (get_tune_table_path() != table) return 2;
          run_matmul();
          return get_tune_stats().tuned == 1 ? 0 : 3;
        }) == 0);
  INFO(read(err));
  tune_table written;
  auto loaded = written.load_file(table, version().version);
  REQUIRE(loaded);
  REQUIRE(written.size() == 1);
  const std::string config = written.rows()[0].entry.config;
  // Second process, tuning off: the descriptor takes the table's configuration.
  CHECK(in_child(err, [&] {
          ::setenv("PRIMCACHE_TUNE_TABLE", table.c_str(), 1);
          ::unsetenv("PRIMCACHE_TUNE");
          if (get_tune()) return 1;
          if (global_tune_table().size() != 1) return 2;
          if (run_matmul() != config) return 3;
          return get_tune_stats().tuned == 0 ? 0 : 4;
        }) == 0);
}

TEST_CASE("a corrupt or foreign tune table is reported and ignored", "[autotune][env]") {
  temp_dir d;
  const std::string table = d.file("tune.json"), err = d.file("stderr");
  SECTION("corrupt") {
    std::ofstream(table) << "{\"format\": \"primcache-tune-table\", \"entries\": [";
    CHECK(in_child(err, [&] {
            ::setenv("PRIMCACHE_TUNE_TABLE", table.c_str(), 1);
            run_matmul();  // creation and execution work
            return global_tune_table().size() == 0 ? 0 : 1;
          }) == 0);
    const std::string said = read(err);
    INFO(said);
    CHECK(said.find("primcache: ignoring the tune table (PRIMCACHE_TUNE_TABLE): " + table +
                    ": tune table: not JSON") != std::string::npos);
  }
  SECTION("another library version") {
    tune_table other;
    other.put("cpu:avx2", key_writer().str("x").finish(), tune_entry{"jit:matmul", "{}", 1, 0, ""});
    REQUIRE(other.save_file(table, "0.0.0-other"));
    CHECK(in_child(err, [&] {
            ::setenv("PRIMCACHE_TUNE_TABLE", table.c_str(), 1);
            run_matmul();
            return global_tune_table().size() == 0 ? 0 : 1;
          }) == 0);
    const std::string said = read(err);
    INFO(said);
    CHECK(said.find("primcache: ignoring the tune table (PRIMCACHE_TUNE_TABLE): " + table +
                    " was written by primcache 0.0.0-other, this is " +
                    std::string(version().version) + "\n") != std::string::npos);
  }
  SECTION("a FIFO, which opening to read would wait on") {
    REQUIRE(::mkfifo(table.c_str(), 0600) == 0);
    CHECK(in_child(err, [&] {
            ::alarm(20);  // a load that waits is killed: the check fails, the suite goes on
            ::setenv("PRIMCACHE_TUNE_TABLE", table.c_str(), 1);
            run_matmul();  // the first descriptor loads the table
            return global_tune_table().size() == 0 ? 0 : 1;
          }) == 0);
    const std::string said = read(err);
    INFO(said);
    CHECK(said.find("primcache: ignoring the tune table (PRIMCACHE_TUNE_TABLE): tune table " +
                    table + ": not read: it is a FIFO, not a regular file\n") != std::string::npos);
  }
  SECTION("a malformed PRIMCACHE_TUNE leaves tuning off") {
    CHECK(in_child(err, [&] {
            ::setenv("PRIMCACHE_TUNE", "maybe", 1);
            return get_tune() ? 1 : 0;
          }) == 0);
    CHECK(read(err).find("PRIMCACHE_TUNE") != std::string::npos);
  }
}
