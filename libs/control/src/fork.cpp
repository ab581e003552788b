// fork() and the control registries: every registry_state is on one list,
// and pthread_atfork handlers (registered with the first registry) hold each
// registry's locks across a fork and reset, in the child, what the parent's
// other threads left behind (registry_state::reset_in_child).
#include <pthread.h>

#include <algorithm>
#include <new>
#include <vector>

#include "primcache/base/thread_annotations.hpp"
#include "registry_state.hpp"

namespace primcache::control_internal {
namespace {

struct live_registries {
  mutex mu;
  std::vector<registry_state*> states PRIMCACHE_GUARDED_BY(mu);
};

live_registries& registries() {
  // Never destroyed: a registry may outlive static destruction (the global
  // one is itself never destroyed), and the handlers may run until exit.
  static live_registries* r = [] {
    auto* made = new live_registries;
    ::pthread_atfork(
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          live_registries& all = registries();
          all.mu.lock();
          for (registry_state* s : all.states) s->lock_for_fork();
        },
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          live_registries& all = registries();
          for (registry_state* s : all.states) s->unlock_after_fork();
          all.mu.unlock();
        },
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          live_registries& all = registries();
          for (registry_state* s : all.states) s->reset_in_child();
          all.mu.unlock();
        });
    return made;
  }();
  return *r;
}

}  // namespace

registry_state::registry_state() {
  live_registries& all = registries();
  lock_guard g(all.mu);
  all.states.push_back(this);
}

registry_state::~registry_state() {
  live_registries& all = registries();
  lock_guard g(all.mu);
  all.states.erase(std::find(all.states.begin(), all.states.end(), this));
}

void registry_state::lock_for_fork() {
  events.lock_for_fork();
  mu.lock();
  for (const auto& [name, entry] : settings) entry->lock_for_fork();
}

void registry_state::unlock_after_fork() {
  for (const auto& [name, entry] : settings) entry->unlock_after_fork();
  mu.unlock();
  events.unlock_after_fork();
}

void registry_state::reset_in_child() {
  for (const auto& [name, entry] : caches) entry->reset_in_child();
  for (const auto& [name, entry] : settings) {
    entry->reset_in_child();
    entry->unlock_after_fork();
  }
  // Not unlocked but made anew: glibc's rwlock remembers its writer by
  // thread id, and the child's thread has a new one, so an unlock here would
  // count as a reader's and leave the lock held by a writer for ever.
  new (&mu) shared_mutex;
  events.unlock_after_fork();
}

}  // namespace primcache::control_internal
