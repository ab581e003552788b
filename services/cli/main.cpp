// primcache — the command line for a running primcached, in the manner of
// `ccache -s` (docs/primcached.md):
//
//   primcache stats                      every cache: size, capacity, hits, misses, ...
//   primcache set-capacity NAME N        change a cache's capacity (needs the token)
//   primcache flush NAME                 drop every entry of a cache (needs the token)
//   primcache cache ...                  a persistent cache directory (cache_command.hpp)
//   primcache tune WORKLOAD -o TABLE     tune matmuls and convolutions (tune_command.hpp)
//
// Options: --admin HOST:PORT (default 127.0.0.1:8477), --token-file PATH
// (default: where primcached writes it; read only when it is a regular file
// of this user, mode 0600 or stricter, at most 4 KiB, holding a token of
// primcached's form: read_token). A request to the daemon takes at most 10 s
// (http_client.hpp). Errors are one line on stderr and exit status 1 (2 for
// a usage error).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>

#include "cache_command.hpp"
#include "default_paths.hpp"
#include "http_client.hpp"
#include "human_bytes.hpp"
#include "primcache/base/regular_file.hpp"
#include "tune_command.hpp"

namespace {

namespace json = boost::json;
using primcache::cli::http_request;
using primcache::cli::http_response;

constexpr const char* usage =
    "usage: primcache [--admin HOST:PORT] [--token-file PATH] COMMAND\n"
    "commands:\n"
    "  stats                  a table of every cache of the running primcached\n"
    "  set-capacity NAME N    set cache NAME's capacity to N (in its unit)\n"
    "  flush NAME             drop every entry of cache NAME\n"
    "  cache ...              a persistent cache directory: stats, verify, clear, export,\n"
    "                         import (primcache cache --help)\n"
    "  tune WORKLOAD -o TABLE tune a workload's matmuls and convolutions into a tune table\n"
    "                         (primcache tune --help)\n";

struct failure {
  std::string message;
  int exit_code = 1;
};

struct target {
  std::string host = std::string(primcache::services::default_admin_address);
  std::uint16_t port = primcache::services::default_admin_port;
  std::string token_file = primcache::services::default_token_file();
};

// The token primcached wrote (token_file.cpp): 64 lowercase hex digits and a
// newline, in a regular file of this user with mode 0600. The default path
// may be in /tmp, where another user can put something first, so what is
// there is checked before it is read, and before its text is sent anywhere:
// a link is not followed, a FIFO not waited on, a device not read; the file
// must be this user's, unreadable and unwritable by others, at most 4 KiB,
// and hold a token of that form.
constexpr std::size_t token_digits = 64;
constexpr std::size_t max_token_file_bytes = 4096;

std::string read_token(const target& t) {
  const std::string& path = t.token_file;
  const std::string refused = "the token file " + path + " ";
  // Opened without following a link or waiting on a FIFO; at most the
  // limit and one byte read (primcache/base/regular_file.hpp).
  const primcache::regular_file_text f =
      primcache::read_regular_file(path, max_token_file_bytes, /*follow_links=*/false);
  if (f.refusal == primcache::file_refusal::cannot_open) {
    struct stat lst {};
    if (f.error == ELOOP && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      throw failure{refused + "is a symbolic link: refusing to follow it"};
    }
    throw failure{"cannot read the token file " + path + ": " + f.reason +
                  " (is primcached running? give the path with --token-file)"};
  }
  if (f.refusal == primcache::file_refusal::not_regular) {
    throw failure{refused + "is " + f.reason + ": refusing to read it"};
  }
  if (f.stat_known && f.uid != ::geteuid()) {
    throw failure{refused + "is owned by uid " + std::to_string(f.uid) +
                  ", not by this user (uid " + std::to_string(::geteuid()) + "): refusing it"};
  }
  if (f.stat_known && (f.mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(f.mode & 07777));
    throw failure{refused + "has mode " + mode +
                  ": others may read or change it (primcached writes it 0600): refusing it"};
  }
  if (f.refusal == primcache::file_refusal::too_large) {
    throw failure{refused + "is " + std::to_string(f.bytes) + " bytes, more than " +
                  std::to_string(max_token_file_bytes) + ": not a token file"};
  }
  if (f.refusal == primcache::file_refusal::cannot_read) {
    throw failure{"cannot read the token file " + path + ": " + f.reason};
  }
  if (f.text.empty()) throw failure{refused + "is empty"};
  std::string token = f.text;
  if (token.back() == '\n') token.pop_back();
  const bool hex = std::all_of(token.begin(), token.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (token.size() != token_digits || !hex) {
    throw failure{refused + "does not hold a token of primcached's form (" +
                  std::to_string(token_digits) +
                  " lowercase hex digits and a newline): refusing to send it"};
  }
  return token;
}

// The response body as JSON for a 2xx status; otherwise a failure naming the
// server's error.
json::value checked(const http_response& r, const std::string& what, const target& t) {
  std::string server_error;
  json::value doc;
  boost::system::error_code ec;
  doc = json::parse(r.body, ec);
  if (r.status >= 200 && r.status < 300) {
    if (ec) throw failure{what + ": the server's answer is not JSON (" + ec.message() + ")"};
    return doc;
  }
  if (!ec && doc.is_object() && doc.as_object().contains("error") &&
      doc.as_object().at("error").is_string()) {
    server_error = std::string(doc.as_object().at("error").get_string());
  } else {
    server_error = r.body.substr(0, 200);
  }
  std::string message = what + ": HTTP " + std::to_string(r.status) + ": " + server_error;
  if (r.status == 401) message += " (the token in " + t.token_file + " was refused)";
  throw failure{message};
}

std::uint64_t as_u64(const json::value& v) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64()) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.get_int64()));
  if (v.is_double()) return static_cast<std::uint64_t>(std::max(0.0, v.get_double()));
  return 0;
}

