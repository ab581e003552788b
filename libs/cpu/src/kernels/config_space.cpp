#include "kernels/config_space.hpp"

#include <string>

namespace primcache::cpu_internal {

result<field_reader> field_reader::open(const backend::kernel_config& cfg, const char* kernel,
                                        std::initializer_list<std::string_view> names) {
  if (auto ok = cfg.expect(names); !ok) {
    return failure{ok.why().code, std::string(kernel) + " configuration: " + ok.why().message};
  }
  return field_reader(cfg, kernel);
}

result<bool> field_reader::get(std::string_view name, std::int64_t lo, std::int64_t hi,
                               std::int64_t& out) const {
  const std::int64_t v = cfg_->get(name).value_or(lo);
  if (v < lo || v > hi) {
    return failure{status::invalid_arguments,
                   std::string(kernel_) + " configuration: " + std::string(name) + " = " +
                       std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]"};
  }
  out = v;
  return true;
}

result<bool> field_reader::get(std::string_view name, int lo, int hi, int& out) const {
  std::int64_t v = 0;
  if (auto ok = get(name, std::int64_t{lo}, std::int64_t{hi}, v); !ok) return ok;
  out = static_cast<int>(v);
  return true;
}

result<bool> field_reader::get(std::string_view name, bool& out) const {
  std::int64_t v = 0;
  if (auto ok = get(name, std::int64_t{0}, std::int64_t{1}, v); !ok) return ok;
  out = v != 0;
  return true;
}

}  // namespace primcache::cpu_internal
