// Tune mode (tuning.hpp): the switch, the process's tune table and its
// file, and tuning a primitive on its first execution through the
// autotune library.
#include "primcache/runtime/tuning.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "primcache/autotune/output_check.hpp"
#include "primcache/autotune/search.hpp"
#include "primcache/autotune/tuner.hpp"
#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/backend/memory_storage.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/runtime/version.hpp"
#include "primitive_cache_internal.hpp"
#include "tuning_internal.hpp"

namespace primcache {
namespace runtime_internal {
namespace {

constexpr std::size_t kMaxNconfigsLimit = 1000;

struct tune_state {
  switch_registration tune_switch;        // "tune" in control, when it could be registered
  std::atomic<bool> local_switch{false};  // otherwise this
  bool registered = false;
  tune_table table;
  // PRIMCACHE_TUNE_TABLE, or use_tune_table_file's path.
  mutable mutex path_mu;
  std::string path PRIMCACHE_GUARDED_BY(path_mu);
  // "tune_max_nconfigs" in control, when it could be registered; else this.
  setting_registration max_nconfigs_setting;
  std::atomic<std::size_t> max_nconfigs{40};
  // Metrics (docs/metrics.md, "Tuning"), registered with the state.
  metric_counter primitives_kept, primitives_replaced, primitives_failed, primitives_skipped;
  metric_counter candidates_measured, candidates_wrong, candidates_failed, candidates_rejected;
  metric_histogram tuning_seconds;
  metric_gauge table_entries;
  std::atomic<bool> dirty{false};  // the table changed since it was loaded or saved
  mutex mu;
  std::set<std::string> in_flight PRIMCACHE_GUARDED_BY(mu);  // problems being tuned
  std::atomic<std::uint64_t> tuned{0}, replaced{0}, failed{0}, skipped{0}, wrong{0},
      failed_candidates{0}, device_timed_runs{0}, rejected{0};
  std::atomic<std::int64_t> tuning_ns{0};
  // Replaced whole, read as a snapshot: the listener runs with no lock held.
  mutex listener_mu;
  std::shared_ptr<const std::function<void(const tune_progress_event&)>> listener
      PRIMCACHE_GUARDED_BY(listener_mu);

