#include "input_file.hpp"

#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/base/regular_file.hpp"

namespace primcache::primcached {

namespace {

std::string size_text(std::size_t bytes) {
  if (bytes % (std::size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

std::string read_input_file(const std::string& path, const std::string& cannot_read,
                            std::size_t max_bytes, bool open_reason) {
  regular_file_text f = read_regular_file(path, max_bytes);
  switch (f.refusal) {
    case file_refusal::none: return std::move(f.text);
    case file_refusal::cannot_open:
      throw error(status::not_found, open_reason ? cannot_read + ": " + f.reason : cannot_read);
    case file_refusal::not_regular: throw error(status::not_found, cannot_read + ": " + f.reason);
    case file_refusal::too_large:
      throw error(status::permission_denied,
                  cannot_read + ": larger than " + size_text(max_bytes) +
                      ", the limit for a config, workload or graph file");
    case file_refusal::cannot_read: break;
  }
  throw error(status::runtime_error, cannot_read + ": " + f.reason);
}

}  // namespace primcache::primcached
