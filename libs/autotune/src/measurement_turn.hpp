// The process's measuring turn: tune() (tuner.cpp) holds it while one
// measurement's flushes and runs execute — a candidate's cold runs, the
// default's second measurement, one warm confirmation — so that no two
// tunings in the process time their candidates at once. Two tunings timing
// at once each measure the other's load on the cores, caches and memory
// bandwidth they share (and one's flush evicts what the other's run just
// brought into cache): a candidate timed during the other's heavy phase
// looks slower, and a worse one can win. Builds, output checks and releases
// are outside the turn, so tunings still overlap there.
//
//   {
//     const autotune_internal::measurement_turn turn;  // waits for others' turns
//     for (...) { flush(); time(run); }
//   }
//
// Re-entrant on one thread: a thread that holds the turn (a tuning started
// inside a candidate's run or flush, on that thread) takes nothing and waits
// for nothing; only the outermost scope releases it. A callback that waits
// for another thread that is about to measure deadlocks, as with any lock.
//
// fork(): a child has only the forking thread, so a turn another thread held
// at the fork is made free in the child (held again when the forking thread
// was itself inside a turn: its scope releases it there). The fork does not
// wait for the turn (see measurement_turn.cpp).
//
// Thread-safety: any thread may hold a measurement_turn; one thread holds
// the turn at a time. Exceptions: the constructor may throw
// std::system_error (a mutex that cannot be locked).
#pragma once

namespace primcache::autotune_internal {

class measurement_turn {
 public:
  measurement_turn();
  ~measurement_turn();
  measurement_turn(const measurement_turn&) = delete;
  measurement_turn& operator=(const measurement_turn&) = delete;
};

}  // namespace primcache::autotune_internal
