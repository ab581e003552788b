#include "kernels/eltwise_config.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "jit/target.hpp"
#include "kernels/eltwise_validation.hpp"
#include "kernels/post_ops.hpp"

namespace primcache::cpu_internal {
namespace {

bool has_per_channel(const post_op_chain& chain) {
  for (const post_op& op : chain) {
    if (op.what == post_op::kind::binary_add &&
        op.binary.broadcast == binary_broadcast::per_channel) {
      return true;
    }
  }
  return false;
}

// Vectors wider than the innermost loop, or unrolling past it, give the
// same code as narrower ones: such configs are brought to the narrower form
// so that different configs mean different code.
void canonicalize(eltwise_config& c, std::int64_t extent) {
  while (c.vector_lanes > 4 && c.vector_lanes > extent) c.vector_lanes /= 2;
  while (c.unroll > 1 && static_cast<std::int64_t>(c.vector_lanes) * c.unroll > extent) --c.unroll;
}

}  // namespace

unsigned eltwise_keep_dims(const eltwise_problem& p) {
  return has_per_channel(p.post_ops) ? 2u : 0u;
}

result<walk_plan> eltwise_walk_plan(const eltwise_problem& p) {
  const unsigned keep = eltwise_keep_dims(p);
  auto plan = plan_walk(p.src, p.dst, keep);
  if (!plan) return plan.why();
  return batch_padded_block(std::move(plan).value(), keep);
}

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
  if (!validate_eltwise_problem(p)) return c;
  // A long function's code (gelu_erf: about a hundred instructions a
  // vector; tanh, sigmoid, gelu_tanh, exp: tens) is a dependency chain:
  // four vectors' chains interleaved (one vector of 64 lanes, whose every
  // step LLVM emits for its four registers in turn) keep the FMA units
  // busy where two unrolled vectors, one's chain after the other's, wait
  // on latency. Needs the 32 registers of AVX-512. Measured 1.3-1.7x for
  // gelu_erf on the Intel host (nothing at AVX2), 1.13-1.28x for the
  // others on the Zen 5 host, where the Intel host's two measurements
  // disagreed (docs/PERFORMANCE.md, "Interleaved epilogues", "Long
  // functions at 64 lanes").
  if (isa_vector_bits(isa) >= 512 &&
      (is_long_function(p.op.alg) || has_long_function(p.post_ops))) {
    c.vector_lanes = 64;
    c.unroll = 1;
  }
  auto plan = eltwise_walk_plan(p);
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

std::vector<eltwise_config> eltwise_config_variants(const eltwise_problem& p, cpu_isa isa) {
  const eltwise_config def = default_eltwise_config(p, isa);
  std::vector<eltwise_config> out;
  if (!validate_eltwise_problem(p)) return out;
  auto plan = eltwise_walk_plan(p);
  if (!plan) return out;
  const walk_plan& w = plan.value();
  const std::int64_t extent = w.loops.back().extent;
  auto add = [&](eltwise_config c) {
    if (!validate_eltwise_config(c) || out.size() >= 6) return;
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

backend::kernel_config to_fields(const eltwise_config& c) {
  backend::kernel_config f;
  f.add("vector_lanes", c.vector_lanes).add("unroll", c.unroll).add("chunk", c.chunk);
  return f;
}

result<eltwise_config> eltwise_config_from_fields(const backend::kernel_config& f) {
  auto r = field_reader::open(f, "eltwise", {"vector_lanes", "unroll", "chunk"});
  if (!r) return r.why();
  const field_reader& in = r.value();
  eltwise_config c;
  for (auto ok : {in.get("vector_lanes", 1, 64, c.vector_lanes), in.get("unroll", 1, 64, c.unroll),
                  in.get("chunk", 0, std::int64_t{1} << 62, c.chunk)}) {
    if (!ok) return ok.why();
  }
  if (auto ok = validate_eltwise_config(c); !ok) return ok.why();
  return c;
}

result<bool> validate_eltwise_config_for(const eltwise_problem& p, const eltwise_config& c,
                                         cpu_isa isa) {
  if (auto ok = validate_eltwise_problem(p); !ok) return ok;
  if (auto ok = validate_eltwise_config(c); !ok) return ok;
  if (isa > detected_isa()) {
    return failure{status::unimplemented,
                   "eltwise: ISA " + std::string(to_string(isa)) + " is beyond this host"};
  }
  return true;
}

enumerated_configs<eltwise_config> eltwise_config_candidates(const eltwise_problem& p,
                                                             cpu_isa isa) {
  (void)isa;  // the vector width is a parameter; LLVM splits wide vectors at any ISA
  std::vector<eltwise_config> out;
  if (!validate_eltwise_problem(p)) return {};
  auto plan = eltwise_walk_plan(p);
  if (!plan) return {};
  const walk_plan& w = plan.value();
  const std::int64_t extent = w.loops.back().extent;
  for (int lanes : {4, 8, 16, 32, 64}) {
    for (int u = 1; u <= 8; ++u) {
      for (int parts : {1, 2, 4, 8, 16}) {
        eltwise_config c{lanes, u, parts == 1 ? 0 : std::max<std::int64_t>(1, extent / parts)};
        if (!validate_eltwise_config(c)) continue;
        canonicalize(c, extent);
        c.chunk = walk_chunk(w, c.chunk, c.vector_lanes * c.unroll);
        if (c.chunk >= extent) c.chunk = 0;
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      }
    }
  }
  return enumerated_configs<eltwise_config>::of(std::move(out));
}

}  // namespace primcache::cpu_internal
