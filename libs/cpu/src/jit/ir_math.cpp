#include "jit/ir_math.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "jit/compiler.hpp"

namespace primcache::cpu_internal {
namespace {

// Polynomial coefficients, highest degree first, fitted in Chebyshev nodes
// (near-minimax) with the coefficients rounded to float.

// e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2]; relative error 7e-10.
constexpr float kExp[] = {0.000198909809f, 0.00139336416f, 0.00833331048f,
                          0.0416664667f,   0.166666672f,   0.5f};
// tanh(x) = x + x^3 R(x^2) for |x| < 0.625; relative error 4e-9.
constexpr float kTanh[] = {0.00229274482f, -0.00834394526f, 0.0217689183f,
                           -0.0539592579f, 0.133333042f,    -0.333333343f};
// erf(x) = x P(x^2) for |x| < 1; relative error 7e-8.
constexpr float kErf[] = {7.87587487e-05f, -0.00080168643f, 0.00518908724f, -0.0268542115f,
                          0.112835944f,    -0.37612626f,    1.12837911f};
// erfc(x) = t e^(-x^2 + P(2.5 t - 1)) with t = 2/(2 + x), for x >= 0.5;
// absolute error of P 1.8e-8, so relative error of erfc the same.
constexpr float kErfcLog[] = {2.46508389e-05f, 2.79458363e-05f, -0.000198156573f, -0.000219884008f,
                              0.00115421473f,  0.00161172752f,  -0.00697428267f,  -0.0183658786f,
                              0.0463760383f,   0.51876837f,     -0.80407232f};

// Cody-Waite split of ln 2: n * kLn2Hi is exact for |n| < 2^15.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kLog2e = 1.44269504088896341f;
// Adding then subtracting 1.5 * 2^23 rounds |v| < 2^22 to an integer, ties
// to even, in the default rounding mode (no fast-math flags let LLVM fold it).
constexpr float kRoundMagic = 12582912.0f;
// e^x rounds to 0 below kExpMin, even times a factor up to 2^23, and
// overflows above kExpMax; both keep 2^(n/2) a normal float.
constexpr float kExpMin = -120.0f;
constexpr float kExpMax = 89.0f;

llvm::Type* int_like(llvm::Type* t, unsigned bits) {
  llvm::Type* scalar = llvm::Type::getIntNTy(t->getContext(), bits);
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(t)) {
    return llvm::VectorType::get(scalar, v->getElementCount());
  }
  return scalar;
}

llvm::Type* float_like(llvm::Type* t) {
  llvm::Type* scalar = llvm::Type::getFloatTy(t->getContext());
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(t)) {
    return llvm::VectorType::get(scalar, v->getElementCount());
  }
  return scalar;
}

// Splat constants of x's shape.
llvm::Constant* fconst(llvm::Type* t, float v) {
  return llvm::ConstantFP::get(t, v);
}
llvm::Constant* iconst(llvm::Type* t, std::uint64_t v) {
  return llvm::ConstantInt::get(t, v);
}

llvm::Value* fmuladd(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  // Fused where the ISA has FMA, a multiply and an add otherwise; never the
  // libm fmaf that llvm.fma becomes without FMA hardware.
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

template <std::size_t N>
llvm::Value* horner(llvm::IRBuilderBase& b, llvm::Value* x, const float (&c)[N]) {
  llvm::Type* t = x->getType();
  llvm::Value* acc = fconst(t, c[0]);
  for (std::size_t i = 1; i < N; ++i) acc = fmuladd(b, acc, x, fconst(t, c[i]));
  return acc;
}

llvm::Value* fabs(llvm::IRBuilderBase& b, llvm::Value* x) {
  return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
}

llvm::Value* copysign(llvm::IRBuilderBase& b, llvm::Value* magnitude, llvm::Value* sign) {
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, magnitude, sign);
}

llvm::Value* is_nan(llvm::IRBuilderBase& b, llvm::Value* x) {
  return b.CreateFCmpUNO(x, x);
}

