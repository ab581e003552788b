#include "jit/jit_module.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectFileInterface.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include "jit/object_check.hpp"
#include "jit/object_symbols.hpp"
#include "jit/process_jit.hpp"
#include "text.hpp"

namespace primcache::cpu_internal {
namespace {

// JITDylib names must be unique in the session; kernels' names need not be.
std::string dylib_name(std::string_view kernel) {
  static std::atomic<std::uint64_t> counter{0};
  return "primcache.kernel." + std::to_string(counter.fetch_add(1, std::memory_order_relaxed)) +
         "." + std::string(kernel);
}

std::string joined(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view n : names) out.append(out.empty() ? "" : ", ").append(n);
  return out;
}

result<bool> check_imports(std::string_view name, std::span<const std::byte> object) {
  auto needed = undefined_symbols(object);
  if (!needed) {
    return failure{needed.why().code,
                   "object of kernel " + quoted(name) + ": " + needed.why().message};
  }
  for (const std::string& symbol : needed.value()) {
    if (!is_allowed_external_symbol(symbol)) {
      return failure{status::permission_denied,
                     "refusing to link kernel " + quoted(name) + ": it needs " + quoted(symbol) +
                         ", and kernels may only call " + joined(allowed_external_symbols())};
    }
  }
  return true;
}

}  // namespace

jit_module::jit_module(std::string name, std::vector<std::byte> object,
                       llvm::orc::ExecutionSession& es, llvm::orc::JITDylib& dylib)
    : name_(std::move(name)), object_(std::move(object)), es_(&es), dylib_(&dylib) {}

jit_module::~jit_module() {
  // Removing the JITDylib destroys its memory managers, which unmap the code.
  if (auto err = es_->removeJITDylib(*dylib_)) {
    llvm::logAllUnhandledErrors(std::move(err), llvm::errs(),
                                "primcache: unloading kernel '" + name_ + "' failed: ");
  }
}

result<std::unique_ptr<jit_module>> jit_module::compile(std::string_view name, cpu_isa isa,
                                                        ir_builder build) {
  return compile(name, isa, default_compile_settings(name), build);
}

result<std::unique_ptr<jit_module>> jit_module::compile(std::string_view name, cpu_isa isa,
                                                        const compile_settings& settings,
                                                        ir_builder build) {
  auto object = compile_object(name, isa, settings, build);
  if (!object) return object.why();
  compile_probe* probe = compile_probe::current();
  if (probe == nullptr || probe->profiles.empty())
    return link(name, std::move(object).value(), isa);
  const double start = compile_probe::thread_cpu_ms();
  auto linked = link(name, std::move(object).value(), isa);
  probe->profiles.back().link_ms = compile_probe::thread_cpu_ms() - start;
  return linked;
}

result<std::unique_ptr<jit_module>> jit_module::load(std::string_view name,
                                                     std::vector<std::byte> object,
                                                     cpu_isa highest) {
  return link(name, std::move(object), highest);
}

result<std::unique_ptr<jit_module>> jit_module::load_built_in(std::string_view name,
                                                              std::span<const std::byte> object) {
  // A built-in object is chosen for a descriptor's ISA, bound when the
  // descriptor was made (generic_isa_for): a cap lowered since must not
  // refuse it, as it does not refuse the same descriptor's fresh code
  // (compile() links against the ISA it compiled for). tiered/generic_code.cpp
  // keeps a failed link for the life of the process, so refusing here would
  // turn tiered creation off at that ISA for good.
  return link(name, std::vector<std::byte>(object.begin(), object.end()), detected_isa());
}

