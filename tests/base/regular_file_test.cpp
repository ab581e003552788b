// read_regular_file: a regular file whole; everything else refused before a
// byte is read (a directory, a FIFO, a device, a file over the limit), with
// the reason; a missing file's errno.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "primcache/base/regular_file.hpp"

namespace fs = std::filesystem;
using primcache::file_refusal;
using primcache::read_regular_file;

TEST_CASE("read_regular_file reads regular files and refuses everything else", "[base][file]") {
  const fs::path dir =
      fs::temp_directory_path() / ("primcache_regular_file_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string text_file = (dir / "a.json").string();
  std::ofstream(text_file) << "{\"a\": 1}";

  auto ok = read_regular_file(text_file, 100);
  CHECK(ok.refusal == file_refusal::none);
  CHECK(ok.text == "{\"a\": 1}");
  // Exactly at the limit is read; one byte under it is refused.
  CHECK(read_regular_file(text_file, 8).refusal == file_refusal::none);
  auto small = read_regular_file(text_file, 7);
  CHECK(small.refusal == file_refusal::too_large);
  CHECK(small.bytes == 8);
  CHECK_FALSE(small.grew);
  CHECK(small.reason == "8 bytes, more than the limit of 7");

  auto missing = read_regular_file((dir / "none").string(), 100);
  CHECK(missing.refusal == file_refusal::cannot_open);
  CHECK(missing.error == ENOENT);

  auto directory = read_regular_file(dir.string(), 100);
  CHECK(directory.refusal == file_refusal::not_regular);
  CHECK(directory.reason == "a directory, not a regular file");

  // Neither waits: a FIFO without a writer, a device without end.
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(read_regular_file(fifo, 100).reason == "a FIFO, not a regular file");
  CHECK(read_regular_file("/dev/zero", 100).reason == "a character device, not a regular file");

  // What fstat found comes back with the outcome; a link is followed only
  // when asked to.
  CHECK(ok.stat_known);
  CHECK(S_ISREG(ok.mode));
  CHECK(ok.uid == ::geteuid());
  CHECK(small.stat_known);
  CHECK(S_ISDIR(directory.mode));
  CHECK_FALSE(missing.stat_known);
  const std::string link = (dir / "link").string();
  REQUIRE(::symlink(text_file.c_str(), link.c_str()) == 0);
  CHECK(read_regular_file(link, 100).text == "{\"a\": 1}");
  auto not_followed = read_regular_file(link, 100, /*follow_links=*/false);
  CHECK(not_followed.refusal == file_refusal::cannot_open);
  CHECK(not_followed.error == ELOOP);
  CHECK(read_regular_file(text_file, 100, /*follow_links=*/false).text == "{\"a\": 1}");

  // A sparse file far over the limit: refused at open, nothing allocated.
  const std::string sparse = (dir / "sparse").string();
  std::ofstream(sparse).close();
  fs::resize_file(sparse, std::uintmax_t{1} << 40);
  auto huge = read_regular_file(sparse, 1 << 20);
  CHECK(huge.refusal == file_refusal::too_large);
  CHECK(huge.bytes == std::uint64_t{1} << 40);
  fs::remove_all(dir);
}