// x clamped to [lo, hi]; NaN stays NaN.
llvm::Value* clamp(llvm::IRBuilderBase& b, llvm::Value* x, float lo, float hi) {
  llvm::Type* t = x->getType();
  x = b.CreateSelect(b.CreateFCmpOLT(x, fconst(t, lo)), fconst(t, lo), x);
  return b.CreateSelect(b.CreateFCmpOGT(x, fconst(t, hi)), fconst(t, hi), x);
}

// 2^n for integer n in [-126, 127] (i32 lanes), as float.
llvm::Value* pow2(llvm::IRBuilderBase& b, llvm::Value* n, llvm::Type* ft) {
  llvm::Type* it = n->getType();
  llvm::Value* biased = b.CreateAdd(n, iconst(it, 127));
  return b.CreateBitCast(b.CreateShl(biased, iconst(it, 23)), ft);
}

// e^(hi + lo) as y * s1 * s2, where lo is a small correction to hi (or
// null): range reduction hi = n ln2 + r with n = round(hi log2e), e^r = y by
// polynomial, and 2^n split in two factors so that the scaling, applied
// last, rounds once even for subnormal results.
struct exp_parts {
  llvm::Value* arg;        // hi
  llvm::Value* nan;        // hi is NaN
  llvm::Value* underflow;  // hi < kExpMin: e^hi times any modest factor is 0
  llvm::Value* y;
  llvm::Value* s1;
  llvm::Value* s2;
};

exp_parts exp_reduce(llvm::IRBuilderBase& b, llvm::Value* hi, llvm::Value* lo) {
  llvm::Type* ft = hi->getType();
  llvm::Type* it = int_like(ft, 32);
  exp_parts parts;
  parts.arg = hi;
  parts.nan = is_nan(b, hi);
  parts.underflow = b.CreateFCmpOLT(hi, fconst(ft, kExpMin));
  llvm::Value* xc = clamp(b, hi, kExpMin, kExpMax);
  xc = b.CreateSelect(parts.nan, fconst(ft, 0.0f), xc);

  llvm::Value* t = b.CreateFMul(xc, fconst(ft, kLog2e));
  llvm::Value* nf = b.CreateFSub(b.CreateFAdd(t, fconst(ft, kRoundMagic)), fconst(ft, kRoundMagic));
  llvm::Value* r = fmuladd(b, nf, fconst(ft, -kLn2Hi), xc);
  r = fmuladd(b, nf, fconst(ft, -kLn2Lo), r);
  if (lo != nullptr) {
    // The correction only means something while hi was not clamped.
    llvm::Value* in_range = b.CreateFCmpOEQ(xc, hi);
    r = b.CreateFAdd(r, b.CreateSelect(in_range, lo, fconst(ft, 0.0f)));
  }
  llvm::Value* p = horner(b, r, kExp);
  llvm::Value* y = fmuladd(b, p, b.CreateFMul(r, r), r);
  parts.y = b.CreateFAdd(y, fconst(ft, 1.0f));

  llvm::Value* n = b.CreateFPToSI(nf, it);
  llvm::Value* n1 = b.CreateAShr(n, iconst(it, 1));
  parts.s1 = pow2(b, n1, ft);
  parts.s2 = pow2(b, b.CreateSub(n, n1), ft);
  return parts;
}

// factor * e^(hi + lo) (factor null: 1), rounded once at the last scaling;
// NaN for a NaN exponent. The factor must be far from overflow (|factor| <
// 2^60) and, below kExpMin, small enough that the product underflows
// (|factor| < 2^23).
llvm::Value* exp_finish(llvm::IRBuilderBase& b, const exp_parts& parts, llvm::Value* factor) {
  llvm::Value* y = factor != nullptr ? b.CreateFMul(parts.y, factor) : parts.y;
  llvm::Value* v = b.CreateFMul(b.CreateFMul(y, parts.s1), parts.s2);
  if (factor != nullptr) {
    llvm::Value* zero = copysign(b, fconst(factor->getType(), 0.0f), factor);
    v = b.CreateSelect(parts.underflow, zero, v);
  }
  return b.CreateSelect(parts.nan, parts.arg, v);
}

llvm::Value* exp_core(llvm::IRBuilderBase& b, llvm::Value* hi, llvm::Value* lo) {
  return exp_finish(b, exp_reduce(b, hi, lo), nullptr);
}

