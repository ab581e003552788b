#include "jit/object_check.hpp"

#include <cstring>
#include <string>
#include <string_view>

#include <llvm/ADT/StringExtras.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/Object/ELF.h>

#include "jit/compiler.hpp"

namespace primcache::cpu_internal {
namespace {

namespace elf = llvm::ELF;
using elf_file = llvm::object::ELFFile<llvm::object::ELF64LE>;
using elf_shdr = elf_file::Elf_Shdr;
using elf_sym = elf_file::Elf_Sym;

// A section may ask for at most a page's alignment: the linker pads each
// section to it, and the code generation asks for 64 bytes at most.
constexpr std::uint64_t k_max_alignment = 4096;

// The section flags the code generation sets, and those harmless to the
// linker that another LLVM may set on such sections (large-model data).
constexpr std::uint64_t k_allowed_flags = elf::SHF_WRITE | elf::SHF_ALLOC | elf::SHF_EXECINSTR |
                                          elf::SHF_MERGE | elf::SHF_STRINGS | elf::SHF_INFO_LINK |
                                          elf::SHF_X86_64_LARGE;

// The relocations the code generation emits, and the bytes each one writes.
// The large code model with static relocations (jit/target.cpp) makes every
// reference a 64-bit absolute address: the relocations of 1,300 objects
// (every primitive kind, with data types, layouts and post-ops, at avx2 up to
// avx512_core_bf16) and of the built-in shape-generic objects are all
// R_X86_64_64. A new type in the code generation fails every test that
// compiles a kernel, since compile() links through the same check.
struct relocation_kind {
  std::uint32_t type;
  std::uint64_t width;
};
constexpr relocation_kind k_relocations[] = {{elf::R_X86_64_64, 8}};

failure corrupt(std::string what) {
  return failure{status::corrupt_data, std::move(what)};
}

std::string message(llvm::Error e) {
  return llvm::toString(std::move(e));
}

bool fits(std::uint64_t offset, std::uint64_t size, std::uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

std::string relocation_name(std::uint32_t type) {
  return llvm::object::getELFRelocationTypeName(elf::EM_X86_64, type).str() + " (" +
         std::to_string(type) + ")";
}

std::string allowed_relocation_names() {
  std::string out;
  for (const relocation_kind& k : k_relocations) {
    out.append(out.empty() ? "" : ", ")
        .append(llvm::object::getELFRelocationTypeName(elf::EM_X86_64, k.type).str());
  }
  return out;
}

class checker {
 public:
  explicit checker(std::span<const std::byte> object)
      : bytes_(reinterpret_cast<const char*>(object.data()), object.size()),
        file_(elf_file::create(bytes_)) {}

  std::optional<failure> run() {
    if (!file_) return corrupt("not an ELF object: " + message(file_.takeError()));
    if (auto f = check_header()) return f;
    auto sections = file_->sections();
    if (!sections) return corrupt("unreadable section table: " + message(sections.takeError()));
    sections_ = *sections;
    if (auto f = check_sections()) return f;
    if (auto f = check_symbols()) return f;
    return check_relocations();
  }

 private:
  std::optional<failure> check_header() const {
    const auto& h = file_->getHeader();
    if (std::memcmp(h.e_ident, elf::ElfMagic, 4) != 0) return corrupt("no ELF magic");
    if (h.e_ident[elf::EI_CLASS] != elf::ELFCLASS64 ||
        h.e_ident[elf::EI_DATA] != elf::ELFDATA2LSB ||
        h.e_ident[elf::EI_VERSION] != elf::EV_CURRENT) {
      return corrupt("not a 64-bit little-endian ELF object of version 1");
    }
    if (h.e_type != elf::ET_REL) {
      return corrupt("ELF type " + std::to_string(h.e_type) + ", not a relocatable object");
    }
    if (h.e_machine != elf::EM_X86_64) {
      return corrupt("ELF machine " + std::to_string(h.e_machine) + ", not x86-64");
    }
    if (h.e_shoff == 0 || h.e_shnum == 0 || h.e_shnum >= elf::SHN_LORESERVE) {
      return corrupt("no section table, or one of " + std::to_string(h.e_shnum) + " sections");
    }
    if (h.e_shstrndx == elf::SHN_UNDEF || h.e_shstrndx >= h.e_shnum) {
      return corrupt("the section names' table is section " + std::to_string(h.e_shstrndx) +
                     " of " + std::to_string(h.e_shnum));
    }
    return std::nullopt;
  }

  // "section 3 ('.text')", or the index alone when the name is unreadable.
  std::string section_label(std::size_t index) const {
    std::string out = "section " + std::to_string(index);
    if (index < sections_.size()) {
      auto name = file_->getSectionName(sections_[index]);
      if (name) return out + " ('" + name->str() + "')";
      llvm::consumeError(name.takeError());
    }
    return out;
  }

  std::optional<failure> check_sections() {
    if (sections_[0].sh_type != elf::SHT_NULL) return corrupt("section 0 is not the null section");
    if (sections_[file_->getHeader().e_shstrndx].sh_type != elf::SHT_STRTAB) {
      return corrupt("the section names' table is not a string table");
    }
    std::uint64_t zero_fill = 0;
    for (std::size_t i = 1; i < sections_.size(); ++i) {
      const elf_shdr& s = sections_[i];
      auto name = file_->getSectionName(s);
      if (!name) return corrupt("section " + std::to_string(i) + ": " + message(name.takeError()));
      const std::string label = "section " + std::to_string(i) + " ('" + name->str() + "')";
      switch (s.sh_type) {
        case elf::SHT_PROGBITS:
        case elf::SHT_NOBITS:
        case elf::SHT_STRTAB:
        case elf::SHT_RELA: break;
        case elf::SHT_SYMTAB:
          if (symtab_ != 0) return corrupt(label + " is a second symbol table");
          symtab_ = i;
          break;
        default:
          return corrupt(label + " has type " +
                         llvm::object::getELFSectionTypeName(elf::EM_X86_64, s.sh_type).str() +
                         ", which the code generation never emits");
      }
      if ((s.sh_flags & ~k_allowed_flags) != 0) {
        return corrupt(label + " has flags 0x" + llvm::utohexstr(s.sh_flags) +
                       " (TLS, group, compressed or unknown)");
      }
      if (s.sh_addralign > k_max_alignment || (s.sh_addralign & (s.sh_addralign - 1)) != 0) {
        return corrupt(label + " asks for an alignment of " + std::to_string(s.sh_addralign));
      }
      if (*name == ".eh_frame") {
        return corrupt(label + ": kernels have no unwind tables, and the linker would register it");
      }
      if (s.sh_type == elf::SHT_NOBITS) {
        if (s.sh_size > k_max_zero_fill_bytes - zero_fill) {
          return corrupt(label + " asks for " + std::to_string(s.sh_size) +
                         " zero-filled bytes; objects may ask for " +
                         std::to_string(k_max_zero_fill_bytes) + " in all");
        }
        zero_fill += s.sh_size;
      } else if (!fits(s.sh_offset, s.sh_size, bytes_.size())) {
        return corrupt(label + " (offset " + std::to_string(s.sh_offset) + ", size " +
                       std::to_string(s.sh_size) + ") runs past the end of the " +
                       std::to_string(bytes_.size()) + "-byte object");
      }
    }
    if (symtab_ == 0) return corrupt("no symbol table");
    return std::nullopt;
  }

  std::optional<failure> check_symbols() {
    const elf_shdr& table = sections_[symtab_];
    auto symbols = file_->symbols(&table);
    if (!symbols) return corrupt(section_label(symtab_) + ": " + message(symbols.takeError()));
    auto strings = file_->getStringTableForSymtab(table, sections_);
    if (!strings) return corrupt(section_label(symtab_) + ": " + message(strings.takeError()));
    symbol_count_ = symbols->size();
    int isa_definitions = 0;
    for (std::size_t i = 1; i < symbols->size(); ++i) {
      const elf_sym& sym = (*symbols)[i];
      auto name = sym.getName(*strings);
      if (!name) return corrupt("symbol " + std::to_string(i) + ": " + message(name.takeError()));
      const std::string label = "symbol " + std::to_string(i) + " ('" + name->str() + "')";
      const unsigned type = sym.getType();
      const unsigned binding = sym.getBinding();
      if (type != elf::STT_NOTYPE && type != elf::STT_OBJECT && type != elf::STT_FUNC &&
          type != elf::STT_SECTION && type != elf::STT_FILE) {
        return corrupt(label + " has type " + std::to_string(type) +
                       " (common, TLS, indirect function or unknown)");
      }
      if (binding != elf::STB_LOCAL && binding != elf::STB_GLOBAL && binding != elf::STB_WEAK) {
        return corrupt(label + " has binding " + std::to_string(binding));
      }
      const bool is_isa = *name == isa_symbol;
      if (sym.st_shndx == elf::SHN_UNDEF) {
        if (is_isa) {
          return corrupt(label + " is undefined: the object must define the ISA it records");
        }
        if (name->empty() || binding == elf::STB_LOCAL) {
          return corrupt(label + " is undefined and unnamed or local");
        }
        continue;
      }
      if (sym.st_shndx == elf::SHN_ABS) {
        if (type == elf::STT_FILE) continue;
        return corrupt(label + " is absolute: its address would be its value " +
                       std::to_string(sym.st_value));
      }
      if (sym.st_shndx >= sections_.size()) {
        return corrupt(label + " is defined in section " + std::to_string(sym.st_shndx) + " of " +
                       std::to_string(sections_.size()) + " (common, extended or out of range)");
      }
      const elf_shdr& home = sections_[sym.st_shndx];
      if ((home.sh_flags & elf::SHF_ALLOC) == 0) {
        return corrupt(label + " is defined in " + section_label(sym.st_shndx) +
                       ", which is not loaded");
      }
      if (!fits(sym.st_value, sym.st_size, home.sh_size)) {
        return corrupt(label + " (value " + std::to_string(sym.st_value) + ", size " +
                       std::to_string(sym.st_size) + ") lies outside " +
                       section_label(sym.st_shndx) + " of " + std::to_string(home.sh_size) +
                       " bytes");
      }
      if (is_isa) {
        ++isa_definitions;
        if (binding != elf::STB_GLOBAL || type != elf::STT_OBJECT || sym.st_size != 4 ||
            home.sh_type != elf::SHT_PROGBITS || (home.sh_flags & elf::SHF_EXECINSTR) != 0) {
          return corrupt(label + " is not a global 4-byte object in a data section");
        }
      }
    }
    if (isa_definitions != 1) {
      return corrupt(std::to_string(isa_definitions) + " definitions of " +
                     std::string(isa_symbol) + " (the object must record its ISA once)");
    }
    return std::nullopt;
  }

  std::optional<failure> check_relocations() const {
    for (std::size_t i = 1; i < sections_.size(); ++i) {
      const elf_shdr& s = sections_[i];
      if (s.sh_type != elf::SHT_RELA) continue;
      if (s.sh_link != symtab_) {
        return corrupt(section_label(i) + " refers to symbol table " + std::to_string(s.sh_link) +
                       ", not " + std::to_string(symtab_));
      }
      if (s.sh_info == 0 || s.sh_info >= sections_.size() ||
          sections_[s.sh_info].sh_type != elf::SHT_PROGBITS ||
          (sections_[s.sh_info].sh_flags & elf::SHF_ALLOC) == 0) {
        return corrupt(section_label(i) + " applies to section " + std::to_string(s.sh_info) +
                       ", which is not a loaded section with contents");
      }
      const std::uint64_t target_size = sections_[s.sh_info].sh_size;
      auto entries = file_->relas(s);
      if (!entries) return corrupt(section_label(i) + ": " + message(entries.takeError()));
      std::size_t j = 0;
      for (const auto& r : *entries) {
        const std::uint32_t type = r.getType(false);
        const relocation_kind* kind = nullptr;
        for (const relocation_kind& k : k_relocations) {
          if (k.type == type) kind = &k;
        }
        if (kind == nullptr) {
          return corrupt("relocation " + std::to_string(j) + " of " + section_label(i) +
                         " has type " + relocation_name(type) +
                         ": the code generation emits only " + allowed_relocation_names());
        }
        const std::uint32_t symbol = r.getSymbol(false);
        if (symbol == 0 || symbol >= symbol_count_) {
          return corrupt("relocation " + std::to_string(j) + " of " + section_label(i) +
                         " refers to symbol " + std::to_string(symbol) + " of " +
                         std::to_string(symbol_count_));
        }
        if (!fits(r.r_offset, kind->width, target_size)) {
          return corrupt("relocation " + std::to_string(j) + " of " + section_label(i) +
                         " writes " + std::to_string(kind->width) + " bytes at offset " +
                         std::to_string(r.r_offset) + ", outside " + section_label(s.sh_info) +
                         " of " + std::to_string(target_size) + " bytes");
        }
        ++j;
      }
    }
    return std::nullopt;
  }

  llvm::StringRef bytes_;
  llvm::Expected<elf_file> file_;
  elf_file::Elf_Shdr_Range sections_;
  std::size_t symtab_ = 0;  // the symbol table's section index (0: none yet)
  std::size_t symbol_count_ = 0;
};

}  // namespace

std::optional<failure> check_object(std::span<const std::byte> object) {
  return checker(object).run();
}

}  // namespace primcache::cpu_internal
