// fork() and the constant tensor caches: the process-wide lists of sets,
// and of caches and listener lists, and the pthread_atfork handlers of each
// that hold their locks across a fork (fork_handlers.hpp says which, and in
// what order).
#include <pthread.h>

#include <algorithm>
#include <new>
#include <thread>
#include <vector>

#include "fork_handlers.hpp"
#include "listener_list.hpp"
#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"

namespace primcache::const_cache_internal {
namespace {

// Never destroyed: the process's set (constant_caches()) is never destroyed
// either, and the handlers may run until exit.
struct live_caches {
  mutex mu;
  std::vector<constant_tensor_cache*> caches PRIMCACHE_GUARDED_BY(mu);
  std::vector<listener_list*> lists PRIMCACHE_GUARDED_BY(mu);
};

struct live_sets {
  mutex mu;
  std::vector<constant_tensor_caches*> sets PRIMCACHE_GUARDED_BY(mu);
};

void prepare_caches() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
void parent_caches() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
void child_caches() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
void prepare_sets() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
void parent_sets() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
void child_sets() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

live_caches& caches() {
  static live_caches* c = [] {
    auto* made = new live_caches;
    // The cache library registers its handlers with its first cache: this
    // one, if no other came first. Theirs registered first, their prepare
    // (writers' locks) runs after ours (capacity locks).
    { const concurrent_cache<int, int> first(0); }
    ::pthread_atfork(prepare_caches, parent_caches, child_caches);
    return made;
  }();
  return *c;
}

live_sets& sets() {
  static live_sets* s = [] {
    auto* made = new live_sets;
    // The caches' handlers registered first, their prepare (capacity locks)
    // runs after ours (map locks). Control's were registered with the
    // registry this set is made with, so its prepare (control's map lock)
    // runs after ours too.
    (void)caches();
    ::pthread_atfork(prepare_sets, parent_sets, child_sets);
    return made;
  }();
  return *s;
}

template <typename T>
void remove_from(std::vector<T*>& list, T* object) noexcept {
  list.erase(std::find(list.begin(), list.end(), object));
}

void prepare_caches() {
  live_caches& all = caches();
  all.mu.lock();
  for (constant_tensor_cache* c : all.caches) fork_handlers::lock_for_fork(*c);
  for (listener_list* l : all.lists) l->lock_for_fork();
}

void parent_caches() {
  live_caches& all = caches();
  for (listener_list* l : all.lists) l->unlock_after_fork();
  for (constant_tensor_cache* c : all.caches) fork_handlers::unlock_after_fork(*c);
  all.mu.unlock();
}

void child_caches() {
  live_caches& all = caches();
  for (listener_list* l : all.lists) {
    l->reset_in_child();
    l->unlock_after_fork();
  }
  for (constant_tensor_cache* c : all.caches) fork_handlers::unlock_after_fork(*c);
  all.mu.unlock();
}

void prepare_sets() {
  live_sets& all = sets();
  all.mu.lock();
  for (constant_tensor_caches* s : all.sets) fork_handlers::lock_for_fork(*s);
}

void parent_sets() {
  live_sets& all = sets();
  for (constant_tensor_caches* s : all.sets) fork_handlers::unlock_after_fork(*s);
  all.mu.unlock();
}

void child_sets() {
  live_sets& all = sets();
  for (constant_tensor_caches* s : all.sets) {
    fork_handlers::reset_in_child(*s);
    fork_handlers::unlock_after_fork(*s);
  }
  all.mu.unlock();
}

}  // namespace

void fork_handlers::add(constant_tensor_caches& set) {
  live_sets& all = sets();
  lock_guard g(all.mu);
  all.sets.push_back(&set);
}

void fork_handlers::remove(constant_tensor_caches& set) noexcept {
  live_sets& all = sets();
  lock_guard g(all.mu);
  remove_from(all.sets, &set);
}

void fork_handlers::add(constant_tensor_cache& cache) {
  live_caches& all = caches();
  lock_guard g(all.mu);
  all.caches.push_back(&cache);
}

void fork_handlers::remove(constant_tensor_cache& cache) noexcept {
  live_caches& all = caches();
  lock_guard g(all.mu);
  remove_from(all.caches, &cache);
}

void fork_handlers::add(listener_list& list) {
  live_caches& all = caches();
  lock_guard g(all.mu);
  all.lists.push_back(&list);
}

void fork_handlers::remove(listener_list& list) noexcept {
  live_caches& all = caches();
  lock_guard g(all.mu);
  remove_from(all.lists, &list);
}

void fork_handlers::lock_for_fork(constant_tensor_caches& set) {
  // Its holders wait only for locks the prepare handlers take after it (a
  // new device's: the caches' list, its capacity lock, control's map lock).
  set.mutex_.lock();
}

void fork_handlers::unlock_after_fork(constant_tensor_caches& set) {
  set.mutex_.unlock();
}

void fork_handlers::reset_in_child(constant_tensor_caches& set) {
  // Held by this thread: it forked from a callback of a kind setting, which
  // releases the lock when it returns.
  if (set.applier_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return;
  if (set.apply_.try_lock()) {
    set.apply_.unlock();
    return;
  }
  // Held by a thread this process does not have: it would never be
  // released. What it serializes is whole (the map lock and the capacity
  // locks were held across the fork), though that setting may have reached
  // only some of the kind's devices: the next setting of the kind reaches
  // them all. Built anew over the held lock: destroying a held std::mutex is
  // undefined, and it has no other state.
  new (&set.apply_) mutex;
  set.applier_.store(std::thread::id(), std::memory_order_relaxed);
}

void fork_handlers::lock_for_fork(constant_tensor_cache& cache) {
  // A capacity change or a flush holds it while it empties backing caches
  // (their writers' locks and grace periods: short, and the cache library's
  // prepare runs after this one); its callbacks run after it is released.
  // Only a callback heard under it for lack of memory runs under it: if that
  // callback forks, the lock is its own thread's, which releases it.
  if (cache.config_holder_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return;
  cache.config_.lock();
}

void fork_handlers::unlock_after_fork(constant_tensor_cache& cache) {
  // Stable across the fork: this thread holds every capacity lock it does
  // not hold in its own right, so no other thread changes the holder.
  if (cache.config_holder_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return;
  cache.config_.unlock();
}

}  // namespace primcache::const_cache_internal
