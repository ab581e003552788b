// generic_kernels_aot — the build-time tool that compiles the CPU backend's
// shape-generic kernels (kernels/generic_*_generator.hpp) once per ISA level
// the backend generates code for, with the compiler the library uses at run
// time (compile_object: same target machines, pipelines, code generation),
// and writes the objects as a C++ source that registers them
// (tiered/generic_code.hpp). CMake runs it and compiles its output into
// primcache::cpu. The objects compile on up to one thread per hardware
// thread; the output is the same byte for byte whatever their number.
//
//   generic_kernels_aot OUT.cpp
//
// Exit status 0 on success; otherwise a message on stderr and 1 (the build
// stops: a library without its generic kernels would silently compile
// every primitive synchronously).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jit/compiler.hpp"
#include "kernels/generic_conv_generator.hpp"
#include "kernels/generic_eltwise_generator.hpp"
#include "kernels/generic_matmul_generator.hpp"
#include "kernels/generic_reorder_generator.hpp"

namespace {

using primcache::cpu_isa;
using namespace primcache::cpu_internal;

struct built {
  std::string array;  // C++ identifier
  std::string kernel;
  cpu_isa isa;
  std::vector<std::byte> bytes;
};

// One object to compile: its name, kind, ISA level, settings (none: the
// name's defaults) and generator.
struct job {
  std::string name;
  std::string kernel;
  cpu_isa isa;
  const compile_settings* settings;
  void (*generate)(cpu_isa, llvm::Module&);
};

// Compiles every job, on up to one thread per hardware thread (each
// compilation has its own LLVMContext: compile_object's contract), and
// keeps the objects in the jobs' order, so the output does not depend on
// the number of threads. The first failure in that order is reported.
bool compile_all(const std::vector<job>& jobs, std::vector<built>& objects) {
  std::vector<primcache::result<std::vector<std::byte>>> results(
      jobs.size(), primcache::failure{primcache::status::runtime_error, "not compiled"});
  // Taken from the last: the reorder walks, by far the longest (15 and 25
  // s of 55 on this machine), start first.
  std::atomic<std::size_t> taken{0};
  auto work = [&] {
    for (std::size_t n = taken++; n < jobs.size(); n = taken++) {
      const std::size_t i = jobs.size() - 1 - n;
      const job& j = jobs[i];
      auto generate = [&](llvm::Module& m) { j.generate(j.isa, m); };
      results[i] = j.settings ? compile_object(j.name, j.isa, *j.settings, generate)
                              : compile_object(j.name, j.isa, generate);
    }
  };
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, jobs.size());
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!results[i]) {
      std::fprintf(stderr, "generic_kernels_aot: %s: %s\n", jobs[i].name.c_str(),
                   results[i].why().message.c_str());
      return false;
    }
    objects.push_back(
        {"k_" + jobs[i].name, jobs[i].kernel, jobs[i].isa, std::move(results[i]).value()});
  }
  return true;
}

// Writes `bytes` as adjacent string literals, 64 bytes a line: printable
// characters as themselves, the others (and the backslash, the quote and '?',
// which could start a trigraph in older dialects) as three-digit octal
// escapes, which never take the next character into the escape.
void write_string_literal(std::ostream& out, const std::vector<std::byte>& bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i % 64 == 0) out << (i == 0 ? "\n    \"" : "\"\n    \"");
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"' && c != '?') {
      out << static_cast<char>(c);
    } else {
      const char octal[] = {'\\', static_cast<char>('0' + (c >> 6)),
                            static_cast<char>('0' + ((c >> 3) & 7)),
                            static_cast<char>('0' + (c & 7))};
      out.write(octal, sizeof octal);
    }
  }
  out << (bytes.empty() ? " \"\"" : "\"");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.cpp\n", argv[0]);
    return 1;
  }
  // The levels whose vector shapes differ; higher levels (VNNI, BF16, FP16)
  // add nothing an f32 matmul or convolution (or a layout walk) uses and run
  // avx512_core's object.
  const cpu_isa levels[] = {cpu_isa::avx2, cpu_isa::avx512_core};
  std::vector<job> jobs;
  for (cpu_isa isa : levels) {
    jobs.push_back({generic_matmul_name(isa), "matmul", isa, nullptr, generate_generic_matmul});
  }
  // The convolution's tiles: a 16-channel vector at both levels, the
  // register tile per level (generic_conv_shape_for).
  for (cpu_isa isa : levels) {
    jobs.push_back({generic_conv_name(isa), "conv", isa, &generic_conv_compile_settings,
                    generate_generic_conv});
  }
  // The layout walks: eltwise (per algorithm form and f32/bf16 pair) and
  // reorder (per data type pair and walk form, and bit copies), the vector
  // width and tile edge per level (generic_walk_shape_for).
  for (cpu_isa isa : levels) {
    jobs.push_back({generic_eltwise_name(isa), "eltwise", isa, &generic_walk_compile_settings,
                    generate_generic_eltwise});
  }
  for (cpu_isa isa : levels) {
    jobs.push_back({generic_reorder_name(isa), "reorder", isa, &generic_walk_compile_settings,
                    generate_generic_reorder});
  }
  std::vector<built> objects;
  if (!compile_all(jobs, objects)) return 1;

  std::ostringstream out;
  out << "// Generated by generic_kernels_aot (libs/cpu/tools): the CPU backend's\n"
         "// shape-generic kernels, compiled when the library was built. Do not edit.\n"
         "#include \"tiered/generic_code.hpp\"\n\n"
         "namespace {\n\n"
         "using primcache::cpu_isa;\n"
         "using primcache::cpu_internal::embedded_object;\n"
         "using primcache::cpu_internal::generic_kernel;\n\n";
  // Each object is a string literal (one token a line) rather than a list of
  // integers (a token and an initializer each byte): the generated source
  // compiled in 12.9 s (GCC 12) as a list, in 2.3 s as literals, and
  // every build of the tree compiles it. The array holds the literal's
  // terminating NUL too, which the object's size leaves out.
  for (const built& b : objects) {
    out << "alignas(16) const unsigned char " << b.array << "[" << b.bytes.size() + 1 << "] =";
    write_string_literal(out, b.bytes);
    out << ";\n\n";
  }
  out << "const embedded_object k_objects[] = {\n";
  for (const built& b : objects) {
    out << "    {generic_kernel::" << b.kernel << ", static_cast<cpu_isa>("
        << static_cast<int>(b.isa) << "), " << b.array << ", sizeof " << b.array << " - 1},\n";
  }
  out << "};\n\n"
         "[[maybe_unused]] const bool k_registered = [] {\n"
         "  primcache::cpu_internal::register_generic_objects(k_objects);\n"
         "  return true;\n"
         "}();\n\n"
         "}  // namespace\n\n"
         "// What a static primcache_cpu's users link to keep this object (its\n"
         "// registration has no other reference): libs/cpu/CMakeLists.txt.\n"
         "extern \"C\" const int primcache_cpu_generic_kernels_anchor = 1;\n";

  const std::string path = argv[1];
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out.str();
    if (!f) {
      std::fprintf(stderr, "generic_kernels_aot: cannot write %s\n", tmp.c_str());
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "generic_kernels_aot: cannot rename %s to %s\n", tmp.c_str(),
                 path.c_str());
    return 1;
  }
  return 0;
}