// Error-free transformations (Dekker, Knuth). A product's error is one
// fused multiply-add where the ISA has FMA, and from split operands below
// it (never llvm.fma's libm call), so it is exact at every ISA level. They
// rely on IEEE float semantics, which LLVM keeps because no fast-math flag
// is set and plain multiplies and adds are never fused.

// a = hi + lo with hi holding the top 12 significant bits, lo the rest.
std::pair<llvm::Value*, llvm::Value*> split(llvm::IRBuilderBase& b, llvm::Value* a) {
  llvm::Type* ft = a->getType();
  llvm::Type* it = int_like(ft, 32);
  llvm::Value* hi =
      b.CreateBitCast(b.CreateAnd(b.CreateBitCast(a, it), iconst(it, 0xFFFFF000u)), ft);
  return {hi, b.CreateFSub(a, hi)};
}

// Whether the kernel being built runs where FMA is (avx2 and up).
bool has_fma(llvm::IRBuilderBase& b) {
  const llvm::Module* m = b.GetInsertBlock()->getModule();
  const auto isa = module_isa(*m);
  return isa && *isa >= cpu_isa::avx2;
}

// x * y = p + e exactly (barring overflow and underflow): e is fma(x, y,
// -p) where the ISA fuses, else from halves whose products have at most 24
// significant bits (2 instructions against 10; the same e).
std::pair<llvm::Value*, llvm::Value*> two_prod(llvm::IRBuilderBase& b, llvm::Value* x,
                                               llvm::Value* y) {
  if (has_fma(b)) {
    llvm::Value* p = b.CreateFMul(x, y);
    return {p, b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, b.CreateFNeg(p)})};
  }
  auto [xh, xl] = split(b, x);
  auto [yh, yl] = split(b, y);
  llvm::Value* p = b.CreateFMul(x, y);
  llvm::Value* e = b.CreateFSub(b.CreateFMul(xh, yh), p);
  e = b.CreateFAdd(e, b.CreateFMul(xh, yl));
  e = b.CreateFAdd(e, b.CreateFMul(xl, yh));
  e = b.CreateFAdd(e, b.CreateFMul(xl, yl));
  return {p, e};
}

// x + y = s + e exactly, whatever their magnitudes.
std::pair<llvm::Value*, llvm::Value*> two_sum(llvm::IRBuilderBase& b, llvm::Value* x,
                                              llvm::Value* y) {
  llvm::Value* s = b.CreateFAdd(x, y);
  llvm::Value* yy = b.CreateFSub(s, x);
  llvm::Value* e = b.CreateFAdd(b.CreateFSub(x, b.CreateFSub(s, yy)), b.CreateFSub(y, yy));
  return {s, e};
}

// erf(y) for |y| < 1.
llvm::Value* erf_small(llvm::IRBuilderBase& b, llvm::Value* y) {
  return b.CreateFMul(y, horner(b, b.CreateFMul(y, y), kErf));
}

// erfc(ay) = t e^(-y^2 + P(t)) for ay = |y| >= 0.5 (other lanes give
// values that callers select away), where sq_hi + sq_lo = y^2 exactly. The
// exponent is carried as a pair into exp: rounding it to one float would
// cost up to 40 ulp of erfc for y near 9. Callers finish with
// exp_finish(e, t * factor).
struct erfc_parts {
  llvm::Value* t;
  exp_parts e;
};

erfc_parts erfc_reduce(llvm::IRBuilderBase& b, llvm::Value* ay, llvm::Value* sq_hi,
                       llvm::Value* sq_lo) {
  llvm::Type* ft = ay->getType();
  llvm::Value* two = fconst(ft, 2.0f);
  llvm::Value* t = b.CreateFDiv(two, b.CreateFAdd(two, ay));
  llvm::Value* p = horner(b, fmuladd(b, t, fconst(ft, 2.5f), fconst(ft, -1.0f)), kErfcLog);
  auto [hi, lo] = two_sum(b, b.CreateFNeg(sq_hi), p);
  return {t, exp_reduce(b, hi, b.CreateFSub(lo, sq_lo))};
}