using primcache::services::human_bytes;

std::string capacity_text(const json::object& c) {
  const json::value& cap = c.at("capacity");
  if (as_u64(cap) >= (std::uint64_t{1} << 53) || cap.is_null()) return "unlimited";
  return std::to_string(as_u64(cap));
}

void print_cache_line(const json::object& c) {
  const json::object& s = c.at("stats").as_object();
  const std::uint64_t hits = as_u64(s.at("hits")), misses = as_u64(s.at("misses"));
  const std::uint64_t waits = s.contains("waits") ? as_u64(s.at("waits")) : 0;
  const std::uint64_t lookups = hits + misses + waits;
  char rate[16] = "-";
  if (lookups > 0) {
    std::snprintf(rate, sizeof rate, "%.1f%%",
                  100.0 * static_cast<double>(hits) / static_cast<double>(lookups));
  }
  std::string weight = "-";
  if (c.contains("weight_bytes") && !c.at("weight_bytes").is_null()) {
    weight = human_bytes(as_u64(c.at("weight_bytes")));
  }
  const std::string size_cap = std::to_string(as_u64(c.at("size"))) + " / " + capacity_text(c);
  std::printf(
      "%-18s %-8s %17s %10s %12llu %10llu %8llu %10llu %9llu %9s\n",
      std::string(c.at("name").get_string()).c_str(),
      std::string(c.at("unit").get_string()).c_str(), size_cap.c_str(), weight.c_str(),
      static_cast<unsigned long long>(hits), static_cast<unsigned long long>(misses),
      static_cast<unsigned long long>(waits),
      static_cast<unsigned long long>(as_u64(s.at("evictions"))),
      static_cast<unsigned long long>(s.contains("failures") ? as_u64(s.at("failures")) : 0), rate);
  if (c.contains("extra") && c.at("extra").is_object()) {
    for (const auto& kv : c.at("extra").as_object()) {
      std::printf("  %s.%s: %llu\n", std::string(c.at("name").get_string()).c_str(),
                  std::string(kv.key()).c_str(),
                  static_cast<unsigned long long>(as_u64(kv.value())));
    }
  }
}

