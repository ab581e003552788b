// The built-in persistent kernel cache (persistent_cache.hpp): the attached
// store, the environment, the read-through on a primitive-cache miss and the
// write-behind queue.
#include "primcache/runtime/persistent_cache.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "persistent_cache_internal.hpp"
#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/base/thread_startup.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/fleet_key.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/registration.hpp"
#include "primcache/persist/sharded_redis_store.hpp"
#include "primcache/persist/store_spec.hpp"
#include "primcache/persist/tiered_store.hpp"
#include "primcache/runtime/version.hpp"
#include "primitive_cache_internal.hpp"

namespace primcache {
namespace runtime_internal {
namespace {

constexpr std::int64_t kDefaultCapacityMb = 1024;
constexpr std::int64_t kMaxCapacityMb = (std::int64_t{1} << 44) - 1;
constexpr std::size_t kDefaultQueueCapacity = 256;
// How long an exiting process waits for queued writes.
constexpr auto kExitFlushLimit = std::chrono::seconds(10);

std::span<const std::byte> as_bytes(const std::vector<std::uint8_t>& v) {
  return std::as_bytes(std::span<const std::uint8_t>(v.data(), v.size()));
}

// Process-wide counters (persistent_cache_stats), relaxed.
struct counters {
  std::atomic<std::uint64_t> hits{0}, misses{0}, rejected{0}, load_failed{0}, queued{0}, stored{0},
      exists{0}, refused{0}, failed{0}, dropped{0}, unserializable{0};
};
counters& counts() {
  static counters* c = new counters;  // never destroyed: written during exit
  return *c;
}

// primcache_persistent_cache_writes_total{result} and
// primcache_persistent_cache_load_failures_total{result}, registered on
// first attachment.
struct write_metrics {
  metric_counter stored, exists, refused, failed, dropped, unserializable;
  metric_counter load_rejected, load_kept;
};
const write_metrics& writes_metric() {
  static const write_metrics* m = [] {
    auto* w = new write_metrics;
    auto make = [](const char* result) {
      return control().counter("primcache_persistent_cache_writes_total",
                               "Writes of fresh compilations to the persistent cache, by result",
                               {{"result", result}});
    };
    w->stored = make("stored");
    w->exists = make("exists");
    w->refused = make("refused");
    w->failed = make("failed");
    w->dropped = make("dropped");
    w->unserializable = make("unserializable");
    auto load = [](const char* result) {
      return control().counter(
          "primcache_persistent_cache_load_failures_total",
          "Blobs the persistent cache returned that did not load: rejected (the entry was bad: "
          "erased, compiled, written again) or kept (a failure outside the entry: compiled)",
          {{"result", result}});
    };
    w->load_rejected = load("rejected");
    w->load_kept = load("kept");
    return w;
  }();
  return *m;
}

// Whether a blob that failed to load with `s` is itself bad — true for
// what blob loaders say of the bytes: corrupt_data (altered, truncated,
// not a blob), invalid_arguments (another descriptor's, device's or ISA's
// blob; a program binary the OpenCL driver refuses), unimplemented (a
// format or record version this build does not read; code for an ISA
// above this host's), not_found (code without a symbol it must define),
// permission_denied (code that calls what kernels may not). Anything else
// (out_of_memory, runtime_error: a driver or JIT failure) is this
// process's state at the time: the entry may be good, and other processes
// sharing it (a fleet's Redis) may load it.
bool entry_is_bad(status s) {
  switch (s) {
    case status::corrupt_data:
    case status::invalid_arguments:
    case status::unimplemented:
    case status::not_found:
    case status::permission_denied: return true;
    case status::success:
    case status::out_of_memory:
    case status::already_exists:
    case status::runtime_error: return false;
  }
  return false;  // a status this build does not know says nothing of the entry
}

class attachment;

// What control's "persistent" cache shows: the store, with the blobs it
// returned that the runtime could not load moved from hits to misses, and
// those that were bad (rejected, not load_failed) counted as corrupt
// entries.
class control_view final : public blob_store {
 public:
  control_view(blob_store& store, const std::atomic<std::uint64_t>& rejected,
               const std::atomic<std::uint64_t>& load_failed)
      : store_(store), rejected_(rejected), load_failed_(load_failed) {}
  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override {
    return store_.get(key);
  }
  put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) override {
    return store_.put(key, payload);
  }
  bool erase(std::span<const std::byte> key) override { return store_.erase(key); }
  std::uint64_t size() const override { return store_.size(); }
  std::uint64_t capacity() const override { return store_.capacity(); }
  void set_capacity(std::uint64_t megabytes) override { store_.set_capacity(megabytes); }
  void clear() override { store_.clear(); }
  blob_store_stats stats() const override {
    blob_store_stats s = store_.stats();
    const std::uint64_t r = std::min(rejected_.load(std::memory_order_relaxed), s.hits);
    const std::uint64_t f = std::min(load_failed_.load(std::memory_order_relaxed), s.hits - r);
    s.hits -= r + f;
    s.misses += r + f;
    s.corrupt_entries += r;
    return s;
  }
  bool read_only() const noexcept override { return store_.read_only(); }
  std::string describe() const override { return store_.describe(); }

