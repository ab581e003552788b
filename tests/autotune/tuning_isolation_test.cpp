// What tuning leaves alone: the global primitive cache and the persistent
// cache are as they were until the winner is created — candidates, and the
// nested primitives they create, are built in the tuning's private cache,
// which neither of them sees; and tunable primitives with nothing to tune
// are skipped: eltwise and reorder (kinds tuning does not measure), an
// implementation without configurations, a matmul with an exp post-op.
//
// A test implementation, "test:nested_matmul", is registered above the JIT
// for one matmul shape (29x31 by 31x23, no bias, no post-ops): it runs a
// nested JIT matmul (the same product, with an identity post-op so that its
// descriptor is the JIT's), created through create_nested_impl both by its
// primitives and by its tuning candidates, and counts where those nested
// creations were found. Another, "test:plain_matmul", takes one other shape
// (11x13 by 13x17) and has no configurations.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "primcache/control/registry.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

bool jit() {
  return effective_isa() >= cpu_isa::avx2;
}

memory filled(const memory::desc& md, unsigned seed) {
  memory m(md, cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < md.size_bytes() / sizeof(float); ++i) p[i] = dist(rng);
  return m;
}

// A store that records the keys it is asked for and given, in front of a
// directory store.
class recording_store final : public blob_store {
 public:
  explicit recording_store(std::shared_ptr<blob_store> inner) : inner_(std::move(inner)) {}
  using keys = std::vector<std::vector<std::byte>>;
  keys gets() const {
    std::lock_guard g(mu_);
    return gets_;
  }
  keys puts() const {
    std::lock_guard g(mu_);
    return puts_;
  }
  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override {
    {
      std::lock_guard g(mu_);
      gets_.emplace_back(key.begin(), key.end());
    }
    return inner_->get(key);
  }
  put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) override {
    {
      std::lock_guard g(mu_);
      puts_.emplace_back(key.begin(), key.end());
    }
    return inner_->put(key, payload);
  }
  bool erase(std::span<const std::byte> key) override { return inner_->erase(key); }
  std::uint64_t size() const override { return inner_->size(); }
  std::uint64_t capacity() const override { return inner_->capacity(); }
  void set_capacity(std::uint64_t mb) override { inner_->set_capacity(mb); }
  void clear() override { inner_->clear(); }
  blob_store_stats stats() const override { return inner_->stats(); }
  bool read_only() const noexcept override { return inner_->read_only(); }
  std::string describe() const override { return "recording " + inner_->describe(); }

 private:
  std::shared_ptr<blob_store> inner_;
  mutable std::mutex mu_;
  keys gets_, puts_;
};

std::vector<std::byte> bytes_of(const std::vector<std::uint8_t>& id) {
  std::vector<std::byte> out(id.size());
  std::memcpy(out.data(), id.data(), id.size());
  return out;
}

// A directory store behind a recorder, attached for the scope.
struct attached_store {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("primcache-tuning-isolation-" + std::to_string(::getpid()));
  std::shared_ptr<recording_store> store;
  attached_store() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
    store = std::make_shared<recording_store>(open_persistent_cache_dir(dir.string(), 64));
    set_persistent_cache(store);
  }
  ~attached_store() {
    set_persistent_cache(nullptr);
    std::filesystem::remove_all(dir);
  }
  attached_store(const attached_store&) = delete;
  attached_store& operator=(const attached_store&) = delete;
};

// The primitive cache's counters, as an operator reads them.
cache_counters primitive_cache_counters() {
  return control().find_cache("primitive").info().stats;
}

void check_same_counters(const cache_counters& a, const cache_counters& b) {
  CHECK(a.hits == b.hits);
  CHECK(a.misses == b.misses);
  CHECK(a.waits == b.waits);
  CHECK(a.evictions == b.evictions);
}

// Restores the tune settings a test changed, and gives the test an empty
// tune table, putting the entries it held back afterwards. A test tunes
// only a problem the table has no entry for: the entry another test's
// tuning left (both test:nested_matmul tests tune one problem) stops the
// tuning, or sends the descriptor to the implementation that won it
// (jit:matmul), when the whole binary runs in one process. Cached
// descriptors chose their configurations from the table, so they are made
// again after each change (set_config_source: the runtime installs none).
struct tune_scope {
  std::size_t nconfigs = get_tune_max_nconfigs();
  bool on = get_tune();
  jit_mode mode = get_jit_mode();
  std::vector<tune_row> table = global_tune_table().rows();
  tune_scope() { empty_table(); }
  ~tune_scope() {
    empty_table();
    for (const tune_row& r : table) global_tune_table().put(r.device, r.key, r.entry);
    backend::set_config_source({});
    set_tune_max_nconfigs(nconfigs);
    set_tune(on);
    set_jit_mode(mode);
  }
  tune_scope(const tune_scope&) = delete;
  tune_scope& operator=(const tune_scope&) = delete;