// factor * sigmoid(v) for v = hi + lo (lo a small correction, or null;
// factor null: 1). With e = e^-|v|, which never overflows, sigmoid(v) is
// 1/(1+e) for v >= 0 and e/(1+e) for v < 0, both free of cancellation; the
// second is scaled last so that factor * sigmoid(v) rounds once even where
// sigmoid(v) alone would be subnormal.
llvm::Value* sigmoid_core(llvm::IRBuilderBase& b, llvm::Value* hi, llvm::Value* lo,
                          llvm::Value* factor) {
  llvm::Type* ft = hi->getType();
  llvm::Value* positive = b.CreateFCmpOGE(hi, fconst(ft, 0.0f));
  llvm::Value* neg_lo = nullptr;
  if (lo != nullptr) neg_lo = b.CreateSelect(positive, b.CreateFNeg(lo), lo);
  exp_parts e = exp_reduce(b, b.CreateFNeg(fabs(b, hi)), neg_lo);
  llvm::Value* d =
      b.CreateFDiv(fconst(ft, 1.0f), b.CreateFAdd(fconst(ft, 1.0f), exp_finish(b, e, nullptr)));
  if (factor != nullptr) d = b.CreateFMul(factor, d);
  return b.CreateSelect(positive, d, exp_finish(b, e, d));
}

// Where the gelus are known without their tails: x itself above `above`
// (their Phi(x) rounds away in x Phi(x)), -0 below `below` (under half the
// smallest subnormal; -inf included). Those lanes compute from stand-ins
// instead (x clamped to `above`, a factor of -0; gelu_tanh also takes v at
// the clamp below): from their own values the tails would be subnormal or
// underflow, and on x86 an instruction whose result underflows takes a
// microcode assist, over a hundred cycles for the whole vector, which
// inputs of magnitude 10 or more (a matmul's sums before a gelu) hit in
// most vectors (docs/PERFORMANCE.md, "Subnormal tails"). The results are
// the same bits. NaN is in neither range.
struct gelu_lanes {
  llvm::Value* under;    // x < below
  llvm::Value* clamped;  // x, or `above` where x > above
  llvm::Value* factor;   // x, or -0 where x < below
};

gelu_lanes gelu_known_lanes(llvm::IRBuilderBase& b, llvm::Value* x, float below, float above) {
  llvm::Type* ft = x->getType();
  llvm::Value* top = fconst(ft, above);
  llvm::Value* under = b.CreateFCmpOLT(x, fconst(ft, below));
  return {under, b.CreateSelect(b.CreateFCmpOGT(x, top), top, x),
          b.CreateSelect(under, fconst(ft, -0.0f), x)};
}

// NaN -> 0, then x clamped to [lo, hi] (inside +-2^31), rounded to nearest
// even and converted to i32.
llvm::Value* to_i32_rne(llvm::IRBuilderBase& b, llvm::Value* x, float lo, float hi) {
  llvm::Type* ft = x->getType();
  llvm::Value* nan = is_nan(b, x);
  llvm::Value* c = clamp(b, b.CreateSelect(nan, fconst(ft, 0.0f), x), lo, hi);
  return b.CreateFPToSI(emit_round_half_even(b, c), int_like(ft, 32));
}

// to_i32_rne for a range inside +-2^22, 8 bits out, in 5 operations
// instead of 11 (f32 -> s8 was compute-bound at half oneDNN's speed):
// c + 1.5 * 2^23 rounds c to an integer, ties to even, and holds it in the
// sum's low mantissa bits (two's complement for negative c: the sum's bits
// are 0x4B400000 + round(c)), so the byte is the sum's low byte. NaN lanes
// take the constant itself, whose low byte is 0.
llvm::Value* to_byte_rne(llvm::IRBuilderBase& b, llvm::Value* x, float lo, float hi) {
  llvm::Type* ft = x->getType();
  llvm::Value* magic = fconst(ft, 12582912.0f);
  llvm::Value* sum = b.CreateFAdd(clamp(b, x, lo, hi), magic);
  sum = b.CreateSelect(is_nan(b, x), magic, sum);
  return b.CreateTrunc(b.CreateBitCast(sum, int_like(ft, 32)), int_like(ft, 8));
}

}  // namespace

llvm::Value* emit_exp(llvm::IRBuilderBase& b, llvm::Value* x) {
  return exp_core(b, x, nullptr);
}

