#include "primcache/autotune/tune_table.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace primcache;
namespace fs = std::filesystem;

namespace {

key make_key(int n) {
  return key_writer().str("matmul").i64(n).i64(n * 2).finish();
}

tune_entry entry(double ns, std::string config = R"({"mr":6,"nr":16})") {
  return tune_entry{"jit:matmul", std::move(config), ns, ns * 2, "matmul test"};
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "primcache-tune-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  std::string file(const char* name) const { return (path / name).string(); }
};

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}
std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// How a child running `body` ended: its exit code (-1: killed), why the
// parent killed it, and what it wrote to its pipe.
struct child_outcome {
  int exit_code = -1;
  std::string killed;
  std::string said;
};

std::size_t resident_bytes(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// Runs `body(fd)` in a forked child, which the parent kills when it runs
// past `limit` or grows 512 MiB past what it was forked with: a load that
// waits or reads without end fails the check instead of hanging the suite
// or filling the machine.
child_outcome run_guarded(const std::function<int(int)>& body,
                          std::chrono::seconds limit = std::chrono::seconds(5)) {
  // From this process's own size: sanitizer builds start far larger.
  const std::size_t memory_limit = resident_bytes(::getpid()) + (std::size_t{512} << 20);
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    std::_Exit(body(pipe_fds[1]));
  }
  ::close(pipe_fds[1]);
  child_outcome out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      out.killed = "still running after " + std::to_string(limit.count()) + " s";
    } else if (resident_bytes(pid) > memory_limit) {
      out.killed = "grew over 512 MiB";
    }
    if (!out.killed.empty()) {
      ::kill(pid, SIGKILL);
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) {
    out.said.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  return out;
}

// load_file of `path` in a guarded child: exits 0 with the message when it
// fails as runtime_error, 1 when it loads, 2 for another failure.
child_outcome load_guarded(const std::string& path) {
  return run_guarded([&](int out) {
    tune_table t;
    auto r = t.load_file(path, "0.1.0");
    const std::string said = r ? std::string("loaded") : r.why().message;
    if (::write(out, said.data(), said.size()) < 0) return 3;
    if (r) return 1;
    return r.why().code == status::runtime_error ? 0 : 2;
  });
}

}  // namespace

TEST_CASE("a tune table finds entries by device and key", "[autotune][table]") {
  tune_table t;
  CHECK(t.size() == 0);
  CHECK_FALSE(t.find("cpu:avx2", make_key(1)));
  t.put("cpu:avx2", make_key(1), entry(100));
  REQUIRE(t.find("cpu:avx2", make_key(1)));
  CHECK(*t.find("cpu:avx2", make_key(1)) == entry(100));
  CHECK_FALSE(t.find("cpu:avx2", make_key(2)));
  SECTION("another device does not see it") {
    CHECK_FALSE(t.find("cpu:avx512_core", make_key(1)));
  }
  SECTION("put replaces; put_if_faster only when faster") {
    t.put("cpu:avx2", make_key(1), entry(300));
    CHECK(t.find("cpu:avx2", make_key(1))->time_ns == 300);
    CHECK_FALSE(t.put_if_faster("cpu:avx2", make_key(1).bytes(), entry(300)));
    CHECK_FALSE(t.put_if_faster("cpu:avx2", make_key(1).bytes(), entry(400)));
    CHECK(t.put_if_faster("cpu:avx2", make_key(1).bytes(), entry(250)));
    CHECK(t.find("cpu:avx2", make_key(1))->time_ns == 250);
    CHECK(t.size() == 1);
  }
  SECTION("erase and clear") {
    CHECK(t.erase("cpu:avx2", make_key(1).bytes()));
    CHECK_FALSE(t.erase("cpu:avx2", make_key(1).bytes()));
    t.put("cpu:avx2", make_key(2), entry(1));
    t.clear();
    CHECK(t.size() == 0);
  }
}

