// Records which function-local statics a piece of code initializes for the
// first time (see guard_recorder.cpp: the executable interposes the C++
// runtime's __cxa_guard_acquire).
//
//   primcache_test::start_recording_guard_initializations();
//   ... the code ...
//   std::vector<void*> callers = primcache_test::stop_recording_guard_initializations();
#pragma once

#include <cstddef>
#include <vector>

namespace primcache_test {

inline constexpr std::size_t k_max_guard_initializations = 4096;

void start_recording_guard_initializations();
// The address inside each function whose static was initialized while
// recording, in order (the first k_max_guard_initializations).
std::vector<void*> stop_recording_guard_initializations();

}  // namespace primcache_test
