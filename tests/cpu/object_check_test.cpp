// Objects the CPU backend links are checked before the JIT's linker sees them
// (jit/object_check.hpp): a blob whose envelope is valid (encoded by the
// project's own encoder, checksum and all) but whose object was altered is
// refused as corrupt data, naming what is wrong, and never crashes the
// process. Each load runs in a forked child, so a crash or an abort reads as
// a failure of the case instead of ending the test program.
#include <catch2/catch.hpp>

#include <elf.h>
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "jit/compiler.hpp"
#include "jit/object_check.hpp"
#include "kernels/generic_matmul_generator.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"
#include "support/child_process.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

// A view of an ELF64 relocatable object held in a byte vector, for patching
// it in place. The vector must outlive the view and keep its size.
class elf_view {
 public:
  explicit elf_view(std::vector<std::byte>& bytes) : bytes_(bytes) {
    REQUIRE(bytes_.size() >= sizeof(Elf64_Ehdr));
    REQUIRE(std::memcmp(bytes_.data(), ELFMAG, SELFMAG) == 0);
  }

  Elf64_Ehdr& header() { return at<Elf64_Ehdr>(0); }
  std::size_t section_count() { return header().e_shnum; }
  Elf64_Shdr& section(std::size_t i) {
    REQUIRE(i < section_count());
    return at<Elf64_Shdr>(header().e_shoff + i * sizeof(Elf64_Shdr));
  }
  std::string section_name(std::size_t i) {
    const Elf64_Shdr& names = section(header().e_shstrndx);
    return reinterpret_cast<const char*>(bytes_.data() + names.sh_offset + section(i).sh_name);
  }
  std::size_t section_named(const std::string& name) {
    for (std::size_t i = 1; i < section_count(); ++i) {
      if (section_name(i) == name) return i;
    }
    FAIL("the object has no section " << name);
    return 0;
  }
  std::size_t first_section_of_type(std::uint32_t type) {
    for (std::size_t i = 1; i < section_count(); ++i) {
      if (section(i).sh_type == type && section(i).sh_size > 0) return i;
    }
    FAIL("the object has no section of type " << type);
    return 0;
  }

  // The relocations of the first relocation section (the code's).
  std::size_t relocation_section() { return first_section_of_type(SHT_RELA); }
  Elf64_Rela& relocation(std::size_t j) {
    const Elf64_Shdr& s = section(relocation_section());
    REQUIRE((j + 1) * sizeof(Elf64_Rela) <= s.sh_size);
    return at<Elf64_Rela>(s.sh_offset + j * sizeof(Elf64_Rela));
  }

  std::size_t symbol_count() { return section(symtab()).sh_size / sizeof(Elf64_Sym); }
  Elf64_Sym& symbol(std::size_t i) {
    REQUIRE(i < symbol_count());
    return at<Elf64_Sym>(section(symtab()).sh_offset + i * sizeof(Elf64_Sym));
  }
  Elf64_Sym& symbol_named(const std::string& name) {
    const Elf64_Shdr& strings = section(section(symtab()).sh_link);
    for (std::size_t i = 1; i < symbol_count(); ++i) {
      const char* n =
          reinterpret_cast<const char*>(bytes_.data() + strings.sh_offset + symbol(i).st_name);
      if (name == n) return symbol(i);
    }
    FAIL("the object has no symbol " << name);
    return symbol(0);
  }
  // A function the kernel defines.
  Elf64_Sym& some_function() {
    for (std::size_t i = 1; i < symbol_count(); ++i) {
      if (ELF64_ST_TYPE(symbol(i).st_info) == STT_FUNC && symbol(i).st_shndx != SHN_UNDEF)
        return symbol(i);
    }
    FAIL("the object defines no function");
    return symbol(0);
  }

 private:
  std::size_t symtab() { return first_section_of_type(SHT_SYMTAB); }
  template <typename T>
  T& at(std::uint64_t offset) {
    REQUIRE(offset + sizeof(T) <= bytes_.size());
    return *reinterpret_cast<T*>(bytes_.data() + offset);
  }