TEST_CASE("tables merge keeping the faster entry", "[autotune][table]") {
  tune_table a, b;
  a.put("cpu:avx2", make_key(1), entry(100, "a1"));
  a.put("cpu:avx2", make_key(2), entry(500, "a2"));
  b.put("cpu:avx2", make_key(2), entry(400, "b2"));
  b.put("cpu:avx2", make_key(3), entry(700, "b3"));
  b.put("cpu:avx2", make_key(1), entry(100, "b1"));  // a tie keeps a's
  CHECK(a.merge(b) == 2);
  CHECK(a.size() == 3);
  CHECK(a.find("cpu:avx2", make_key(1))->config == "a1");
  CHECK(a.find("cpu:avx2", make_key(2))->config == "b2");
  CHECK(a.find("cpu:avx2", make_key(3))->config == "b3");
  CHECK(b.size() == 3);  // the source is unchanged
  CHECK(a.merge(a) == 0);
  CHECK(a.size() == 3);
}

TEST_CASE("tables round-trip through JSON and files", "[autotune][table]") {
  tune_table t;
  t.put("cpu:avx2", make_key(1), entry(123.5, R"({"mr":6,"nr":16,"kc":256})"));
  t.put("cpu:avx512_core", make_key(1), entry(99));
  t.put("gpu:pocl \"x\"", make_key(7), tune_entry{"ocl:matmul", "wg=16\n", 5, 0, ""});
  // The warm confirmation's figures (tuner.hpp) travel with the entry.
  t.put("cpu:avx2", make_key(2), tune_entry{"jit:conv", "{}", 600, 1000, "conv", 401.5, 415});
  const std::string json = t.to_json("0.1.0");
  CHECK(json.find(R"("warm_time_ns":4.015E2,"warm_default_time_ns":4.15E2)") != std::string::npos);
  INFO(json);
  tune_table back;
  auto r = back.merge_json(json, "0.1.0");
  REQUIRE(r);
  CHECK(r.value().entries == 4);
  CHECK(r.value().taken == 4);
  CHECK(r.value().file_version == "0.1.0");
  CHECK(back.to_json("0.1.0") == json);
  REQUIRE(back.rows().size() == 4);
  CHECK(back.find("cpu:avx2", make_key(2))->warm_default_time_ns == 415);
  for (const tune_row& row : t.rows()) {
    auto e = back.find(row.device, row.key);
    REQUIRE(e);
    CHECK(*e == row.entry);
  }
  SECTION("through a file") {
    temp_dir d;
    const std::string path = d.file("tune.json");
    auto saved = t.save_file(path, "0.1.0");
    REQUIRE(saved);
    CHECK(saved.value() == 4);
    tune_table loaded;
    auto l = loaded.load_file(path, "0.1.0");
    REQUIRE(l);
    CHECK(l.value().taken == 4);
    CHECK(loaded.to_json("0.1.0") == json);
    // Nothing but the table and its lock file is left in the directory.
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(d.path)) names.insert(e.path().filename().string());
    CHECK(names == std::set<std::string>{"tune.json", "tune.json.lock"});
  }
  SECTION("an empty table") {
    tune_table empty;
    tune_table again;
    auto e = again.merge_json(empty.to_json("0.1.0"), "0.1.0");
    REQUIRE(e);
    CHECK(e.value().entries == 0);
  }
}