  std::string table_path() const {
    lock_guard g(path_mu);
    return path;
  }
  bool on() const noexcept {
    return registered ? tune_switch.on() : local_switch.load(std::memory_order_acquire);
  }
  std::size_t nconfigs() const noexcept {
    return max_nconfigs_setting ? static_cast<std::size_t>(max_nconfigs_setting.int_value())
                                : max_nconfigs.load(std::memory_order_relaxed);
  }
  void set(bool v) noexcept {
    if (registered) {
      tune_switch.set(v);
    } else {
      local_switch.store(v, std::memory_order_release);
    }
  }
};

void report(const std::string& line) {
  std::fprintf(stderr, "primcache: %s\n", line.c_str());
}

void save_at_exit();

// Reads the tune table file at `path` into `table`: this library version's
// entries, nothing of a file another version wrote. `found` is false for a
// missing file (a first run: saving creates it); `ignored` says why a file
// that exists gave nothing (unreadable, malformed, another version).
struct table_file_read {
  bool found = false;
  std::string ignored;
};

table_file_read read_table_file(tune_table& table, const std::string& path) {
  table_file_read out;
  auto r = table.load_file(path, version().version);
  if (!r) {
    out.found = r.why().code != status::not_found;
    if (out.found) out.ignored = r.why().message;
  } else {
    out.found = true;
    if (r.value().other_version) {
      out.ignored = path + " was written by primcache " + r.value().file_version + ", this is " +
                    version().version;
    }
  }
  return out;
}

void register_tune_metrics(tune_state& st) {
  control_registry& c = control();
  const char* prim_help = "Primitives whose tuning ended, by result";
  st.primitives_kept =
      c.counter("primcache_tune_primitives_total", prim_help, {{"result", "kept"}});
  st.primitives_replaced =
      c.counter("primcache_tune_primitives_total", prim_help, {{"result", "replaced"}});
  st.primitives_failed =
      c.counter("primcache_tune_primitives_total", prim_help, {{"result", "failed"}});
  st.primitives_skipped =
      c.counter("primcache_tune_primitives_total", prim_help, {{"result", "skipped"}});
  const char* cand_help = "Candidate configurations tried while tuning, by result";
  st.candidates_measured =
      c.counter("primcache_tune_candidates_total", cand_help, {{"result", "measured"}});
  st.candidates_wrong =
      c.counter("primcache_tune_candidates_total", cand_help, {{"result", "wrong"}});
  st.candidates_failed =
      c.counter("primcache_tune_candidates_total", cand_help, {{"result", "failed"}});
  st.candidates_rejected =
      c.counter("primcache_tune_candidates_total", cand_help, {{"result", "rejected"}});
  st.tuning_seconds =
      c.histogram("primcache_tune_seconds", "Time to tune one primitive (builds included)", {},
                  {0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800});
  st.table_entries = c.gauge("primcache_tune_table_entries", "Entries in the process's tune table");
}

tune_state& state() {
  // Never destroyed: primitives may execute from threads that outlive
  // static destruction; the exit hook saves the table instead.
  static tune_state* s = [] {
    auto* st = new tune_state;
    const bool initial = env_bool("PRIMCACHE_TUNE", false);
    try {
      st->tune_switch = control().register_switch(
          "tune", "tune tunable primitives on their first execution (PRIMCACHE_TUNE)", initial);
      st->registered = true;
    } catch (const error&) {
      // Someone registered "tune" first: the runtime keeps its own switch.
      st->local_switch.store(initial);
    }
    try {
      st->max_nconfigs_setting = control().register_setting(setting_spec::integer(
          "tune_max_nconfigs",
          "candidate configurations measured per tuned primitive, the default included", 40, 1,
          static_cast<std::int64_t>(kMaxNconfigsLimit)));
    } catch (const error&) {
      // Registered by someone else: the runtime keeps its own value.
    }
    register_tune_metrics(*st);
    if (auto p = env_string("PRIMCACHE_TUNE_TABLE"); p && !p->empty()) {
      {
        lock_guard g(st->path_mu);
        st->path = *p;
      }
      // A missing file is a first run: saving at exit creates it.
      const table_file_read r = read_table_file(st->table, *p);
      if (!r.ignored.empty()) {
        report("ignoring the tune table (PRIMCACHE_TUNE_TABLE): " + r.ignored);
      }
    }
    st->table_entries.set(static_cast<double>(st->table.size()));
    std::atexit(save_at_exit);
    return st;
  }();
  return *s;
}

void save_at_exit() {
  tune_state& st = state();
  const std::string path = st.table_path();
  if (path.empty() || !st.dirty.load()) return;
  auto r = st.table.save_file(path, version().version);
  if (!r) report("cannot save the tune table at exit: " + r.why().message);
}

thread_local private_impl_cache* tl_private_cache = nullptr;

struct private_cache_scope {
  private_impl_cache cache;
  private_impl_cache* previous;
  private_cache_scope() : previous(tl_private_cache) { tl_private_cache = &cache; }
  ~private_cache_scope() { tl_private_cache = previous; }
  private_cache_scope(const private_cache_scope&) = delete;
  private_cache_scope& operator=(const private_cache_scope&) = delete;
};

std::string describe_problem(const backend::primitive_desc_impl& pd) {
  std::string s(backend::to_string(pd.kind()));
  static constexpr std::pair<int, const char*> kArgs[] = {{PRIMCACHE_ARG_SRC, "src"},
                                                          {PRIMCACHE_ARG_WEIGHTS, "wei"},
                                                          {PRIMCACHE_ARG_BIAS, "bia"},
                                                          {PRIMCACHE_ARG_DST, "dst"}};
  for (auto [arg, name] : kArgs) {
    memory_desc md = pd.arg_md(arg);
    if (!md.is_zero()) s.append(" ").append(name).append(":").append(md.to_string());
  }
  return s;
}

// How many products each output element sums: the accumulation length the
// output tolerance is derived from.
std::int64_t accumulation_length(const backend::primitive_desc_impl& pd) {
  const memory_desc w = pd.arg_md(PRIMCACHE_ARG_WEIGHTS);
  if (pd.kind() == backend::primitive_kind::matmul) {
    return pd.arg_md(PRIMCACHE_ARG_SRC).dims().back();
  }
  // Convolution: (O, I, KH, KW) or (G, O, I, KH, KW) -> I * KH * KW.
  const auto d = w.dims();
  std::int64_t k = 1;
  for (std::size_t i = d.size() == 5 ? 2 : 1; i < d.size(); ++i) k *= d[i];
  return k;
}

// Synthetic inputs are multiples of 1/4 in [-1, 1]: every product is a
// multiple of 1/16 and every partial sum of at most 2^20 of them is exact
// in f32, so correct configurations agree exactly before post-ops (the
// output tolerance, output_tolerance, is built on it).
void fill_input(float* p, std::size_t n, int seed) {
  std::uint32_t x = 0x9e3779b9u * static_cast<std::uint32_t>(seed + 1);
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = static_cast<float>(static_cast<int>(x % 9) - 4) * 0.25f;
  }
}

// How far a correct candidate's output may be from the default's, for K
// products per output element (accumulation_length) and the post-ops.
//
// Before post-ops: every product of fill_input's values is a multiple of
// 1/16 of at most 1, the bias and binary post-ops' operands multiples of
// 1/4 of at most 1, so the n = K + 1 + (binary post-ops before the first
// eltwise) terms sum exactly in f32 in any order while 16 n <= 2^24
// (accumulation_tolerance gives 0): every correct configuration, of this
// implementation or another (alternative_descs: the same engine kind,
// f32 accumulation throughout), writes the same bits, and a candidate off
// by one term (a skipped bias in a tail block, a dropped K step: at least
// 1/16) is caught at any K below 2^20. Beyond, Higham's reordering bound
// (output_check.hpp). Only f32 arguments are tuned (tune_primitive
// refuses others): were bf16/f16 arguments taken, the inputs would still
// be exact (multiples of 1/4 in [-1, 1] need 3 significant bits) but an
// f16 accumulation or destination would not hold the sums (11 bits), and
// s8 cannot hold 1/4 at all; this bound would have to change with them.
//
// Then each post-op maps v, |v| <= m, the two outputs differing by e, to
//   e' = L e + own + (e > 0 ? 2 u m' : 0),   m' its output bound,
// with L its slope bound and `own` what two implementations of it may
// differ by at equal inputs: 0 for relu, clip and binary add (selects and
// single roundings, deterministic); for linear the rounding of alpha v
// (fused with the add or not) and of each side's result; for gelu, tanh and logistic kFunctionUlps
// ulp of the output's scale (m for gelu, whose error is relative to v; 1 for tanh and logistic).
// Candidates of one engine kind share their post-op code (CPU: emit_eltwise's polynomials, a few
// ulp; OpenCL: the built-ins, which the OpenCL spec bounds at 16 ulp for erf, 5 for tanh, 3 for
// exp, and a vectorized and a scalar variant of one kernel may take different ones), so 64 ulp, 32
// per side, covers them with margin; the last term is the rounding of each side's result when the
// inputs already differ. A post-op's scale multiplies both. At K = 4096 a gelu's allowance is 64 *
// 2^-24 * 4097 = 0.016, still below the 1/16 of one dropped product.
double output_tolerance(std::int64_t k, const post_ops& ops) {
  constexpr double u = 0x1p-24;         // f32's unit roundoff
  constexpr double kFunctionUlps = 64;  // two implementations of a function (above)
  const std::vector<post_ops::entry>& entries = ops.entries();
  std::int64_t n = k + 1;
  std::size_t first = 0;
  for (; first < entries.size() && entries[first].kind == post_ops::kind::binary; ++first) ++n;
  double m = static_cast<double>(n);  // every term is at most 1 in magnitude
  double e = accumulation_tolerance(n, 1.0, 1.0 / 16);
  for (std::size_t i = first; i < entries.size(); ++i) {
    const post_ops::entry& p = entries[i];
    const double alpha = std::fabs(static_cast<double>(p.alpha));
    const double beta = std::fabs(static_cast<double>(p.beta));
    double slope = 1, out = m, own = 0;
    if (p.kind == post_ops::kind::binary) {
      out = m + 1;  // the operand: a multiple of 1/4 of at most 1
    } else {
      switch (p.alg) {
        case algorithm::eltwise_relu:
          slope = std::max(1.0, alpha);
          out = slope * m;
          break;
        case algorithm::eltwise_clip: out = std::max(alpha, beta); break;
        case algorithm::eltwise_linear:
          slope = alpha;
          out = alpha * m + beta;
          own = u * (alpha * m + 2 * out);  // alpha v rounded or fused, then each result
          break;
        case algorithm::eltwise_gelu_erf:
        case algorithm::eltwise_gelu_tanh:
          slope = 1.13;  // the largest slope of x Phi(x) (1.129 at x = 1.41)
          own = kFunctionUlps * u * m;
          break;
        case algorithm::eltwise_tanh:
          out = std::min(m, 1.0);
          own = kFunctionUlps * u;
          break;
        case algorithm::eltwise_logistic:
          slope = 0.25;
          out = 1;
          own = kFunctionUlps * u;
          break;
        default:  // exp (never tuned: no usable bound) or an unknown one
          return std::numeric_limits<double>::infinity();
      }
    }
    e = slope * e + own + (e > 0 ? 2 * u * out : 0);
    if (p.kind == post_ops::kind::eltwise && p.scale != 1.f) {
      const double scale = std::fabs(static_cast<double>(p.scale));
      out *= scale;
      e = scale * e + (e > 0 ? 2 * u * out : 0);
    }
    m = out;
  }
  return e;
}

void fill_nan(float* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
}

const engine& engine_for(const primitive_desc& pd,
                         backend::primitive_desc_impl::required_arg::on where) {
  using on = backend::primitive_desc_impl::required_arg::on;
  return where == on::src_engine   ? pd.get_src_engine()
         : where == on::dst_engine ? pd.get_dst_engine()
                                   : pd.get_engine();
}

// Host access to a memory's floats for one scope (map_data / unmap_data:
// the buffer itself for host memory, a mapping for device memory; the
// stream that wrote it has been waited for).
class mapped_floats {
 public:
  explicit mapped_floats(const memory& m) : m_(m), p_(static_cast<float*>(m.map_data())) {}
  ~mapped_floats() { m_.unmap_data(p_); }
  mapped_floats(const mapped_floats&) = delete;
  mapped_floats& operator=(const mapped_floats&) = delete;
  float* data() const noexcept { return p_; }

