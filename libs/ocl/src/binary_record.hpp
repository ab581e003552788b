// binary_record.hpp — an OpenCL primitive's program binary as the object
// part of its impl blob (primitive::cache_blob, the persistent cache).
//
// The record names what the binary was made for and from, so that a blob
// is loaded only where it was built:
//
//   "PCOCLBIN"  magic (8 bytes)
//   u32         record version (1)
//   str x 3     platform name, device name, driver version (u32 length, bytes)
//   16 bytes    XXH3-128 of the kernel's OpenCL C source (low, high)
//   u64, bytes  the program binary (CL_PROGRAM_BINARIES)
//
// The impl blob around it (runtime's impl_blob) carries the primitive key
// (device identity and the kernel configuration are part of it) and a
// checksum over everything; read_binary_record checks the record against
// the engine that loads it and against the source the descriptor would
// compile, so a binary of another device, driver or generator is refused
// even when the key and checksum pass (a blob made through the API by a
// build whose generator differed).
//
// Thread-safety: pure functions. Errors are values (failure).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "device_list.hpp"
#include "primcache/base/result.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

// The identity a binary is tied to (what ocl_engine::write_identity writes).
// A PoCL binary is code for the CPU PoCL compiled for, made by the LLVM PoCL
// was built with, and neither shows in the driver version ("3.1+debian"):
// `versions` (device_entry::versions) carries both.
struct device_identity {
  std::string platform;
  std::string device;
  std::string driver;
  std::string versions;
  static device_identity of(const device_entry& dev);
  friend bool operator==(const device_identity&, const device_identity&) = default;
};

std::vector<std::byte> write_binary_record(const device_identity& id, const std::string& source,
                                           const program_binary& binary);

// The binary of `record` if it was made for `id` from `source`.
// corrupt_data: not a record, truncated, trailing bytes; invalid_arguments:
// another device, platform, driver or versions, or other source.
result<program_binary> read_binary_record(std::span<const std::byte> record,
                                          const device_identity& id, const std::string& source);

}  // namespace primcache::ocl_internal
