#include "measurement_turn.hpp"

#include <pthread.h>

#include <mutex>
#include <new>

namespace primcache::autotune_internal {
namespace {

// One for the process, not one per object (STYLE.md 10's rule is for data
// an object owns): what it shares out is the machine every tuning measures
// on, and tune() is a free function with no object to hold it.
//
// Constant-initialized (std::mutex's constructor is constexpr), so no
// guard variable exists that a fork could copy half-taken, and never
// destroyed (the union's destructor does nothing): a tuning may still run
// on another thread during static destruction.
union never_destroyed_mutex {
  constexpr never_destroyed_mutex() : mutex() {}
  ~never_destroyed_mutex() {}
  std::mutex mutex;
};
constinit never_destroyed_mutex g_turn;

// How many measurement_turn scopes are open on this thread: only the
// outermost takes and releases g_turn (a nested tuning measures inside its
// caller's turn).
constinit thread_local int tl_depth = 0;

// The child of a fork() has only the forking thread: a turn that another
// thread held stays held there for ever unless made anew. Made anew, not
// unlocked (destroying or unlocking another thread's std::mutex is
// undefined), as read_mostly_lock remakes its grace-period mutex; and held
// again when the forking thread was inside a turn itself, so its scope's
// release stays balanced.
//
// There is no prepare handler waiting for the turn (tune_table's save gate
// has one: a save is short I/O): a turn lasts as long as the caller's run
// callbacks (a PoCL convolution's confirmation, seconds), which may wait for
// the thread that forks, and other libraries' prepare handlers that run
// before this one may hold locks a run needs (the thread pool's, taken when
// a run creates the default pool) — a fork would wait for ever. The child
// needs nothing the measuring threads were doing: they are not there.
void remake_in_child() noexcept {
  new (&g_turn.mutex) std::mutex;
  if (tl_depth > 0) g_turn.mutex.lock();
}

// At load time, before any thread can take the turn (so before any fork
// can find it taken), and with no guard variable of its own.
[[maybe_unused]] const bool g_fork_handler_registered =
    ::pthread_atfork(nullptr, nullptr, &remake_in_child) == 0;

}  // namespace

measurement_turn::measurement_turn() {
  if (tl_depth == 0) g_turn.mutex.lock();
  ++tl_depth;
}

measurement_turn::~measurement_turn() {
  if (--tl_depth == 0) g_turn.mutex.unlock();
}

}  // namespace primcache::autotune_internal
