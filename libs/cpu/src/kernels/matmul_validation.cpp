#include "kernels/matmul_validation.hpp"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_failure.hpp"
#include "kernels/matmul_config.hpp"

namespace primcache::cpu_internal {

namespace {

// Bounds that keep every offset, constant and scratchpad size far from
// overflow; no real matmul comes near them.
constexpr std::int64_t kMaxOffsetBytes = std::int64_t{1} << 56;
constexpr std::int64_t kMaxPackBytes = std::int64_t{1} << 30;
constexpr int kMaxThreads = 4096;

failure invalid(const std::string& message) {
  return kernel_invalid("matmul", message);
}
failure unimplemented(const std::string& message) {
  return kernel_unimplemented("matmul", message);
}

// The largest element offset of a tensor with these extents and strides,
// or nullopt when it (or its size in bytes) leaves the supported range.
std::optional<std::int64_t> max_offset(std::span<const std::int64_t> extents,
                                       std::span<const std::int64_t> strides) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < extents.size(); ++i) {
    std::int64_t term = 0;
    if (__builtin_mul_overflow(extents[i] - 1, strides[i], &term)) return std::nullopt;
    if (__builtin_add_overflow(total, term, &total)) return std::nullopt;
  }
  if (total >= kMaxOffsetBytes / 4) return std::nullopt;
  return total;
}

}  // namespace

std::optional<failure> validate_matmul_problem(const matmul_problem& p, bool need_dense_n) {
  const std::pair<const char*, std::int64_t> dims[] = {
      {"batch", p.batch}, {"m", p.m}, {"n", p.n}, {"k", p.k}};
  for (const auto& [name, v] : dims) {
    if (v < 1) return invalid(std::string(name) + " " + std::to_string(v) + " is not positive");
  }
  const std::pair<const char*, const std::array<std::int64_t, 3>*> strides[] = {
      {"src", &p.src_strides}, {"weights", &p.wei_strides}, {"dst", &p.dst_strides}};
  for (const auto& [name, s] : strides) {
    for (std::int64_t v : *s) {
      if (v < 0)
        return invalid(std::string(name) + " stride " + std::to_string(v) + " is negative");
    }
  }
  const std::int64_t src_ext[] = {p.batch, p.m, p.k};
  const std::int64_t wei_ext[] = {p.batch, p.k, p.n};
  const std::int64_t dst_ext[] = {p.batch, p.m, p.n};
  if (!max_offset(src_ext, p.src_strides)) return invalid("src extent overflows");
  if (!max_offset(wei_ext, p.wei_strides)) return invalid("weights extent overflows");
  if (!max_offset(dst_ext, p.dst_strides)) return invalid("dst extent overflows");
  if (need_dense_n && p.dst_strides[2] != 1) {
    return unimplemented("dst n stride " + std::to_string(p.dst_strides[2]) +
                         " is not 1 (dst must be dense along n)");
  }
  // dst is written, so no two elements may share an address: the dims
  // sorted by stride must each step over the whole extent of the smaller ones.
  struct dim {
    std::int64_t extent, stride;
  };
  std::vector<dim> outer;
  if (p.n > 1) outer.push_back({p.n, p.dst_strides[2]});
  if (p.m > 1) outer.push_back({p.m, p.dst_strides[1]});
  if (p.batch > 1) outer.push_back({p.batch, p.dst_strides[0]});
  std::sort(outer.begin(), outer.end(), [](dim a, dim b) { return a.stride < b.stride; });
  std::int64_t span = 1;
  for (const dim& d : outer) {
    if (d.stride < span) {
      return invalid("dst strides (" + std::to_string(p.dst_strides[0]) + ", " +
                     std::to_string(p.dst_strides[1]) + ", " + std::to_string(p.dst_strides[2]) +
                     ") make elements overlap");
    }
    span = d.stride * d.extent;  // no overflow: max_offset bounded it
  }
  if (p.nthr < 1 || p.nthr > kMaxThreads) {
    return invalid("nthr " + std::to_string(p.nthr) + " is outside [1, " +
                   std::to_string(kMaxThreads) + "]");
  }
  for (const post_op& op : p.post_ops) {
    if (op.what == post_op::kind::eltwise) {
      if (op.eltwise.alg > eltwise_alg::clip) return invalid("unknown eltwise algorithm");
    } else if (op.what == post_op::kind::binary_add) {
      if (op.binary.arg_index < 0) {
        return invalid("binary post-op operand index " + std::to_string(op.binary.arg_index) +
                       " is negative");
      }
      if (op.binary.broadcast > binary_broadcast::scalar) {
        return invalid("unknown binary broadcast");
      }
    } else {
      return invalid("unknown post-op kind");
    }
  }
  return std::nullopt;
}