  static void empty_table() {
    global_tune_table().clear();
    backend::set_config_source({});
  }
};

// Empties the global primitive cache (its capacity set to 0, then back). A
// test that checks what a creation asks of the store needs that creation to
// be a miss, and another test may have made the same primitive earlier in
// the process (both test:nested_matmul tests make the one composite).
void empty_primitive_cache() {
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(capacity);
}

// ---- test:nested_matmul ----------------------------------------------------

constexpr std::int64_t kM = 29, kK = 31, kN = 23;

// Nested creations made by the implementation: by its primitives (through
// the global cache) and by its tuning candidates, by how they were found.
std::atomic<int> candidate_builds{0}, candidate_nested_misses{0}, candidate_nested_hits{0};
// Executions of candidates, and those whose nested matmul ran generic code
// (created tiered, its specialized code not installed yet).
std::atomic<int> candidate_runs{0}, candidate_generic_runs{0};

class nested_matmul_impl final : public backend::primitive_impl {
 public:
  nested_matmul_impl(std::shared_ptr<const backend::primitive_desc_impl> pd,
                     std::shared_ptr<const backend::primitive_impl> matmul, bool candidate)
      : primitive_impl(std::move(pd)), matmul_(std::move(matmul)), candidate_(candidate) {}
  std::vector<const primitive_impl*> nested() const override { return {matmul_.get()}; }
  std::size_t scratchpad_bytes() const override { return matmul_->scratchpad_bytes(); }
  void execute(const backend::exec_ctx& ctx) const override {
    if (candidate_) {
      ++candidate_runs;
      if (!matmul_->specialized()) ++candidate_generic_runs;
    }
    matmul_->execute(ctx.nested(ctx.args, ctx.scratchpad));
  }

 private:
  std::shared_ptr<const backend::primitive_impl> matmul_;
  bool candidate_;
};

backend::kernel_config variant(std::int64_t v) {
  backend::kernel_config c;
  c.add("variant", v);
  return c;
}

class nested_matmul_pd final : public backend::primitive_desc_impl {
 public:
  nested_matmul_pd(const primitive_attr& attr, backend::matmul_op op,
                   std::shared_ptr<const backend::primitive_desc_impl> matmul)
      : primitive_desc_impl(backend::primitive_kind::matmul, attr, "test:nested_matmul"),
        op_(std::move(op)),
        matmul_(std::move(matmul)) {}

  memory_desc arg_md(int arg) const override {
    if (arg == PRIMCACHE_ARG_SRC) return op_.src;
    if (arg == PRIMCACHE_ARG_WEIGHTS) return op_.weights;
    if (arg == PRIMCACHE_ARG_DST) return op_.dst;
    return {};
  }
  std::size_t scratchpad_bytes() const override { return matmul_->scratchpad_bytes(); }
  void write_op_key(key_writer& w) const override {
    op_.src.write_key(w);
    op_.weights.write_key(w);
    op_.dst.write_key(w);
  }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine& eng) const override {
    auto matmul = backend::create_nested_impl(*matmul_, eng);
    return std::make_shared<const nested_matmul_impl>(shared_from_this(), std::move(matmul.value),
                                                      false);
  }
  std::optional<backend::kernel_config> default_config() const override { return variant(1); }
  backend::config_space config_candidates() const override {
    return backend::config_space::of({variant(2), variant(3)});
  }
  result<bool> validate_config(const backend::kernel_config& cfg) const override {
    if (auto ok = cfg.expect({"variant"}); !ok) return ok;
    const std::int64_t v = *cfg.get("variant");
    if (v < 1 || v > 3) return failure{status::invalid_arguments, "variant out of 1-3"};
    return true;
  }
  // A candidate: its nested matmul through create_nested_impl, as the
  // primitive's own creation does.
  std::shared_ptr<const backend::primitive_impl> create_impl_with(
      const engine& eng, const backend::kernel_config& cfg) const override {
    if (auto ok = validate_config(cfg); !ok) throw error(ok.why().code, ok.why().message);
    ++candidate_builds;
    auto matmul = backend::create_nested_impl(*matmul_, eng);
    ++(matmul.outcome == lookup_outcome::miss ? candidate_nested_misses : candidate_nested_hits);
    return std::make_shared<const nested_matmul_impl>(shared_from_this(), std::move(matmul.value),
                                                      true);
  }

 private:
  backend::matmul_op op_;
  std::shared_ptr<const backend::primitive_desc_impl> matmul_;
};

