// The generic layout walks (generic_reorder_generator.hpp) on layouts with
// padding: a vector or tile that straddles the padding is clipped to its
// real part (masked loads and stores, dst's padding written as zero) instead
// of being walked element by element, and a padded stream whose split loop
// continues in the next loop (an eltwise, or a reorder between the same
// blocked layouts) is walked in runs of work items with vectors holding
// several split loops; a reorder between nChw8c and nChw16c walks the
// specialized kernel's joined loop (a vector across two blocks). Its results stay the specialized
// kernel's bit for bit and the reference's; its src and operand reads stay
// inside the real elements (buffers end at an unreadable page); the walk
// functions carry the masked loads and stores.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "guarded_bytes.hpp"
#include "kernels/eltwise_kernel.hpp"
#include "kernels/generic_eltwise_generator.hpp"
#include "kernels/generic_eltwise_kernel.hpp"
#include "kernels/generic_reorder_generator.hpp"
#include "kernels/generic_reorder_kernel.hpp"
#include "kernels/reorder_kernel.hpp"
#include "naive_reference.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"
#include "primcache/tensor/numeric.hpp"
#include "test_isas.hpp"

using namespace primcache;
using namespace primcache::cpu_internal;
using cpu_test::guarded_bytes;
using cpu_test::test_isas;

namespace {

thread_pool& pool() {
  static thread_pool p(3);
  return p;
}

// Values meaningful for the type, at every element of the buffer (padding
// included: a walk must not let src's padding reach dst).
void fill(const memory_desc& md, std::byte* p, std::uint32_t seed, float range = 300.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-range, range);
  const std::size_t es = size_of(md.data_type());
  for (std::size_t i = 0; i < md.size_bytes() / es; ++i) {
    const float f = rng() % 9 == 0 ? range / 2 + 0.5f : val(rng);
    switch (md.data_type()) {
      case data_type::f32: std::memcpy(p + 4 * i, &f, 4); break;
      case data_type::bf16: {
        const std::uint16_t h = f32_to_bf16(f);
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      default: p[i] = static_cast<std::byte>(rng()); break;
    }
  }
}

const std::int64_t odd_channels[] = {1, 3, 15, 17, 33};

std::string describe(const reorder_problem& p) {
  return p.src.to_string() + " -> " + p.dst.to_string() + " scales " +
         std::to_string(static_cast<int>(p.scales)) + " nthr " + std::to_string(p.nthr);
}

template <class Kernel>
std::vector<std::byte> run_reorder(const Kernel& k, const reorder_problem& p,
                                   const guarded_bytes& src, const float* scales) {
  guarded_bytes dst(p.dst.size_bytes());
  std::memset(dst.data(), 0x5a, dst.size());
  k.execute({src.data(), dst.data(), scales}, nullptr, pool());
  return std::vector<std::byte>(dst.data(), dst.data() + dst.size());
}

void check_reorder(const reorder_problem& p, cpu_isa isa, std::uint32_t seed) {
  INFO(describe(p) + " at " + std::string(to_string(isa)));
  guarded_bytes src(p.src.size_bytes());
  fill(p.src, src.data(), seed);
  std::vector<float> scales(static_cast<std::size_t>(p.src.dims()[1]));
  for (std::size_t c = 0; c < scales.size(); ++c)
    scales[c] = 0.25f + 0.125f * static_cast<float>(c);
  // Exactly as many scales as the scale dimension's real extent, at the
  // end of a page.
  guarded_bytes scale_bytes(scales.size() * sizeof(float));
  std::memcpy(scale_bytes.data(), scales.data(), scale_bytes.size());
  const auto* s = reinterpret_cast<const float*>(scale_bytes.data());
  const reorder_config def = default_reorder_config(p, isa);
  auto g = generic_reorder_kernel::create(p, def, isa);
  INFO((g ? std::string() : g.why().message));
  REQUIRE(g);
  const auto got = run_reorder(*g.value(), p, src, s);
  CHECK(cpu_test::naive_nonzero_padding_bytes(p.dst, got) == 0);
  auto k = reorder_kernel::create(p, def, isa);
  REQUIRE(k);
  CHECK(got == run_reorder(*k.value(), p, src, s));
  std::vector<std::byte> want(p.dst.size_bytes(), std::byte{0x5a});
  cpu_test::naive_reorder(p, {src.data(), want.data(), s});
  CHECK(got == want);
}

// The instructions that call `intrinsic` in the functions of m named `name`.
int calls_to(const llvm::Module& m, const std::string& name, llvm::Intrinsic::ID intrinsic) {
  int n = 0;
  const llvm::Function* f = m.getFunction(name);
  REQUIRE(f != nullptr);
  for (const llvm::BasicBlock& bb : *f) {
    for (const llvm::Instruction& i : bb) {
      if (const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i)) {
        n += call->getIntrinsicID() == intrinsic ? 1 : 0;
      }
    }
  }
  return n;
}

}  // namespace

