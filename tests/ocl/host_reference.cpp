#include "host_reference.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"

namespace ocl_test {

using primcache::algorithm;

double eltwise_reference(algorithm alg, double v, double alpha, double beta) {
  switch (alg) {
    case algorithm::eltwise_relu: return v > 0 ? v : alpha * v;
    case algorithm::eltwise_gelu_erf: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case algorithm::eltwise_gelu_tanh:
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case algorithm::eltwise_tanh: return std::tanh(v);
    case algorithm::eltwise_logistic: return 1.0 / (1.0 + std::exp(-v));
    case algorithm::eltwise_exp: return std::exp(v);
    case algorithm::eltwise_linear: return alpha * v + beta;
    case algorithm::eltwise_clip: return std::min(std::max(v, alpha), beta);
    default: std::abort();
  }
}

std::vector<std::vector<std::int64_t>> all_indices(const std::vector<std::int64_t>& dims) {
  std::vector<std::vector<std::int64_t>> out;
  std::int64_t total = 1;
  for (auto d : dims) total *= d;
  for (std::int64_t i = 0; i < total; ++i) {
    std::vector<std::int64_t> idx(dims.size());
    std::int64_t rest = i;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      idx[d] = rest % dims[d];
      rest /= dims[d];
    }
    out.push_back(std::move(idx));
  }
  return out;
}

std::vector<float> read_all(const primcache::memory& m) {
  std::vector<float> v(m.get_desc().size_bytes() / sizeof(float));
  void* p = m.map_data();
  std::memcpy(v.data(), p, v.size() * sizeof(float));
  m.unmap_data(p);
  return v;
}

void write_all(const primcache::memory& m, const std::vector<float>& values) {
  void* p = m.map_data();
  std::memcpy(p, values.data(), values.size() * sizeof(float));
  m.unmap_data(p);
}

std::vector<float> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) % 4096) / 1024.f - 2.f;
  }
  return v;
}

namespace {

class host_engine final : public primcache::backend::engine_impl {
 public:
  host_engine() : engine_impl(primcache::engine_kind::cpu, 0) {}
  void write_identity(primcache::key_writer& w) const override { w.str("test-host"); }
  std::string describe() const override { return "test-host"; }
  void* allocate(std::size_t bytes) const override {
    return std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
  }
  void deallocate(void* p) const noexcept override { std::free(p); }
};

}  // namespace

void register_host_engine() {
  static const bool done = [] {
    primcache::backend::register_engine_factory(
        primcache::engine_kind::cpu, [] { return std::size_t{1}; },
        [](std::size_t) -> std::shared_ptr<const primcache::backend::engine_impl> {
          return std::make_shared<const host_engine>();
        });
    return true;
  }();
  (void)done;
}

}  // namespace ocl_test
