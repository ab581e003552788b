#include "primcache/runtime/thread_pool.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primitive_cache_internal.hpp"

namespace primcache {
namespace {

thread_local bool tl_in_region = false;

// About 10-50 us of polling before a futex sleep: long enough that the next
// region of a multi-stage kernel finds the workers awake, short enough not
// to burn a shared core for long.
constexpr int kSpinIterations = 2000;

// How long after outside callers last filled the pool a new region still
// runs on its caller (see the header's contract).
constexpr std::int64_t kSaturationGraceTicks =
    std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::microseconds(100))
        .count();

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Raw futexes on the atomics' own words. (libstdc++ 12's atomic::wait
// routes some types through a shared proxy word and was seen to lose
// wake-ups here.) The atomics carry the memory ordering; the futex only
// sleeps while the word still holds `expected`.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected,
            nullptr, nullptr, 0);
}
void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
            nullptr, 0);
}

// Pool sizes; a claim word keeps nthr and the next ithr in 16 bits each.
// Its 32-bit sequence would have to wrap (2^32 regions in one slot) while a
// worker sat between loading the word and its CAS for a stale claim to land.
constexpr int kMaxThreads = 1023;

constexpr std::uint64_t slot_bit(int i) noexcept {
  return std::uint64_t{1} << i;
}
constexpr int claim_nthr(std::uint64_t word) noexcept {
  return static_cast<int>((word >> 16) & 0xffff);
}
constexpr int claim_next(std::uint64_t word) noexcept {
  return static_cast<int>(word & 0xffff);
}

void check_size(int size) {
  if (size < 1 || size > kMaxThreads) {
    throw error(status::invalid_arguments, "thread pool size " + std::to_string(size) +
                                               " is outside [1, " + std::to_string(kMaxThreads) +
                                               "]");
  }
}

struct region_flag {
  region_flag() { tl_in_region = true; }
  ~region_flag() { tl_in_region = false; }
};

// Every live pool, for the fork handlers. Never destroyed: pools may be
// destroyed by other objects' static destructors.
struct pool_list {
  mutex mu;
  std::vector<thread_pool*> pools PRIMCACHE_GUARDED_BY(mu);
};
pool_list& live_pools() {
  static auto* list = new pool_list;
  return *list;
}

// The default pool. Replaced in a fork() child (see thread_pool::fork_child).
std::atomic<thread_pool*> g_pool{nullptr};
// The size a child's replacement pool starts with (the parent's); 0 before
// any fork.
std::atomic<int> g_child_size{0};

}  // namespace

range balance(std::int64_t n, int ithr, int nthr) noexcept {
  if (nthr <= 1 || n <= 0) return {0, std::max<std::int64_t>(n, 0)};
  const std::int64_t base = n / nthr;
  const std::int64_t extra = n % nthr;
  const std::int64_t begin = ithr * base + std::min<std::int64_t>(ithr, extra);
  return {begin, begin + base + (ithr < extra ? 1 : 0)};
}

thread_pool::thread_pool(int size) : size_(1), slots_(new region_slot[kRegionSlots]) {
  check_size(size);
  static const bool fork_handlers_registered =
      ::pthread_atfork(&thread_pool::fork_prepare, &thread_pool::fork_parent,
                       &thread_pool::fork_child) == 0;
  (void)fork_handlers_registered;
  {
    pool_list& list = live_pools();
    lock_guard g(list.mu);
    list.pools.push_back(this);
  }
  lock_guard g(workers_mu_);
  start_workers(size - 1);
  size_.store(size, std::memory_order_relaxed);
}

thread_pool::~thread_pool() {
  stopping_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(generation_, INT_MAX);
  {
    lock_guard g(workers_mu_);
    for (auto& t : workers_) t.join();
  }
  // Only now: a fork until here still waits for this pool's starting workers.
  pool_list& list = live_pools();
  lock_guard g(list.mu);
  std::erase(list.pools, this);
}

// A thread's start-up allocates (its stack guard, thread-local storage and,
// under AddressSanitizer, the sanitizer's own bookkeeping). A fork at that
// moment could give the child an allocator lock held by a thread the child
// does not have: glibc's malloc locks its arenas around fork(), but the AddressSanitizer
// allocators of GCC 12 and clang 15 do not, and CI saw a child's new workers wait
// forever on such a lock. So a fork waits until every worker of every pool
// is past its start-up, and holds the pools' worker locks across the fork so
// that no new worker starts meanwhile. Running workers allocate nothing of
// the pool's own (a region allocates nothing).
void thread_pool::fork_prepare() {
  pool_list& list = live_pools();
  list.mu.lock();
  for (thread_pool* pool : list.pools) {
    pool->workers_mu_.lock();
    pool->startups_.wait_for(static_cast<int>(pool->workers_.size()));
  }
}