TEST_CASE("entries of another version or device are ignored", "[autotune][table]") {
  tune_table t;
  t.put("cpu:avx2", make_key(1), entry(100));
  t.put("cpu:avx512_core", make_key(2), entry(100));
  const std::string json = t.to_json("0.1.0");
  SECTION("another library version: nothing is taken") {
    tune_table other;
    auto r = other.merge_json(json, "0.2.0");
    REQUIRE(r);
    CHECK(r.value().other_version);
    CHECK(r.value().file_version == "0.1.0");
    CHECK(r.value().taken == 0);
    CHECK(other.size() == 0);
  }
  SECTION("another device: skipped when the loader names its device") {
    tune_table mine;
    auto r = mine.merge_json(json, "0.1.0", "cpu:avx2");
    REQUIRE(r);
    CHECK(r.value().taken == 1);
    CHECK(r.value().other_device == 1);
    CHECK(mine.find("cpu:avx2", make_key(1)));
    CHECK_FALSE(mine.find("cpu:avx512_core", make_key(2)));
  }
  SECTION("loading keeps faster entries already in the table") {
    tune_table mine;
    mine.put("cpu:avx2", make_key(1), entry(50, "mine"));
    auto r = mine.merge_json(json, "0.1.0");
    REQUIRE(r);
    CHECK(r.value().kept_faster == 1);
    CHECK(r.value().taken == 1);
    CHECK(mine.find("cpu:avx2", make_key(1))->config == "mine");
  }
}

TEST_CASE("a corrupt table is reported and changes nothing", "[autotune][table]") {
  tune_table good;
  good.put("cpu:avx2", make_key(1), entry(100));
  const std::string json = good.to_json("0.1.0");
  const std::string head =
      R"({"format":"primcache-tune-table","format_version":1,"library_version":"0.1.0","entries":[)";
  const std::string valid_entry =
      R"({"device":"cpu","key":"0a0b","implementation":"jit:matmul","config":"{}","time_ns":5})";
  auto message_of = [&](const std::string& text) {
    tune_table t;
    t.put("cpu:avx2", make_key(9), entry(1));
    auto r = t.merge_json(text, "0.1.0");
    REQUIRE_FALSE(r);
    CHECK(r.why().code == status::corrupt_data);
    CHECK(t.size() == 1);  // the table is as it was
    return r.why().message;
  };
  CHECK(message_of(json.substr(0, json.size() / 2)).find("not JSON") != std::string::npos);
  CHECK(message_of("").find("not JSON") != std::string::npos);
  CHECK(message_of("[1,2]") == "tune table: the top level is not an object");
  CHECK(message_of(R"({"format":"other"})") ==
        "tune table: \"format\" is not \"primcache-tune-table\"");
  CHECK(message_of(R"({"format":"primcache-tune-table","format_version":2})") ==
        "tune table: format_version 2 is not 1");
  CHECK(message_of(R"({"format":"primcache-tune-table","format_version":"1"})") ==
        "tune table: \"format_version\" is missing or not an integer");
  CHECK(message_of(R"({"format":"primcache-tune-table","format_version":1})") ==
        "tune table: \"library_version\" is missing or not a string");
  CHECK(message_of(
            R"({"format":"primcache-tune-table","format_version":1,"library_version":"0.1.0"})") ==
        "tune table: \"entries\" is missing or not an array");
  CHECK(message_of(head + "3]}") == "tune table: entry 0 is not an object");
  CHECK(message_of(head + R"({"device":"cpu"}]})") == "tune table: entry 0 has no \"key\"");
  CHECK(message_of(
            head + valid_entry + "," +
            R"({"device":"cpu","key":"0a0","implementation":"x","config":"{}","time_ns":5}]})") ==
        "tune table: entry 1: \"key\" is not lowercase hex of whole bytes");
  CHECK(message_of(
            head +
            R"({"device":"cpu","key":"0A0B","implementation":"x","config":"{}","time_ns":5}]})") ==
        "tune table: entry 0: \"key\" is not lowercase hex of whole bytes");
  CHECK(
      message_of(head +
                 R"({"device":"cpu","key":"0a","implementation":1,"config":"{}","time_ns":5}]})") ==
      "tune table: entry 0: \"implementation\" is not a string");
  CHECK(
      message_of(head +
                 R"({"device":"","key":"0a","implementation":"x","config":"{}","time_ns":5}]})") ==
      "tune table: entry 0: \"device\" is empty");
  CHECK(message_of(
            head +
            R"({"device":"cpu","key":"0a","implementation":"x","config":"{}","time_ns":-5}]})") ==
        "tune table: entry 0: \"time_ns\" is not a positive finite number of ns");
  CHECK(message_of(
            head +
            R"({"device":"cpu","key":"0a","implementation":"x","config":"{}","time_ns":0}]})") ==
        "tune table: entry 0: \"time_ns\" is not a positive finite number of ns");
  CHECK(message_of(
            head +
            R"({"device":"cpu","key":"0a","implementation":"x","config":"{}","time_ns":"5"}]})") ==
        "tune table: entry 0: \"time_ns\" is not a number");
  CHECK(message_of(head + R"({"device":"cpu","key":"0a","implementation":"x","config":"{}"}]})") ==
        "tune table: entry 0 has no \"time_ns\"");
  CHECK(message_of(head +
                   R"({"device":"cpu","key":"0a","implementation":"x","config":"{}","time_ns":5,)"
                   R"("warm_time_ns":-1}]})") ==
        "tune table: entry 0: \"warm_time_ns\" is not a positive finite number of ns");
  CHECK(message_of(head +
                   R"({"device":"cpu","key":"0a","implementation":"x","config":"{}","time_ns":5,)"
                   R"("warm_default_time_ns":"4"}]})") ==
        "tune table: entry 0: \"warm_default_time_ns\" is not a number");
  CHECK(message_of(head + valid_entry + "," + valid_entry + "]}") ==
        "tune table: entry 1 repeats the device and key of an earlier entry");
  SECTION("from a file: the message names the path") {
    temp_dir d;
    const std::string path = d.file("bad.json");
    write(path, "{\"format\":");
    tune_table t;
    auto r = t.load_file(path, "0.1.0");
    REQUIRE_FALSE(r);
    CHECK(r.why().code == status::corrupt_data);
    CHECK(r.why().message.rfind(path + ": tune table: not JSON", 0) == 0);
  }
}

