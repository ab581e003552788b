#include "kernels/generic_matmul_kernel.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/integer_math.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/matmul_validation.hpp"
#include "tiered/generic_code.hpp"

namespace primcache::cpu_internal {
namespace {

// The blocking of the generic kernel: the specialized heuristic's rules
// (matmul_config.cpp, packing branch) for the generic register block.
matmul_config generic_config(const matmul_problem& p, const matmul_config& specialized,
                             const generic_matmul_shape& s) {
  matmul_config c = specialized;
  c.mr = s.mr;
  c.nr = s.nr();
  c.k_unroll = 4;
  c.n_inner = true;
  // The weights are read in place where the specialized kernel reads them
  // so (dense along N, not reused by several row blocks: a matrix-vector
  // product); its K blocks, short when no row block reuses the weights
  // (with_blocking in matmul_config.cpp, for the TLB), and one N block.
  c.pack_b = !p.prepacked_weights && (specialized.pack_b || p.wei_strides[2] != 1);
  if (!c.pack_b && !p.prepacked_weights) {
    const std::int64_t kc_max = p.m <= c.mr ? 64 : 256;
    c.kc = div_up(p.k, div_up(p.k, kc_max));
    c.mc = round_up(std::min<std::int64_t>(p.m, 4096), c.mr);
    c.nc = div_up(div_up(p.n, c.nr), c.thr_n) * c.nr;
    return c;
  }
  c.kc = div_up(p.k, div_up(p.k, 256));
  const std::int64_t mc_rows = std::max<std::int64_t>(c.mr, (512 * 1024) / (c.kc * 4));
  c.mc = std::max<std::int64_t>(c.mr, mc_rows / c.mr * c.mr);
  const std::int64_t nb = div_up(p.n, c.nr);
  const std::int64_t share = div_up(nb, c.thr_n) * c.nr;
  const std::int64_t nc_cols = std::max<std::int64_t>(c.nr, (1024 * 1024) / (c.kc * 4));
  c.nc = std::min(share, std::max<std::int64_t>(c.nr, nc_cols / c.nr * c.nr));
  return c;
}

}  // namespace

generic_matmul_kernel::generic_matmul_kernel(const matmul_problem& p, const matmul_config& c,
                                             cpu_isa isa, generic_matmul_function* fn)
    : problem_(p), config_(c), isa_(isa), fn_(fn) {
  auto& v = params_;
  v[gm_m] = p.m;
  v[gm_n] = p.n;
  v[gm_k] = p.k;
  v[gm_src_batch_stride] = p.src_strides[0];
  v[gm_src_m_stride] = p.src_strides[1];
  v[gm_src_k_stride] = p.src_strides[2];
  v[gm_wei_k_stride] = p.wei_strides[1];
  v[gm_wei_n_stride] = p.wei_strides[2];
  v[gm_wei_batch_stride] =
      p.prepacked_weights ? matmul_packing::of(p, c).batch_stride() : p.wei_strides[0];
  v[gm_dst_batch_stride] = p.dst_strides[0];
  v[gm_dst_m_stride] = p.dst_strides[1];
  v[gm_with_bias] = p.with_bias ? 1 : 0;
  v[gm_prepacked] = p.prepacked_weights ? 1 : 0;
  v[gm_pack_b] = c.pack_b ? 1 : 0;
  v[gm_kc] = c.kc;
  v[gm_mc_blocks] = c.mc / c.mr;
  v[gm_nc_blocks] = c.nc / c.nr;
  write_generic_post_ops(p.post_ops, v[gm_post_op_count], &v[gm_post_ops]);
}

result<std::unique_ptr<generic_matmul_kernel>> generic_matmul_kernel::create(
    const matmul_problem& p, const matmul_config& specialized, cpu_isa isa) {
  if (auto f = validate_matmul_isa(isa)) return *f;
  if (auto f = validate_matmul_problem(p)) return *f;
  if (p.post_ops.size() > static_cast<std::size_t>(gm_max_post_ops)) {
    return failure{status::unimplemented, "the generic matmul takes at most " +
                                              std::to_string(gm_max_post_ops) + " post-ops, not " +
                                              std::to_string(p.post_ops.size())};
  }
  auto code_isa = generic_isa_for(generic_kernel::matmul, isa);
  if (!code_isa) return code_isa.why();
  const generic_matmul_shape shape = generic_matmul_shape_for(code_isa.value());
  if (p.prepacked_weights && specialized.nr != shape.nr()) {
    return failure{status::unimplemented, "the weights are prepacked for nr " +
                                              std::to_string(specialized.nr) +
                                              "; the generic matmul reads them packed for nr " +
                                              std::to_string(shape.nr())};
  }
  auto fn = generic_function<generic_matmul_function>(generic_kernel::matmul, code_isa.value(),
                                                      generic_matmul_symbol);
  if (!fn) return fn.why();
  const matmul_config c = generic_config(p, specialized, shape);
  return std::unique_ptr<generic_matmul_kernel>(
      new generic_matmul_kernel(p, c, code_isa.value(), fn.value()));
}

std::size_t generic_matmul_kernel::scratchpad_bytes() const noexcept {
  return matmul_pack_slot_bytes(config_) * static_cast<std::size_t>(config_.thr_m * config_.thr_n);
}

void generic_matmul_kernel::execute(const matmul_args& args, void* scratchpad,
                                    thread_pool& pool) const {
  // The specialized kernel's partition (matmul_kernel.cpp) with the generic
  // register block.
  const matmul_problem& p = problem_;
  const matmul_config& c = config_;
  const std::int64_t mblocks = div_up(p.m, c.mr);
  const std::int64_t nblocks = div_up(p.n, c.nr);
  const std::int64_t rows = p.batch * mblocks;
  const std::size_t slot = matmul_pack_slot_bytes(c);
  const int cells = c.thr_m * c.thr_n;
  pool.parallel_for(cells, [&](int ithr, int nthr) {
    float* pack = slot == 0 ? nullptr
                            : reinterpret_cast<float*>(static_cast<std::byte*>(scratchpad) +
                                                       slot * static_cast<std::size_t>(ithr));
    for (int cell = ithr; cell < cells; cell += nthr) {
      const range r = balance(rows, cell / c.thr_n, c.thr_m);
      const range cr = balance(nblocks, cell % c.thr_n, c.thr_n);
      if (r.begin >= r.end || cr.begin >= cr.end) continue;
      for (std::int64_t b = r.begin / mblocks; b * mblocks < r.end; ++b) {
        const std::int64_t mb0 = std::max(r.begin, b * mblocks) - b * mblocks;
        const std::int64_t mb1 = std::min(r.end, (b + 1) * mblocks) - b * mblocks;
        fn_(params_.data(), args.src, args.weights, args.bias, args.dst, args.binary_operands, pack,
            b, mb0, mb1, cr.begin, cr.end);
      }
    }
  });
}

}  // namespace primcache::cpu_internal