 private:
  blob_store& store_;
  const std::atomic<std::uint64_t>& rejected_;
  const std::atomic<std::uint64_t>& load_failed_;
};

// One attached store. Creators hold it while they use it; detaching marks
// it, unregisters it and finishes its queued writes.
class attachment {
 public:
  attachment(std::shared_ptr<blob_store> s, bool env) : store(std::move(s)), from_env(env) {}
  std::shared_ptr<blob_store> store;
  bool from_env;
  // Attached in the process this one was forked from (reset_in_child): its
  // store's objects (a worker thread the child does not have, condition
  // variables that count that thread as a waiter) must never be destroyed
  // here, so detaching it in the child keeps it (retire).
  bool from_parent = false;
  std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::uint64_t> load_failed{0};
  std::atomic<bool> detached{false};
  control_view view{*store, rejected, load_failed};
  blob_store_registration registration;
};

struct write_item {
  std::shared_ptr<attachment> to;
  std::vector<std::uint8_t> id;
  std::shared_ptr<const backend::primitive_impl> impl;
};

// The write-behind queue: bounded, one background thread. Never destroyed
// (the thread is detached and may outlive static destruction).
class writer {
 public:
  // The hand-off: false (counted) when the queue is full or the store was
  // detached meanwhile.
  bool push(write_item item) PRIMCACHE_EXCLUDES(mu_) {
    {
      lock_guard g(mu_);
      if (!item.to->detached.load(std::memory_order_acquire) && queue_.size() < capacity_) {
        start_locked();
        queue_.push_back(std::move(item));
        ready_->notify_one();
        return true;
      }
    }
    counts().dropped.fetch_add(1, std::memory_order_relaxed);
    writes_metric().dropped.add();
    return false;
  }

  // Waits until the queue is empty and nothing is being written, or until
  // `limit` passes.
  void flush(std::chrono::steady_clock::duration limit = std::chrono::steady_clock::duration::max())
      PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    const bool bounded = limit != std::chrono::steady_clock::duration::max();
    const auto deadline = bounded ? std::chrono::steady_clock::now() + limit
                                  : std::chrono::steady_clock::time_point::max();
    while (!queue_.empty() || busy_) {
      if (!bounded) {
        idle_->wait(mu_);
      } else if (idle_->wait_until(mu_, deadline) == std::cv_status::timeout) {
        return;
      }
    }
  }

  void set_capacity(std::size_t n) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    capacity_ = n;
  }

