#include "kernels/addressing.hpp"

#include <cmath>
#include <cstdio>

namespace primcache::ocl_internal {

std::string index_list(int n, const std::string& prefix) {
  std::string s;
  for (int d = 0; d < n; ++d) s += (d ? ", " : "") + prefix + std::to_string(d);
  return s;
}

std::string offset_function(const memory_desc& md, const std::string& name) {
  const int n = md.ndims();
  std::string s = "inline long " + name + "(";
  for (int d = 0; d < n; ++d) s += (d ? ", long p" : "long p") + std::to_string(d);
  s += ") {\n  long off = " + std::to_string(md.offset0()) + "L;\n";
  for (int d = 0; d < n; ++d) {
    if (md.padded_offsets()[d] != 0) {
      s += "  p" + std::to_string(d) + " += " + std::to_string(md.padded_offsets()[d]) + "L;\n";
    }
  }
  std::int64_t inner_stride = 1;
  for (int k = md.inner_nblks() - 1; k >= 0; --k) {
    const std::string p = "p" + std::to_string(md.inner_idxs()[k]);
    const std::string blk = std::to_string(md.inner_blks()[k]) + "L";
    s += "  off += (" + p + " % " + blk + ") * " + std::to_string(inner_stride) + "L;\n";
    s += "  " + p + " /= " + blk + ";\n";
    inner_stride *= md.inner_blks()[k];
  }
  for (int d = 0; d < n; ++d) {
    s += "  off += p" + std::to_string(d) + " * " + std::to_string(md.strides()[d]) + "L;\n";
  }
  return s + "  return off;\n}\n";
}

std::string index_split(std::span<const std::int64_t> dims, const std::string& linear,
                        const std::string& prefix) {
  std::string s = "  long rest_ = " + linear + ";\n";
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    const std::string v = prefix + std::to_string(d);
    const std::string n = std::to_string(dims[static_cast<std::size_t>(d)]) + "L";
    s += "  const long " + v + " = rest_ % " + n + ";\n  rest_ /= " + n + ";\n";
  }
  return s;
}

std::string float_literal(float v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "(%af)", static_cast<double>(v));
  return buf;
}

}  // namespace primcache::ocl_internal