llvm::Value* emit_tanh(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Value* one = fconst(ft, 1.0f);
  llvm::Value* ax = fabs(b, x);
  llvm::Value* z = b.CreateFMul(x, x);
  llvm::Value* small = fmuladd(b, b.CreateFMul(x, z), horner(b, z, kTanh), x);
  // 1 - 2/(e^2|x| + 1): e^2|x| is at least 3.49 here, so the subtraction
  // loses at most one bit. NaN flows through exp.
  llvm::Value* e = emit_exp(b, b.CreateFAdd(ax, ax));
  llvm::Value* large = b.CreateFSub(one, b.CreateFDiv(fconst(ft, 2.0f), b.CreateFAdd(e, one)));
  // tanh is odd; the sign goes back on at the end so that tanh(-0) = -0.
  return copysign(b, b.CreateSelect(b.CreateFCmpOLT(ax, fconst(ft, 0.625f)), small, large), x);
}

llvm::Value* emit_sigmoid(llvm::IRBuilderBase& b, llvm::Value* x) {
  return sigmoid_core(b, x, nullptr, nullptr);
}

llvm::Value* emit_erf(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Value* ax = fabs(b, x);
  auto [hi, lo] = two_prod(b, ax, ax);
  erfc_parts erfc = erfc_reduce(b, ax, hi, lo);
  llvm::Value* large = b.CreateFSub(fconst(ft, 1.0f), exp_finish(b, erfc.e, erfc.t));
  // NaN fails the comparison and flows through exp_finish.
  return b.CreateSelect(b.CreateFCmpOLT(ax, fconst(ft, 1.0f)), erf_small(b, x),
                        copysign(b, large, x));
}

llvm::Value* emit_gelu_erf(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Value* half = fconst(ft, 0.5f);
  llvm::Value* one = fconst(ft, 1.0f);
  constexpr float inv_sqrt2 = 0.707106781186547524f;
  llvm::Value* y = b.CreateFMul(x, fconst(ft, inv_sqrt2));
  llvm::Value* ay = fabs(b, y);
  // Above 6, 1 - Phi(x) < 1e-9 rounds away in x (1 - erfc(y)/2): the tail
  // is taken at 6. Below -14.5 the factor -0 makes it -0 without an
  // underflow.
  gelu_lanes known = gelu_known_lanes(b, x, -14.5f, 6.0f);
  // (x / sqrt 2)^2 = x^2 / 2 exactly, from x's exact square: the rounding of
  // y itself does not reach the exponential.
  llvm::Value* ax = fabs(b, known.clamped);
  auto [hi, lo] = two_prod(b, ax, ax);
  llvm::Value* ay_tail = b.CreateFMul(ax, fconst(ft, inv_sqrt2));  // ay where not clamped
  erfc_parts erfc = erfc_reduce(b, ay_tail, b.CreateFMul(hi, half), b.CreateFMul(lo, half));
  // gelu = x Phi(x), Phi(x) = (1 + erf(y)) / 2. For |y| < 0.5 from erf;
  // beyond, from erfc: x (1 - erfc(y)/2) for x > 0, and x erfc(|y|)/2 for
  // x < 0, where 1 + erf(y) would cancel, with x folded into exp's scaling.
  llvm::Value* negative = b.CreateFCmpOLT(x, fconst(ft, 0.0f));
  llvm::Value* factor =
      b.CreateFMul(b.CreateFMul(erfc.t, half), b.CreateSelect(negative, known.factor, one));
  llvm::Value* tail = exp_finish(b, erfc.e, factor);
  llvm::Value* large = b.CreateSelect(negative, tail, b.CreateFMul(x, b.CreateFSub(one, tail)));
  llvm::Value* small = b.CreateFMul(x, fmuladd(b, erf_small(b, y), half, half));
  return b.CreateSelect(b.CreateFCmpOLT(ay, half), small, large);
}

