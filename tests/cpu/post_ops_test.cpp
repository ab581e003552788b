#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "jit/jit_module.hpp"
#include "jit/object_symbols.hpp"
#include "jit/target.hpp"
#include "kernels/post_ops.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/keyhash/key.hpp"
#include "test_isas.hpp"

namespace {

using cpu_test::test_isas;
using primcache::cpu_isa;
namespace ci = primcache::cpu_internal;
using ci::binary_broadcast;
using ci::eltwise_alg;

// void post_ops(const float* x, const float* const* operands, float* y, i64 n):
// y[i] = chain(x[i]), binary operand j read at operands[j][i] (broadcast
// none and per_channel: one channel per element) or operands[j][0] (scalar).
// A vector body as wide as the ISA's registers and a scalar tail, so both
// shapes of the emitted IR run.
using post_ops_fn = void(const float* x, const float* const* operands, float* y, std::int64_t n);

// `joined` > 1: the vector body takes that many vectors a step through the
// emit_post_ops that joins them (post_op_group's count at a time).
void build_post_ops(llvm::Module& m, cpu_isa isa, const ci::post_op_chain& chain,
                    unsigned joined = 1) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* f32 = b.getFloatTy();
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  auto* fn =
      llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, i64}, false),
                             llvm::Function::ExternalLinkage, "post_ops", m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  const unsigned lanes = ci::isa_vector_bits(isa) / 32;
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* vhead = llvm::BasicBlock::Create(ctx, "vhead", fn);
  auto* vbody = llvm::BasicBlock::Create(ctx, "vbody", fn);
  auto* shead = llvm::BasicBlock::Create(ctx, "shead", fn);
  auto* sbody = llvm::BasicBlock::Create(ctx, "sbody", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", fn);
  llvm::Value* n = fn->getArg(3);

  auto operand = [&](const ci::binary_add_op& op, llvm::Value* i, unsigned width) {
    llvm::Type* t = width == 1 ? f32 : llvm::FixedVectorType::get(f32, width);
    llvm::Value* slot = b.CreateGEP(ptr, fn->getArg(1), b.getInt64(op.arg_index));
    llvm::Value* base = b.CreateAlignedLoad(ptr, slot, llvm::Align(8));
    if (op.broadcast == binary_broadcast::scalar) {
      llvm::Value* s = b.CreateAlignedLoad(f32, base, llvm::Align(4));
      return width == 1 ? s : b.CreateVectorSplat(width, s);
    }
    return static_cast<llvm::Value*>(
        b.CreateAlignedLoad(t, b.CreateGEP(f32, base, i), llvm::Align(4)));
  };
  auto joined_body = [&](llvm::Value* i) {
    llvm::Type* t = llvm::FixedVectorType::get(f32, lanes);
    auto at = [&](std::size_t k) { return b.CreateAdd(i, b.getInt64(k * lanes)); };
    ci::emit_post_ops(
        b, joined, chain, ci::post_op_group(chain, ci::isa_vector_bits(isa)),
        [&](std::size_t k) {
          return b.CreateAlignedLoad(t, b.CreateGEP(f32, fn->getArg(0), at(k)), llvm::Align(4));
        },
        [&](int, const ci::binary_add_op& op, std::size_t k) { return operand(op, at(k), lanes); },
        [&](std::size_t k, llvm::Value* y) {
          b.CreateAlignedStore(y, b.CreateGEP(f32, fn->getArg(2), at(k)), llvm::Align(4));
        });
  };
  auto body = [&](llvm::Value* i, unsigned width) {
    llvm::Type* t = width == 1 ? f32 : llvm::FixedVectorType::get(f32, width);
    llvm::Value* x = b.CreateAlignedLoad(t, b.CreateGEP(f32, fn->getArg(0), i), llvm::Align(4));
    llvm::Value* y = ci::emit_post_ops(
        b, x, chain, [&](int, const ci::binary_add_op& op) { return operand(op, i, width); });
    b.CreateAlignedStore(y, b.CreateGEP(f32, fn->getArg(2), i), llvm::Align(4));
  };

  b.SetInsertPoint(entry);
  const unsigned step = lanes * joined;
  llvm::Value* nvec = b.CreateMul(b.CreateUDiv(n, b.getInt64(step)), b.getInt64(step));
  b.CreateBr(vhead);
  b.SetInsertPoint(vhead);
  llvm::PHINode* i = b.CreatePHI(i64, 2);
  i->addIncoming(b.getInt64(0), entry);
  b.CreateCondBr(b.CreateICmpULT(i, nvec), vbody, shead);
  b.SetInsertPoint(vbody);
  if (joined > 1) {
    joined_body(i);
  } else {
    body(i, lanes);
  }
  i->addIncoming(b.CreateAdd(i, b.getInt64(step)), b.GetInsertBlock());
  b.CreateBr(vhead);
  b.SetInsertPoint(shead);
  llvm::PHINode* j = b.CreatePHI(i64, 2);
  j->addIncoming(i, vhead);
  b.CreateCondBr(b.CreateICmpULT(j, n), sbody, exit);
  b.SetInsertPoint(sbody);
  body(j, 1);
  j->addIncoming(b.CreateAdd(j, b.getInt64(1)), b.GetInsertBlock());
  b.CreateBr(shead);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
}