  std::size_t depth() PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    return queue_.size() + (busy_ ? 1 : 0);
  }

  // fork(): the prepare handler waits for the write in progress and for the
  // thread's start-up, and holds the locks across fork, so the child never
  // starts with a lock the writer thread held (the store's, the C library's,
  // or under the AddressSanitizer of GCC 12 and clang 15 the allocator's: thread_startup.hpp);
  // in the child the thread does not exist, so the queue is abandoned (its
  // items are the parent's to write) and a new thread starts on the next
  // write.
  void lock_for_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    write_mu_.lock();
    mu_.lock();
    startup_.wait_for(started_ ? 1 : 0);
  }
  void unlock_after_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    mu_.unlock();
    write_mu_.unlock();
  }
  void reset_in_child() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    startup_.reset();
    static auto* abandoned = new std::vector<write_item>;
    for (write_item& i : queue_) abandoned->push_back(std::move(i));
    queue_.clear();
    // The parent's writer thread (and any flush) waited on these, and
    // glibc's condition variable still counts them as waiters here: a
    // notification that must switch groups waits for them to leave,
    // forever (a child's second write hung in pthread_cond_signal). Made
    // anew; the old ones are kept, never destroyed (destroying one waits
    // for its waiters too), in a list that stays reachable, so
    // LeakSanitizer does not count them.
    static auto* abandoned_cvs = new std::vector<std::unique_ptr<std::condition_variable_any>>;
    abandoned_cvs->push_back(std::move(ready_));
    abandoned_cvs->push_back(std::move(idle_));
    ready_ = std::make_unique<std::condition_variable_any>();
    idle_ = std::make_unique<std::condition_variable_any>();
    busy_ = false;
    started_ = false;
  }

 private:
  void start_locked() PRIMCACHE_REQUIRES(mu_) {
    if (started_) return;
    started_ = true;
    static std::once_flag at_exit;
    std::call_once(at_exit, [] { std::atexit(flush_at_exit); });
    std::thread([this] { run(); }).detach();
  }
  static void flush_at_exit();

  void run() PRIMCACHE_EXCLUDES(mu_, write_mu_) {
    startup_.mark_started();
    for (;;) {
      write_item item;
      {
        lock_guard g(mu_);
        while (queue_.empty()) ready_->wait(mu_);
        item = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      lock_guard writing(write_mu_);  // a fork waits for the write
      write(item);
      item = write_item{};  // release the impl and the store outside mu_
      lock_guard g(mu_);
      busy_ = false;
      if (queue_.empty()) idle_->notify_all();
    }
  }

  static void write(const write_item& item) {
    counters& c = counts();
    const write_metrics& m = writes_metric();
    std::vector<std::uint8_t> blob;
    try {
      blob = item.impl->serialize();
    } catch (const error& e) {
      if (e.code() == status::unimplemented) {
        c.unserializable.fetch_add(1, std::memory_order_relaxed);
        m.unserializable.add();
      } else {
        c.failed.fetch_add(1, std::memory_order_relaxed);
        m.failed.add();
      }
      return;
    } catch (const std::exception&) {
      c.failed.fetch_add(1, std::memory_order_relaxed);
      m.failed.add();
      return;
    }
    put_result r;
    try {
      r = item.to->store->put(as_bytes(item.id), as_bytes(blob));
    } catch (const std::exception& e) {
      r = {put_status::failed, e.what()};
    }
    switch (r.status) {
      case put_status::stored:
        c.stored.fetch_add(1, std::memory_order_relaxed);
        m.stored.add();
        break;
      case put_status::exists:
        c.exists.fetch_add(1, std::memory_order_relaxed);
        m.exists.add();
        break;
      case put_status::read_only:
      case put_status::too_large:
        c.refused.fetch_add(1, std::memory_order_relaxed);
        m.refused.add();
        break;
      case put_status::failed:
        c.failed.fetch_add(1, std::memory_order_relaxed);
        m.failed.add();
        break;
    }
    if (r.status == put_status::failed && verbose_level() >= 1) {
      verbose_print("primcache_verbose,persistent:write_failed," +
                    std::string(to_string(item.impl->pd().kind())) + "," + item.impl->pd().name() +
                    "," + r.message);
    }
  }

  mutex write_mu_;  // held by the thread while it writes; taken before mu_
  mutex mu_;
  thread_startups startup_;  // the thread past its start-up (lock_for_fork)
  // Made anew in a fork child (reset_in_child says why).
  std::unique_ptr<std::condition_variable_any> ready_ =
      std::make_unique<std::condition_variable_any>();  // an item was queued
  std::unique_ptr<std::condition_variable_any> idle_ =
      std::make_unique<std::condition_variable_any>();  // the queue ran empty
  std::deque<write_item> queue_ PRIMCACHE_GUARDED_BY(mu_);
  std::size_t capacity_ PRIMCACHE_GUARDED_BY(mu_) = kDefaultQueueCapacity;
  bool busy_ PRIMCACHE_GUARDED_BY(mu_) = false;
  bool started_ PRIMCACHE_GUARDED_BY(mu_) = false;
};

