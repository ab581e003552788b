#include "primcache/control/capacity_unit.hpp"

namespace primcache {

std::string_view to_string(capacity_unit unit) noexcept {
  switch (unit) {
    case capacity_unit::entries: return "entries";
    case capacity_unit::bytes: return "bytes";
    case capacity_unit::megabytes: return "MB";
  }
  return "unknown";
}

}  // namespace primcache