result<std::unique_ptr<jit_module>> jit_module::link(std::string_view name,
                                                     std::vector<std::byte> object, cpu_isa cap) {
  auto jit = process_jit();
  if (!jit) return jit.why();
  // RuntimeDyld trusts its input (a relocation it does not implement aborts,
  // one outside its section writes outside it), and the ISA is read below
  // from wherever primcache_isa points: check the object first.
  if (auto bad = check_object(object)) {
    return failure{bad->code, "object of kernel " + quoted(name) + ": " + bad->message};
  }
  if (auto ok = check_imports(name, object); !ok) return ok.why();

  llvm::orc::LLJIT& lljit = *jit.value().jit;
  llvm::orc::ExecutionSession& es = lljit.getExecutionSession();
  llvm::StringRef bytes(reinterpret_cast<const char*>(object.data()), object.size());
  auto interface = llvm::orc::getObjectFileInterface(es, llvm::MemoryBufferRef(bytes, name));
  if (!interface) {
    return failure{status::corrupt_data, "object of kernel " + quoted(name) + ": " +
                                             llvm::toString(interface.takeError())};
  }

  llvm::orc::JITDylib& dylib = es.createBareJITDylib(dylib_name(name));
  dylib.addToLinkOrder(*jit.value().runtime_symbols);
  // From here on the module owns the JITDylib: any failure below removes it.
  std::unique_ptr<jit_module> module(
      new jit_module(std::string(name), std::move(object), es, dylib));

  // The buffer borrows the module's bytes, which outlive the JITDylib; the
  // linker copies sections into memory of its own.
  auto buffer = llvm::MemoryBuffer::getMemBuffer(
      llvm::StringRef(reinterpret_cast<const char*>(module->object_.data()),
                      module->object_.size()),
      module->name_, /*RequiresNullTerminator=*/false);
  if (auto err = lljit.addObjectFile(dylib, std::move(buffer))) {
    return failure{status::runtime_error, "adding kernel " + quoted(name) + " to the JIT failed: " +
                                              llvm::toString(std::move(err))};
  }

  llvm::orc::SymbolLookupSet wanted;
  for (const auto& [symbol, flags] : interface->SymbolFlags) {
    // An initializer marker has no address to find; kernels have none.
    if (!flags.hasMaterializationSideEffectsOnly()) wanted.add(symbol);
  }
  auto found = es.lookup(
      llvm::orc::makeJITDylibSearchOrder(&dylib, llvm::orc::JITDylibLookupFlags::MatchAllSymbols),
      std::move(wanted));
  if (!found) {
    return failure{status::runtime_error, "linking kernel " + quoted(name) +
                                              " failed: " + llvm::toString(found.takeError())};
  }
  acquire_linked_code();
  for (const auto& [symbol, definition] : *found) {
    module->symbols_.emplace_back((*symbol).str(),
                                  static_cast<std::uintptr_t>(definition.getAddress()));
  }
  std::sort(module->symbols_.begin(), module->symbols_.end());
  // The ISA the object was compiled for; nothing of it has run yet.
  // check_object() placed primcache_isa inside a loaded data section.
  auto recorded = module->lookup(isa_symbol);
  if (!recorded) {
    return failure{status::corrupt_data, "object of kernel " + quoted(name) +
                                             " records no ISA (no " + std::string(isa_symbol) +
                                             " symbol): not an object compile_object made"};
  }
  std::int32_t value = 0;
  std::memcpy(&value, recorded.value(), sizeof value);
  if (value < static_cast<int>(cpu_isa::x86_64) ||
      value > static_cast<int>(cpu_isa::avx512_core_fp16)) {
    return failure{status::corrupt_data, "object of kernel " + quoted(name) +
                                             " records an unknown ISA " + std::to_string(value)};
  }
  module->isa_ = static_cast<cpu_isa>(value);
  const cpu_isa limit = std::min(cap, detected_isa());
  if (module->isa_ > limit) {
    return failure{status::unimplemented,
                   "object of kernel " + quoted(name) + " was compiled for " +
                       std::string(to_string(module->isa_)) + ", above " +
                       std::string(to_string(limit)) +
                       (limit == detected_isa() ? " (the best this host supports)"
                                                : " (the ISA cap of this process)")};
  }
  return module;
}

result<void*> jit_module::lookup(std::string_view symbol) const {
  auto it = std::lower_bound(symbols_.begin(), symbols_.end(), symbol,
                             [](const auto& entry, std::string_view s) { return entry.first < s; });
  if (it == symbols_.end() || it->first != symbol) {
    std::string defined;
    for (const auto& entry : symbols_)
      defined.append(defined.empty() ? "" : ", ").append(entry.first);
    return failure{status::not_found, "kernel " + quoted(name_) + " defines no symbol " +
                                          quoted(symbol) + " (it defines: " + defined + ")"};
  }
  return reinterpret_cast<void*>(it->second);
}

}  // namespace primcache::cpu_internal
