#include "kernels/eltwise_kernel.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "jit/target.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/kernel_failure.hpp"
#include "kernels/layout_walk.hpp"
#include "primcache/tensor/numeric.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr const char* kSymbol = "eltwise";

failure invalid(const std::string& message) {
  return kernel_invalid("eltwise", message);
}
failure unimplemented(const std::string& message) {
  return kernel_unimplemented("eltwise", message);
}

bool has_per_channel(const post_op_chain& chain) {
  for (const post_op& op : chain) {
    if (op.what == post_op::kind::binary_add &&
        op.binary.broadcast == binary_broadcast::per_channel) {
      return true;
    }
  }
  return false;
}

result<bool> validate_op(const eltwise_op& op, const std::string& what) {
  if (static_cast<int>(op.alg) > static_cast<int>(eltwise_alg::clip)) {
    return invalid(what + " algorithm " + std::to_string(static_cast<int>(op.alg)) +
                   " is not a known algorithm");
  }
  return true;
}

result<bool> validate(const eltwise_problem& p) {
  if (!p.src.is_blocked()) return invalid("src " + p.src.to_string() + " has no resolved layout");
  if (!p.dst.is_blocked()) return invalid("dst " + p.dst.to_string() + " has no resolved layout");
  if (p.src.ndims() != p.dst.ndims() ||
      !std::equal(p.src.dims().begin(), p.src.dims().end(), p.dst.dims().begin())) {
    return invalid("src " + p.src.to_string() + " and dst " + p.dst.to_string() +
                   " have different dims");
  }
  if (p.nthr < 1) return invalid("nthr is " + std::to_string(p.nthr) + "; it must be >= 1");
  for (const memory_desc* md : {&p.src, &p.dst}) {
    if (md->data_type() != data_type::f32 && md->data_type() != data_type::bf16) {
      return unimplemented(md->to_string() + ": only f32 and bf16 are supported");
    }
  }
  if (p.src.with_offset0(0).with_data_type(data_type::f32) !=
      p.dst.with_offset0(0).with_data_type(data_type::f32)) {
    return unimplemented("src " + p.src.to_string() + " and dst " + p.dst.to_string() +
                         " have different layouts; reorder one first");
  }
  for (std::int64_t o : p.dst.padded_offsets()) {
    if (o != 0) return unimplemented(p.dst.to_string() + " has non-zero padded offsets");
  }
  if (auto ok = validate_op(p.op, "the"); !ok) return ok;
  for (std::size_t i = 0; i < p.post_ops.size(); ++i) {
    const post_op& op = p.post_ops[i];
    const std::string which = "post-op " + std::to_string(i);
    if (op.what == post_op::kind::eltwise) {
      if (auto ok = validate_op(op.eltwise, which); !ok) return ok;
    } else if (op.what == post_op::kind::binary_add) {
      if (op.binary.arg_index < 0) {
        return invalid(which + " has operand index " + std::to_string(op.binary.arg_index));
      }
      switch (op.binary.broadcast) {
        case binary_broadcast::none:
        case binary_broadcast::scalar: break;
        case binary_broadcast::per_channel:
          if (p.dst.ndims() < 2) {
            return invalid(which + " is per channel, but " + p.dst.to_string() +
                           " has no dimension 1");
          }
          break;
        default: return invalid(which + " has an unknown broadcast kind");
      }
    } else {
      return invalid(which + " has an unknown kind");
    }
  }
  return true;
}

result<bool> validate(const eltwise_config& c) {
  if (!is_pow2(c.vector_lanes) || c.vector_lanes < 4 || c.vector_lanes > 64) {
    return invalid("config vector_lanes " + std::to_string(c.vector_lanes) +
                   " is not a power of two in [4, 64]");
  }
  if (c.unroll < 1 || c.unroll > 8) {
    return invalid("config unroll " + std::to_string(c.unroll) + " is outside [1, 8]");
  }
  if (c.chunk < 0) return invalid("config chunk " + std::to_string(c.chunk) + " is negative");
  return true;
}

// Vectors wider than the innermost loop, or unrolling past it, give the
// same code as narrower ones: such configs are brought to the narrower form
// so that different configs mean different code.
void canonicalize(eltwise_config& c, std::int64_t extent) {
  while (c.vector_lanes > 4 && c.vector_lanes > extent) c.vector_lanes /= 2;
  while (c.unroll > 1 && static_cast<std::int64_t>(c.vector_lanes) * c.unroll > extent) --c.unroll;
}

result<walk_plan> plan_of(const eltwise_problem& p) {
  return plan_walk(p.src, p.dst, has_per_channel(p.post_ops) ? 2u : 0u);
}

