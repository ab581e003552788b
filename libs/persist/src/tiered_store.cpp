#include "primcache/persist/tiered_store.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/base/thread_startup.hpp"

namespace primcache {
namespace {

struct write_job {
  enum class target { local, remote };
  target to;
  std::vector<std::byte> key;
  std::vector<std::byte> payload;
  std::size_t bytes() const { return key.size() + payload.size(); }
};

}  // namespace

struct tiered_store::state {
  std::unique_ptr<blob_store> local;
  std::unique_ptr<blob_store> remote;
  tiered_store_options options;

  std::atomic<std::uint64_t> hits{0}, misses{0}, remote_hits{0}, dropped{0};

  mutex mu;
  std::condition_variable_any wake;  // a job was queued, or stop
  std::condition_variable_any done;  // a job finished
  std::deque<write_job> queue PRIMCACHE_GUARDED_BY(mu);
  std::size_t queued_bytes PRIMCACHE_GUARDED_BY(mu) = 0;
  std::uint64_t enqueued PRIMCACHE_GUARDED_BY(mu) = 0;   // jobs ever queued
  std::uint64_t completed PRIMCACHE_GUARDED_BY(mu) = 0;  // jobs ever finished
  bool stop PRIMCACHE_GUARDED_BY(mu) = false;
  // The job the writer is running (nullptr when none): discard() waits for
  // it.
  const write_job* in_flight PRIMCACHE_GUARDED_BY(mu) = nullptr;
  std::thread worker;
  thread_startups worker_started;  // open() returns once the worker is past its start-up