 private:
  const memory& m_;
  float* p_;
};

struct aligned_free {
  void operator()(void* p) const noexcept { std::free(p); }
};

void tune_primitive(const primitive_desc& pd, const stream& strm) {
  tune_state& st = state();
  const backend::primitive_desc_impl& pdi = backend::impl_of(pd);
  const engine& eng = pd.get_engine();
  const auto def = pdi.default_config();
  const bool kind_tuned = pdi.kind() == backend::primitive_kind::matmul ||
                          pdi.kind() == backend::primitive_kind::convolution;
  if (!def || !kind_tuned) {
    st.skipped.fetch_add(1, std::memory_order_relaxed);
    st.primitives_skipped.add();
    return;
  }
  for (const post_ops::entry& e : pdi.attr().get_post_ops().entries()) {
    if (e.kind == post_ops::kind::eltwise && e.alg == algorithm::eltwise_exp) {
      // exp magnifies the accumulation's rounding without a bound the
      // output check could use.
      st.skipped.fetch_add(1, std::memory_order_relaxed);
      st.primitives_skipped.add();
      return;
    }
  }
  const std::string device = tune_device_of(eng);
  if (st.table.find(device, pdi.problem_key())) return;  // tuned before
  std::string slot = device;
  slot.push_back('\0');
  slot.append(reinterpret_cast<const char*>(pdi.problem_key().data()), pdi.problem_key().size());
  {
    lock_guard g(st.mu);
    if (!st.in_flight.insert(slot).second) return;  // another thread is tuning it
  }
  struct in_flight_guard {
    tune_state& st;
    const std::string& slot;
    ~in_flight_guard() {
      lock_guard g(st.mu);
      st.in_flight.erase(slot);
    }
  } guard{st, slot};
  // Another thread may have finished tuning it since the first look.
  if (st.table.find(device, pdi.problem_key())) return;

  // Private arguments with synthetic data, in the primitive's descriptors,
  // on the engines the primitive wants them (host or device memory: filled
  // and read back through map_data).
  std::unordered_map<int, memory> args;
  const memory* dst = nullptr;
  std::size_t dst_count = 0;
  int seed = 0;
  for (const auto& a : pdi.required_args()) {
    if (a.md.data_type() != data_type::f32) {
      throw error(status::unimplemented,
                  "tuning needs f32 arguments, " + a.md.to_string() + " is not");
    }
    memory m(a.md, engine_for(pd, a.engine));
    const std::size_t n = a.md.size_bytes() / sizeof(float);
    if (a.index == PRIMCACHE_ARG_DST) {
      dst_count = n;
    } else if (n != 0) {
      mapped_floats host(m);
      fill_input(host.data(), n, seed++);
    }
    const int index = a.index;
    auto it = args.emplace(index, std::move(m)).first;
    if (index == PRIMCACHE_ARG_DST) dst = &it->second;
  }
  if (dst == nullptr) throw error(status::unimplemented, "tuning needs a destination to compare");
  std::vector<float> got(dst_count);
  auto read_dst = [&] {
    if (dst_count == 0) return;
    mapped_floats host(*dst);
    std::copy(host.data(), host.data() + dst_count, got.begin());
  };

  const double tolerance = output_tolerance(accumulation_length(pdi), pdi.attr().get_post_ops());

  // The candidates: this implementation's default (candidate 0) and its
  // space, then each other implementation's that accepts the op with the
  // same arguments and has configurations — its default, then its space.
  // A winner from another implementation is recorded under both problem
  // keys, and the registry then creates that implementation for this op.
  struct candidate_source {
    std::shared_ptr<const backend::primitive_desc_impl> alternative;  // null: pdi itself
    const backend::primitive_desc_impl* desc;
    backend::kernel_config def;
    backend::config_space space;
    std::size_t first;  // the index of its default
  };
  std::vector<candidate_source> sources;
  sources.push_back({nullptr, &pdi, *def, pdi.config_candidates(), 0});
  std::size_t count = 1 + static_cast<std::size_t>(sources.back().space.size());
  for (auto& alt : alternative_descs(pdi, eng)) {
    const backend::primitive_desc_impl* d = alt.get();
    sources.push_back({std::move(alt), d, *d->default_config(), d->config_candidates(), count});
    count += 1 + static_cast<std::size_t>(sources.back().space.size());
  }
  auto source_of = [&](std::size_t i) -> const candidate_source& {
    std::size_t s = sources.size() - 1;
    while (sources[s].first > i) --s;
    return sources[s];
  };
  auto config_at = [&](std::size_t i) {
    const candidate_source& src = source_of(i);
    return i == src.first ? src.def : src.space.at(i - src.first - 1);
  };
  std::vector<float> expected;
  // What a built candidate runs with; two at once while the tuner confirms
  // a winner against the default (tuner.hpp).
  struct built_candidate {
    std::shared_ptr<const backend::primitive_impl> impl;
    std::unique_ptr<backend::resource_mapper> resources;
    std::unique_ptr<void, aligned_free> scratch;
  };
  std::map<std::size_t, built_candidate> built;
  // A stream of its own on the caller's engine: candidates are timed by the
  // device where it can (OpenCL profiling events: the kernels alone, not
  // the launch and the wait), and the measurement must not disturb one the
  // caller runs on its stream. The arguments are the tuning's own, so
  // nothing orders it after the caller's queued work.
  stream s(strm.get_engine());

  tuning_callbacks cb;
  cb.count = count;
  cb.build = [&](std::size_t i) {
    const private_cache_scope scope;
    built_candidate& b = built[i];
    b.impl = source_of(i).desc->create_impl_with(eng, config_at(i));
    // Nested impls the candidate created through the private cache were
    // made by their descriptors' create_impl: in tiered mode, generic code
    // with the specialized compilation queued. Measure what a tuned
    // primitive ends up running: their specialized code (a compilation
    // still queued runs here, on this thread).
    b.impl->wait_until_specialized();
    b.resources = std::make_unique<backend::resource_mapper>();
    b.impl->create_resource(eng, *b.resources);
    const std::size_t bytes = b.impl->scratchpad_bytes();
    b.scratch.reset(bytes ? std::aligned_alloc(4096, (bytes + 4095) & ~std::size_t{4095})
                          : nullptr);
    if (bytes && !b.scratch) throw error(status::out_of_memory, "cannot allocate a scratchpad");
    if (dst_count != 0) {
      mapped_floats host(*dst);
      fill_nan(host.data(), dst_count);  // what a candidate does not write stays NaN
    }
  };
  cb.run = [&](std::size_t i) {
    const built_candidate& b = built.at(i);
    const backend::exec_ctx ctx{&s, &args, b.resources.get(), b.scratch.get(), &pdi.attr()};
    s.reset_profiling();
    b.impl->execute(ctx);
    s.wait();
  };
  cb.device_time = [&](std::size_t) -> std::optional<std::int64_t> {
    const std::optional<std::int64_t> ns = s.profiled_ns();
    // No kernel timed (a CPU stream, nothing launched, or kernels whose
    // events all ended where they started): no device time for this run,
    // and the tuner then compares every candidate by the clock (tuner.hpp:
    // one clock per comparison), never this run's clock time against
    // another's device time.
    if (!ns || *ns == 0) return std::nullopt;
    return ns;
  };
  cb.compare = [&](std::size_t) {
    read_dst();
    return compare_outputs(expected, got, tolerance);
  };
  cb.release = [&](std::size_t i) {
    // The default's output of its first measurement is the reference (later
    // releases of the default may follow another candidate's run).
    if (i == 0 && expected.empty()) {
      read_dst();
      expected = got;
    }
    built.erase(i);
  };
  auto describe = [&](std::size_t i) {
    const candidate_source& src = source_of(i);
    const std::string json = config_at(i).to_json();
    return src.alternative ? std::string(src.desc->name()) + " " + json : json;
  };
  cb.describe = describe;

  tune_options o;
  o.max_nconfigs = st.nconfigs();
  // Each other implementation's default first, then the budget left spread
  // over all the spaces (they are far larger than the budget).
  o.search = [&sources, spread = spread_search()](std::size_t n, std::size_t budget,
                                                  const search_keep& keep) {
    std::vector<std::size_t> picked;
    for (const candidate_source& src : sources) {
      if (src.first != 0 && picked.size() < budget && keep(src.first)) picked.push_back(src.first);
    }
    const std::size_t defaults = picked.size();
    const search_keep rest = [&](std::size_t i) {
      for (std::size_t j = 0; j < defaults; ++j) {
        if (picked[j] == i) return false;
      }
      return keep(i);
    };
    for (std::size_t i : spread(n, budget - picked.size(), rest)) picked.push_back(i);
    return picked;
  };
  o.prune = [&](std::size_t i) {
    const candidate_source& src = source_of(i);
    const backend::kernel_config c = config_at(i);
    return (i != src.first && c == src.def) || !src.desc->validate_config(c);
  };
  std::shared_ptr<const std::function<void(const tune_progress_event&)>> listener;
  {
    lock_guard g(st.listener_mu);
    listener = st.listener;
  }
  if (listener) {
    o.on_progress = [&, problem = describe_problem(pdi)](const tune_progress& p) {
      (*listener)(
          tune_progress_event{problem, p.done, p.total, p.default_ns / 1e6, p.best_ns / 1e6});
    };
  }
  const tune_result r = tune(cb, o);

  const backend::kernel_config winner = config_at(r.winner);
  const backend::primitive_desc_impl& winner_desc = *source_of(r.winner).desc;
  const tune_entry entry{winner_desc.name(),
                         winner.to_json(),
                         r.winner_ns,
                         r.default_ns,
                         describe_problem(pdi),
                         r.default_replaced() ? r.warm_winner_ns : 0,
                         r.default_replaced() ? r.warm_default_ns : 0};
  // Under the alternative's own key too: its descriptor, made by the
  // registry for this op from now on, finds its configuration there (and
  // is not tuned again).
  if (&winner_desc != &pdi) st.table.put(device, winner_desc.problem_key(), entry);
  st.table.put(device, pdi.problem_key(), entry);
  st.dirty.store(true);
  st.tuned.fetch_add(1, std::memory_order_relaxed);
  if (r.default_replaced()) st.replaced.fetch_add(1, std::memory_order_relaxed);
  st.wrong.fetch_add(r.wrong, std::memory_order_relaxed);
  st.failed_candidates.fetch_add(r.failed, std::memory_order_relaxed);
  st.device_timed_runs.fetch_add(r.device_timed_runs, std::memory_order_relaxed);
  st.rejected.fetch_add(r.rejected, std::memory_order_relaxed);
  st.tuning_ns.fetch_add(static_cast<std::int64_t>(r.tuning_ns), std::memory_order_relaxed);
  (r.default_replaced() ? st.primitives_replaced : st.primitives_kept).add();
  st.candidates_measured.add(r.measured);
  st.candidates_wrong.add(r.wrong);
  st.candidates_failed.add(r.failed);
  st.candidates_rejected.add(r.rejected);
  st.tuning_seconds.observe(r.tuning_ns / 1e9);
  st.table_entries.set(static_cast<double>(st.table.size()));
  // A wrong candidate is a kernel bug: always said.
  for (const candidate_report& c : r.candidates) {
    if (c.outcome == candidate_outcome::wrong_output) {
      report("tuning " + describe_problem(pdi) + " (" + pdi.name() + "): discarded candidate " +
             c.description + ": wrong output: " + c.message);
    }
  }
  if (verbose_level() >= 1) {
    // A winner the warm confirmation rejected: faster cold, slower warm.
    for (const candidate_report& c : r.candidates) {
      if (c.outcome != candidate_outcome::rejected) continue;
      verbose_print("primcache_verbose,tune:rejected," + describe_problem(pdi) + "," + pdi.name() +
                    "," + c.description + "," + c.message);
    }
    char line[224];
    std::snprintf(line, sizeof line, ",%.4f,%.4f,%zu,%zu,%zu,%.1f,%zu,%.4f,%.4f",
                  r.default_ns / 1e6, r.winner_ns / 1e6, r.measured + r.wrong + r.failed, r.wrong,
                  r.failed, r.tuning_ns / 1e6, r.rejected, r.warm_default_ns / 1e6,
                  r.warm_winner_ns / 1e6);
    verbose_print("primcache_verbose,tune," + describe_problem(pdi) + "," + pdi.name() + "," +
                  describe(r.winner) + line);
  }
  // The descriptors cached so far chose their implementation and
  // configuration before this entry existed.
  if (&winner_desc != &pdi || pdi.config() != winner) invalidate_primitive_descs();
}

}  // namespace

bool tuning_wanted(const primitive_attr& attr) {
  if (auto t = attr.get_tunable()) return *t;
  return state().on();
}

void tune_on_first_execute(const primitive_desc& pd, const stream& strm) noexcept {
  try {
    tune_primitive(pd, strm);
  } catch (const std::exception& e) {
    state().failed.fetch_add(1, std::memory_order_relaxed);
    state().primitives_failed.add();
    try {
      const auto& pdi = backend::impl_of(pd);
      report("tuning " + describe_problem(pdi) + " (" + pdi.name() +
             ") failed, it runs untuned: " + e.what());
    } catch (...) {
    }
  } catch (...) {
    state().failed.fetch_add(1, std::memory_order_relaxed);
    state().primitives_failed.add();
  }
}

std::optional<std::string> tuned_implementation(const backend::primitive_desc_impl& pd,
                                                const backend::engine_impl& eng) {
  auto e = state().table.find(eng.describe(), pd.problem_key());
  if (!e || e->implementation == pd.name()) return std::nullopt;
  return e->implementation;
}

std::optional<backend::kernel_config> tuned_config(const backend::primitive_desc_impl& pd,
                                                   const backend::engine_impl& eng) {
  tune_state& st = state();
  auto e = st.table.find(eng.describe(), pd.problem_key());
  if (!e || e->implementation != pd.name()) return std::nullopt;
  auto ignore = [&](const std::string& why) -> std::optional<backend::kernel_config> {
    if (verbose_level() >= 1) {
      verbose_print("primcache_verbose,config:ignored," +
                    std::string(backend::to_string(pd.kind())) + "," + pd.name() +
                    ",the tune table's entry " + why + "; using the heuristic's configuration");
    }
    return std::nullopt;
  };
  auto cfg = backend::kernel_config::from_json(e->config);
  if (!cfg) return ignore(cfg.why().message);
  if (auto ok = pd.validate_config(cfg.value()); !ok) {
    return ignore(e->config + " is refused: " + ok.why().message);
  }
  return cfg.value();
}

private_impl_cache* tuning_private_cache() noexcept {
  return tl_private_cache;
}

}  // namespace runtime_internal