// n lanes of f32 starting at element `first`, `step` apart.
llvm::Value* load_f32_lanes(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* first,
                            std::int64_t step, unsigned n) {
  llvm::Type* f32 = b.getFloatTy();
  if (n == 1 || step == 0) {
    llvm::Value* s = b.CreateAlignedLoad(f32, b.CreateGEP(f32, base, first), llvm::Align(4));
    return n == 1 ? s : b.CreateVectorSplat(n, s);
  }
  if (step == 1) {
    return b.CreateAlignedLoad(llvm::FixedVectorType::get(f32, n), b.CreateGEP(f32, base, first),
                               llvm::Align(4));
  }
  llvm::Value* v = llvm::PoisonValue::get(llvm::FixedVectorType::get(f32, n));
  for (unsigned e = 0; e < n; ++e) {
    llvm::Value* p = b.CreateGEP(f32, base, b.CreateAdd(first, b.getInt64(e * step)));
    v = b.CreateInsertElement(v, b.CreateAlignedLoad(f32, p, llvm::Align(4)), e);
  }
  return v;
}

struct prepared {
  walk_plan plan;
  walk_codegen gen;
  std::int64_t work_items = 0;
};

result<prepared> prepare(const eltwise_problem& p, const eltwise_config& c) {
  if (auto ok = validate(p); !ok) return ok.why();
  if (auto ok = validate(c); !ok) return ok.why();
  auto plan = plan_of(p);
  if (!plan) return plan.why();
  prepared out{std::move(plan).value(), {}, 0};
  walk_codegen& g = out.gen;
  g.src_dt = p.src.data_type();
  g.dst_dt = p.dst.data_type();
  g.vector_lanes = c.vector_lanes;
  g.unroll = c.unroll;
  g.chunk = walk_chunk(out.plan, c.chunk, c.vector_lanes * c.unroll);
  g.use_memcpy = false;
  out.work_items = out.plan.work_items(g.chunk);
  return out;
}

std::string kernel_name(const eltwise_problem& p) {
  return "eltwise_" + p.src.to_string() + "_to_" + p.dst.to_string();
}

void build(llvm::Module& m, const eltwise_problem& p, prepared& pr) {
  pr.gen.transform = [&p](llvm::IRBuilderBase& b, llvm::Value* x, const walk_lanes& lanes) {
    const unsigned n = x->getType()->isVectorTy()
                           ? llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements()
                           : 1;
    llvm::Value* y = emit_eltwise(b, x, p.op);
    return emit_post_ops(b, y, p.post_ops, [&](int, const binary_add_op& op) -> llvm::Value* {
      llvm::Type* ptr = llvm::PointerType::get(b.getContext(), 0);
      llvm::Value* base = b.CreateAlignedLoad(
          ptr,
          b.CreateGEP(ptr, lanes.operands, b.getInt64(static_cast<std::uint64_t>(op.arg_index))),
          llvm::Align(8));
      switch (op.broadcast) {
        case binary_broadcast::per_channel:
          return load_f32_lanes(b, base, lanes.index[1], lanes.index_step[1], n);
        case binary_broadcast::scalar: return load_f32_lanes(b, base, b.getInt64(0), 0, n);
        default: return load_f32_lanes(b, base, lanes.dst_offset, lanes.dst_step, n);
      }
    });
  };
  emit_walk_function(m, kSymbol, pr.plan, pr.gen);
}

}  // namespace

void eltwise_problem::write_key(key_writer& w) const {
  w.str("eltwise");
  src.write_key(w);
  dst.write_key(w);
  w.enumeration(op.alg).f32(op.alpha).f32(op.beta).f32(op.scale);
  cpu_internal::write_key(w, post_ops);
  w.i32(nthr);
}

void eltwise_config::write_key(key_writer& w) const {
  w.i32(vector_lanes).i32(unroll).i64(chunk);
}

eltwise_config default_eltwise_config(const eltwise_problem& p, cpu_isa isa) {
  eltwise_config c;
  c.vector_lanes = static_cast<int>(std::max(4u, isa_vector_bits(isa) / 32));
  c.unroll = 2;
  if (!validate(p)) return c;
  auto plan = plan_of(p);
  if (!plan) return c;
  const walk_plan& w = plan.value();
  const std::int64_t extent = w.loops.back().extent;
  canonicalize(c, extent);
  const std::int64_t outer = w.work_items(extent);
  const std::int64_t want = 4 * static_cast<std::int64_t>(p.nthr);
  if (p.nthr > 1 && outer < want) {
    const std::int64_t pieces = (want + outer - 1) / outer;
    const std::int64_t chunk = std::max<std::int64_t>(4096, (extent + pieces - 1) / pieces);
    c.chunk = walk_chunk(w, chunk, c.vector_lanes * c.unroll);
    if (c.chunk >= extent) c.chunk = 0;
  }
  return c;
}