writer& the_writer() {
  static writer* w = new writer;
  return *w;
}

void finish_store_writes(std::chrono::steady_clock::duration limit);

void writer::flush_at_exit() {
  const auto start = std::chrono::steady_clock::now();
  the_writer().flush(kExitFlushLimit);
  finish_store_writes(kExitFlushLimit - (std::chrono::steady_clock::now() - start));
}

// The attached store and whether the environment has been read.
class state {
 public:
  std::shared_ptr<attachment> get() PRIMCACHE_EXCLUDES(mu_, config_mu_) {
    {
      lock_guard g(mu_);
      if (configured_) return current_;
    }
    lock_guard c(config_mu_);
    {
      lock_guard g(mu_);
      if (configured_) return current_;
    }
    release_inherited_name();
    std::shared_ptr<attachment> a = from_environment();
    lock_guard g(mu_);
    current_ = std::move(a);
    configured_ = true;
    return current_;
  }

  void set(std::shared_ptr<blob_store> store) PRIMCACHE_EXCLUDES(mu_, config_mu_) {
    lock_guard c(config_mu_);
    std::shared_ptr<attachment> old;
    {
      lock_guard g(mu_);
      old = std::move(current_);
      current_ = nullptr;
      configured_ = true;
    }
    retire(old);
    release_inherited_name();
    if (!store) return;
    auto a = std::make_shared<attachment>(std::move(store), false);
    a->registration = register_blob_store(a->view, "persistent");
    writes_metric();
    lock_guard g(mu_);
    current_ = std::move(a);
  }