struct compiled {
  std::unique_ptr<ci::jit_module> module;
  post_ops_fn* fn;
};

compiled compile(cpu_isa isa, const ci::post_op_chain& chain, unsigned joined = 1) {
  auto m = ci::jit_module::compile(
      "post_ops", isa, [&](llvm::Module& mod) { build_post_ops(mod, isa, chain, joined); });
  INFO((m ? std::string() : m.why().message));
  REQUIRE(m.has_value());
  auto fn = m.value()->lookup_function<post_ops_fn>("post_ops");
  REQUIRE(fn.has_value());
  return {std::move(m).value(), fn.value()};
}

ci::post_op eltwise(eltwise_alg alg, float alpha = 0.f, float beta = 0.f, float scale = 1.f) {
  ci::post_op op;
  op.what = ci::post_op::kind::eltwise;
  op.eltwise = {alg, alpha, beta, scale};
  return op;
}
ci::post_op binary(int index, binary_broadcast bcast) {
  ci::post_op op;
  op.what = ci::post_op::kind::binary_add;
  op.binary = {index, bcast};
  return op;
}

// Inputs across the ranges where the functions change shape (both tails of
// the gelus included), and the special values. An odd count, so the scalar
// tail runs.
std::vector<float> inputs() {
  std::vector<float> x;
  for (int i = -1200; i <= 1200; ++i) x.push_back(static_cast<float>(i) * 0.01f);
  for (float v : {1e-30f, -1e-30f, FLT_MIN, -FLT_MIN, 40.f, -40.f, 100.f, -100.f, 0.f, -0.f,
                  std::numeric_limits<float>::denorm_min()}) {
    x.push_back(v);
  }
  if (x.size() % 2 == 0) x.push_back(0.5f);
  return x;
}

float ulp_at(float x) {
  const float a = std::fabs(x);
  if (std::isinf(a) || std::isnan(a)) return 0.f;
  return std::nextafter(a, std::numeric_limits<float>::infinity()) - a;
}

// Allowed distance from the reference (itself a double result rounded to
// float). Exact for relu and clip (selects only); for linear a multiply and
// an add, each rounded, so 2 ulp of the terms' magnitude (cancellation makes
// the result's own ulp meaningless); for the transcendental functions the
// bounds ir_math.hpp guarantees (exp 1.5, tanh 2, sigmoid 3, gelu_erf 6,
// gelu_tanh 4 ulp) plus one for the reference's rounding and one for a
// scale other than 1.
double allowed(const ci::eltwise_op& op, float x, float ref) {
  double ulps = 0;
  switch (op.alg) {
    case eltwise_alg::relu:
      return op.alpha == 0.f ? 0.0 : 2.0 * ulp_at(op.alpha * x) * std::fabs(op.scale);
    case eltwise_alg::clip: return op.scale == 1.f ? 0.0 : ulp_at(ref);
    case eltwise_alg::linear:
      return 2.0 * (ulp_at(op.alpha * x) + ulp_at(op.beta)) * std::fabs(op.scale) + ulp_at(ref);
    case eltwise_alg::exp: ulps = 1.5; break;
    case eltwise_alg::tanh: ulps = 2; break;
    case eltwise_alg::sigmoid: ulps = 3; break;
    case eltwise_alg::gelu_erf: ulps = 6; break;
    case eltwise_alg::gelu_tanh: ulps = 4; break;
  }
  ulps += op.scale == 1.f ? 1 : 2;
  // Results in the subnormal range carry absolute, not relative, error.
  return ulps * std::max(ulp_at(ref), std::numeric_limits<float>::denorm_min());
}

bool same(float got, float want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(static_cast<double>(got) - want) <= tol;
}

}  // namespace