TEST_CASE(
    "the generic walks clip vectors and tiles that straddle padding with masked loads and "
    "stores",
    "[cpu][generic][padded]") {
  // Exact walks run the copy without checks; the copy with checks walks a
  // straddling vector or tile as one masked vector or tile (before, element
  // by element: no masked load or store anywhere in the walk).
  for (cpu_isa isa : {cpu_isa::avx2, cpu_isa::avx512_core}) {
    llvm::LLVMContext ctx;
    llvm::Module reorder("reorder", ctx);
    generate_generic_reorder(isa, reorder);
    for (generic_walk_form form :
         {generic_walk_form::stream, generic_walk_form::tile, generic_walk_form::runs}) {
      for (const std::string& name : {generic_reorder_symbol(data_type::f32, data_type::bf16, form),
                                      generic_reorder_symbol(data_type::f32, data_type::s8, form),
                                      generic_reorder_raw_symbol(4, form)}) {
        INFO(name << " at " << to_string(isa));
        CHECK(calls_to(reorder, name, llvm::Intrinsic::masked_load) > 0);
        CHECK(calls_to(reorder, name, llvm::Intrinsic::masked_store) > 0);
      }
    }
    llvm::Module eltwise("eltwise", ctx);
    generate_generic_eltwise(isa, eltwise);
    const std::string name =
        generic_eltwise_symbol(generic_eltwise_form::relu_zero, data_type::f32, data_type::f32);
    INFO(name << " at " << to_string(isa));
    CHECK(calls_to(eltwise, name, llvm::Intrinsic::masked_load) > 0);
    CHECK(calls_to(eltwise, name, llvm::Intrinsic::masked_store) > 0);
    // The post-op chain of a clipped vector reads the operands of its real
    // lanes only.
    CHECK(eltwise.getFunction("gw_eltwise_chain_live_" +
                              std::to_string(generic_walk_shape_for(isa).lanes)) != nullptr);
  }
}

TEST_CASE(
    "generic reorders of odd padded channels equal the specialized kernel and the reference, "
    "reading only real elements",
    "[cpu][generic][padded][reorder][kernel_sweep]") {
  std::uint32_t seed = 3;
  for (cpu_isa isa : test_isas()) {
    for (std::int64_t c : odd_channels) {
      for (format_tag blocked : {format_tag::nChw8c, format_tag::nChw16c}) {
        for (format_tag plain : {format_tag::nchw, format_tag::nhwc, format_tag::nChw8c}) {
          for (data_type dt : {data_type::f32, data_type::bf16, data_type::s8}) {
            for (bool to_blocked : {true, false}) {
              ++seed;
              reorder_problem p;
              // 36 and 55 spatial elements: full tiles and vectors, and the
              // edges of the I and J loops.
              const bool odd = seed % 2 != 0;
              const dims_array d{odd ? 2 : 1, c, odd ? 4 : 5, odd ? 9 : 11};
              dims_view dims(std::span<const std::int64_t>(d.data(), 4));
              const memory_desc pl(dims, data_type::f32, plain);
              const memory_desc bl(dims, dt, blocked);
              p.src = to_blocked ? pl : bl;
              p.dst = to_blocked ? bl : pl;
              p.scales = static_cast<reorder_scales>(seed % 3);
              p.scale_dim = 1;
              p.nthr = 1 + static_cast<int>(seed % 2);
              check_reorder(p, isa, seed);
              if (!to_blocked && dt != data_type::f32) {
                // From blocked f32 to a plain narrower type: the J loop (the
                // spatial positions) ends in a partial tile of 8- or 16-bit
                // elements (its masked stores a loop over the rows at avx2).
                p.src = p.src.with_data_type(data_type::f32);
                p.dst = p.dst.with_data_type(dt);
                check_reorder(p, isa, seed);
                p.dst = p.dst.with_data_type(data_type::f32);
              }
              // The same layouts, one data type: a bit copy.
              p.src = p.src.with_data_type(dt);
              p.dst = p.dst.with_data_type(dt);
              p.scales = reorder_scales::none;
              check_reorder(p, isa, seed);
            }
          }
        }
      }
    }
  }
}