int stats(const target& t) {
  const json::value doc =
      checked(http_request(t.host, t.port, "GET", "/api/v1/caches", "", ""), "stats", t);
  if (!doc.is_object() || !doc.as_object().contains("caches") ||
      !doc.as_object().at("caches").is_array()) {
    throw failure{"stats: the server's answer has no caches array"};
  }
  std::printf("primcached at %s:%u\n", t.host.c_str(), static_cast<unsigned>(t.port));
  std::printf("%-18s %-8s %17s %10s %12s %10s %8s %10s %9s %9s\n", "cache", "unit",
              "size / capacity", "weight", "hits", "misses", "waits", "evictions", "failures",
              "hit rate");
  try {
    for (const json::value& c : doc.as_object().at("caches").as_array()) {
      print_cache_line(c.as_object());
    }
  } catch (const std::exception& e) {
    throw failure{std::string("stats: a cache entry is malformed (") + e.what() + ")"};
  }
  return 0;
}

int set_capacity(const target& t, const std::string& name, const std::string& value) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || n > (1ull << 53)) {
    throw failure{"set-capacity " + name + " " + value +
                      ": expected a capacity that is an integer in [0, 2^53]",
                  2};
  }
  const std::string token = read_token(t);
  const json::value doc =
      checked(http_request(t.host, t.port, "POST", "/api/v1/caches/" + name + "/capacity",
                           json::serialize(json::object{{"capacity", n}}), token),
              "set-capacity " + name, t);
  const json::object& c = doc.as_object();
  std::printf("%s: capacity %s (size %llu)\n", name.c_str(), capacity_text(c).c_str(),
              static_cast<unsigned long long>(as_u64(c.at("size"))));
  return 0;
}

int flush(const target& t, const std::string& name) {
  const std::string token = read_token(t);
  const json::value doc =
      checked(http_request(t.host, t.port, "POST", "/api/v1/caches/" + name + "/flush", "", token),
              "flush " + name, t);
  std::printf("%s: flushed %llu entries\n", name.c_str(),
              static_cast<unsigned long long>(as_u64(doc.as_object().at("flushed_entries"))));
  return 0;
}

int run(int argc, char** argv) {
  // `cache` works on a directory, not on a daemon: its own words and options.
  if (argc >= 2 && std::string_view(argv[1]) == "cache") {
    return primcache::cli::run_cache_command(std::vector<std::string>(argv + 2, argv + argc),
                                             stdout, stderr);
  }
  // `tune` runs in this process: a workload file in, a tune table out.
  if (argc >= 2 && std::string_view(argv[1]) == "tune") {
    return primcache::cli::run_tune_command(std::vector<std::string>(argv + 2, argv + argc), stdout,
                                            stderr);
  }
  target t;
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (arg.starts_with("--")) {
      std::string value;
      const std::size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        throw failure{arg + ": missing value", 2};
      }
      if (arg == "--admin") {
        if (!primcache::services::parse_host_port(value, t.host, t.port)) {
          throw failure{"--admin " + value + ": expected HOST:PORT", 2};
        }
      } else if (arg == "--token-file") {
        t.token_file = value;
      } else {
        throw failure{"unknown option " + arg, 2};
      }
      continue;
    }
    words.push_back(arg);
  }
  if (words.empty()) throw failure{"missing command (stats, set-capacity or flush)", 2};
  const std::string& cmd = words[0];
  if (cmd == "stats" && words.size() == 1) return stats(t);
  if (cmd == "set-capacity" && words.size() == 3) return set_capacity(t, words[1], words[2]);
  if (cmd == "flush" && words.size() == 2) return flush(t, words[1]);
  if (cmd == "stats" || cmd == "set-capacity" || cmd == "flush") {
    throw failure{cmd + ": wrong number of arguments", 2};
  }
  throw failure{"unknown command " + cmd, 2};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const failure& f) {
    std::fprintf(stderr, "primcache: %s\n", f.message.c_str());
    if (f.exit_code == 2) std::fputs(usage, stderr);
    return f.exit_code;
  } catch (const primcache::cli::connect_error& e) {
    std::fprintf(stderr, "primcache: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "primcache: %s\n", e.what());
    return 1;
  }
}