void thread_pool::fork_parent() {
  pool_list& list = live_pools();
  for (thread_pool* pool : list.pools) pool->workers_mu_.unlock();
  list.mu.unlock();
}

// The child, single-threaded. The parent's default pool has no workers here
// and may be in the middle of a region, so it is abandoned (never destroyed:
// destroying it would join threads that do not exist) and a new one is made
// on first use, with the same size.
void thread_pool::fork_child() {
  pool_list& list = live_pools();
  for (thread_pool* pool : list.pools) pool->workers_mu_.unlock();
  thread_pool* old = g_pool.load(std::memory_order_relaxed);
  if (old != nullptr) {
    g_child_size.store(old->size(), std::memory_order_relaxed);
    g_pool.store(nullptr, std::memory_order_relaxed);
    std::erase(list.pools, old);
  }
  list.mu.unlock();
}

void thread_pool::start_workers(int count) {
  while (static_cast<int>(workers_.size()) < count) {
    workers_.emplace_back([this] { worker_main(); });
  }
}

void thread_pool::resize(int size) {
  check_size(size);
  lock_guard g(workers_mu_);
  start_workers(size - 1);
  size_.store(size, std::memory_order_relaxed);
}

bool thread_pool::in_parallel_region() noexcept {
  return tl_in_region;
}

void thread_pool::run_share(region_slot& r, int ithr, int nthr) noexcept {
  try {
    r.body(ithr, nthr);
  } catch (...) {
    if (!r.has_error.exchange(true, std::memory_order_acq_rel)) {
      r.first_error = std::current_exception();
    }
  }
}

bool thread_pool::run_shares(int i) noexcept {
  region_slot& r = slots_[static_cast<std::size_t>(i)];
  bool ran = false;
  std::uint64_t word = r.claim.load(std::memory_order_acquire);
  for (;;) {
    const int nthr = claim_nthr(word);
    const int next = claim_next(word);
    if (next >= nthr) return ran;
    // acquire: the body and fields the caller wrote before publishing.
    if (!r.claim.compare_exchange_weak(word, word + 1, std::memory_order_acquire,
                                       std::memory_order_acquire)) {
      continue;
    }
    // The last share claimed: nothing left for others to find here. Before
    // the share runs, so before the slot can be reused.
    if (next + 1 == nthr) open_slots_.fetch_and(~slot_bit(i), std::memory_order_relaxed);
    run_share(r, next, nthr);
    ran = true;
    // After this decrement the region may finish and its slot be reused:
    // only pool memory is touched below (a wake-up on a reused slot is a
    // harmless spurious one).
    if (r.pending.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        r.caller_sleeping.load(std::memory_order_seq_cst)) {
      futex_wake(r.pending, 1);
    }
    word = r.claim.load(std::memory_order_acquire);
  }
}