  // The attached store, without reading the environment.
  std::shared_ptr<attachment> current() PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    return current_;
  }

  void lock_for_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    config_mu_.lock();
    mu_.lock();
  }
  void unlock_after_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    mu_.unlock();
    config_mu_.unlock();
  }
  // In a forked child: a store the environment attached is opened anew on
  // first use (a directory store's lock must not be shared with the
  // parent); one the application attached stays (see the header).
  // The parent's attachment is kept, never destroyed: its store's objects
  // (a lock descriptor, a worker thread the child does not have) are the
  // parent's. Its registration in control as "persistent" is released when
  // the child attaches a store (release_inherited_name), not here: this
  // handler may run before control's own, which forgets the calls the
  // parent's threads had in progress on it, and until then releasing it
  // would wait for them.
  void reset_in_child() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    if (current_ && current_->from_env) {
      abandoned().push_back(std::move(current_));
      inherited_ = abandoned().back().get();
      current_ = nullptr;
      configured_ = false;
    } else if (current_) {
      current_->from_parent = true;
    }
  }

 private:
  // The parent's attachments a fork child let go of: kept, never destroyed
  // (reachable, so LeakSanitizer does not count them).
  static std::vector<std::shared_ptr<attachment>>& abandoned() {
    static auto* kept = new std::vector<std::shared_ptr<attachment>>;
    return *kept;
  }

  static void retire(const std::shared_ptr<attachment>& old) {
    if (!old) return;
    old->detached.store(true, std::memory_order_release);
    old->registration.reset();
    the_writer().flush();
    // Serialized by config_mu_, which every caller holds.
    if (old->from_parent) abandoned().push_back(old);
  }

  // In a fork child: the parent's environment store gives up the name
  // "persistent" for the child's own.
  void release_inherited_name() PRIMCACHE_REQUIRES(config_mu_) {
    if (inherited_ == nullptr) return;
    inherited_->registration.reset();
    inherited_ = nullptr;
  }

  static std::shared_ptr<attachment> from_environment() {
    std::optional<std::string> dir = env_string(persistent_cache_dir_env);
    std::optional<std::string> redis = env_string(persistent_cache_redis_env);
    if (redis && !redis->empty()) {
      try {
        parse_redis_url_list(*redis);  // one URL, or a comma-separated list (sharded)
      } catch (const error& e) {
        report_malformed_env(persistent_cache_redis_env, redact_redis_url_list(*redis), e.message(),
                             "no remote tier");
        redis.reset();
      }
    }
    const bool has_dir = dir && !dir->empty();
    const bool has_redis = redis && !redis->empty();
    if (!has_dir && !has_redis) return nullptr;
    const std::int64_t capacity =
        has_dir ? env_int(persistent_cache_capacity_env, kDefaultCapacityMb, 0, kMaxCapacityMb)
                : kDefaultCapacityMb;
    std::shared_ptr<blob_store> store;
    try {
      store = open_persistent_cache(has_dir ? *dir : std::string(),
                                    static_cast<std::uint64_t>(capacity),
                                    has_redis ? *redis : std::string());
    } catch (const error& e) {
      report_malformed_env(has_dir ? persistent_cache_dir_env : persistent_cache_redis_env,
                           has_dir ? *dir : redact_redis_url_list(*redis), e.message(),
                           "no persistent cache");
      return nullptr;
    }
    auto a = std::make_shared<attachment>(std::move(store), true);
    try {
      a->registration = register_blob_store(a->view, "persistent");
    } catch (const error& e) {
      report_malformed_env(has_dir ? persistent_cache_dir_env : persistent_cache_redis_env,
                           has_dir ? *dir : redact_redis_url_list(*redis), e.message(),
                           "no persistent cache");
      return nullptr;
    }
    writes_metric();
    return a;
  }

  mutex config_mu_;  // serializes attaching (and reading the environment)
  mutex mu_;         // taken after config_mu_ when both are
  std::shared_ptr<attachment> current_ PRIMCACHE_GUARDED_BY(mu_);
  // In a fork child whose parent had a store from the environment: that
  // store's attachment, which still holds control's "persistent" until the
  // child attaches its own (reset_in_child).
  attachment* inherited_ PRIMCACHE_GUARDED_BY(config_mu_) = nullptr;
  bool configured_ PRIMCACHE_GUARDED_BY(mu_) = false;
};

void fork_prepare();
void fork_parent();
void fork_child();

state& the_state() {
  static state* s = [] {
    auto* made = new state;  // never destroyed, as the primitive cache
    // Control's atfork handlers first, so that its prepare runs after this
    // one's (prepare handlers run in reverse order): a thread holding
    // config_mu_ takes control's map lock (registering, unregistering), so
    // control's prepare holding that lock first would leave this prepare
    // waiting for config_mu_ for ever.
    (void)control();
    ::pthread_atfork(fork_prepare, fork_parent, fork_child);
    return made;
  }();
  return *s;
}