TEST_CASE("emitted eltwise post-ops match their references", "[cpu][post_ops]") {
  struct named {
    const char* name;
    ci::eltwise_op op;
  };
  const named e = GENERATE(named{"relu", {eltwise_alg::relu, 0.f, 0.f, 1.f}},
                           named{"leaky relu", {eltwise_alg::relu, 0.2f, 0.f, 1.f}},
                           named{"gelu_erf", {eltwise_alg::gelu_erf, 0.f, 0.f, 1.f}},
                           named{"gelu_tanh", {eltwise_alg::gelu_tanh, 0.f, 0.f, 1.f}},
                           named{"tanh", {eltwise_alg::tanh, 0.f, 0.f, 1.f}},
                           named{"sigmoid", {eltwise_alg::sigmoid, 0.f, 0.f, 1.f}},
                           named{"exp", {eltwise_alg::exp, 0.f, 0.f, 1.f}},
                           named{"linear", {eltwise_alg::linear, 1.5f, -0.25f, 1.f}},
                           named{"clip", {eltwise_alg::clip, -2.f, 3.f, 1.f}},
                           named{"scaled sigmoid", {eltwise_alg::sigmoid, 0.f, 0.f, -2.5f}},
                           named{"scaled clip", {eltwise_alg::clip, -1.f, 1.f, 0.5f}});
  INFO(e.name);
  const ci::post_op_chain chain = {ci::post_op{ci::post_op::kind::eltwise, e.op, {}}};
  auto x = inputs();
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  for (cpu_isa isa : test_isas()) {
    INFO(primcache::to_string(isa));
    compiled k = compile(isa, chain);
    std::vector<float> y(x.size());
    k.fn(x.data(), nullptr, y.data(), static_cast<std::int64_t>(x.size()));
    int bad = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float want = ci::eltwise_reference(x[i], e.op);
      if (!same(y[i], want, allowed(e.op, x[i], want)) && bad++ < 3) {
        FAIL_CHECK("x " << x[i] << ": got " << y[i] << ", want " << want);
      }
    }
    CHECK(bad == 0);
  }
}

// Operands for the chains below, for `n` elements: 0 a scalar, 1 shaped
// as dst, 2 one per element (per channel).
struct chain_operands {
  explicit chain_operands(std::size_t n) : same_shape(n), per_element(n) {
    for (std::size_t i = 0; i < n; ++i) {
      same_shape[i] = std::sin(static_cast<float>(i));
      per_element[i] = 0.25f * std::cos(static_cast<float>(i));
    }
  }
  chain_operands(const chain_operands&) = delete;  // `pointers` point into this object
  chain_operands& operator=(const chain_operands&) = delete;
  float scalar = -0.75f;
  std::vector<float> same_shape, per_element;
  const float* pointers[3] = {&scalar, same_shape.data(), per_element.data()};
};

