// guarded_bytes.hpp — test memory that ends where an unreadable page
// begins, so that a kernel reading past the bytes it was given faults (the
// release kernel tests run without AddressSanitizer, which does not
// instrument generated code anyway).
//
//   cpu_test::guarded_bytes ops(n * sizeof(float));
//   std::memcpy(ops.data(), values.data(), n * sizeof(float));
#pragma once

#include <cstddef>

#include <sys/mman.h>
#include <unistd.h>
#include <catch2/catch.hpp>

namespace cpu_test {

class guarded_bytes {
 public:
  explicit guarded_bytes(std::size_t bytes) : bytes_(bytes) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    map_bytes_ = (bytes + page - 1) / page * page + page;
    map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map_ != MAP_FAILED);
    auto* end = static_cast<std::byte*>(map_) + map_bytes_ - page;
    REQUIRE(mprotect(end, page, PROT_NONE) == 0);
    data_ = end - bytes;
  }
  guarded_bytes(const guarded_bytes&) = delete;
  guarded_bytes& operator=(const guarded_bytes&) = delete;
  ~guarded_bytes() { munmap(map_, map_bytes_); }
  std::byte* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  std::size_t bytes_;
  std::size_t map_bytes_ = 0;
  void* map_ = nullptr;
  std::byte* data_ = nullptr;
};

}  // namespace cpu_test