  std::vector<std::byte>& bytes_;
};

// Restores the JIT mode a test changed.
struct jit_mode_scope {
  jit_mode saved = get_jit_mode();
  explicit jit_mode_scope(jit_mode m) { set_jit_mode(m); }
  ~jit_mode_scope() { set_jit_mode(saved); }
};

// In a child: a crash ends it with its signal, without the test framework's
// handlers reporting it as the parent's failure as well.
void default_crash_handling() {
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::signal(sig, SIG_DFL);
}

// The statuses the child reports.
constexpr int k_refused_as_said = 0;
constexpr int k_loaded = 1;
constexpr int k_other_status = 2;
constexpr int k_other_reason = 3;

std::string describe(int status) {
  switch (status) {
    case k_refused_as_said: return "refused as corrupt data, naming the problem";
    case k_loaded: return "the altered blob was loaded without error";
    case k_other_status: return "refused, but not as corrupt data";
    case k_other_reason:
      return "refused as corrupt data, but the message does not name the problem";
    default: return "the child died: " + primcache_test::describe_child_status(status);
  }
}

}  // namespace

TEST_CASE("a blob whose object was altered is refused as corrupt data, never crashing the process",
          "[cpu][blob][object_check]") {
  if (effective_isa() < cpu_isa::avx2) return;  // the JIT matmul needs avx2
  jit_mode_scope mode(jit_mode::sync);
  engine eng(engine_kind::cpu, 0);
  const memory::desc a({8, 32}, data_type::f32, tag::ab);
  const memory::desc b({32, 48}, data_type::f32, tag::ab);
  const memory::desc c({8, 48}, data_type::f32, tag::ab);
  const matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
  const std::vector<std::uint8_t> blob = matmul(pd).cache_blob();
  const backend::impl_blob original = backend::impl_blob::decode(blob).value();
  REQUIRE_FALSE(original.object.empty());
  // Empty the primitive cache, so that a creation from a blob is a miss that
  // reads the blob.
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(capacity);

  // Patches a copy of the object, encodes it with the project's encoder and
  // creates the primitive from it in a child.
  auto load_altered = [&](const std::function<void(elf_view&)>& patch, const std::string& says) {
    backend::impl_blob altered = original;
    elf_view view(altered.object);
    patch(view);
    const std::vector<std::uint8_t> bytes = altered.encode();
    REQUIRE(backend::impl_blob::decode(bytes).has_value());  // the envelope is valid
    const int status = primcache_test::run_in_child(60, [&] {
      default_crash_handling();
      try {
        const primitive p(pd, bytes);
        return k_loaded;
      } catch (const error& e) {
        std::fprintf(stderr, "refused: %s\n", e.what());
        if (e.code() != status::corrupt_data) return k_other_status;
        return e.message().find(says) != std::string::npos ? k_refused_as_said : k_other_reason;
      }
    });
    INFO(describe(status) << " (expected a message naming: " << says << ")");
    CHECK(status == k_refused_as_said);
  };

  SECTION("the object unaltered, re-encoded, loads (the harness itself refuses nothing)") {
    const int status = primcache_test::run_in_child(60, [&] {
      const primitive p(pd, original.encode());
      return p ? 0 : 1;
    });
    INFO(primcache_test::describe_child_status(status));
    CHECK(status == 0);
  }
  SECTION("a relocation of a type the linker does not implement") {
    load_altered(
        [](elf_view& v) {
          Elf64_Rela& r = v.relocation(0);
          r.r_info = ELF64_R_INFO(ELF64_R_SYM(r.r_info), R_X86_64_COPY);
        },
        "R_X86_64_COPY");
  }
  SECTION("a relocation of a type the linker implements but the code generation never emits") {
    const auto type = GENERATE(as<std::uint32_t>{}, R_X86_64_PC32, R_X86_64_NONE, R_X86_64_GOTPCREL,
                               R_X86_64_TPOFF64);
    load_altered(
        [type](elf_view& v) {
          Elf64_Rela& r = v.relocation(0);
          r.r_info = ELF64_R_INFO(ELF64_R_SYM(r.r_info), type);
        },
        "has type R_X86_64_");
  }
  SECTION("a relocation far outside its section") {
    load_altered([](elf_view& v) { v.relocation(0).r_offset = 0x7fffffff0ULL; }, "outside");
  }
  SECTION("a relocation that straddles the end of its section") {
    load_altered(
        [](elf_view& v) {
          const Elf64_Shdr& target = v.section(v.section(v.relocation_section()).sh_info);
          v.relocation(0).r_offset = target.sh_size - 4;
        },
        "outside");
  }
  SECTION("a relocation whose symbol index lies past the symbol table") {
    load_altered(
        [](elf_view& v) {
          Elf64_Rela& r = v.relocation(0);
          r.r_info = ELF64_R_INFO(v.symbol_count() + 1000, ELF64_R_TYPE(r.r_info));
        },
        "refers to symbol");
  }
  SECTION("a relocation section that applies to a section that does not exist") {
    load_altered([](elf_view& v) { v.section(v.relocation_section()).sh_info = 0xffff; },
                 "applies to section");
  }
  SECTION("a section whose contents lie past the end of the file") {
    load_altered(
        [](elf_view& v) {
          Elf64_Shdr& text = v.section(v.section_named(".text"));
          text.sh_offset = 0x7fffffff0ULL;
        },
        "runs past the end");
  }
  SECTION("a section whose size runs past the end of the file") {
    load_altered([](elf_view& v) { v.section(v.section_named(".text")).sh_size = 1ULL << 40; },
                 "runs past the end");
  }
  SECTION("primcache_isa made absolute") {
    load_altered(
        [](elf_view& v) {
          Elf64_Sym& isa = v.symbol_named(cpu_internal::isa_symbol);
          isa.st_shndx = SHN_ABS;
          isa.st_value = 0x10;  // an address no process maps
        },
        "is absolute");
  }
  SECTION("primcache_isa made undefined") {
    load_altered([](elf_view& v) { v.symbol_named(cpu_internal::isa_symbol).st_shndx = SHN_UNDEF; },
                 "is undefined");
  }
  SECTION("primcache_isa placed far outside its section") {
    load_altered(
        [](elf_view& v) { v.symbol_named(cpu_internal::isa_symbol).st_value = 0x7fffffff0000ULL; },
        "lies outside");
  }
  SECTION("primcache_isa given a huge size") {
    load_altered([](elf_view& v) { v.symbol_named(cpu_internal::isa_symbol).st_size = 1ULL << 40; },
                 "lies outside");
  }
  SECTION("primcache_isa placed in the code") {
    load_altered(
        [](elf_view& v) {
          v.symbol_named(cpu_internal::isa_symbol).st_shndx =
              static_cast<std::uint16_t>(v.section_named(".text"));
        },
        "not a global 4-byte object in a data section");
  }
  SECTION("a function placed outside its section") {
    load_altered([](elf_view& v) { v.some_function().st_value = 0x7fffffff0000ULL; },
                 "lies outside");
  }
}

TEST_CASE("the objects the code generation makes pass the check at every ISA level",
          "[cpu][object_check]") {
  // The built-in objects and every kernel compiled in the other tests pass it
  // when they are linked; this covers the levels above the host's too.
  for (int level = static_cast<int>(cpu_isa::avx2); level <= static_cast<int>(max_known_cpu_isa);
       ++level) {
    const auto isa = static_cast<cpu_isa>(level);
    INFO(to_string(isa));
    auto object = cpu_internal::compile_object(
        cpu_internal::generic_matmul_name(isa), isa,
        [&](llvm::Module& m) { cpu_internal::generate_generic_matmul(isa, m); });
    REQUIRE(object.has_value());
    const auto found = cpu_internal::check_object(object.value());
    INFO((found ? found->message : std::string()));
    CHECK_FALSE(found.has_value());
  }
}