  // Queues a job, or drops it (counted) when the queue is full.
  void enqueue(write_job job) PRIMCACHE_EXCLUDES(mu) {
    {
      lock_guard g(mu);
      const std::size_t b = job.bytes();
      if (queue.size() >= options.max_queued_writes ||
          queued_bytes + b > options.max_queued_bytes) {
        dropped.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      queued_bytes += b;
      ++enqueued;
      queue.push_back(std::move(job));
    }
    wake.notify_one();
  }

  // Takes the queued jobs `matches` picks out of the queue (counted as
  // finished for flush(), not as dropped: the caller wants them gone), then
  // waits for the job being written if it is one of them. What an erase()
  // or clear() then removes from the stores stays removed: no write queued
  // before it lands after it.
  template <typename Matches>
  void discard(Matches matches) PRIMCACHE_EXCLUDES(mu) {
    bool took = false;
    {
      lock_guard g(mu);
      for (auto it = queue.begin(); it != queue.end();) {
        if (matches(*it)) {
          queued_bytes -= it->bytes();
          ++completed;
          it = queue.erase(it);
          took = true;
        } else {
          ++it;
        }
      }
      while (in_flight != nullptr && matches(*in_flight)) done.wait(mu);
    }
    if (took) done.notify_all();
  }

  // The background writer: one job at a time, no lock held while a store
  // is called. Runs the queue dry before it honours stop.
  void run() PRIMCACHE_EXCLUDES(mu) {
    worker_started.mark_started();
    for (;;) {
      write_job job;
      {
        lock_guard g(mu);
        while (queue.empty() && !stop) wake.wait(mu);
        if (queue.empty()) return;  // stop, and nothing left
        job = std::move(queue.front());
        queue.pop_front();
        queued_bytes -= job.bytes();
        in_flight = &job;
      }
      try {
        blob_store& to = job.to == write_job::target::local ? *local : *remote;
        to.put(job.key, job.payload);  // failures are counted by the store itself
      } catch (...) {
        // A store's put reports failures as values; std::bad_alloc is all
        // that can get here. The write is lost, like a dropped one.
        dropped.fetch_add(1, std::memory_order_relaxed);
      }
      {
        lock_guard g(mu);
        ++completed;
        in_flight = nullptr;
      }
      done.notify_all();
    }
  }
};

std::unique_ptr<tiered_store> tiered_store::open(std::unique_ptr<blob_store> local,
                                                 std::unique_ptr<blob_store> remote,
                                                 tiered_store_options options) {
  if (!local || !remote) {
    throw error(status::invalid_arguments,
                "tiered store: the local and the remote store are both required");
  }
  auto s = std::make_unique<state>();
  s->local = std::move(local);
  s->remote = std::move(remote);
  s->options = options;
  state* raw = s.get();
  s->worker = std::thread([raw] { raw->run(); });
  // A thread allocates while it starts: a fork() right after open() must not
  // copy an allocator lock the worker holds (thread_startup.hpp).
  s->worker_started.wait_for(1);
  return std::unique_ptr<tiered_store>(new tiered_store(std::move(s)));
}

tiered_store::tiered_store(std::unique_ptr<state> s) : s_(std::move(s)) {}

tiered_store::~tiered_store() {
  {
    lock_guard g(s_->mu);
    s_->stop = true;
  }
  s_->wake.notify_all();
  s_->worker.join();
}

std::optional<std::vector<std::byte>> tiered_store::get(std::span<const std::byte> key) {
  state& s = *s_;
  if (auto v = s.local->get(key)) {
    s.hits.fetch_add(1, std::memory_order_relaxed);
    return v;
  }
  std::optional<std::vector<std::byte>> v = s.remote->get(key);
  if (!v) {
    s.misses.fetch_add(1, std::memory_order_relaxed);
    return v;
  }
  s.hits.fetch_add(1, std::memory_order_relaxed);
  s.remote_hits.fetch_add(1, std::memory_order_relaxed);
  if (!s.local->read_only()) {
    s.enqueue({write_job::target::local, {key.begin(), key.end()}, *v});
  }
  return v;
}

put_result tiered_store::put(std::span<const std::byte> key, std::span<const std::byte> payload) {
  state& s = *s_;
  put_result r = s.local->put(key, payload);
  if (r.status != put_status::exists && !s.remote->read_only()) {
    s.enqueue(
        {write_job::target::remote, {key.begin(), key.end()}, {payload.begin(), payload.end()}});
  }
  return r;
}

bool tiered_store::erase(std::span<const std::byte> key) {
  s_->discard([key](const write_job& job) { return std::ranges::equal(job.key, key); });
  const bool a = s_->local->erase(key);
  const bool b = s_->remote->erase(key);
  return a || b;
}

std::uint64_t tiered_store::size() const {
  return s_->local->size();
}

std::uint64_t tiered_store::capacity() const {
  return s_->local->capacity();
}

void tiered_store::set_capacity(std::uint64_t megabytes) {
  s_->local->set_capacity(megabytes);
}

void tiered_store::clear() {
  s_->discard([](const write_job&) { return true; });
  s_->local->clear();
  s_->remote->clear();
}

blob_store_stats tiered_store::stats() const {
  const state& s = *s_;
  const blob_store_stats l = s.local->stats();
  const blob_store_stats r = s.remote->stats();
  blob_store_stats out;
  out.hits = s.hits.load(std::memory_order_relaxed);
  out.misses = s.misses.load(std::memory_order_relaxed);
  out.writes = l.writes;
  out.bytes = l.bytes;
  out.bytes_read = l.bytes_read + r.bytes_read;
  out.bytes_written = l.bytes_written;
  out.evictions = l.evictions;
  out.corrupt_entries = l.corrupt_entries + r.corrupt_entries;
  out.errors = l.errors + r.errors;
  out.refusals = l.refusals;
  out.remote_hits = s.remote_hits.load(std::memory_order_relaxed);
  out.remote_errors = r.remote_errors;
  out.timeouts = r.timeouts;
  out.breaker_state = r.breaker_state;
  out.breaker_opens = r.breaker_opens;
  out.breaker_rejections = r.breaker_rejections;
  out.dropped_writes =
      s.dropped.load(std::memory_order_relaxed) + l.dropped_writes + r.dropped_writes;
  return out;
}

bool tiered_store::read_only() const noexcept {
  return s_->local->read_only();
}

std::vector<blob_store_shard> tiered_store::shards() const {
  return s_->remote->shards();
}

std::string tiered_store::describe() const {
  return s_->local->describe() + ", then " + s_->remote->describe();
}

void tiered_store::flush() {
  state& s = *s_;
  lock_guard g(s.mu);
  const std::uint64_t target = s.enqueued;
  while (s.completed < target) s.done.wait(s.mu);
}

std::size_t tiered_store::queued_writes() const {
  lock_guard g(s_->mu);
  return s_->queue.size();
}

blob_store& tiered_store::local() noexcept {
  return *s_->local;
}

blob_store& tiered_store::remote() noexcept {
  return *s_->remote;
}

}  // namespace primcache
