#include "kernels/matmul_kernel.hpp"

#include <algorithm>
#include <utility>

#include "kernels/integer_math.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/matmul_generator.hpp"
#include "kernels/matmul_validation.hpp"

namespace primcache::cpu_internal {

matmul_kernel::matmul_kernel(const matmul_problem& p, const matmul_config& cfg,
                             std::unique_ptr<jit_module> module, function* fn)
    : problem_(p), config_(cfg), module_(std::move(module)), fn_(fn) {}

result<std::unique_ptr<matmul_kernel>> matmul_kernel::finish(
    const matmul_problem& p, const matmul_config& cfg, result<std::unique_ptr<jit_module>> module) {
  if (!module) return module.why();
  auto fn = module.value()->lookup_function<function>(matmul_symbol);
  if (!fn) return fn.why();
  return std::unique_ptr<matmul_kernel>(
      new matmul_kernel(p, cfg, std::move(module).value(), fn.value()));
}

result<std::unique_ptr<matmul_kernel>> matmul_kernel::create(const matmul_problem& p,
                                                             const matmul_config& cfg,
                                                             cpu_isa isa) {
  if (auto f = validate_matmul_isa(isa)) return *f;
  if (auto f = validate_matmul_problem(p)) return *f;
  if (auto f =
          validate_matmul_config(p, cfg, matmul_vector_lanes(isa), matmul_vector_registers(isa)))
    return *f;
  return finish(p, cfg, jit_module::compile(matmul_module_name(p), isa, [&](llvm::Module& m) {
                  generate_matmul(p, cfg, isa, m);
                }));
}

result<std::unique_ptr<matmul_kernel>> matmul_kernel::load(const matmul_problem& p,
                                                           const matmul_config& cfg,
                                                           std::span<const std::byte> object,
                                                           cpu_isa highest) {
  if (auto f = validate_matmul_problem(p)) return *f;
  if (auto f = validate_matmul_config(p, cfg, 0, 0)) return *f;
  return finish(p, cfg, jit_module::load(matmul_module_name(p), object, highest));
}

std::size_t matmul_kernel::scratchpad_bytes() const noexcept {
  return matmul_pack_slot_bytes(config_) * static_cast<std::size_t>(config_.thr_m * config_.thr_n);
}

void matmul_kernel::execute(const matmul_args& args, void* scratchpad, thread_pool& pool) const {
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
    // A pool smaller than the grid gives some threads several cells.
    for (int cell = ithr; cell < cells; cell += nthr) {
      const range r = balance(rows, cell / c.thr_n, c.thr_m);
      const range cr = balance(nblocks, cell % c.thr_n, c.thr_n);
      if (r.begin >= r.end || cr.begin >= cr.end) continue;
      for (std::int64_t b = r.begin / mblocks; b * mblocks < r.end; ++b) {
        const std::int64_t mb0 = std::max(r.begin, b * mblocks) - b * mblocks;
        const std::int64_t mb1 = std::min(r.end, (b + 1) * mblocks) - b * mblocks;
        fn_(args.src, args.weights, args.bias, args.dst, args.binary_operands, pack, b, mb0, mb1,
            cr.begin, cr.end);
      }
    }
  });
}
}  // namespace primcache::cpu_internal