void thread_pool::worker_main() noexcept {
  tl_in_region = true;
  startups_.mark_started();
  // Where this worker starts looking among open slots; advanced after each
  // region so that concurrent regions are served in turn.
  unsigned start = 0;
  for (;;) {
    if (stopping_.load(std::memory_order_acquire)) return;
    std::uint64_t open = open_slots_.load(std::memory_order_acquire);
    for (int spin = 0; open == 0 && spin < kSpinIterations; ++spin) {
      cpu_relax();
      open = open_slots_.load(std::memory_order_acquire);
    }
    if (open != 0) {
      const unsigned i = (start + static_cast<unsigned>(
                                      std::countr_zero(std::rotr(open, static_cast<int>(start))))) %
                         kRegionSlots;
      start = (i + 1) % kRegionSlots;
      run_shares(static_cast<int>(i));
      continue;
    }
    // Dekker with parallel_for: we announce sleeping, then look for open
    // slots; the caller sets its slot's bit, bumps the generation, then
    // reads sleeping_workers_. seq_cst on all of them makes one of us see
    // the other; the futex sleeps only while the generation is unchanged.
    const std::uint32_t seen = generation_.load(std::memory_order_seq_cst);
    sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
    if (open_slots_.load(std::memory_order_seq_cst) == 0 &&
        !stopping_.load(std::memory_order_seq_cst)) {
      futex_wait(generation_, seen);
    }
    sleeping_workers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void thread_pool::parallel_for(int nthr, parallel_body f) {
  nthr = std::clamp(nthr, 1, size());
  if (nthr == 1 || tl_in_region) {
    // Nested or single-threaded: every share inline, in order.
    for (int ithr = 0; ithr < nthr; ++ithr) f(ithr, nthr);
    return;
  }
  // The pool offers size() threads of parallelism in all. When outside
  // callers alone already number that many, workers could only
  // oversubscribe the cores they share with them: such a region runs on its
  // caller.
  struct caller_count {
    std::atomic<int>& n;
    ~caller_count() { n.fetch_sub(1, std::memory_order_relaxed); }
  } counted{active_callers_};
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (active_callers_.fetch_add(1, std::memory_order_relaxed) + 1 >= size()) {
    saturated_at_.store(now, std::memory_order_relaxed);
    run_inline(nthr, f);
    return;
  }
  if (now - saturated_at_.load(std::memory_order_relaxed) < kSaturationGraceTicks) {
    run_inline(nthr, f);
    return;
  }
  // A slot of our own.
  std::uint64_t used = used_slots_.load(std::memory_order_relaxed);
  int i = -1;
  while (used != ~std::uint64_t{0}) {
    const int free = std::countr_zero(~used);
    if (used_slots_.compare_exchange_weak(used, used | slot_bit(free), std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
      i = free;
      break;
    }
  }
  if (i < 0) {
    run_inline(nthr, f);  // more concurrent callers than slots
    return;
  }
  region_slot& r = slots_[static_cast<std::size_t>(i)];
  // No share of the slot's previous region can still be claimed (all were,
  // and all finished before its caller released the slot), so nobody reads
  // these fields while they are written.
  r.body = f;
  r.first_error = nullptr;
  r.has_error.store(false, std::memory_order_relaxed);
  r.caller_sleeping.store(false, std::memory_order_relaxed);
  r.pending.store(static_cast<std::uint32_t>(nthr), std::memory_order_relaxed);
  const std::uint64_t seq = (r.claim.load(std::memory_order_relaxed) >> 32) + 1;
  // The open bit first: whoever claims the last share clears it, and no
  // share can be claimed before the claim word below is stored.
  open_slots_.fetch_or(slot_bit(i), std::memory_order_seq_cst);
  r.claim.store((seq << 32) | (static_cast<std::uint64_t>(nthr) << 16), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) futex_wake(generation_, nthr - 1);

  {
    region_flag in_region;
    run_shares(i);
  }

  std::uint32_t left = r.pending.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations * 8; ++spin) {
    cpu_relax();
    left = r.pending.load(std::memory_order_acquire);
  }
  while (left != 0) {
    r.caller_sleeping.store(true, std::memory_order_seq_cst);
    futex_wait(r.pending, left);
    r.caller_sleeping.store(false, std::memory_order_seq_cst);
    left = r.pending.load(std::memory_order_acquire);
  }
  std::exception_ptr e;
  if (r.has_error.load(std::memory_order_acquire)) e = std::exchange(r.first_error, nullptr);
  used_slots_.fetch_and(~slot_bit(i), std::memory_order_release);
  if (e) std::rethrow_exception(e);
}

void thread_pool::run_inline(int nthr, parallel_body f) {
  region_flag in_region;
  std::exception_ptr first;
  for (int ithr = 0; ithr < nthr; ++ithr) {
    try {
      f(ithr, nthr);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

namespace runtime_internal {
namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::string text;
  std::getline(in, text, '\0');
  return text;
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// ceil(quota / period), at least 1; 0 for "no quota" or nonsense.
int quota_cpus(std::int64_t quota, std::int64_t period) {
  if (quota <= 0 || period <= 0) return 0;
  const std::int64_t cpus = (quota + period - 1) / period;
  return static_cast<int>(std::clamp<std::int64_t>(cpus, 1, kMaxThreads));
}

// v2: "max 100000" or "<quota> <period>".
int read_cpu_max(const std::filesystem::path& dir) {
  const std::string text = read_small_file((dir / "cpu.max").string());
  std::string_view t = trim(text);
  const auto space = t.find(' ');
  if (space == std::string_view::npos) return 0;
  const auto quota = parse_int(t.substr(0, space));
  const auto period = parse_int(trim(t.substr(space + 1)));
  if (!quota || !period) return 0;  // "max" (no quota) or malformed
  return quota_cpus(*quota, *period);
}

// v1: cpu.cfs_quota_us (-1: no quota) and cpu.cfs_period_us.
int read_cfs(const std::filesystem::path& dir) {
  const auto quota = parse_int(trim(read_small_file((dir / "cpu.cfs_quota_us").string())));
  const auto period = parse_int(trim(read_small_file((dir / "cpu.cfs_period_us").string())));
  if (!quota || !period) return 0;
  return quota_cpus(*quota, *period);
}

// The smallest limit over `mount`/`cgroup_path` and its ancestors up to
// `mount`; only `mount` itself when the process's path is not there (a
// container that mounts its own cgroup at the root without a namespace).
int walk_limits(const std::filesystem::path& mount, std::string_view cgroup_path,
                int (*read)(const std::filesystem::path&)) {
  std::error_code ec;
  if (!std::filesystem::is_directory(mount, ec)) return 0;
  std::filesystem::path dir = mount;
  std::string_view rel = cgroup_path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  if (!rel.empty()) {
    std::filesystem::path candidate = (mount / std::filesystem::path(rel)).lexically_normal();
    // Stay inside the mount ("/.." and the like).
    const auto m = mount.lexically_normal().string();
    if (candidate.string().rfind(m, 0) == 0 && std::filesystem::is_directory(candidate, ec)) {
      dir = candidate;
    }
  }
  const std::filesystem::path top = mount.lexically_normal();
  dir = dir.lexically_normal();
  int best = 0;
  for (;;) {
    const int limit = read(dir);
    if (limit > 0 && (best == 0 || limit < best)) best = limit;
    if (dir == top || !dir.has_relative_path() || dir.parent_path() == dir) break;
    std::filesystem::path parent = dir.parent_path();
    if (parent.string().size() < top.string().size()) break;
    dir = parent;
  }
  return best;
}

int min_limit(int a, int b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

int affinity_cpu_count() noexcept {
  for (int n = CPU_SETSIZE; n <= (1 << 16); n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) == 0) {
      const int count = CPU_COUNT_S(bytes, set);
      CPU_FREE(set);
      return std::max(count, 1);
    }
    const int err = errno;
    CPU_FREE(set);
    if (err != EINVAL) break;  // EINVAL: the kernel's mask is larger; try a bigger one
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int cgroup_cpu_limit(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  const std::filesystem::path root(cgroup_root);
  int limit = 0;
  bool saw_v2 = false;
  std::string_view rest = proc_self_cgroup;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    // "hierarchy-id:controllers:path"
    const auto c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    const auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, c1);
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string_view path = trim(line.substr(c2 + 1));
    if (id == "0" && controllers.empty()) {
      saw_v2 = true;
      limit = min_limit(limit, walk_limits(root, path, read_cpu_max));
      continue;
    }
    bool has_cpu = false;
    for (std::string_view cs = controllers; !cs.empty();) {
      const auto comma = cs.find(',');
      if (cs.substr(0, comma) == "cpu") has_cpu = true;
      cs = comma == std::string_view::npos ? std::string_view() : cs.substr(comma + 1);
    }
    if (!has_cpu) continue;
    for (const char* mount : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) {
      std::error_code ec;
      if (std::filesystem::is_directory(root / mount, ec)) {
        limit = min_limit(limit, walk_limits(root / mount, path, read_cfs));
        break;
      }
    }
  }
  // No /proc/self/cgroup to go by: the root's own v2 limit, if any.
  if (!saw_v2 && proc_self_cgroup.empty()) limit = min_limit(limit, read_cpu_max(root));
  return limit;
}

int initial_num_threads() {
  int cpus = affinity_cpu_count();
  const int quota = cgroup_cpu_limit("/sys/fs/cgroup", read_small_file("/proc/self/cgroup"));
  if (quota > 0) cpus = std::min(cpus, quota);
  cpus = std::clamp(cpus, 1, kMaxThreads);
  return static_cast<int>(env_int("PRIMCACHE_NUM_THREADS", cpus, 1, kMaxThreads));
}

}  // namespace runtime_internal

namespace {

thread_pool& make_default_pool() {
  int size = g_child_size.load(std::memory_order_relaxed);
  if (size == 0) size = runtime_internal::initial_num_threads();
  // Never destroyed: kernels may run from static destructors of user code,
  // and idle workers sleeping on a futex cost nothing at exit.
  auto* fresh = new thread_pool(size);
  thread_pool* expected = nullptr;
  if (!g_pool.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
    delete fresh;  // another thread made it first
    return *expected;
  }
  return *fresh;
}

thread_pool& pool_instance() {
  thread_pool* p = g_pool.load(std::memory_order_acquire);
  if (p != nullptr) [[likely]]
    return *p;
  return make_default_pool();
}

}  // namespace

thread_pool& default_thread_pool() {
  return pool_instance();
}

void set_num_threads(int n) {
  pool_instance().resize(n);
  // The operators' view (the "num_threads" setting) follows the API; its
  // on_change resizes again, which is a no-op at the same size.
  runtime_internal::metrics();  // registers the setting on first use
  control().set_setting("num_threads", std::int64_t{n});
}

int get_num_threads() {
  return pool_instance().size();
}

}  // namespace primcache