// A store with writes of its own behind put() (the tiered store's remote
// writes): wait for them too, at most `limit` — a process that exits right
// after its creations would otherwise leave its kernels out of the fleet's
// Redis.
void finish_store_writes(std::chrono::steady_clock::duration limit) {
  std::shared_ptr<attachment> a = the_state().current();
  auto* tiered = a ? dynamic_cast<tiered_store*>(a->store.get()) : nullptr;
  if (tiered == nullptr || limit <= std::chrono::steady_clock::duration::zero()) return;
  if (limit == std::chrono::steady_clock::duration::max()) {
    tiered->flush();
    return;
  }
  // Bounded: the flush runs on its own thread, which holds the store.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([a, tiered, done] {
    tiered->flush();
    done->set_value();
  }).detach();
  finished.wait_for(limit);
}

void fork_prepare() {
  the_state().lock_for_fork();
  the_writer().lock_for_fork();
}
void fork_parent() {
  the_writer().unlock_after_fork();
  the_state().unlock_after_fork();
}
void fork_child() {
  the_writer().reset_in_child();
  the_writer().unlock_after_fork();
  the_state().reset_in_child();
  the_state().unlock_after_fork();
}

std::string who(const backend::primitive_desc_impl& pd) {
  return std::string(to_string(pd.kind())) + "," + pd.name();
}

}  // namespace

std::vector<std::uint8_t> cache_blob_id_of(const backend::primitive_desc_impl& pd) {
  // What names the code, plus what makes this library's code for that name
  // differ from another build's: the key bytes after the library version
  // and the build identity (a hash of the code-generating sources and LLVM).
  key_writer w;
  w.str("primcache-blob-id").u32(1);
  w.str(version().version).str(version().build_identity);
  w.raw(pd.cache_key().bytes());
  const key k = w.finish();
  std::vector<std::uint8_t> out(k.size());
  std::memcpy(out.data(), k.data(), k.size());
  return out;
}

persistent_created create_through_persistent_cache(const backend::primitive_desc_impl& pd,
                                                   const engine& eng) {
  std::shared_ptr<attachment> a = the_state().get();
  if (!a) return {pd.create_impl(eng), persistent_outcome::none};
  counters& c = counts();
  std::vector<std::uint8_t> id = cache_blob_id_of(pd);
  std::optional<std::vector<std::byte>> blob;
  try {
    blob = a->store->get(as_bytes(id));
  } catch (const std::exception& e) {  // a store breaking its contract: a miss
    if (verbose_level() >= 1) {
      verbose_print("primcache_verbose,persistent:get_failed," + who(pd) + "," + e.what());
    }
  }
  bool replaces_entry = false;  // a bad entry, erased once its replacement compiled
  if (blob) {
    // Why the blob did not load, when it did not.
    std::optional<error> failure;
    try {
      const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(blob->data()),
                                                blob->size());
      auto impl = pd.create_impl_from_blob(eng, bytes);
      c.hits.fetch_add(1, std::memory_order_relaxed);
      return {std::move(impl), persistent_outcome::hit};
    } catch (const error& e) {
      failure = e;
    } catch (const std::bad_alloc&) {
      failure = error(status::out_of_memory, "out of memory while loading the blob");
    }
    if (!entry_is_bad(failure->code())) {
      // Not the entry's fault: kept (other processes, a fleet sharing it,
      // may load it), compiled, and nothing queued to write over it.
      c.load_failed.fetch_add(1, std::memory_order_relaxed);
      a->load_failed.fetch_add(1, std::memory_order_relaxed);
      writes_metric().load_kept.add();
      if (verbose_level() >= 1) {
        verbose_print("primcache_verbose,persistent:load_failed," + who(pd) + "," +
                      std::string(failure->what()));
      }
      c.misses.fetch_add(1, std::memory_order_relaxed);
      blob.reset();  // its bytes are not needed while compiling (memory may be short)
      return {pd.create_impl(eng), persistent_outcome::miss};
    }
    // Bad: counted, compiled afresh, then removed (and written again).
    c.rejected.fetch_add(1, std::memory_order_relaxed);
    a->rejected.fetch_add(1, std::memory_order_relaxed);
    writes_metric().load_rejected.add();
    if (verbose_level() >= 1) {
      verbose_print("primcache_verbose,persistent:rejected," + who(pd) + "," + failure->message());
    }
    blob.reset();
    replaces_entry = true;
  }
  c.misses.fetch_add(1, std::memory_order_relaxed);
  auto impl = pd.create_impl(eng);
  if (replaces_entry) {
    // Erased only once its replacement compiled: a process that cannot
    // compile either (an OpenCL driver that cannot write its own cache
    // directory refuses a binary and the source alike, with the status a
    // bad binary gets) would otherwise take a good entry from the fleet.
    try {
      a->store->erase(as_bytes(id));
    } catch (const std::exception&) {
    }
  }
  if (the_writer().push({std::move(a), std::move(id), impl})) {
    c.queued.fetch_add(1, std::memory_order_relaxed);
  }
  return {std::move(impl), persistent_outcome::miss};
}

}  // namespace runtime_internal