std::vector<eltwise_config> eltwise_config_candidates(const eltwise_problem& p, cpu_isa isa) {
  const eltwise_config def = default_eltwise_config(p, isa);
  std::vector<eltwise_config> out;
  if (!validate(p)) return out;
  auto plan = plan_of(p);
  if (!plan) return out;
  const walk_plan& w = plan.value();
  const std::int64_t extent = w.loops.back().extent;
  auto add = [&](eltwise_config c) {
    if (!validate(c) || out.size() >= 6) return;
    canonicalize(c, extent);
    c.chunk = walk_chunk(w, c.chunk, c.vector_lanes * c.unroll);
    if (c.chunk >= extent) c.chunk = 0;
    if (c == def || std::find(out.begin(), out.end(), c) != out.end()) return;
    out.push_back(c);
  };
  for (int lanes : {4, 8, 16, 32}) {
    for (int u : {1, 2, 4}) {
      eltwise_config c = def;
      c.vector_lanes = lanes;
      c.unroll = u;
      add(c);
    }
  }
  eltwise_config c = def;
  c.chunk = std::max<std::int64_t>(1, extent / 3);
  add(c);
  return out;
}

result<std::unique_ptr<eltwise_kernel>> eltwise_kernel::finish(const eltwise_problem& p,
                                                               const eltwise_config& c,
                                                               std::unique_ptr<jit_module> m,
                                                               std::int64_t work_items) {
  auto fn = m->lookup_function<fn_type>(kSymbol);
  if (!fn) return fn.why();
  std::unique_ptr<eltwise_kernel> k(new eltwise_kernel());
  k->problem_ = p;
  k->config_ = c;
  k->module_ = std::move(m);
  k->fn_ = fn.value();
  k->work_items_ = work_items;
  return k;
}

result<std::unique_ptr<eltwise_kernel>> eltwise_kernel::create(const eltwise_problem& p,
                                                               const eltwise_config& c,
                                                               cpu_isa isa) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  prepared& pr = prep.value();
  auto m = jit_module::compile(kernel_name(p), isa, [&](llvm::Module& mod) { build(mod, p, pr); });
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), pr.work_items);
}

result<std::unique_ptr<eltwise_kernel>> eltwise_kernel::load(const eltwise_problem& p,
                                                             const eltwise_config& c,
                                                             std::span<const std::byte> object) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  auto m = jit_module::load(kernel_name(p), object);
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), prep.value().work_items);
}

void eltwise_kernel::execute(const eltwise_args& args, void* /*scratchpad*/,
                             thread_pool& pool) const {
  const std::int64_t n = work_items_;
  fn_type* fn = fn_;
  const int nthr = static_cast<int>(std::min<std::int64_t>(problem_.nthr, n));
  if (nthr <= 1) {
    fn(args.src, args.dst, nullptr, args.binary_operands, 0, n);
    return;
  }
  pool.parallel_for(nthr, [&](int ithr, int nt) {
    const range r = balance(n, ithr, nt);
    if (r.begin < r.end) fn(args.src, args.dst, nullptr, args.binary_operands, r.begin, r.end);
  });
}

result<bool> check_eltwise_problem(const eltwise_problem& p) {
  return validate(p);
}

void eltwise_reference(const eltwise_problem& p, const eltwise_args& args) {
  const memory_desc& s = p.src;
  const memory_desc& d = p.dst;
  const int nd = d.ndims();
  dims_array i{};
  const auto bound = d.padded_dims();
  auto read = [&](std::int64_t off) {
    return s.data_type() == data_type::f32
               ? static_cast<const float*>(args.src)[off]
               : bf16_to_f32(static_cast<const std::uint16_t*>(args.src)[off]);
  };
  auto write = [&](std::int64_t off, float v) {
    if (d.data_type() == data_type::f32) {
      static_cast<float*>(args.dst)[off] = v;
    } else {
      static_cast<std::uint16_t*>(args.dst)[off] = f32_to_bf16(v);
    }
  };
  std::vector<float> operands(p.post_ops.size());
  for (;;) {
    bool real = true;
    for (int k = 0; k < nd; ++k) real = real && i[k] < d.dims()[k];
    const dims_view index(std::span(i.data(), static_cast<std::size_t>(nd)));
    const std::int64_t doff = d.offset_of(index);
    if (!real) {
      write(doff, 0.f);
    } else {
      for (std::size_t k = 0; k < p.post_ops.size(); ++k) {
        const post_op& op = p.post_ops[k];
        if (op.what != post_op::kind::binary_add) continue;
        const float* base = args.binary_operands[op.binary.arg_index];
        switch (op.binary.broadcast) {
          case binary_broadcast::per_channel: operands[k] = base[i[1]]; break;
          case binary_broadcast::scalar: operands[k] = base[0]; break;
          default: operands[k] = base[doff]; break;
        }
      }
      const float y = eltwise_reference(read(s.offset_of(index)), p.op);
      write(doff, apply_post_ops_reference(y, p.post_ops, operands.data()));
    }
    int k = nd - 1;
    for (; k >= 0; --k) {
      if (++i[k] < bound[k]) break;
      i[k] = 0;
    }
    if (k < 0) break;
  }
}

}  // namespace primcache::cpu_internal
