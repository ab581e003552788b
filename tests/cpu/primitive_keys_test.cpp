// The bytes of CPU primitive keys are pinned: a refactoring of the
// descriptors and implementations must write the same key, byte for byte,
// or every persistent cache entry and every tuned configuration filed under
// the old key would be lost. Each case fixes everything the key depends on
// (ISA cap, thread count) and compares the XXH3-64 hash of the key's bytes
// with the value the key had when the test was written.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

// Holds the ISA cap and the thread count at fixed values for one scope.
class fixed_context {
 public:
  explicit fixed_context(cpu_isa cap) : threads_(get_num_threads()) {
    set_max_cpu_isa(cap);
    set_num_threads(2);
  }
  ~fixed_context() {
    clear_max_cpu_isa();
    set_num_threads(threads_);
  }
  fixed_context(const fixed_context&) = delete;
  fixed_context& operator=(const fixed_context&) = delete;

 private:
  int threads_;
};

struct pinned {
  std::string impl;
  std::uint64_t hash;          // the key
  std::uint64_t problem_hash;  // the key without the configuration
};

template <class PrimitiveDesc>
pinned key_of(const PrimitiveDesc& pd) {
  return {pd.impl_info_str(), backend::impl_of(pd).cache_key().hash(),
          backend::impl_of(pd).problem_key().hash()};
}

matmul::primitive_desc a_matmul() {
  memory::desc src({3, 17, 20}, data_type::f32, tag::abc);
  memory::desc wei({3, 20, 33}, data_type::f32, tag::abc);
  memory::desc bias({1, 1, 33}, data_type::f32, tag::abc);
  memory::desc dst({3, 17, 33}, data_type::f32, tag::abc);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.5f, 0.f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  return matmul::primitive_desc(matmul::desc(src, wei, bias, dst), attr, cpu());
}

convolution_forward::primitive_desc a_convolution() {
  memory::desc src({2, 8, 13, 11}, data_type::f32, tag::nchw);
  memory::desc wei({16, 8, 3, 3}, data_type::f32, tag::oihw);
  memory::desc bias({16}, data_type::f32, tag::a);
  memory::desc dst({2, 16, 7, 6}, data_type::f32, tag::nchw);
  return convolution_forward::primitive_desc(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                wei, bias, dst, {2, 2}, {1, 1}, {1, 1}),
      cpu());
}

eltwise_forward::primitive_desc an_eltwise() {
  memory::desc md({2, 16, 5, 7}, data_type::f32, tag::nchw);
  return eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_gelu_tanh, md, md),
      cpu());
}

reorder::primitive_desc a_reorder() {
  memory::desc src({2, 16, 5, 7}, data_type::f32, tag::nchw);
  memory::desc dst({2, 16, 5, 7}, data_type::f32, tag::nChw8c);
  return reorder::primitive_desc(cpu(), src, cpu(), dst);
}

}  // namespace

TEST_CASE("the reference implementations write the keys they always wrote",
          "[cpu][primitive][key]") {
  // x86_64 is every host's level, so these keys are the same on every host.
  fixed_context context(cpu_isa::x86_64);
  const pinned mm = key_of(a_matmul());
  const pinned conv = key_of(a_convolution());
  const pinned elt = key_of(an_eltwise());
  const pinned re = key_of(a_reorder());
  CHECK(mm.impl == "ref:matmul");
  CHECK(mm.hash == 0x6e1911d328375e0cULL);
  CHECK(conv.impl == "ref:conv");
  CHECK(conv.hash == 0xeaf3e7a6fe122c2aULL);
  CHECK(elt.impl == "ref:eltwise");
  CHECK(elt.hash == 0xab2b7cf6a9e6724aULL);
  CHECK(re.impl == "ref:reorder");
  CHECK(re.hash == 0x266eb886a33efa4fULL);
  // No configuration: the problem key is the key.
  for (const pinned& p : {mm, conv, elt, re}) CHECK(p.problem_hash == p.hash);
}

TEST_CASE("the JIT implementations write the keys they always wrote", "[cpu][primitive][key]") {
  if (detected_isa() < cpu_isa::avx2) {
    WARN("the host has no AVX2: the JIT keys pinned at avx2 are not checked");
    return;
  }
  fixed_context context(cpu_isa::avx2);
  const pinned mm = key_of(a_matmul());
  const pinned conv = key_of(a_convolution());
  const pinned elt = key_of(an_eltwise());
  const pinned re = key_of(a_reorder());
  // The problem keys are the keys these implementations wrote before the
  // configuration entered the key; the keys add the heuristic's
  // configuration.
  CHECK(mm.impl == "jit:matmul");
  CHECK(mm.problem_hash == 0x79653e3a54efe474ULL);
  CHECK(mm.hash == 0xe058f837fbda4043ULL);
  CHECK(conv.impl == "jit:conv");
  CHECK(conv.problem_hash == 0x7b7859041c42dbd1ULL);
  // The convolution's configuration grew K panels, N panels and thread
  // partitions (ic_block, oc_panel, thr_oc) after it entered the key:
  // 0x998c74c4910a6318 before.
  CHECK(conv.hash == 0x115c5b3a79d53f98ULL);
  CHECK(elt.impl == "jit:eltwise");
  CHECK(elt.problem_hash == 0x56e221b643cbb4caULL);
  CHECK(elt.hash == 0xeb0a3fcd0a311d01ULL);
  CHECK(re.impl == "jit:reorder");
  CHECK(re.problem_hash == 0x5aac0137ac8bf85aULL);
  // The reorder's configuration grew the transposing walk's blocks
  // (block_i, block_j) after it entered the key: 0x7515a364882869ec before.
  CHECK(re.hash == 0x65003ee83902a6a6ULL);
}