std::optional<failure> validate_matmul_config(const matmul_problem& p, const matmul_config& c,
                                              int lanes, int registers) {
  if (c.mr < 1 || c.nr < 1) {
    return invalid("register block " + std::to_string(c.mr) + "x" + std::to_string(c.nr) +
                   " is not positive");
  }
  if (c.nr % 8 != 0 || (lanes != 0 && c.nr % lanes != 0)) {
    return invalid("nr " + std::to_string(c.nr) + " is not a multiple of the vector width " +
                   std::to_string(lanes == 0 ? 8 : lanes));
  }
  if (lanes != 0) {
    const int nv = c.nr / lanes;
    if (c.mr * nv + nv + 1 > registers) {
      return invalid("register block " + std::to_string(c.mr) + "x" + std::to_string(c.nr) +
                     " needs more than " + std::to_string(registers) + " vector registers");
    }
  }
  if (c.kc < 1 || c.kc > (1 << 20))
    return invalid("kc " + std::to_string(c.kc) + " is out of range");
  if (c.mc < c.mr || c.mc % c.mr != 0 || c.mc > (std::int64_t{1} << 40)) {
    return invalid("mc " + std::to_string(c.mc) + " is not a positive multiple of mr");
  }
  if (c.nc < c.nr || c.nc % c.nr != 0 || c.nc > (std::int64_t{1} << 40)) {
    return invalid("nc " + std::to_string(c.nc) + " is not a positive multiple of nr");
  }
  if (c.k_unroll < 1 || c.k_unroll > 16) {
    return invalid("k_unroll " + std::to_string(c.k_unroll) + " is outside [1, 16]");
  }
  if (c.thr_m < 1 || c.thr_n < 1 || static_cast<std::int64_t>(c.thr_m) * c.thr_n > p.nthr) {
    return invalid("thread grid " + std::to_string(c.thr_m) + "x" + std::to_string(c.thr_n) +
                   " has more cells than nthr = " + std::to_string(p.nthr));
  }
  if (c.pack_b && p.prepacked_weights) {
    return invalid("the weights come prepacked: the configuration must not pack them");
  }
  if (!c.pack_b && !p.prepacked_weights && p.wei_strides[2] != 1) {
    return invalid("without packing the weights must be dense along n (n stride " +
                   std::to_string(p.wei_strides[2]) + ")");
  }
  if (c.pack_b && c.kc * c.nc > kMaxPackBytes / 4) {
    return invalid("packed panel kc x nc = " + std::to_string(c.kc) + "x" + std::to_string(c.nc) +
                   " is too large");
  }
  if (p.prepacked_weights) {
    // The packed weights' extent: batches x column blocks x K x nr floats.
    const matmul_packing pk = matmul_packing::of(p, c);
    std::int64_t floats = 0;
    if (__builtin_mul_overflow(pk.column_blocks() * pk.nr, pk.k, &floats) ||
        __builtin_mul_overflow(floats, pk.batches, &floats)) {
      return invalid("prepacked weights extent overflows");
    }
    const std::int64_t ext[] = {pk.batches, pk.column_blocks(), pk.k, pk.nr};
    const std::int64_t str[] = {pk.batch_stride(), pk.k * pk.nr, pk.nr, 1};
    if (!max_offset(ext, str)) return invalid("prepacked weights extent overflows");
  }
  return std::nullopt;
}

std::optional<failure> validate_matmul_isa(cpu_isa isa) {
  if (isa < cpu_isa::avx2) {
    return unimplemented("needs avx2 or better, asked for " + std::string(to_string(isa)));
  }
  if (isa > detected_isa()) {
    return unimplemented(std::string(to_string(isa)) + " is beyond this host's " +
                         std::string(to_string(detected_isa())));
  }
  return std::nullopt;
}

result<bool> check_matmul_problem(const matmul_problem& p, bool for_reference) {
  if (auto bad = validate_matmul_problem(p, !for_reference)) return *bad;
  return true;
}

}  // namespace primcache::cpu_internal