result<std::shared_ptr<const backend::primitive_desc_impl>> make_nested_matmul_pd(
    const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng) {
  const auto& m = std::get<backend::matmul_op>(op);
  const memory_desc src({kM, kK}, data_type::f32, tag::ab);
  const memory_desc wei({kK, kN}, data_type::f32, tag::ab);
  const memory_desc dst({kM, kN}, data_type::f32, tag::ab);
  if (!(m.src == src) || !(m.weights == wei) || !(m.dst == dst) || !m.bias.is_zero() ||
      !attr.get_post_ops().entries().empty()) {
    return failure{status::unimplemented, "test:nested_matmul takes one shape only"};
  }
  // The nested matmul: the same product with an identity post-op (x * 1 +
  // 0), an op this implementation refuses, so the registry gives the JIT's.
  primitive_attr nested_attr;
  post_ops identity;
  identity.append_eltwise(1.f, algorithm::eltwise_linear, 1.f, 0.f);
  nested_attr.set_post_ops(identity);
  std::shared_ptr<const backend::primitive_desc_impl> matmul;
  try {
    matmul = backend::create_primitive_desc(m, nested_attr, engine(engine_kind::cpu, eng.index()));
  } catch (const error& e) {
    return failure{e.code(), e.message()};
  }
  auto pd = std::make_shared<nested_matmul_pd>(attr, m, std::move(matmul));
  pd->finalize(eng, 1);
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

void register_nested_matmul() {
  static const bool registered = [] {
    backend::register_implementation({"test:nested_matmul", engine_kind::cpu,
                                      backend::primitive_kind::matmul, 200,
                                      &make_nested_matmul_pd});
    return true;
  }();
  (void)registered;
}

// ---- test:plain_matmul -------------------------------------------------------

constexpr std::int64_t kPlainM = 11, kPlainK = 13, kPlainN = 17;

class plain_matmul_impl final : public backend::primitive_impl {
 public:
  using primitive_impl::primitive_impl;
  void execute(const backend::exec_ctx& ctx) const override {
    const auto* a = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_SRC));
    const auto* b = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_WEIGHTS));
    auto* c = static_cast<float*>(ctx.arg_ptr(PRIMCACHE_ARG_DST));
    for (std::int64_t i = 0; i < kPlainM; ++i) {
      for (std::int64_t j = 0; j < kPlainN; ++j) {
        float acc = 0;
        for (std::int64_t k = 0; k < kPlainK; ++k) acc += a[i * kPlainK + k] * b[k * kPlainN + j];
        c[i * kPlainN + j] = acc;
      }
    }
  }
};

// No default_config, no space: nothing to tune.
class plain_matmul_pd final : public backend::primitive_desc_impl {
 public:
  plain_matmul_pd(const primitive_attr& attr, backend::matmul_op op)
      : primitive_desc_impl(backend::primitive_kind::matmul, attr, "test:plain_matmul"),
        op_(std::move(op)) {}
  memory_desc arg_md(int arg) const override {
    if (arg == PRIMCACHE_ARG_SRC) return op_.src;
    if (arg == PRIMCACHE_ARG_WEIGHTS) return op_.weights;
    if (arg == PRIMCACHE_ARG_DST) return op_.dst;
    return {};
  }
  void write_op_key(key_writer& w) const override {
    op_.src.write_key(w);
    op_.weights.write_key(w);
    op_.dst.write_key(w);
  }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine&) const override {
    return std::make_shared<const plain_matmul_impl>(shared_from_this());
  }

 private:
  backend::matmul_op op_;
};

