// primcache/base/thread_annotations.hpp — Clang thread-safety annotations and
// the annotated mutexes they check.
//
// Under clang with -Wthread-safety (the tsan preset makes it an error) the
// compiler proves that data marked PRIMCACHE_GUARDED_BY(m) is only touched
// with m held. libstdc++'s std::mutex carries no capability attributes, so
// primcache code locks primcache::mutex / primcache::shared_mutex through the
// scoped guards below. Elsewhere the macros expand to nothing.
//
//   class counter {
//    public:
//     void add() { primcache::lock_guard g(mu_); ++n_; }
//    private:
//     primcache::mutex mu_;
//     int n_ PRIMCACHE_GUARDED_BY(mu_) = 0;
//   };
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define PRIMCACHE_THREAD_ATTR(x) __attribute__((x))
#else
#define PRIMCACHE_THREAD_ATTR(x)
#endif

#define PRIMCACHE_CAPABILITY(x) PRIMCACHE_THREAD_ATTR(capability(x))
#define PRIMCACHE_SCOPED_CAPABILITY PRIMCACHE_THREAD_ATTR(scoped_lockable)
#define PRIMCACHE_GUARDED_BY(x) PRIMCACHE_THREAD_ATTR(guarded_by(x))
#define PRIMCACHE_PT_GUARDED_BY(x) PRIMCACHE_THREAD_ATTR(pt_guarded_by(x))
#define PRIMCACHE_REQUIRES(...) PRIMCACHE_THREAD_ATTR(requires_capability(__VA_ARGS__))
#define PRIMCACHE_REQUIRES_SHARED(...) \
  PRIMCACHE_THREAD_ATTR(requires_shared_capability(__VA_ARGS__))
#define PRIMCACHE_ACQUIRE(...) PRIMCACHE_THREAD_ATTR(acquire_capability(__VA_ARGS__))
#define PRIMCACHE_ACQUIRE_SHARED(...) PRIMCACHE_THREAD_ATTR(acquire_shared_capability(__VA_ARGS__))
#define PRIMCACHE_RELEASE(...) PRIMCACHE_THREAD_ATTR(release_capability(__VA_ARGS__))
#define PRIMCACHE_RELEASE_SHARED(...) PRIMCACHE_THREAD_ATTR(release_shared_capability(__VA_ARGS__))
#define PRIMCACHE_RELEASE_GENERIC(...) \
  PRIMCACHE_THREAD_ATTR(release_generic_capability(__VA_ARGS__))
#define PRIMCACHE_EXCLUDES(...) PRIMCACHE_THREAD_ATTR(locks_excluded(__VA_ARGS__))
#define PRIMCACHE_RETURN_CAPABILITY(x) PRIMCACHE_THREAD_ATTR(lock_returned(x))
#define PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS PRIMCACHE_THREAD_ATTR(no_thread_safety_analysis)

namespace primcache {

// std::mutex with the capability attributes clang's analysis needs.
class PRIMCACHE_CAPABILITY("mutex") mutex {
 public:
  void lock() PRIMCACHE_ACQUIRE() { m_.lock(); }
  void unlock() PRIMCACHE_RELEASE() { m_.unlock(); }
  bool try_lock() PRIMCACHE_THREAD_ATTR(try_acquire_capability(true)) { return m_.try_lock(); }
  // For std::condition_variable, which needs the std::mutex itself.
  std::mutex& native() { return m_; }

 private:
  std::mutex m_;
};

// std::shared_mutex with the capability attributes.
class PRIMCACHE_CAPABILITY("shared_mutex") shared_mutex {
 public:
  void lock() PRIMCACHE_ACQUIRE() { m_.lock(); }
  void unlock() PRIMCACHE_RELEASE() { m_.unlock(); }
  void lock_shared() PRIMCACHE_ACQUIRE_SHARED() { m_.lock_shared(); }
  void unlock_shared() PRIMCACHE_RELEASE_SHARED() { m_.unlock_shared(); }

 private:
  std::shared_mutex m_;
};

// Holds a mutex exclusively for its scope.
template <typename Mutex>
class PRIMCACHE_SCOPED_CAPABILITY lock_guard {
 public:
  explicit lock_guard(Mutex& m) PRIMCACHE_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~lock_guard() PRIMCACHE_RELEASE() { m_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  Mutex& m_;
};

// Holds a shared_mutex in shared mode for its scope.
class PRIMCACHE_SCOPED_CAPABILITY shared_lock_guard {
 public:
  explicit shared_lock_guard(shared_mutex& m) PRIMCACHE_ACQUIRE_SHARED(m) : m_(m) {
    m_.lock_shared();
  }
  ~shared_lock_guard() PRIMCACHE_RELEASE() { m_.unlock_shared(); }
  shared_lock_guard(const shared_lock_guard&) = delete;
  shared_lock_guard& operator=(const shared_lock_guard&) = delete;

 private:
  shared_mutex& m_;
};

}  // namespace primcache
