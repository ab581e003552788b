// jit/object_symbols.hpp — what a kernel object may import, and reading the
// symbols an object defines and needs.
//
// A kernel is self-contained code: math is inlined as polynomials, data-type
// conversions as integer operations. The only functions it may call outside
// itself are the libc memory routines the code generator emits for block
// copies and fills. Everything else (expf, __truncsfbf2, fmaf, ...) is a bug
// in a generator — LLVM 15 lowers several intrinsics to such calls — or, for
// an object read from a persistent cache, a reason to refuse it.
//
//   auto needed = primcache::cpu_internal::undefined_symbols(object);
//   for (auto& s : needed.value())
//     if (!primcache::cpu_internal::is_allowed_external_symbol(s)) ...
//
// Thread-safety: pure functions. Exceptions: none beyond std::bad_alloc;
// malformed objects are failures.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

// memset, memcpy, memmove.
std::span<const std::string_view> allowed_external_symbols() noexcept;
bool is_allowed_external_symbol(std::string_view name) noexcept;

// The names an object references but does not define, sorted, unique. Fails
// (corrupt_data) when the bytes are not an object file for this host's
// architecture.
result<std::vector<std::string>> undefined_symbols(std::span<const std::byte> object);

// The global names an object defines, sorted. Same failures.
result<std::vector<std::string>> defined_symbols(std::span<const std::byte> object);

}  // namespace primcache::cpu_internal