void set_tune(bool on) {
  runtime_internal::state().set(on);
}

bool get_tune() {
  return runtime_internal::state().on();
}

void set_tune_max_nconfigs(std::size_t n) {
  if (n < 1 || n > runtime_internal::kMaxNconfigsLimit) {
    throw error(status::invalid_arguments, "max_nconfigs " + std::to_string(n) + " is outside 1.." +
                                               std::to_string(runtime_internal::kMaxNconfigsLimit));
  }
  auto& st = runtime_internal::state();
  if (st.max_nconfigs_setting) {
    control().set_setting("tune_max_nconfigs", static_cast<std::int64_t>(n));
  } else {
    st.max_nconfigs.store(n, std::memory_order_relaxed);
  }
}

std::size_t get_tune_max_nconfigs() {
  return runtime_internal::state().nconfigs();
}

tune_table& global_tune_table() {
  return runtime_internal::state().table;
}

std::string tune_device_of(const engine& eng) {
  return backend::impl_of(eng).describe();
}

std::string get_tune_table_path() {
  return runtime_internal::state().table_path();
}

tune_table_file_report use_tune_table_file(const std::string& path) {
  if (path.empty()) throw error(status::invalid_arguments, "use_tune_table_file: empty path");
  auto& st = runtime_internal::state();
  // Read aside, then swapped in: the table is empty only between clear()
  // and merge(), not while the file is read.
  tune_table fresh;
  const runtime_internal::table_file_read r = runtime_internal::read_table_file(fresh, path);
  tune_table_file_report report;
  report.found = r.found;
  report.ignored = r.ignored;
  report.entries = fresh.size();
  {
    lock_guard g(st.path_mu);
    st.path = path;
  }
  st.table.clear();
  st.table.merge(fresh);
  st.dirty.store(false);
  st.table_entries.set(static_cast<double>(st.table.size()));
  runtime_internal::invalidate_primitive_descs();
  return report;
}

