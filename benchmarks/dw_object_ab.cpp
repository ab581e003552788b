// dw_object_ab — the speed of depthwise convolution objects side by side in
// one process. A measuring tool, not a benchmark: it loads each object (as
// `jit_profile --dw=C,IN,STRIDE --dump=PREFIX` writes it, from this build
// or another) into a conv_kernel for bench_conv's dw_* problem (nChw16c,
// Goihw16g weights, bias, padding 1), runs them on the same tensors in
// rounds, each round a block of about 2 ms of calls per object (the order
// rotated from round to round), and prints per object the median and
// minimum of its per-call time over the rounds and its speed relative to
// the first object (the median and quartiles of the per-round ratios).
// Objects of different builds compared this way share everything but their
// code: the driver, the buffers (so the same cache sets and page offsets)
// and the load of the machine at the moment.
//
// Instead of a file, a label may name
// - "compile": the heuristic's configuration, compiled in this process;
// - "compile:OW_BLOCK,OC_BLOCKS[,oc_outer|spatial_outer]": another register
//   tile and loop order (the other fields as the heuristic's);
// - "FILE@OW_BLOCK,OC_BLOCKS[,ORDER]": an object compiled for that tile and
//   order (an older build's default, where today's heuristic picks
//   another: loading it with the wrong tile runs the wrong items);
// - "chunks:MIN": the heuristic's kernel, its items shared among the
//   threads in chunks of at least MIN vector multiply-adds
//   (conv_chunk_min_fmas, kernels/conv_schedule.hpp; 0: a sixteenth of a
//   home range, as before the floor).
// With --threads=N (default 1) the problem is made for N threads and the
// times are wall time (one thread: the thread's CPU time).
//
//   dw_object_ab [--rounds=N] [--threads=N] C,IN,STRIDE LABEL=SPEC ...
//
// Run it in several processes to average over placements (buffer
// addresses differ between processes and move the ratios by a few
// percent).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/conv_config.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/conv_schedule.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/thread_pool.hpp"