TEST_CASE(
    "generic eltwises of odd padded channels with post-op chains equal the specialized kernel "
    "and the reference, reading only real operands",
    "[cpu][generic][padded][eltwise]") {
  std::uint32_t seed = 11;
  for (cpu_isa isa : test_isas()) {
    for (std::int64_t c : odd_channels) {
      for (format_tag blocked : {format_tag::nChw8c, format_tag::nChw16c}) {
        for (data_type sdt : {data_type::f32, data_type::bf16}) {
          for (binary_broadcast bc :
               {binary_broadcast::none, binary_broadcast::per_channel, binary_broadcast::scalar}) {
            ++seed;
            eltwise_problem p;
            const dims_array d{2, c, 3, 5 + static_cast<std::int64_t>(seed % 3)};
            dims_view dims(std::span<const std::int64_t>(d.data(), 4));
            p.src = memory_desc(dims, sdt, blocked);
            p.dst = p.src.with_data_type(seed % 2 ? data_type::f32 : sdt);
            p.op.alg = static_cast<eltwise_alg>(seed % 8);
            p.op.alpha = p.op.alg == eltwise_alg::clip ? -0.5f : 0.25f;
            p.op.beta = 0.75f;
            post_op e;
            e.eltwise = {static_cast<eltwise_alg>((seed + 3) % 8), 0.5f, 1.f, 1.f};
            if (e.eltwise.alg == eltwise_alg::clip) e.eltwise.alpha = -0.5f;
            post_op b;
            b.what = post_op::kind::binary_add;
            b.binary = {0, bc};
            p.post_ops = {b, e};
            p.nthr = 1 + static_cast<int>(seed % 3);
            INFO(p.src.to_string()
                 << " -> " << p.dst.to_string() << " alg " << static_cast<int>(p.op.alg) << " then "
                 << static_cast<int>(e.eltwise.alg) << ", broadcast " << static_cast<int>(bc)
                 << " at " << to_string(isa));
            guarded_bytes src(p.src.size_bytes());
            fill(p.src, src.data(), seed, 3.f);
            // The operand: dst's shape (padding included), C floats, or one,
            // at the end of a page.
            const std::size_t n =
                bc == binary_broadcast::none ? p.dst.size_bytes() / size_of(p.dst.data_type())
                : bc == binary_broadcast::per_channel ? static_cast<std::size_t>(c)
                                                      : 1;
            guarded_bytes operand(n * sizeof(float));
            std::mt19937 rng(seed);
            std::uniform_real_distribution<float> val(-2.f, 2.f);
            for (std::size_t i = 0; i < n; ++i) {
              const float v = val(rng);
              std::memcpy(operand.data() + 4 * i, &v, 4);
            }
            const float* operands[] = {reinterpret_cast<const float*>(operand.data())};
            auto run = [&](const auto& k) {
              guarded_bytes dst(p.dst.size_bytes());
              std::memset(dst.data(), 0x5a, dst.size());
              k.execute({src.data(), dst.data(), operands}, nullptr, pool());
              return std::vector<std::byte>(dst.data(), dst.data() + dst.size());
            };
            const eltwise_config def = default_eltwise_config(p, isa);
            auto g = generic_eltwise_kernel::create(p, def, isa);
            INFO((g ? std::string() : g.why().message));
            REQUIRE(g);
            const auto got = run(*g.value());
            CHECK(cpu_test::naive_nonzero_padding_bytes(p.dst, got) == 0);
            auto k = eltwise_kernel::create(p, def, isa);
            REQUIRE(k);
            CHECK(got == run(*k.value()));
            // The reference, within the specialized kernel's tolerance
            // (eltwise_kernel_test.cpp), f32 dst only.
            if (p.dst.data_type() != data_type::f32) continue;
            std::vector<std::byte> want(p.dst.size_bytes());
            cpu_test::naive_eltwise(p, {src.data(), want.data(), operands});
            int bad = 0;
            for (std::size_t i = 0; i < got.size() / 4; ++i) {
              float x, y;
              std::memcpy(&x, got.data() + 4 * i, 4);
              std::memcpy(&y, want.data() + 4 * i, 4);
              if (std::isnan(y)
                      ? !std::isnan(x)
                      : (std::isinf(y) ? x != y : std::fabs(x - y) > 1e-4f * (1 + std::fabs(y)))) {
                ++bad;
              }
            }
            CHECK(bad == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("a transposing generic walk whose I and J loops both step a padded dimension is declined",
          "[cpu][generic][padded][reorder]") {
  // No format tag gives this plan (a dimension's unit-stride level is the
  // same loop in src and dst): built by hand, dim 1 of 20 padded to 24, its
  // 8-block along I (src stride 1) and its blocks of 8 along J (dst stride
  // 1). A straddling tile's real part would not be a rectangle.
  walk_plan plan;
  plan.ndims = 2;
  plan.dims = {3, 20};
  plan.bound = {3, 24};
  plan.exact = {true, false};
  plan.known = {true, true};
  plan.loops = {walk_loop{3, 24, 24, 0, 1}, walk_loop{8, 1, 3, 1, 1}, walk_loop{3, 8, 1, 1, 8}};
  plan.inner = walk_plan::inner_kind::tile;
  auto params = make_generic_walk_params("reorder", plan, 0, -1);
  REQUIRE_FALSE(params);
  CHECK(params.why().code == status::unimplemented);
  CHECK(params.why().message.find("steps along both loops") != std::string::npos);
  // The same plan with the J loop over another dimension is walked.
  plan.loops[2].dim = 0;
  CHECK(make_generic_walk_params("reorder", plan, 0, -1));
}

TEST_CASE(
    "generic reorders between nChw8c and nChw16c walk the specialized kernel's joined loop, "
    "a vector across two blocks",
    "[cpu][generic][padded][reorder][kernel_sweep]") {
  // Before, the generic walk took plan_walk's plan: a work item per block
  // of 8 channels at one pixel (the odometer's step around each vector of
  // 8). Now the joined loop of the specialized walk: a vector of 16
  // channels read from two src blocks (nChw8c -> nChw16c) or written to two
  // dst blocks (the other way), items taken in runs along the pixels; at
  // avx2 (8 lanes) each vector lies in one block.
  std::uint32_t seed = 101;
  for (cpu_isa isa : test_isas()) {
    const int lanes = generic_walk_shape_for(isa).lanes;
    // One block of the narrower layout (the other run past the buffer),
    // padded, exact.
    for (std::int64_t c : {8, 20, 32}) {
      for (bool widen : {true, false}) {
        for (data_type dt : {data_type::f32, data_type::s8}) {
          ++seed;
          const dims_array d{seed % 2 ? 2 : 1, c, 3, seed % 3 ? 5 : 7};
          dims_view dims(std::span<const std::int64_t>(d.data(), 4));
          reorder_problem p;
          p.src =
              memory_desc(dims, data_type::f32, widen ? format_tag::nChw8c : format_tag::nChw16c);
          p.dst = memory_desc(dims, dt, widen ? format_tag::nChw16c : format_tag::nChw8c);
          p.scales = static_cast<reorder_scales>(seed % 3);
          p.scale_dim = 1;
          p.nthr = 1 + static_cast<int>(seed % 2);
          const reorder_config def = default_reorder_config(p, isa);
          auto g = generic_reorder_kernel::create(p, def, isa);
          REQUIRE(g);
          INFO(describe(p) << " at " << to_string(isa));
          // 8 channels in a block of the narrower layout: a vector holds two
          // of them at 16 lanes, lies in one at 8.
          const auto form = static_cast<gw_run_form>(g.value()->params()[gw_runs]);
          CHECK(form == (lanes == 8 ? gw_run_form::whole
                         : widen    ? gw_run_form::src_halves
                                    : gw_run_form::dst_halves));
          check_reorder(p, isa, seed);
          // The same layouts in one type: a bit copy.
          p.src = p.src.with_data_type(dt);
          p.dst = p.dst.with_data_type(dt);
          p.scales = reorder_scales::none;
          check_reorder(p, isa, seed);
        }
      }
    }
  }
}

TEST_CASE("a joined loop the generic kernel's vectors do not fit is declined",
          "[cpu][generic][reorder]") {
  // nChw8c -> nChw16c with 32 channels: the joined loop of 16 channels in
  // src runs of 8, below the pixels (56 of them, src stride 8, dst 16).
  const dims_array d{1, 32, 7, 8};
  dims_view dims(std::span<const std::int64_t>(d.data(), 4));
  auto plan = plan_walk(memory_desc(dims, data_type::f32, format_tag::nChw8c),
                        memory_desc(dims, data_type::f32, format_tag::nChw16c), 0);
  REQUIRE(plan);
  const walk_plan joined = join_dst_runs(plan.value());
  REQUIRE(joined.loops.back().src_run == 8);
  const std::int64_t extent = joined.loops.back().extent;
  // Taken: 16 lanes (two runs a vector), 8 (one), 4 (two vectors a run).
  for (int lanes : {16, 8, 4}) {
    auto params = make_generic_walk_params("reorder", joined, extent, -1, lanes);
    INFO(lanes << " lanes");
    REQUIRE(params);
    CHECK(params.value()[gw_runs] ==
          static_cast<std::int64_t>(lanes == 16 ? gw_run_form::src_halves : gw_run_form::whole));
    CHECK(params.value()[gw_src_run_shift] == 3);
    CHECK(params.value()[gw_src_run_mask] == 7);
    CHECK(params.value()[gw_src_run_stride] == 8 * 7 * 8);
  }
  auto declined = [&](const walk_plan& w, std::int64_t chunk, int tracked, int lanes) {
    auto params = make_generic_walk_params("reorder", w, chunk, tracked, lanes);
    REQUIRE_FALSE(params);
    CHECK(params.why().code == status::unimplemented);
    CHECK(params.why().message.find("joined loop") != std::string::npos);
  };
  declined(joined, extent, -1, 0);       // no vectors for runs (the eltwise)
  declined(joined, extent, -1, 32);      // runs of a quarter vector
  declined(joined, extent / 2, -1, 16);  // the loop in two chunks
  // The pixels' index tracked (per-dim scales along H): items could not
  // run along them.
  walk_plan tracked = joined;
  tracked.loops[tracked.loops.size() - 2].dim = 2;
  tracked.loops[tracked.loops.size() - 2].mult = 1;
  tracked.known[2] = true;
  declined(tracked, extent, 2, 16);
  // plan_walk's own plan still walks, without runs.
  auto unjoined = make_generic_walk_params("reorder", plan.value(), 0, -1, 16);
  REQUIRE(unjoined);
  CHECK(unjoined.value()[gw_runs] == static_cast<std::int64_t>(gw_run_form::none));
}