std::size_t save_tune_table(const std::string& path) {
  auto& st = runtime_internal::state();
  const std::string own = st.table_path();
  const std::string& to = path.empty() ? own : path;
  if (to.empty()) {
    throw error(status::invalid_arguments,
                "save_tune_table: no path given and PRIMCACHE_TUNE_TABLE is unset");
  }
  auto r = st.table.save_file(to, version().version);
  if (!r) throw error(r.why().code, r.why().message);
  if (to == own) st.dirty.store(false);
  st.table_entries.set(static_cast<double>(st.table.size()));
  return r.value();
}

void set_tune_progress_listener(std::function<void(const tune_progress_event&)> fn) {
  auto next =
      fn ? std::make_shared<const std::function<void(const tune_progress_event&)>>(std::move(fn))
         : nullptr;
  auto& st = runtime_internal::state();
  lock_guard g(st.listener_mu);
  st.listener = std::move(next);
}

tune_stats get_tune_stats() {
  auto& st = runtime_internal::state();
  tune_stats s;
  s.tuned = st.tuned.load(std::memory_order_relaxed);
  s.replaced = st.replaced.load(std::memory_order_relaxed);
  s.failed = st.failed.load(std::memory_order_relaxed);
  s.skipped = st.skipped.load(std::memory_order_relaxed);
  s.wrong_candidates = st.wrong.load(std::memory_order_relaxed);
  s.failed_candidates = st.failed_candidates.load(std::memory_order_relaxed);
  s.device_timed_runs = st.device_timed_runs.load(std::memory_order_relaxed);
  s.rejected_candidates = st.rejected.load(std::memory_order_relaxed);
  s.seconds = static_cast<double>(st.tuning_ns.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

}  // namespace primcache
