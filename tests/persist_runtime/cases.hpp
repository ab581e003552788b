// Shared by the persistent-cache runtime tests: one CPU primitive of each
// kind (how to make its descriptor, and its arguments), running one, a
// private temporary directory, and emptying the in-memory primitive cache.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "primcache/runtime/runtime.hpp"

namespace primcache::test {

inline engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

inline memory make(memory::dims dims, format_tag t, unsigned seed) {
  memory m(memory::desc(dims, data_type::f32, t), cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < m.get_desc().size_bytes() / sizeof(float); ++i) p[i] = dist(rng);
  return m;
}

struct a_case {
  std::string name;
  std::function<primitive_desc()> make_pd;
  std::unordered_map<int, memory> args;
  int dst;
};

// `size` varies the shapes, so tests can make many distinct primitives.
inline a_case matmul_case(std::int64_t size = 19) {
  using tag = format_tag;
  memory src = make({2, size, 37}, tag::abc, 1), wei = make({2, 37, 45}, tag::abc, 2);
  memory bias = make({1, 1, 45}, tag::abc, 3);
  memory dst(memory::desc({2, size, 45}, data_type::f32, tag::abc), cpu());
  auto make_pd = [=]() -> primitive_desc {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0.f, 0.f);
    primitive_attr attr;
    attr.set_post_ops(ops);
    return matmul::primitive_desc(
        matmul::desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc()), attr, cpu());
  };
  return {"matmul " + std::to_string(size),
          make_pd,
          {{PRIMCACHE_ARG_SRC, src},
           {PRIMCACHE_ARG_WEIGHTS, wei},
           {PRIMCACHE_ARG_BIAS, bias},
           {PRIMCACHE_ARG_DST, dst}},
          PRIMCACHE_ARG_DST};
}

inline a_case conv_case() {
  using tag = format_tag;
  memory src = make({2, 8, 13, 11}, tag::nchw, 5), wei = make({16, 8, 3, 3}, tag::oihw, 6);
  memory bias = make({16}, tag::a, 7);
  memory dst(memory::desc({2, 16, 7, 6}, data_type::f32, tag::nchw), cpu());
  auto make_pd = [=]() -> primitive_desc {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc(),
                                  {2, 2}, {1, 1}, {1, 1}),
        cpu());
  };
  return {"convolution",
          make_pd,
          {{PRIMCACHE_ARG_SRC, src},
           {PRIMCACHE_ARG_WEIGHTS, wei},
           {PRIMCACHE_ARG_BIAS, bias},
           {PRIMCACHE_ARG_DST, dst}},
          PRIMCACHE_ARG_DST};
}

// dst_tag nhwc: the eltwise across layouts, a nested reorder inside.
inline a_case eltwise_case(format_tag dst_tag = format_tag::nchw) {
  using tag = format_tag;
  memory src = make({2, 16, 5, 7}, tag::nchw, 8);
  memory dst(memory::desc({2, 16, 5, 7}, data_type::f32, dst_tag), cpu());
  auto make_pd = [=]() -> primitive_desc {
    return eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_gelu_tanh,
                              src.get_desc(), dst.get_desc()),
        cpu());
  };
  return {dst_tag == tag::nchw ? "eltwise" : "eltwise via reorder",
          make_pd,
          {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}},
          PRIMCACHE_ARG_DST};
}

inline a_case reorder_case() {
  using tag = format_tag;
  memory src = make({2, 16, 5, 7}, tag::nchw, 9);
  memory dst(memory::desc({2, 16, 5, 7}, data_type::f32, tag::nChw8c), cpu());
  auto make_pd = [=]() -> primitive_desc {
    return reorder::primitive_desc(cpu(), src.get_desc(), cpu(), dst.get_desc());
  };
  return {
      "reorder", make_pd, {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}}, PRIMCACHE_ARG_TO};
}

inline std::vector<a_case> all_cases() {
  return {matmul_case(), conv_case(), eltwise_case(), eltwise_case(format_tag::nhwc),
          reorder_case()};
}

// Runs `p` on the case's arguments (dst cleared first); dst's bytes.
inline std::vector<std::uint8_t> run(const primitive& p, const a_case& c) {
  const memory& dst = c.args.at(c.dst);
  std::memset(dst.get_data_handle(), 0, dst.get_desc().size_bytes());
  stream s(cpu());
  p.execute(s, c.args);
  s.wait();
  const auto* b = static_cast<const std::uint8_t*>(dst.get_data_handle());
  return {b, b + dst.get_desc().size_bytes()};
}

// Empties the in-memory primitive cache (and the descriptor cache): the next
// creation is a miss, as in a new process.
inline void empty_primitive_cache() {
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(capacity);
}

// A fresh directory (mode 0700) under TMPDIR, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/primcache-prt-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    ::chmod(path_.c_str(), 0700);
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Detaches the persistent cache when the scope ends.
struct detach_at_end {
  ~detach_at_end() { detach_persistent_cache(); }
};

}  // namespace primcache::test
