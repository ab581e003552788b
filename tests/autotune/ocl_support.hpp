// OpenCL tune-mode tests' shared pieces: matmul and convolution cases on the
// first OpenCL device (PoCL's CPU device on CI) with inputs that make every
// partial sum exact in f32, double-precision host references, and forcing a
// configuration through the registry's config source.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

namespace ocl_tune_test {

using namespace primcache;

inline engine& gpu() {
  static engine e(engine_kind::gpu, 0);
  return e;
}

// Multiples of 1/4 in [-1, 1]: products are multiples of 1/16, and sums of
// fewer than 2^20 of them are exact in f32, whatever their order.
inline std::vector<float> quarters(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint32_t x = 0x9e3779b9u * (seed + 1);
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f = static_cast<float>(static_cast<int>(x % 9) - 4) * 0.25f;
  }
  return v;
}

inline void write(const memory& m, const std::vector<float>& v) {
  void* p = m.map_data();
  std::memcpy(p, v.data(), v.size() * sizeof(float));
  m.unmap_data(p);
}

inline std::vector<float> read(const memory& m) {
  std::vector<float> v(m.get_desc().size_bytes() / sizeof(float));
  void* p = m.map_data();
  std::memcpy(v.data(), p, v.size() * sizeof(float));
  m.unmap_data(p);
  return v;
}

// Elements differing from the reference: the sums are exact, so only the
// kernel's own rounding of exact values may differ (none expected; 1e-6
// relative allowed for a mad() that rounds twice).
inline int mismatches(const std::vector<double>& ref, const std::vector<float>& got) {
  int bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!(std::abs(got[i] - ref[i]) <= 1e-6 * (1 + std::abs(ref[i])))) ++bad;
  }
  return bad;
}

// relu(src (m x k) x wei (k x n) + bias), row-major.
struct matmul_case {
  int m, n, k;
  memory src, wei, bias, dst;
  std::vector<float> a, w, b;
  primitive_attr attr;
  matmul_case(int m_, int n_, int k_, std::uint32_t seed)
      : m(m_),
        n(n_),
        k(k_),
        src(memory::desc({m_, k_}, data_type::f32, format_tag::ab), gpu()),
        wei(memory::desc({k_, n_}, data_type::f32, format_tag::ab), gpu()),
        bias(memory::desc({1, n_}, data_type::f32, format_tag::ab), gpu()),
        dst(memory::desc({m_, n_}, data_type::f32, format_tag::ab), gpu()),
        a(quarters(static_cast<std::size_t>(m_) * k_, seed)),
        w(quarters(static_cast<std::size_t>(k_) * n_, seed + 1)),
        b(quarters(static_cast<std::size_t>(n_), seed + 2)) {
    write(src, a);
    write(wei, w);
    write(bias, b);
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  matmul::primitive_desc pd() const {
    return matmul::primitive_desc(
        matmul::desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc()), attr, gpu());
  }
  void run(const primitive& p) const {
    write(dst, std::vector<float>(static_cast<std::size_t>(m) * n, NAN));
    stream s(gpu());
    p.execute(s, {{PRIMCACHE_ARG_SRC, src},
                  {PRIMCACHE_ARG_WEIGHTS, wei},
                  {PRIMCACHE_ARG_BIAS, bias},
                  {PRIMCACHE_ARG_DST, dst}});
    s.wait();
  }
  std::vector<double> reference() const {
    std::vector<double> out(static_cast<std::size_t>(m) * n);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = b[static_cast<std::size_t>(j)];
        for (int x = 0; x < k; ++x) {
          acc += double(a[static_cast<std::size_t>(i) * k + x]) *
                 w[static_cast<std::size_t>(x) * n + j];
        }
        out[static_cast<std::size_t>(i) * n + j] = acc > 0 ? acc : 0;
      }
    }
    return out;
  }
  int bad() const { return mismatches(reference(), read(dst)); }
};

