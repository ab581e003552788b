// services/common/human_bytes.hpp — byte counts as people read them, for
// the command line's tables and messages ("0 B", "768.0 KiB", "1.5 GiB").
//
//   std::puts(primcache::services::human_bytes(786432).c_str());  // 768.0 KiB
//
// Thread-safety: a pure function. Exceptions: std::bad_alloc only.
#pragma once

#include <cstdint>
#include <string>

namespace primcache::services {

// Binary units up to TiB; one decimal above bytes.
std::string human_bytes(std::uint64_t n);

}  // namespace primcache::services