llvm::Value* emit_gelu_tanh(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  // 1 + tanh(u) = 2 sigmoid(2u), so gelu = x sigmoid(v) with
  // v = 2u = x (c1 + c2 x^2), c1 = 2 sqrt(2/pi), c2 = 0.044715 c1. For
  // x < 0, sigmoid(v) ~ e^v, whose relative error is v's absolute error: v
  // is carried as a float pair (about 44 bits) so that x near -10 keeps a
  // few ulp instead of hundreds.
  constexpr double c1 = 1.5957691216057307117597842397375;
  constexpr double c2 = c1 * 0.044715;
  constexpr float c1h = static_cast<float>(c1);
  constexpr float c1l = static_cast<float>(c1 - static_cast<double>(c1h));
  constexpr float c2h = static_cast<float>(c2);
  constexpr float c2l = static_cast<float>(c2 - static_cast<double>(c2h));

  // Above 6, sigmoid(v) rounds to 1 (v = 25 at 6: e^-25 is far below half
  // an ulp of 1); below -11, x sigmoid(v) is -0 (v = -112 at -11). Both
  // take v at 6, since sigmoid_core computes e^-|v| unscaled; the factor
  // -0 gives the second its -0.
  gelu_lanes known = gelu_known_lanes(b, x, -11.0f, 6.0f);
  llvm::Value* xv = b.CreateSelect(known.under, fconst(ft, 6.0f), known.clamped);
  auto [sh, sl] = two_prod(b, xv, xv);
  auto [ph, pl] = two_prod(b, fconst(ft, c2h), sh);  // c2 x^2
  pl = b.CreateFAdd(pl, fmuladd(b, fconst(ft, c2h), sl, b.CreateFMul(fconst(ft, c2l), sh)));
  auto [wh, wl] = two_sum(b, fconst(ft, c1h), ph);  // c1 + c2 x^2
  wl = b.CreateFAdd(wl, b.CreateFAdd(pl, fconst(ft, c1l)));
  auto [vh, vl] = two_prod(b, xv, wh);  // x (c1 + c2 x^2)
  vl = fmuladd(b, xv, wl, vl);
  return sigmoid_core(b, vh, vl, known.factor);
}

llvm::Value* emit_round_half_even(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  // (|x| + 2^23) - 2^23 rounds |x| < 2^23 to an integer, ties to even; the
  // sign is put back so that -0.3 gives -0.
  constexpr float two23 = 8388608.0f;
  llvm::Value* ax = fabs(b, x);
  llvm::Value* r = b.CreateFSub(b.CreateFAdd(ax, fconst(ft, two23)), fconst(ft, two23));
  return b.CreateSelect(b.CreateFCmpOLT(ax, fconst(ft, two23)), copysign(b, r, x), x);
}

llvm::Value* emit_f32_to_bf16(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* it = int_like(x->getType(), 32);
  llvm::Value* u = b.CreateBitCast(x, it);
  llvm::Value* upper = b.CreateLShr(u, iconst(it, 16));
  // Adding 0x7FFF plus the kept part's lowest bit rounds to nearest even and
  // carries into the exponent on overflow (giving infinity).
  llvm::Value* bias = b.CreateAdd(b.CreateAnd(upper, iconst(it, 1)), iconst(it, 0x7FFF));
  llvm::Value* rounded = b.CreateLShr(b.CreateAdd(u, bias), iconst(it, 16));
  llvm::Value* quiet_nan = b.CreateOr(upper, iconst(it, 0x40));
  llvm::Value* bits = b.CreateSelect(is_nan(b, x), quiet_nan, rounded);
  return b.CreateTrunc(bits, int_like(x->getType(), 16));
}

llvm::Value* emit_bf16_to_f32(llvm::IRBuilderBase& b, llvm::Value* bits) {
  llvm::Type* it = int_like(bits->getType(), 32);
  llvm::Value* u = b.CreateShl(b.CreateZExt(bits, it), iconst(it, 16));
  return b.CreateBitCast(u, float_like(bits->getType()));
}

