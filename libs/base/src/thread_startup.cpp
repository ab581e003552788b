#include "primcache/base/thread_startup.hpp"

#include <chrono>
#include <thread>

namespace primcache {

void thread_startups::wait_for(int spawned) const noexcept {
  // A start-up takes microseconds: a few yields, then short sleeps (the
  // starting thread may need this core).
  for (int tries = 0; started() < spawned; ++tries) {
    if (tries < 100) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

}  // namespace primcache