namespace {

namespace pc = primcache;
namespace ci = primcache::cpu_internal;

// "OW_BLOCK,OC_BLOCKS[,oc_outer|spatial_outer]": `base` with that register
// tile (and loop order).
pc::result<ci::conv_config> with_tile(ci::conv_config base, const std::string& spec) {
  char order[32] = "";
  if (std::sscanf(spec.c_str(), "%d,%d,%31s", &base.ow_block, &base.oc_blocks, order) < 2) {
    return pc::failure{pc::status::invalid_arguments, "bad tile in " + spec};
  }
  const std::string o = order;
  if (o == "oc_outer") {
    base.order = ci::conv_loop_order::oc_outer;
  } else if (o == "spatial_outer") {
    base.order = ci::conv_loop_order::spatial_outer;
  } else if (!o.empty()) {
    return pc::failure{pc::status::invalid_arguments, "bad order in " + spec};
  }
  return base;
}

// The calling thread's CPU time, or wall time when other threads work too.
double now_us(bool wall) {
  timespec ts{};
  clock_gettime(wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

struct aligned_floats {
  explicit aligned_floats(std::size_t n)
      : data(static_cast<float*>(
            std::aligned_alloc(64, (std::max<std::size_t>(n, 16) * 4 + 63) / 64 * 64))) {}
  ~aligned_floats() { std::free(data); }
  aligned_floats(const aligned_floats&) = delete;
  aligned_floats& operator=(const aligned_floats&) = delete;
  float* data;
};

// As bench_conv's: uniform in [-1, 1).
void fill(float* p, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < n; ++i) p[i] = u(rng);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

int usage() {
  std::fprintf(stderr,
               "usage: dw_object_ab [--rounds=N] [--threads=N] C,IN,STRIDE "
               "LABEL=FILE.o|compile[:OWB,OCB[,oc_outer|spatial_outer]]|chunks:MIN ...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 16;
  int arg = 1;
  int threads = 1;
  for (; arg < argc && std::string(argv[arg]).starts_with("--"); ++arg) {
    const std::string opt = argv[arg];
    if (opt.starts_with("--rounds=")) {
      rounds = std::max(2, std::atoi(opt.c_str() + 9));
    } else if (opt.starts_with("--threads=")) {
      threads = std::max(1, std::atoi(opt.c_str() + 10));
    } else {
      return usage();
    }
  }
  const bool wall = threads > 1;
  if (argc - arg < 2) return usage();
  long c = 0, in = 0, stride = 0;
  if (std::sscanf(argv[arg], "%ld,%ld,%ld", &c, &in, &stride) != 3 || c < 1 || in < 1 ||
      stride < 1) {
    return usage();
  }
  ++arg;
  using tag = pc::format_tag;
  pc::set_num_threads(threads);
  const pc::cpu_isa isa = pc::effective_isa();
  const long out = (in + 2 - 3) / stride + 1;
  ci::conv_problem p;
  p.src = pc::memory_desc({1, c, in, in}, pc::data_type::f32, tag::nChw16c);
  p.dst = pc::memory_desc({1, c, out, out}, pc::data_type::f32, tag::nChw16c);
  p.bias = pc::memory_desc({c}, pc::data_type::f32, tag::a);
  p.weights = pc::memory_desc({c, 1, 1, 3, 3}, pc::data_type::f32, tag::goihw);
  p.stride_h = p.stride_w = stride;
  p.pad_t = p.pad_l = p.pad_b = p.pad_r = 1;
  p.groups = c;
  p.nthr = threads;
  p.weights = ci::preferred_weights_desc(p).value();
  const ci::conv_config cfg = ci::default_conv_config(p, isa);

  std::vector<std::string> labels;
  std::vector<std::unique_ptr<ci::conv_kernel>> kernels;
  std::vector<std::int64_t> chunk_min;  // per kernel: conv_chunk_min_fmas while it runs
  for (; arg < argc; ++arg) {
    const std::string a = argv[arg];
    const std::size_t eq = a.find('=');
    if (eq == std::string::npos) return usage();
    labels.push_back(a.substr(0, eq));
    const std::string what = a.substr(eq + 1);
    chunk_min.push_back(ci::conv_chunk_min_fmas.load());
    auto k = [&]() -> pc::result<std::unique_ptr<ci::conv_kernel>> {
      if (what == "compile") return ci::conv_kernel::create(p, cfg, isa);
      if (what.starts_with("chunks:")) {
        char* end = nullptr;
        const long long min = std::strtoll(what.c_str() + 7, &end, 10);
        if (end == what.c_str() + 7 || *end != '\0' || min < 0) {
          return pc::failure{pc::status::invalid_arguments, "bad chunk size in " + what};
        }
        chunk_min.back() = min;
        return ci::conv_kernel::create(p, cfg, isa);
      }
      if (what.starts_with("compile:")) {
        auto other = with_tile(cfg, what.substr(8));
        if (!other) return other.why();
        return ci::conv_kernel::create(p, other.value(), isa);
      }
      // FILE@OW_BLOCK,OC_BLOCKS[,ORDER]: an object compiled for another
      // tile than today's heuristic picks (an older build's default).
      std::string path = what;
      ci::conv_config file_cfg = cfg;
      if (const std::size_t at = what.rfind('@'); at != std::string::npos) {
        auto other = with_tile(cfg, what.substr(at + 1));
        if (!other) return other.why();
        file_cfg = other.value();
        path = what.substr(0, at);
      }
      std::ifstream f(path, std::ios::binary);
      if (!f) return pc::failure{pc::status::not_found, "cannot read " + path};
      const std::vector<char> bytes{std::istreambuf_iterator<char>(f), {}};
      std::vector<std::byte> object(bytes.size());
      std::transform(bytes.begin(), bytes.end(), object.begin(),
                     [](char b) { return static_cast<std::byte>(b); });
      return ci::conv_kernel::load(p, file_cfg, object);
    }();
    if (!k) {
      std::fprintf(stderr, "dw_object_ab: %s: %s\n", a.c_str(), k.why().message.c_str());
      return 1;
    }
    kernels.push_back(std::move(k).value());
  }

  aligned_floats src(p.src.size_bytes() / 4), wei(p.weights.size_bytes() / 4),
      bias(static_cast<std::size_t>(c)), dst(p.dst.size_bytes() / 4), scratch(16);
  fill(src.data, p.src.size_bytes() / 4, 1);
  fill(wei.data, p.weights.size_bytes() / 4, 2);
  fill(bias.data, static_cast<std::size_t>(c), 3);
  ci::conv_args args;
  args.src = src.data;
  args.weights = wei.data;
  args.bias = bias.data;
  args.dst = dst.data;
  pc::thread_pool& pool = pc::default_thread_pool();
  const std::int64_t default_chunk_min = ci::conv_chunk_min_fmas.load();
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    ci::conv_chunk_min_fmas = chunk_min[i];
    for (int r = 0; r < 50; ++r) kernels[i]->execute(args, scratch.data, pool);
  }
  ci::conv_chunk_min_fmas = chunk_min[0];
  const double t0 = now_us(wall);
  for (int i = 0; i < 50; ++i) kernels[0]->execute(args, scratch.data, pool);
  const int block =
      std::max(10, static_cast<int>(2000.0 / std::max(0.1, (now_us(wall) - t0) / 50)));

  const std::size_t n = kernels.size();
  std::vector<std::vector<double>> us(n);
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t q = 0; q < n; ++q) {
      const std::size_t i = (q + static_cast<std::size_t>(r)) % n;
      ci::conv_chunk_min_fmas = chunk_min[i];
      const double start = now_us(wall);
      for (int b = 0; b < block; ++b) kernels[i]->execute(args, scratch.data, pool);
      us[i].push_back((now_us(wall) - start) / block);
    }
  }
  ci::conv_chunk_min_fmas = default_chunk_min;
  std::printf("dw %ld,%ld,%ld:", c, in, stride);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> speed;
    for (int r = 0; r < rounds; ++r) speed.push_back(us[0][r] / us[i][r]);
    std::printf("  %s %.3f us (min %.3f) speed %.3f [%.3f-%.3f]", labels[i].c_str(),
                quantile(us[i], 0.5), *std::min_element(us[i].begin(), us[i].end()),
                quantile(speed, 0.5), quantile(speed, 0.25), quantile(speed, 0.75));
  }
  std::printf("\n");
  return 0;
}