llvm::Value* emit_f32_to_f16(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = int_like(ft, 32);
  llvm::Value* u = b.CreateBitCast(x, it);
  llvm::Value* sign = b.CreateAnd(u, iconst(it, 0x80000000u));
  llvm::Value* a = b.CreateXor(u, sign);  // |x| as bits

  // |x| >= 65536 (or inf/NaN): infinity, or a quiet NaN keeping the
  // payload's top bits.
  llvm::Value* payload = b.CreateAnd(b.CreateLShr(a, iconst(it, 13)), iconst(it, 0x3FF));
  llvm::Value* nan_bits = b.CreateOr(payload, iconst(it, 0x7E00));
  llvm::Value* huge =
      b.CreateSelect(b.CreateICmpUGT(a, iconst(it, 0x7F800000u)), nan_bits, iconst(it, 0x7C00));
  // |x| < 2^-14 (f16 subnormal or zero): adding 0.5 aligns the value to the
  // f16 subnormal step 2^-24; the float add rounds to nearest even.
  constexpr std::uint32_t half_bits = 0x3F000000u;  // 0.5f
  llvm::Value* shifted = b.CreateFAdd(b.CreateBitCast(a, ft), fconst(ft, 0.5f));
  llvm::Value* tiny = b.CreateSub(b.CreateBitCast(shifted, it), iconst(it, half_bits));
  // Normal: rebias the exponent and round the 13 dropped bits to even; a
  // carry out of the mantissa moves to the next binade or to infinity.
  llvm::Value* odd = b.CreateAnd(b.CreateLShr(a, iconst(it, 13)), iconst(it, 1));
  llvm::Value* rebased = b.CreateAdd(a, iconst(it, 0xC8000FFFu));  // ((15-127) << 23) + 0xFFF
  llvm::Value* normal = b.CreateLShr(b.CreateAdd(rebased, odd), iconst(it, 13));

  llvm::Value* bits =
      b.CreateSelect(b.CreateICmpUGE(a, iconst(it, 0x47800000u)), huge,
                     b.CreateSelect(b.CreateICmpULT(a, iconst(it, 0x38800000u)), tiny, normal));
  bits = b.CreateOr(bits, b.CreateLShr(sign, iconst(it, 16)));
  return b.CreateTrunc(bits, int_like(ft, 16));
}

llvm::Value* emit_f16_to_f32(llvm::IRBuilderBase& b, llvm::Value* bits) {
  llvm::Type* ft = float_like(bits->getType());
  llvm::Type* it = int_like(bits->getType(), 32);
  llvm::Value* h = b.CreateZExt(bits, it);
  llvm::Value* o = b.CreateShl(b.CreateAnd(h, iconst(it, 0x7FFF)), iconst(it, 13));
  llvm::Value* exponent = b.CreateAnd(o, iconst(it, 0x0F800000u));
  o = b.CreateAdd(o, iconst(it, 0x38000000u));  // rebias: (127 - 15) << 23
  // Inf/NaN: move the exponent on to 255.
  llvm::Value* inf_nan = b.CreateAdd(o, iconst(it, 0x38000000u));
  // Zero/subnormal: make it 2^-14 * (1 + m) then subtract 2^-14, exactly.
  llvm::Value* denorm = b.CreateFSub(b.CreateBitCast(b.CreateAdd(o, iconst(it, 0x00800000u)), ft),
                                     fconst(ft, 6.103515625e-05f));
  o = b.CreateSelect(b.CreateICmpEQ(exponent, iconst(it, 0x0F800000u)), inf_nan, o);
  o = b.CreateSelect(b.CreateICmpEQ(exponent, iconst(it, 0)), b.CreateBitCast(denorm, it), o);
  o = b.CreateOr(o, b.CreateShl(b.CreateAnd(h, iconst(it, 0x8000)), iconst(it, 16)));
  return b.CreateBitCast(o, ft);
}

llvm::Value* emit_f32_to_s8(llvm::IRBuilderBase& b, llvm::Value* x) {
  return to_byte_rne(b, x, -128.0f, 127.0f);
}

llvm::Value* emit_f32_to_u8(llvm::IRBuilderBase& b, llvm::Value* x) {
  return to_byte_rne(b, x, 0.0f, 255.0f);
}

llvm::Value* emit_f32_to_s32(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = int_like(ft, 32);
  // 2147483520 is the largest float below 2^31; at and above 2^31 the
  // result saturates to INT32_MAX, which no float equals.
  llvm::Value* converted = to_i32_rne(b, x, -2147483648.0f, 2147483520.0f);
  return b.CreateSelect(b.CreateFCmpOGE(x, fconst(ft, 2147483648.0f)), iconst(it, 0x7FFFFFFF),
                        converted);
}

}  // namespace primcache::cpu_internal
