// jit/object_check.hpp — whether bytes are an object of the kind the backend's
// code generation makes, checked before the JIT's linker sees them.
//
// The linker (LLVM's RuntimeDyld) trusts its input: a relocation whose type
// it does not implement aborts the process, one whose offset lies outside its
// section writes outside the section's memory, and the loader reads the
// recorded ISA from wherever the `primcache_isa` symbol points. Objects reach
// it from the persistent cache and from primitive(pd, blob), whose checksum
// detects damage but not a crafted entry. check_object() accepts only what
// compile_object() produces (jit/compiler.hpp: the large code model, static
// relocations, no unwind tables):
//
//   - an ELF64 little-endian x86-64 relocatable object (ET_REL);
//   - every section of a known type (null, progbits, nobits, symtab, strtab,
//     rela), with known flags (no TLS, no groups, no compression), its
//     contents inside the file, a power-of-two alignment of at most a page,
//     and no section named .eh_frame (the linker hands that to the unwinder);
//     zero-filled sections of at most k_max_zero_fill_bytes in all;
//   - one symbol table: names inside its string table, each defined symbol
//     in an allocated section and inside it (value + size), no absolute
//     symbol but the file name, no common, TLS or indirect-function symbol,
//     every undefined symbol named;
//   - every relocation section linked to that table, applying to an
//     allocated progbits section, with entries whose type is one the code
//     generation emits (R_X86_64_64 only), whose symbol index is inside the
//     table, and whose offset plus width lies inside the target section;
//   - exactly one `primcache_isa`: a global 4-byte object defined in an
//     allocated, non-executable data section.
//
// Which undefined symbols an object may import is not checked here:
// jit_module's loader refuses (permission_denied) any outside the allowlist
// of object_symbols.hpp right after this check. Nothing here makes loaded
// code safe to run: a valid object is native code that does what it says.
// The check keeps a crafted object from corrupting or ending the process
// while it is linked; trusting what runs is the signing key's business
// (docs/persist.md).
//
//   if (auto bad = primcache::cpu_internal::check_object(bytes))
//     return failure{bad->code, "object of kernel 'k': " + bad->message};
//
// Thread-safety: a pure function. Exceptions: none beyond std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

// The most zero-filled (SHT_NOBITS) memory an object may ask for. The code
// generation emits none; a crafted size would make the linker map and clear
// that much.
inline constexpr std::uint64_t k_max_zero_fill_bytes = std::uint64_t{16} << 20;

// nullopt when `object` passes every check above; otherwise a failure
// (corrupt_data) naming the first problem found: the section, symbol or
// relocation (by index and name) and what about it is wrong.
std::optional<failure> check_object(std::span<const std::byte> object);

}  // namespace primcache::cpu_internal