TEST_CASE("emitted post-op chains apply eltwise and binary additions in order", "[cpu][post_ops]") {
  const ci::post_op_chain chain = {
      binary(1, binary_broadcast::none),        eltwise(eltwise_alg::tanh),
      binary(0, binary_broadcast::scalar),      eltwise(eltwise_alg::linear, 2.f, 1.f),
      binary(2, binary_broadcast::per_channel), eltwise(eltwise_alg::relu)};
  const auto x = inputs();
  const chain_operands o(x.size());
  for (cpu_isa isa : test_isas()) {
    INFO(primcache::to_string(isa));
    compiled k = compile(isa, chain);
    std::vector<float> y(x.size());
    k.fn(x.data(), o.pointers, y.data(), static_cast<std::int64_t>(x.size()));
    int bad = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float ops[] = {o.same_shape[i], 0.f, o.scalar, 0.f, o.per_element[i], 0.f};
      const float want = ci::apply_post_ops_reference(x[i], chain, ops);
      // tanh (3 ulp with rounding) of an exactly added input, then
      // additions: each step at most 2 ulp of 4 (the largest magnitude).
      const double tol = 8.0 * ulp_at(4.f);
      if (!same(y[i], want, tol) && bad++ < 3) {
        FAIL_CHECK("x " << x[i] << ": got " << y[i] << ", want " << want);
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("post-ops applied to vectors joined into one give each vector's own results",
          "[cpu][post_ops]") {
  // Seven vectors a step: joined 4 + 2 + 1 at AVX-512, 2 + 2 + 2 + 1 below;
  // each must get its own dst-shaped and per-element operands and the same
  // bits as a vector taken alone.
  const ci::post_op_chain chain = {
      binary(1, binary_broadcast::none),        eltwise(eltwise_alg::gelu_erf),
      binary(0, binary_broadcast::scalar),      eltwise(eltwise_alg::tanh),
      binary(2, binary_broadcast::per_channel), eltwise(eltwise_alg::sigmoid, 0.f, 0.f, 1.5f)};
  REQUIRE(ci::post_op_group(chain, 512) == 4);
  REQUIRE(ci::post_op_group(chain, 256) == 2);
  REQUIRE(ci::post_op_group({binary(0, binary_broadcast::none), eltwise(eltwise_alg::relu),
                             eltwise(eltwise_alg::linear, 2.f, 1.f), eltwise(eltwise_alg::clip)},
                            512) == 1);
  const auto x = inputs();
  const chain_operands o(x.size());
  for (cpu_isa isa : test_isas()) {
    INFO(primcache::to_string(isa));
    compiled alone = compile(isa, chain);
    compiled joined = compile(isa, chain, 7);
    std::vector<float> want(x.size()), got(x.size());
    alone.fn(x.data(), o.pointers, want.data(), static_cast<std::int64_t>(x.size()));
    joined.fn(x.data(), o.pointers, got.data(), static_cast<std::int64_t>(x.size()));
    int bad = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const bool same_bits = std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
      if (!same_bits && bad++ < 3) {
        FAIL_CHECK("element " << i << ", x " << x[i] << ": got " << got[i] << ", want " << want[i]);
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("relu keeps NaN whatever its slope", "[cpu][post_ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float alpha : {0.f, 0.1f}) {
    CHECK(std::isnan(ci::eltwise_reference(nan, {eltwise_alg::relu, alpha, 0.f, 1.f})));
    for (cpu_isa isa : test_isas()) {
      compiled k = compile(isa, {eltwise(eltwise_alg::relu, alpha)});
      std::vector<float> x(17, nan), y(17, 0.f);
      k.fn(x.data(), nullptr, y.data(), 17);
      for (float v : y) CHECK(std::isnan(v));
    }
  }
}

TEST_CASE("the gelu references stay accurate in their negative tails", "[cpu][post_ops]") {
  // gelu(x) = x * Phi(x); at x = -8, Phi(x) = 6.22096e-16 (to 6 digits), far
  // below what 1 + erf(x / sqrt 2) keeps in double.
  const float g = ci::eltwise_reference(-8.f, {eltwise_alg::gelu_erf, 0.f, 0.f, 1.f});
  CHECK(g == Approx(-8.0 * 6.22096e-16).epsilon(1e-5));
  const float t = ci::eltwise_reference(-8.f, {eltwise_alg::gelu_tanh, 0.f, 0.f, 1.f});
  // 0.5 (1 + tanh u) = sigmoid(2u) with u = sqrt(2/pi)(x + 0.044715 x^3):
  // about e^-49.3 here, so gelu_tanh(-8) is about -3.1e-21.
  CHECK(t < -2e-21f);
  CHECK(t > -4e-21f);
  CHECK(std::signbit(ci::eltwise_reference(-INFINITY, {eltwise_alg::gelu_erf, 0.f, 0.f, 1.f})));
}

TEST_CASE("post-op objects import only allowlisted symbols", "[cpu][post_ops][symbols]") {
  ci::post_op_chain chain;
  for (auto alg :
       {eltwise_alg::relu, eltwise_alg::gelu_erf, eltwise_alg::gelu_tanh, eltwise_alg::tanh,
        eltwise_alg::sigmoid, eltwise_alg::exp, eltwise_alg::linear, eltwise_alg::clip}) {
    chain.push_back(eltwise(alg, 0.5f, 2.f, 1.5f));
  }
  chain.push_back(binary(0, binary_broadcast::scalar));
  for (cpu_isa isa : test_isas()) {
    compiled k = compile(isa, chain);
    auto symbols = ci::undefined_symbols(k.module->object());
    REQUIRE(symbols.has_value());
    for (const std::string& s : symbols.value()) {
      INFO(s);
      CHECK(ci::is_allowed_external_symbol(s));
    }
  }
}

TEST_CASE("post-op chains write keys that tell them apart", "[cpu][post_ops][key]") {
  auto key_of = [](const ci::post_op_chain& c) {
    primcache::key_writer w;
    ci::write_key(w, c);
    return w.finish();
  };
  const ci::post_op_chain relu = {eltwise(eltwise_alg::relu)};
  CHECK(key_of(relu) == key_of({eltwise(eltwise_alg::relu)}));
  CHECK_FALSE(key_of(relu) == key_of({}));
  CHECK_FALSE(key_of(relu) == key_of({eltwise(eltwise_alg::relu, -0.f)}));  // bit patterns
  CHECK_FALSE(key_of(relu) == key_of({eltwise(eltwise_alg::relu, 0.f, 0.f, 2.f)}));
  CHECK_FALSE(key_of({binary(0, binary_broadcast::scalar)}) ==
              key_of({binary(0, binary_broadcast::none)}));
  CHECK_FALSE(key_of({binary(0, binary_broadcast::scalar)}) ==
              key_of({binary(1, binary_broadcast::scalar)}));
  CHECK_FALSE(key_of({relu[0], binary(0, binary_broadcast::none)}) ==
              key_of({binary(0, binary_broadcast::none), relu[0]}));
}