TEST_CASE("a table with a key given twice in one object is corrupt", "[autotune][table]") {
  const std::string head =
      R"({"format":"primcache-tune-table","format_version":1,"library_version":"0.1.0","entries":[)";
  const std::string fields = R"("device":"cpu","key":"0a0b","implementation":"jit:matmul",)"
                             R"("config":"{}","time_ns":5)";
  auto message_of = [&](const std::string& text) {
    tune_table t;
    t.put("cpu:avx2", make_key(9), entry(1));
    auto r = t.merge_json(text, "0.1.0");
    REQUIRE_FALSE(r);
    CHECK(r.why().code == status::corrupt_data);
    CHECK(t.size() == 1);  // the table is as it was
    return r.why().message;
  };
  // Boost.JSON keeps the last: these loaded with a time of 1e9 ns, device
  // "gpu" and library version 0.2.0 (skipped as another version's).
  CHECK(message_of(head + "{" + fields + R"(,"time_ns":1e9}]})") ==
        "tune table: entry 0: \"time_ns\" is given twice");
  CHECK(message_of(head + "{" + fields + "},{" + fields + R"(,"device":"gpu"}]})") ==
        "tune table: entry 1: \"device\" is given twice");
  CHECK(message_of(head + "]," + R"("library_version":"0.2.0"})") ==
        "tune table: \"library_version\" is given twice");
  // Compared unescaped; in an object the format does not read.
  CHECK(message_of(head + "{" + fields + R"(,"\u0074ime_ns":1e9}]})") ==
        "tune table: entry 0: \"time_ns\" is given twice");
  CHECK(message_of(head + R"(],"extra":{"a/b":{"x":1,"x":2}}})") ==
        "tune table: /extra/a~1b: \"x\" is given twice");
  // The same keys in every entry are no duplicate.
  tune_table t;
  REQUIRE(t.merge_json(head + "{" + fields + R"(},{"device":"cpu","key":"0c",)" +
                           R"("implementation":"x","config":"{}","time_ns":5}]})",
                       "0.1.0"));
  CHECK(t.size() == 2);
  SECTION("from a file: the message names the path") {
    temp_dir d;
    const std::string path = d.file("twice.json");
    write(path, head + "{" + fields + R"(,"time_ns":1e9}]})");
    auto r = t.load_file(path, "0.1.0");
    REQUIRE_FALSE(r);
    CHECK(r.why().code == status::corrupt_data);
    CHECK(r.why().message == path + ": tune table: entry 0: \"time_ns\" is given twice");
  }
}

