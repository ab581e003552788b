#include "jit/object_symbols.hpp"

#include <algorithm>
#include <array>

#include <llvm/ADT/Triple.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>

namespace primcache::cpu_internal {
namespace {

using namespace std::string_view_literals;

constexpr std::array kAllowed = {"memset"sv, "memcpy"sv, "memmove"sv};

// Parses `object` and calls visit(name, defined) for each named symbol that
// is global or undefined.
template <typename Visit>
result<bool> for_each_symbol(std::span<const std::byte> object, Visit visit) {
  llvm::MemoryBufferRef ref(
      llvm::StringRef(reinterpret_cast<const char*>(object.data()), object.size()), "kernel");
  auto file = llvm::object::ObjectFile::createObjectFile(ref);
  if (!file) {
    return failure{status::corrupt_data, "not an object file: " + llvm::toString(file.takeError())};
  }
  llvm::Triple host(llvm::sys::getProcessTriple());
  if ((*file)->getArch() != host.getArch()) {
    return failure{status::corrupt_data,
                   "an object file for another architecture than " + host.getArchName().str()};
  }
  for (const llvm::object::SymbolRef& sym : (*file)->symbols()) {
    auto flags = sym.getFlags();
    if (!flags) {
      return failure{status::corrupt_data,
                     "unreadable symbol: " + llvm::toString(flags.takeError())};
    }
    bool undefined = (*flags & llvm::object::SymbolRef::SF_Undefined) != 0;
    bool global = (*flags & llvm::object::SymbolRef::SF_Global) != 0;
    if (!undefined && !global) continue;
    auto name = sym.getName();
    if (!name) {
      return failure{status::corrupt_data,
                     "unreadable symbol name: " + llvm::toString(name.takeError())};
    }
    if (name->empty()) continue;
    visit(std::string(*name), !undefined);
  }
  return true;
}

void sort_unique(std::vector<std::string>& names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
}

}  // namespace

std::span<const std::string_view> allowed_external_symbols() noexcept {
  return kAllowed;
}

bool is_allowed_external_symbol(std::string_view name) noexcept {
  return std::find(kAllowed.begin(), kAllowed.end(), name) != kAllowed.end();
}

result<std::vector<std::string>> undefined_symbols(std::span<const std::byte> object) {
  std::vector<std::string> names;
  auto ok = for_each_symbol(object, [&](std::string name, bool defined) {
    if (!defined) names.push_back(std::move(name));
  });
  if (!ok) return ok.why();
  sort_unique(names);
  return names;
}

result<std::vector<std::string>> defined_symbols(std::span<const std::byte> object) {
  std::vector<std::string> names;
  auto ok = for_each_symbol(object, [&](std::string name, bool defined) {
    if (defined) names.push_back(std::move(name));
  });
  if (!ok) return ok.why();
  sort_unique(names);
  return names;
}

}  // namespace primcache::cpu_internal
