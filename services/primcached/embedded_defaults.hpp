// services/primcached/embedded_defaults.hpp — configs/primcached.json and
// configs/workloads/default.json, compiled into the binary (the build
// generates their definitions), so that primcached runs with no arguments
// from any directory.
#pragma once

#include <string_view>

namespace primcache::primcached {

std::string_view embedded_config() noexcept;
std::string_view embedded_workload() noexcept;

}  // namespace primcache::primcached
