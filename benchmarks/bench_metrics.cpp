// What metrics cost the hot paths: the primitive-creation hit path and
// execute, quiet and while another thread scrapes every registered metric
// (render_metrics, what GET /metrics serves) back to back — a far harsher
// load than a Prometheus scrape every few seconds. Metrics are read at
// scrape time only, so the two should match.
//
//   BM_CreateHitMetrics/quiet       matmul 128x768x3072: op desc -> pd -> primitive (a hit)
//   BM_CreateHitMetrics/scraped     the same, with a scraper thread running
//   BM_ExecuteMetrics/quiet         eltwise relu, 64 KiB, executed
//   BM_ExecuteMetrics/scraped
//   BM_RenderMetrics                one scrape of the whole registry
//
// Compare CPU time per iteration: the scraper takes the machine's other
// core, so wall time would measure the scheduler, not the hot path.
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>

#include "primcache/control/registry.hpp"
#include "primcache/metrics/render.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

namespace pc = primcache;

pc::engine& cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

pc::primitive make_matmul() {
  pc::memory::desc a({128, 3072}, pc::data_type::f32, pc::format_tag::ab);
  pc::memory::desc b({3072, 768}, pc::data_type::f32, pc::format_tag::ab);
  pc::memory::desc c({128, 768}, pc::data_type::f32, pc::format_tag::ab);
  return pc::matmul(pc::matmul::primitive_desc(pc::matmul::desc(a, b, c), cpu()));
}

// Scrapes continuously while alive.
class scraper {
 public:
  explicit scraper(bool on) {
    if (on) {
      thread_ = std::thread([this] {
        while (!stop_.load(std::memory_order_relaxed)) {
          benchmark::DoNotOptimize(pc::render_metrics(pc::control()).size());
        }
      });
    }
  }
  ~scraper() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void BM_CreateHitMetrics(benchmark::State& state, bool scraped) {
  make_matmul();  // compiled once: every iteration below is a hit
  scraper s(scraped);
  for (auto _ : state) benchmark::DoNotOptimize(make_matmul());
  state.SetItemsProcessed(state.iterations());
}

void BM_ExecuteMetrics(benchmark::State& state, bool scraped) {
  pc::set_num_threads(1);  // the scraper has the other core
  pc::memory::desc md({16, 1024}, pc::data_type::f32, pc::format_tag::ab);
  pc::eltwise_forward relu(pc::eltwise_forward::primitive_desc(
      pc::eltwise_forward::desc(pc::prop_kind::forward_inference, pc::algorithm::eltwise_relu, md),
      cpu()));
  pc::memory src(md, cpu()), dst(md, cpu());
  pc::stream strm(cpu());
  scraper s(scraped);
  for (auto _ : state) {
    relu.execute(strm, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RenderMetrics(benchmark::State& state) {
  make_matmul();
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = pc::render_metrics(pc::control()).size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["exposition_bytes"] = static_cast<double>(bytes);
}

const bool registered = [] {
  benchmark::RegisterBenchmark("BM_CreateHitMetrics/quiet", BM_CreateHitMetrics, false);
  benchmark::RegisterBenchmark("BM_CreateHitMetrics/scraped", BM_CreateHitMetrics, true);
  benchmark::RegisterBenchmark("BM_ExecuteMetrics/quiet", BM_ExecuteMetrics, false);
  benchmark::RegisterBenchmark("BM_ExecuteMetrics/scraped", BM_ExecuteMetrics, true);
  benchmark::RegisterBenchmark("BM_RenderMetrics", BM_RenderMetrics);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