TEST_CASE("loading a missing or unreadable table fails as a value", "[autotune][table]") {
  temp_dir d;
  tune_table t;
  auto missing = t.load_file(d.file("none.json"), "0.1.0");
  REQUIRE_FALSE(missing);
  CHECK(missing.why().code == status::not_found);
  CHECK(missing.why().message == "tune table " + d.file("none.json") + " does not exist");
  auto dir = t.load_file(d.path.string(), "0.1.0");  // a directory reads as nothing
  REQUIRE_FALSE(dir);
  // A path through a file: the system's reason, as runtime_error.
  write(d.file("plain"), "x");
  auto through = t.load_file(d.file("plain") + "/t.json", "0.1.0");
  REQUIRE_FALSE(through);
  CHECK(through.why().code == status::runtime_error);
  CHECK(through.why().message ==
        "tune table " + d.file("plain") + "/t.json: cannot open (Not a directory)");
  if (::geteuid() != 0) {
    const std::string path = d.file("secret.json");
    write(path, "{}");
    ::chmod(path.c_str(), 0);
    auto denied = t.load_file(path, "0.1.0");
    REQUIRE_FALSE(denied);
    CHECK(denied.why().code == status::runtime_error);
    CHECK(denied.why().message.find("cannot open") != std::string::npos);
  }
}

TEST_CASE("saving is atomic and merges what the file already holds", "[autotune][table]") {
  temp_dir d;
  const std::string path = d.file("tune.json");
  tune_table first;
  first.put("cpu:avx2", make_key(1), entry(100, "first1"));
  first.put("cpu:avx2", make_key(2), entry(100, "first2"));
  REQUIRE(first.save_file(path, "0.1.0"));
  SECTION("merging: the faster entry of each key, other keys kept") {
    tune_table second;
    second.put("cpu:avx2", make_key(2), entry(50, "second2"));
    second.put("cpu:avx2", make_key(3), entry(70, "second3"));
    auto saved = second.save_file(path, "0.1.0");
    REQUIRE(saved);
    CHECK(saved.value() == 3);
    tune_table back;
    REQUIRE(back.load_file(path, "0.1.0"));
    CHECK(back.find("cpu:avx2", make_key(1))->config == "first1");
    CHECK(back.find("cpu:avx2", make_key(2))->config == "second2");
    CHECK(back.find("cpu:avx2", make_key(3))->config == "second3");
    CHECK(second.size() == 2);  // saving does not change the table itself
  }
  SECTION("without merging the file is replaced") {
    tune_table second;
    second.put("cpu:avx2", make_key(3), entry(70));
    REQUIRE(second.save_file(path, "0.1.0", /*merge_existing=*/false).value() == 1);
    tune_table back;
    REQUIRE(back.load_file(path, "0.1.0"));
    CHECK(back.size() == 1);
  }
  SECTION("a corrupt or other-version file is replaced") {
    write(path, "garbage");
    REQUIRE(first.save_file(path, "0.1.0"));
    tune_table back;
    CHECK(back.load_file(path, "0.1.0").value().taken == 2);
    REQUIRE(first.save_file(path, "0.2.0"));
    tune_table newer;
    newer.put("cpu:avx2", make_key(5), entry(1));
    CHECK(newer.save_file(path, "0.1.0").value() == 1);  // 0.2.0's entries are not merged
  }
  SECTION("a failed write leaves the old file and no temporary") {
    const std::string before = read(path);
    if (::geteuid() != 0) {
      ::chmod(d.path.c_str(), 0555);
      tune_table other;
      other.put("cpu:avx2", make_key(4), entry(1));
      auto r = other.save_file(path, "0.1.0");
      ::chmod(d.path.c_str(), 0755);
      REQUIRE_FALSE(r);
      CHECK(r.why().code == status::runtime_error);
      CHECK(r.why().message.find("tune table " + path + ": cannot create") == 0);
      CHECK(read(path) == before);
    }
    // A directory where the file should be: the rename fails (even as root).
    fs::create_directory(d.file("taken"));
    auto r1 = first.save_file(d.file("taken"), "0.1.0");
    REQUIRE_FALSE(r1);
    CHECK(r1.why().code == status::runtime_error);
    CHECK(r1.why().message.find("tune table " + d.file("taken") + ": cannot rename") == 0);
    CHECK(fs::is_directory(d.file("taken")));
    auto r2 = first.save_file(d.file("no/such/dir/t.json"), "0.1.0");
    REQUIRE_FALSE(r2);
    CHECK(r2.why().code == status::runtime_error);
    CHECK(read(path) == before);
    // The table, the directory and their lock files: no temporary left behind.
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(d.path)) names.insert(e.path().filename().string());
    CHECK(names == std::set<std::string>{"taken", "taken.lock", "tune.json", "tune.json.lock"});
  }
}

