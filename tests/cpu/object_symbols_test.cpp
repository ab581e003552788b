#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <llvm/IR/Module.h>

#include "jit/compiler.hpp"
#include "jit/ir_math.hpp"
#include "jit/object_symbols.hpp"
#include "kernels.hpp"
#include "primcache/cpu/cpu.hpp"

namespace {

using primcache::cpu_isa;
namespace ci = primcache::cpu_internal;
using cpu_test::elem;

struct named_op {
  const char* name;
  elem in;
  elem out;
  cpu_test::unary_op op;
};

// Every IR helper, as a map kernel.
const std::vector<named_op>& all_ops() {
  static const std::vector<named_op> ops = {
      {"exp", elem::f32, elem::f32, ci::emit_exp},
      {"tanh", elem::f32, elem::f32, ci::emit_tanh},
      {"sigmoid", elem::f32, elem::f32, ci::emit_sigmoid},
      {"erf", elem::f32, elem::f32, ci::emit_erf},
      {"gelu_erf", elem::f32, elem::f32, ci::emit_gelu_erf},
      {"gelu_tanh", elem::f32, elem::f32, ci::emit_gelu_tanh},
      {"round", elem::f32, elem::f32, ci::emit_round_half_even},
      {"to_bf16", elem::f32, elem::i16, ci::emit_f32_to_bf16},
      {"to_f16", elem::f32, elem::i16, ci::emit_f32_to_f16},
      {"from_bf16", elem::i16, elem::f32, ci::emit_bf16_to_f32},
      {"from_f16", elem::i16, elem::f32, ci::emit_f16_to_f32},
      {"to_s8", elem::f32, elem::i8, ci::emit_f32_to_s8},
      {"to_u8", elem::f32, elem::i8, ci::emit_f32_to_u8},
      {"to_s32", elem::f32, elem::i32, ci::emit_f32_to_s32},
  };
  return ops;
}

std::vector<std::byte> compile(const std::string& name, cpu_isa isa, ci::ir_builder build) {
  auto object = ci::compile_object(name, isa, build);
  INFO((object ? std::string() : object.why().message));
  REQUIRE(object.has_value());
  return std::move(object).value();
}

}  // namespace

TEST_CASE("every captured object imports only allowlisted libc functions", "[cpu][symbols]") {
  // Every level, also those above the host: compiling needs no hardware,
  // and the lowering (and so the imports) differs per level.
  auto isa = GENERATE(cpu_isa::x86_64, cpu_isa::sse41, cpu_isa::avx, cpu_isa::avx2,
                      cpu_isa::avx512_core, cpu_isa::avx512_core_bf16, cpu_isa::avx512_core_fp16);
  INFO("isa " << primcache::to_string(isa));

  std::vector<std::pair<std::string, std::vector<std::byte>>> objects;
  objects.emplace_back(
      "axpy", compile("axpy", isa, [&](llvm::Module& m) { cpu_test::build_axpy(m, isa); }));
  objects.emplace_back("fill_zero", compile("fill_zero", isa,
                                            [](llvm::Module& m) { cpu_test::build_fill_zero(m); }));
  objects.emplace_back("math", compile("math", isa, [&](llvm::Module& m) {
                         for (const auto& op : all_ops()) {
                           cpu_test::build_map(m, isa, op.name, op.in, op.out, op.op);
                         }
                       }));

  for (const auto& [name, object] : objects) {
    auto imports = ci::undefined_symbols(object);
    REQUIRE(imports.has_value());
    std::string listed;
    for (const auto& s : imports.value()) listed += s + " ";
    INFO("object " << name << " imports: " << listed);
    for (const auto& s : imports.value()) CHECK(ci::is_allowed_external_symbol(s));
  }
  // The fill kernel is the one that does import memset: the check above
  // would catch a disallowed symbol in it.
  auto fill_imports = ci::undefined_symbols(objects[1].second).value();
  CHECK(fill_imports == std::vector<std::string>{"memset"});
  // And the math object defines one function per helper.
  auto defined = ci::defined_symbols(objects[2].second).value();
  for (const auto& op : all_ops()) {
    CHECK(std::find(defined.begin(), defined.end(), op.name) != defined.end());
  }
}

TEST_CASE("the symbol allowlist holds the libc memory functions and nothing else",
          "[cpu][symbols]") {
  CHECK(ci::is_allowed_external_symbol("memset"));
  CHECK(ci::is_allowed_external_symbol("memcpy"));
  CHECK(ci::is_allowed_external_symbol("memmove"));
  for (const char* s : {"expf", "fmaf", "__truncsfbf2", "system", "malloc", "memset2", ""}) {
    CHECK_FALSE(ci::is_allowed_external_symbol(s));
  }
  CHECK(ci::allowed_external_symbols().size() == 3);
}

TEST_CASE("reading symbols of bytes that are not an object fails as corrupt data",
          "[cpu][symbols][errors]") {
  std::vector<std::byte> garbage(64, std::byte{0x7F});
  auto u = ci::undefined_symbols(garbage);
  REQUIRE_FALSE(u.has_value());
  CHECK(u.why().code == primcache::status::corrupt_data);
  auto d = ci::defined_symbols(std::vector<std::byte>{});
  REQUIRE_FALSE(d.has_value());
  CHECK(d.why().code == primcache::status::corrupt_data);
}