void set_persistent_cache(std::shared_ptr<blob_store> store) {
  runtime_internal::the_state().set(std::move(store));
}

std::shared_ptr<blob_store> get_persistent_cache() {
  auto a = runtime_internal::the_state().get();
  return a ? a->store : nullptr;
}

void detach_persistent_cache() {
  set_persistent_cache(nullptr);
}

void flush_persistent_cache_writes() {
  runtime_internal::the_writer().flush();
  runtime_internal::finish_store_writes(std::chrono::steady_clock::duration::max());
}

void set_persistent_cache_write_queue_capacity(std::size_t primitives) {
  runtime_internal::the_writer().set_capacity(primitives);
}

std::shared_ptr<blob_store> open_persistent_cache(const std::string& dir, std::uint64_t capacity_mb,
                                                  const std::string& redis_url) {
  // The store borrows the fleet key: both live in one object.
  struct owned {
    std::optional<fleet_key> key;
    std::unique_ptr<blob_store> store;  // destroyed before the key
  };
  auto key = fleet_key_from_env();
  if (!key) throw error(key.why().code, key.why().message);
  auto o = std::make_shared<owned>();
  o->key = std::move(key.value());
  store_spec spec;
  spec.dir = dir;
  spec.capacity_mb = capacity_mb;
  spec.redis_url = redis_url;
  spec.read_only = readonly_from_env();
  spec.format.library_version = std::string(version().version) + "+" + version().build_identity;
  spec.format.key = o->key ? &*o->key : nullptr;
  o->store = open_store(spec);
  blob_store* s = o->store.get();
  return std::shared_ptr<blob_store>(std::move(o), s);
}

std::shared_ptr<blob_store> open_persistent_cache_dir(const std::string& dir,
                                                      std::uint64_t capacity_mb) {
  if (dir.empty()) {
    throw error(status::invalid_arguments, "the persistent cache directory is empty");
  }
  return open_persistent_cache(dir, capacity_mb, std::string());
}

persistent_cache_stats get_persistent_cache_stats() {
  const auto& c = runtime_internal::counts();
  persistent_cache_stats s;
  s.hits = c.hits.load(std::memory_order_relaxed);
  s.misses = c.misses.load(std::memory_order_relaxed);
  s.rejected = c.rejected.load(std::memory_order_relaxed);
  s.load_failed = c.load_failed.load(std::memory_order_relaxed);
  s.writes_queued = c.queued.load(std::memory_order_relaxed);
  s.writes_stored = c.stored.load(std::memory_order_relaxed);
  s.writes_exists = c.exists.load(std::memory_order_relaxed);
  s.writes_refused = c.refused.load(std::memory_order_relaxed);
  s.writes_failed = c.failed.load(std::memory_order_relaxed);
  s.writes_dropped = c.dropped.load(std::memory_order_relaxed);
  s.unserializable = c.unserializable.load(std::memory_order_relaxed);
  s.queue_depth = runtime_internal::the_writer().depth();
  return s;
}

}  // namespace primcache