result<std::shared_ptr<const backend::primitive_desc_impl>> make_plain_matmul_pd(
    const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng) {
  const auto& m = std::get<backend::matmul_op>(op);
  if (!(m.src == memory_desc({kPlainM, kPlainK}, data_type::f32, tag::ab)) ||
      !(m.weights == memory_desc({kPlainK, kPlainN}, data_type::f32, tag::ab)) ||
      !(m.dst == memory_desc({kPlainM, kPlainN}, data_type::f32, tag::ab)) || !m.bias.is_zero() ||
      !attr.get_post_ops().entries().empty()) {
    return failure{status::unimplemented, "test:plain_matmul takes one shape only"};
  }
  auto pd = std::make_shared<plain_matmul_pd>(attr, m);
  pd->finalize(eng, 1);
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

void register_plain_matmul() {
  static const bool registered = [] {
    backend::register_implementation({"test:plain_matmul", engine_kind::cpu,
                                      backend::primitive_kind::matmul, 200, &make_plain_matmul_pd});
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("tuning leaves the primitive cache and the persistent cache as they were",
          "[autotune][runtime][isolation]") {
  if (!jit()) {
    WARN("the JIT matmul needs avx2: nothing to tune on this host");
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  const tune_scope restore;
  set_tune(false);
  set_tune_max_nconfigs(6);
  empty_primitive_cache();
  const attached_store attached;
  recording_store& store = *attached.store;
  const memory src = filled({{45, 67}, data_type::f32, tag::ab}, 1);
  const memory wei = filled({{67, 89}, data_type::f32, tag::ab}, 2);
  const memory dst(memory::desc({45, 89}, data_type::f32, tag::ab), cpu());
  const matmul::desc desc(src.get_desc(), wei.get_desc(), dst.get_desc());
  primitive_attr attr;
  attr.set_tunable(true);
  const primitive::args args = {
      {PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}};

  // The primitive's own creation: a miss, asked of the store, written there.
  const matmul::primitive_desc pd(desc, attr, cpu());
  REQUIRE(backend::impl_of(pd).name() == std::string("jit:matmul"));
  const std::vector<std::byte> own = bytes_of(pd.cache_blob_id());
  const matmul prim(pd);
  flush_persistent_cache_writes();
  REQUIRE(store.puts() == recording_store::keys{own});
  REQUIRE(store.gets() == recording_store::keys{own});
  const int size = get_primitive_cache_size();
  const cache_counters counters = primitive_cache_counters();
  const std::uint64_t stored_bytes = store.size();
  const tune_stats s0 = get_tune_stats();

  prim.execute(stream(cpu()), args);  // tunes: up to 6 candidates built and run
  const tune_stats s1 = get_tune_stats();
  REQUIRE(s1.tuned == s0.tuned + 1);
  REQUIRE(s1.failed == s0.failed);
  flush_persistent_cache_writes();
  // Nothing looked up, added or evicted in the primitive cache, nothing
  // asked of the store or written to it.
  CHECK(get_primitive_cache_size() == size);
  check_same_counters(primitive_cache_counters(), counters);
  CHECK(primitive_cache_contains(pd));
  CHECK(store.gets() == recording_store::keys{own});
  CHECK(store.puts() == recording_store::keys{own});
  CHECK(store.size() == stored_bytes);

  // The winner, created from the next descriptor, under its own key: the
  // only entry that may appear besides the primitive's own.
  const matmul::primitive_desc next(desc, attr, cpu());
  const std::vector<std::byte> winner = bytes_of(next.cache_blob_id());
  const matmul tuned(next);
  tuned.execute(stream(cpu()), args);
  flush_persistent_cache_writes();
  CHECK(get_tune_stats().tuned == s1.tuned);  // never tuned again
  if (winner == own) {
    // The default stood: the same key, a hit.
    CHECK(get_primitive_cache_size() == size);
    CHECK(store.puts() == recording_store::keys{own});
  } else {
    CHECK(get_primitive_cache_size() == size + 1);
    CHECK(store.puts() == recording_store::keys{own, winner});
    CHECK(store.gets() == recording_store::keys{own, winner});
  }
}

TEST_CASE("the nested primitives tuning candidates create live in the tuning's private cache",
          "[autotune][runtime][isolation]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  register_nested_matmul();
  const tune_scope restore;
  set_tune(false);
  // In sync mode every creation compiles before it returns: the nested
  // matmul's write to the store is queued by its own creation.
  set_jit_mode(jit_mode::sync);
  set_tune_max_nconfigs(4);
  empty_primitive_cache();
  const attached_store attached;
  recording_store& store = *attached.store;
  const memory src = filled({{kM, kK}, data_type::f32, tag::ab}, 3);
  const memory wei = filled({{kK, kN}, data_type::f32, tag::ab}, 4);
  const memory dst(memory::desc({kM, kN}, data_type::f32, tag::ab), cpu());
  const matmul::desc desc(src.get_desc(), wei.get_desc(), dst.get_desc());
  primitive_attr attr;
  attr.set_tunable(true);
  const primitive::args args = {
      {PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}};

  const matmul::primitive_desc pd(desc, attr, cpu());
  REQUIRE(backend::impl_of(pd).name() == std::string("test:nested_matmul"));
  // Its creation puts it and its nested matmul in the global cache; the
  // nested matmul's code goes to the store (the composite has none).
  const matmul prim(pd);
  flush_persistent_cache_writes();
  CHECK(primitive_cache_contains(pd));
  const recording_store::keys gets = store.gets(), puts = store.puts();
  CHECK(puts.size() == 1);  // the nested matmul's
  const int size = get_primitive_cache_size();
  const cache_counters counters = primitive_cache_counters();
  const tune_stats s0 = get_tune_stats();
  const int builds = candidate_builds, misses = candidate_nested_misses,
            hits = candidate_nested_hits;

  prim.execute(stream(cpu()), args);  // tunes
  const tune_stats s1 = get_tune_stats();
  REQUIRE(s1.tuned == s0.tuned + 1);
  REQUIRE(s1.failed == s0.failed);
  flush_persistent_cache_writes();
  // The composite's candidates were built (its default always is), and
  // each created its nested matmul afresh in its own private cache: a miss
  // there, although the global cache holds that very matmul (a hit had it
  // been asked). The global cache and the store saw nothing.
  const int built = candidate_builds - builds;
  CHECK(built >= 1);
  CHECK(candidate_nested_misses - misses == built);
  CHECK(candidate_nested_hits - hits == 0);
  CHECK(get_primitive_cache_size() == size);
  check_same_counters(primitive_cache_counters(), counters);
  CHECK(store.gets() == gets);
  CHECK(store.puts() == puts);
  // What ran is right: the product, through the nested matmul.
  std::vector<float> want(static_cast<std::size_t>(kM * kN));
  const auto* a = static_cast<const float*>(src.get_data_handle());
  const auto* b = static_cast<const float*>(wei.get_data_handle());
  for (std::int64_t i = 0; i < kM; ++i) {
    for (std::int64_t j = 0; j < kN; ++j) {
      double acc = 0;
      for (std::int64_t k = 0; k < kK; ++k) acc += double(a[i * kK + k]) * b[k * kN + j];
      want[static_cast<std::size_t>(i * kN + j)] = static_cast<float>(acc);
    }
  }
  const auto* got = static_cast<const float*>(dst.get_data_handle());
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += std::abs(got[i] - want[i]) > 1e-4f;
  CHECK(bad == 0);
}

TEST_CASE("tuning candidates run the specialized code of the nested primitives they create",
          "[autotune][runtime][isolation][tiered]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  register_nested_matmul();
  const tune_scope restore;
  set_tune(false);
  set_tune_max_nconfigs(4);
  // Tiered: a candidate's nested matmul, created through the private
  // cache, gets generic code and a background compilation. The pool is
  // kept busy first (tiered matmuls of other shapes, alive, compiling one
  // after another), so that compilation stays queued while the candidate
  // is measured unless tuning waits for it.
  set_jit_mode(jit_mode::tiered);
  std::vector<matmul> backlog;
  for (int i = 0; i < 16; ++i) {
    const memory::desc a({64 + i, 96}, data_type::f32, tag::ab);
    const memory::desc b({96, 80 + i}, data_type::f32, tag::ab);
    const memory::desc c({64 + i, 80 + i}, data_type::f32, tag::ab);
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0.f, 0.f);
    primitive_attr backlog_attr;
    backlog_attr.set_post_ops(ops);
    backlog.emplace_back(matmul::primitive_desc(matmul::desc(a, b, c), backlog_attr, cpu()));
  }
  const memory src = filled({{kM, kK}, data_type::f32, tag::ab}, 12);
  const memory wei = filled({{kK, kN}, data_type::f32, tag::ab}, 13);
  const memory dst(memory::desc({kM, kN}, data_type::f32, tag::ab), cpu());
  primitive_attr attr;
  attr.set_tunable(true);
  const matmul::primitive_desc pd(matmul::desc(src.get_desc(), wei.get_desc(), dst.get_desc()),
                                  attr, cpu());
  REQUIRE(backend::impl_of(pd).name() == std::string("test:nested_matmul"));
  const int runs = candidate_runs, generic_runs = candidate_generic_runs;
  const tune_stats s0 = get_tune_stats();
  matmul(pd).execute(
      stream(cpu()),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  REQUIRE(get_tune_stats().tuned == s0.tuned + 1);
  // Measured on the code a tuned primitive ends up running: the nested
  // matmul's specialized kernel, never its generic one.
  CHECK(candidate_runs - runs > 0);
  CHECK(candidate_generic_runs - generic_runs == 0);
}

TEST_CASE("tunable primitives with nothing to tune are skipped", "[autotune][runtime][skipped]") {
  const tune_scope restore;
  set_tune(false);
  set_tune_max_nconfigs(2);
  primitive_attr attr;
  attr.set_tunable(true);
  const std::string device = tune_device_of(cpu());
  // Skipped on the first execution: counted, nothing tuned, no table entry;
  // and never looked at again by this primitive.
  auto check_skipped = [&](const primitive_desc& pd, const primitive& prim,
                           const primitive::args& args) {
    INFO(backend::impl_of(pd).name());
    const tune_stats s0 = get_tune_stats();
    const std::size_t entries = global_tune_table().size();
    prim.execute(stream(cpu()), args);
    const tune_stats s1 = get_tune_stats();
    CHECK(s1.skipped == s0.skipped + 1);
    CHECK(s1.tuned == s0.tuned);
    CHECK(s1.failed == s0.failed);
    CHECK(global_tune_table().size() == entries);
    CHECK_FALSE(global_tune_table().find(device, backend::impl_of(pd).problem_key()));
    prim.execute(stream(cpu()), args);
    CHECK(get_tune_stats().skipped == s1.skipped);
  };
  SECTION("eltwise and reorder: kinds tuning does not measure") {
    const memory src = filled({{16, 24}, data_type::f32, tag::ab}, 7);
    const memory dst(memory::desc({16, 24}, data_type::f32, tag::ab), cpu());
    const memory dst_t(memory::desc({16, 24}, data_type::f32, tag::ba), cpu());
    const eltwise_forward::primitive_desc relu(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, src.get_desc(),
                              dst.get_desc(), 0.f, 0.f),
        attr, cpu());
    check_skipped(relu, eltwise_forward(relu),
                  {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
    const reorder::primitive_desc transpose(cpu(), src.get_desc(), cpu(), dst_t.get_desc(), attr);
    check_skipped(transpose, reorder(transpose),
                  {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst_t}});
  }
  SECTION("a matmul implementation without configurations") {
    register_plain_matmul();
    const memory src = filled({{kPlainM, kPlainK}, data_type::f32, tag::ab}, 8);
    const memory wei = filled({{kPlainK, kPlainN}, data_type::f32, tag::ab}, 9);
    const memory dst(memory::desc({kPlainM, kPlainN}, data_type::f32, tag::ab), cpu());
    const matmul::primitive_desc pd(matmul::desc(src.get_desc(), wei.get_desc(), dst.get_desc()),
                                    attr, cpu());
    REQUIRE(backend::impl_of(pd).name() == std::string("test:plain_matmul"));
    CHECK_FALSE(backend::impl_of(pd).default_config());
    check_skipped(
        pd, matmul(pd),
        {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  }
  SECTION("a matmul with an exp post-op (no bound for the output check)") {
    if (!jit()) {
      CHECK(effective_isa() < cpu_isa::avx2);
      return;
    }
    const memory src = filled({{12, 20}, data_type::f32, tag::ab}, 10);
    const memory wei = filled({{20, 14}, data_type::f32, tag::ab}, 11);
    const memory dst(memory::desc({12, 14}, data_type::f32, tag::ab), cpu());
    primitive_attr exp_attr = attr;
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_exp, 0.f, 0.f);
    exp_attr.set_post_ops(ops);
    const matmul::primitive_desc pd(matmul::desc(src.get_desc(), wei.get_desc(), dst.get_desc()),
                                    exp_attr, cpu());
    REQUIRE(backend::impl_of(pd).default_config());  // configurations, but not tuned
    check_skipped(
        pd, matmul(pd),
        {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  }
}