TEST_CASE("processes saving one table at once keep each other's entries", "[autotune][table]") {
  temp_dir d;
  const std::string path = d.file("shared.json");
  // Each round saves a table of that round's entry alone: an entry that
  // another save's rename dropped is lost for good, so one lost race shows.
  constexpr int kProcesses = 4, kRounds = 100;
  std::vector<pid_t> children;
  std::fflush(nullptr);
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::alarm(60);  // never outlives a parent that stopped waiting
      for (int r = 0; r < kRounds; ++r) {
        tune_table t;
        t.put("cpu:avx2", make_key(p * kRounds + r), entry(100 + r));
        if (!t.save_file(path, "0.1.0")) std::_Exit(1);
      }
      std::_Exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  tune_table back;
  REQUIRE(back.load_file(path, "0.1.0"));
  CHECK(back.size() == kProcesses * kRounds);
  // The lock beside the table: a regular file only its owner may open.
  struct stat st {};
  REQUIRE(::lstat((path + ".lock").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("a child forked while another thread saves can save, and so can the parent after",
          "[autotune][table][fork]") {
  temp_dir d;
  const std::string path = d.file("forked.json");
  std::atomic<bool> stop{false};
  std::atomic<int> parent_saves{0};
  // A thread saving without pause: most forks land inside a save.
  std::thread saver([&] {
    tune_table t;
    t.put("cpu:avx2", make_key(1), entry(100));
    while (!stop.load()) {
      if (t.save_file(path, "0.1.0")) ++parent_saves;
    }
  });
  while (parent_saves.load() == 0) std::this_thread::yield();
  std::vector<std::string> failures;
  for (int round = 0; round < 20 && failures.size() < 3; ++round) {
    // The child saves its own entry; it would wait for ever on a lock its
    // copy of the parent's descriptor holds.
    const child_outcome out = run_guarded([&](int) {
      tune_table t;
      t.put("cpu:avx2", make_key(1000 + round), entry(100));
      return t.save_file(path, "0.1.0") ? 0 : 1;
    });
    if (out.exit_code != 0) {
      failures.push_back(
          "round " + std::to_string(round) + ": " +
          (out.killed.empty() ? "exit " + std::to_string(out.exit_code) : out.killed));
    }
  }
  stop = true;
  saver.join();
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
  tune_table after;
  after.put("cpu:avx2", make_key(2), entry(100));
  CHECK(after.save_file(path, "0.1.0"));
}

TEST_CASE("saving never follows a symbolic link at the lock file's name", "[autotune][table]") {
  temp_dir d;
  const std::string path = d.file("tune.json"), elsewhere = d.file("elsewhere");
  write(elsewhere, "not the lock's");
  fs::create_symlink(elsewhere, path + ".lock");
  tune_table t;
  t.put("cpu:avx2", make_key(1), entry(100));
  auto r = t.save_file(path, "0.1.0");
  REQUIRE_FALSE(r);
  CHECK(r.why().code == status::runtime_error);
  CHECK(r.why().message == "tune table " + path + ": cannot create or open its lock file " + path +
                               ".lock (it is a symbolic link, which is never followed)");
  CHECK_FALSE(fs::exists(path));
  CHECK(read(elsewhere) == "not the lock's");
}

TEST_CASE("saving never touches a temporary file it did not create", "[autotune][table]") {
  temp_dir d;
  const std::string path = d.file("tune.json");
  // Another process's temporaries at the names a save used to choose,
  // PATH.tmp.<pid>.<n> with n counting this process's saves from 0 (two
  // containers sharing a volume both run as pid 1), for every n this
  // process's earlier saves may have reached.
  constexpr int kPlanted = 1000;
  const std::string planted = path + ".tmp." + std::to_string(::getpid()) + ".";
  for (int n = 0; n < kPlanted; ++n) write(planted + std::to_string(n), "another process's");
  tune_table t;
  t.put("cpu:avx2", make_key(1), entry(100));
  auto saved = t.save_file(path, "0.1.0");
  INFO((saved ? std::string() : saved.why().message));
  REQUIRE(saved);
  int intact = 0;
  for (int n = 0; n < kPlanted; ++n)
    intact += read(planted + std::to_string(n)) == "another process's";
  CHECK(intact == kPlanted);
  tune_table back;
  REQUIRE(back.load_file(path, "0.1.0"));
  CHECK(back.size() == 1);
  // The table, its lock and the planted files: the save's own temporary is gone.
  CHECK(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()) == kPlanted + 2);
}

TEST_CASE("a table path that is no regular file, or too large, is refused unread",
          "[autotune][table]") {
  temp_dir d;
  SECTION("a FIFO: opening it to read would wait for a writer") {
    const std::string fifo = d.file("fifo.json");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const child_outcome o = load_guarded(fifo);
    INFO(o.killed);
    CHECK(o.exit_code == 0);
    CHECK(o.said == "tune table " + fifo + ": not read: it is a FIFO, not a regular file");
    SECTION("and saving over it replaces it") {
      const child_outcome s = run_guarded([&](int) {
        tune_table t;
        t.put("cpu:avx2", make_key(1), entry(100));
        return t.save_file(fifo, "0.1.0") ? 0 : 1;
      });
      INFO(s.killed);
      CHECK(s.exit_code == 0);
      CHECK(fs::is_regular_file(fifo));
    }
  }
  SECTION("/dev/zero: reading it never ends") {
    const child_outcome o = load_guarded("/dev/zero");
    INFO(o.killed);
    CHECK(o.exit_code == 0);
    CHECK(o.said == "tune table /dev/zero: not read: it is a character device, not a regular file");
  }
  SECTION("a file over 64 MiB") {
    const std::string big = d.file("big.json");
    write(big, "{");
    fs::resize_file(big, (std::uintmax_t{64} << 20) + 1);  // sparse: nothing written
    const child_outcome o = load_guarded(big);
    INFO(o.killed);
    CHECK(o.exit_code == 0);
    CHECK(o.said == "tune table " + big +
                        ": not read: it holds 67108865 bytes, more than the 67108864 a tune "
                        "table may");
  }
}