// relu(conv2d(src, wei) + bias), nchw / oihw, minibatch 1, one group.
struct conv_case {
  int ic, oc, ih, iw, kh, kw, stride, pad;
  int oh, ow;
  memory src, wei, bias, dst;
  std::vector<float> x, w, b;
  primitive_attr attr;
  conv_case(int ic_, int oc_, int hw, int kk, int stride_, int pad_, std::uint32_t seed)
      : ic(ic_),
        oc(oc_),
        ih(hw),
        iw(hw),
        kh(kk),
        kw(kk),
        stride(stride_),
        pad(pad_),
        oh((hw + 2 * pad_ - kk) / stride_ + 1),
        ow((hw + 2 * pad_ - kk) / stride_ + 1),
        src(memory::desc({1, ic_, hw, hw}, data_type::f32, format_tag::nchw), gpu()),
        wei(memory::desc({oc_, ic_, kk, kk}, data_type::f32, format_tag::oihw), gpu()),
        bias(memory::desc({oc_}, data_type::f32, format_tag::a), gpu()),
        dst(memory::desc({1, oc_, oh, ow}, data_type::f32, format_tag::nchw), gpu()),
        x(quarters(static_cast<std::size_t>(ic_) * hw * hw, seed)),
        w(quarters(static_cast<std::size_t>(oc_) * ic_ * kk * kk, seed + 1)),
        b(quarters(static_cast<std::size_t>(oc_), seed + 2)) {
    write(src, x);
    write(wei, w);
    write(bias, b);
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  convolution_forward::primitive_desc pd() const {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc(),
                                  {stride, stride}, {pad, pad}, {pad, pad}),
        attr, gpu());
  }
  void run(const primitive& p) const {
    write(dst, std::vector<float>(static_cast<std::size_t>(oc) * oh * ow, NAN));
    stream s(gpu());
    p.execute(s, {{PRIMCACHE_ARG_SRC, src},
                  {PRIMCACHE_ARG_WEIGHTS, wei},
                  {PRIMCACHE_ARG_BIAS, bias},
                  {PRIMCACHE_ARG_DST, dst}});
    s.wait();
  }
  std::vector<double> reference() const {
    std::vector<double> out(static_cast<std::size_t>(oc) * oh * ow);
    for (int o = 0; o < oc; ++o) {
      for (int y = 0; y < oh; ++y) {
        for (int z = 0; z < ow; ++z) {
          double acc = b[static_cast<std::size_t>(o)];
          for (int c = 0; c < ic; ++c) {
            for (int r = 0; r < kh; ++r) {
              for (int s = 0; s < kw; ++s) {
                const int iy = y * stride - pad + r, ix = z * stride - pad + s;
                if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                acc += double(x[(static_cast<std::size_t>(c) * ih + iy) * iw + ix]) *
                       w[((static_cast<std::size_t>(o) * ic + c) * kh + r) * kw + s];
              }
            }
          }
          out[(static_cast<std::size_t>(o) * oh + y) * ow + z] = acc > 0 ? acc : 0;
        }
      }
    }
    return out;
  }
  int bad() const { return mismatches(reference(), read(dst)); }
};

// Configurations spread over the descriptor's space (what tuning's
// spread_search measures: the first that validates in each of n segments).
inline std::vector<backend::kernel_config> sampled_configs(const primitive_desc& pd,
                                                           std::size_t n) {
  const auto& pdi = backend::impl_of(pd);
  const backend::config_space space = pdi.config_candidates();
  std::vector<backend::kernel_config> out;
  const std::uint64_t size = space.size();
  for (std::uint64_t s = 0; s < n && size; ++s) {
    for (std::uint64_t i = s * size / n; i < (s + 1) * size / n; ++i) {
      backend::kernel_config c = space.at(i);
      if (pdi.validate_config(c)) {
        out.push_back(std::move(c));
        break;
      }
    }
  }
  return out;
}

// Descriptors created while it lives get `cfg`.
struct forced_config {
  explicit forced_config(const backend::kernel_config& cfg) {
    backend::set_config_source(
        [cfg](const backend::primitive_desc_impl&) -> std::optional<backend::kernel_config> {
          return cfg;
        });
  }
  ~forced_config() { backend::set_config_source({}); }
  forced_config(const forced_config&) = delete;
  forced_config& operator=(const forced_config&) = delete;
};

inline std::string table_config(const primitive_desc& pd) {
  auto e =
      global_tune_table().find(tune_device_of(pd.get_engine()), backend::impl_of(pd).problem_key());
  return e ? e->config : std::string();
}

}  // namespace ocl_tune_test
