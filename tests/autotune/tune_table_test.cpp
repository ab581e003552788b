#include "primcache/autotune/tune_table.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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
    // Nothing but the table is left in the directory.
    CHECK(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()) == 1);
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
    // Only the table and the directory: no temporary left behind.
    CHECK(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()) == 2);
  }
}
