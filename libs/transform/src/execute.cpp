#include <string>

#include "primcache/base/error.hpp"
#include "primcache/runtime/reorder.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/transform/transform_plan.hpp"

namespace primcache {
namespace {

// The engine a step between memories on these engines runs on: the GPU
// one when either side is a GPU (as reorder chooses).
const engine& step_engine(const engine& from, const engine& to) {
  return from.get_kind() == engine_kind::cpu ? to : from;
}

}  // namespace

std::string_view to_string(transform_kind kind) noexcept {
  switch (kind) {
    case transform_kind::layout: return "layout";
    case transform_kind::data_type: return "data_type";
    case transform_kind::layout_and_data_type: return "layout+data_type";
    case transform_kind::place: return "place";
    case transform_kind::library: return "library";
    case transform_kind::user: return "user";
  }
  return "unknown";
}

std::string transform_step::to_string() const {
  std::string s(primcache::to_string(kind));
  if (kind == transform_kind::user) s += ":" + user_name;
  s += " " + from.to_string() + " -> " + to.to_string() + " (" + std::to_string(bytes_per_element) +
       " B/elem";
  if (bytes != 0) s += ", " + std::to_string(bytes) + " B";
  return s + ")";
}

std::size_t transform_plan::bytes_per_element() const noexcept {
  std::size_t b = 0;
  for (const auto& s : steps) b += s.bytes_per_element;
  return b;
}

std::size_t transform_plan::bytes() const noexcept {
  std::size_t b = 0;
  for (const auto& s : steps) b += s.bytes;
  return b;
}

std::string transform_plan::to_string() const {
  std::string s = from.to_string() + " -> " + to.to_string() + ":";
  if (steps.empty()) s += " nothing to do";
  for (const auto& step : steps) s += "\n  " + step.to_string();
  return s;
}

namespace {

// Whether `m` holds a tensor of `dims` in kernel type `t` (library aside).
// Dims `t`'s layout cannot describe (another rank; strides that do not fit
// them) are a mismatch like any other, reported by the caller with both
// sides, not the descriptor's bare complaint.
bool holds(const memory& m, const kernel_type& t, dims_view dims) {
  if (!(place::of(m.get_engine()) == t.place) ||
      t.layout.ndims() != static_cast<int>(dims.size())) {
    return false;
  }
  try {
    return t.layout.desc_for(dims, t.data_type) == m.get_desc();
  } catch (const error&) {
    return false;
  }
}

void check_source(const transform_plan& plan, const memory& src) {
  if (!src) throw error(status::invalid_arguments, "execute_plan: the source memory is empty");
  const memory_desc& md = src.get_desc();
  if (!holds(src, plan.from, md.dims())) {
    throw error(status::invalid_arguments, "execute_plan: the source " + md.to_string() + " on " +
                                               place::of(src.get_engine()).to_string() +
                                               " is not of the plan's kernel type " +
                                               plan.from.to_string());
  }
}

// The engine a step's output memory goes on. The engines of a place are
// many (the default one, and an interop engine per user context), and a
// kernel reads only buffers of its own context, so a plan never leaves the
// engines of the caller's memories for the default ones where it can stay:
// a step within one place keeps the engine of the memory it reads, and a
// step to another place lands on the engine of the caller's memory there
// (the destination's, else the source's, as in a round trip through the
// host), or on the place's default engine when the caller has none there.
engine output_engine(const transform_step& step, const memory& cur, const memory& src,
                     const memory* dst) {
  if (step.to.place == step.from.place) return cur.get_engine();
  if (dst && step.to.place == place::of(dst->get_engine())) return dst->get_engine();
  if (step.to.place == place::of(src.get_engine())) return src.get_engine();
  return step.to.place.get_engine();
}

// Copies `from` into `to` of the same descriptor. Two engines of one GPU
// kind (two OpenCL contexts) share no buffer: the copy goes through the
// host.
void copy(const memory& from, const memory& to) {
  const engine& a = from.get_engine();
  const engine& b = to.get_engine();
  if (!(a == b) && a.get_kind() == engine_kind::gpu && b.get_kind() == engine_kind::gpu) {
    const memory host(from.get_desc(), engine(engine_kind::cpu, 0));
    copy(from, host);
    copy(host, to);
    return;
  }
  stream strm(step_engine(a, b));
  reorder(from, to).execute(strm, from, to);
  strm.wait();
}

// Runs one data-moving step from `cur` into `out`, on the stream of the
// engine that step_engine picks from theirs.
void run_step(const transform_step& step, const memory& cur, const memory& out) {
  stream strm(step_engine(cur.get_engine(), out.get_engine()));
  if (step.kind == transform_kind::user) {
    (*step.function)(cur, out, strm);
  } else {
    // Through the primitive cache: the same reorder is compiled once (the
    // scale is a run-time argument of the kernel, only its mask is keyed).
    primitive_attr attr;
    if (step.from.scale != step.to.scale) {
      attr.set_output_scales(0, {step.from.scale / step.to.scale});
    }
    reorder(cur, out, attr).execute(strm, cur, out);
  }
  strm.wait();
}

// Runs the data-moving steps of `plan` from `src`; the last one writes into
// `*dst` when there is one (through a memory on the engine the step keeps
// and a copy when that is not dst's), and the result is returned.
memory run_steps(const transform_plan& plan, const memory& src, const memory* dst) {
  const auto dims = src.get_desc().dims();
  std::size_t last = plan.steps.size();
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i].kind != transform_kind::library) last = i;
  }
  memory cur = src;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const transform_step& step = plan.steps[i];
    if (step.kind == transform_kind::library) continue;
    const engine eng = output_engine(step, cur, src, dst);
    if (i == last && dst && eng == dst->get_engine()) {
      run_step(step, cur, *dst);
      return *dst;
    }
    memory next(step.to.layout.desc_for(dims, step.to.data_type), eng);
    run_step(step, cur, next);
    cur = next;
  }
  if (dst) copy(cur, *dst);  // nothing moved the data, or it ended on another engine
  return dst ? *dst : cur;
}

}  // namespace

memory execute_plan(const transform_plan& plan, const memory& src) {
  check_source(plan, src);
  return run_steps(plan, src, nullptr);
}

void execute_plan(const transform_plan& plan, const memory& src, const memory& dst) {
  check_source(plan, src);
  if (!dst) throw error(status::invalid_arguments, "execute_plan: the destination is empty");
  if (!holds(dst, plan.to, src.get_desc().dims())) {
    throw error(status::invalid_arguments,
                "execute_plan: the destination " + dst.get_desc().to_string() + " on " +
                    place::of(dst.get_engine()).to_string() + " is not of the plan's kernel type " +
                    plan.to.to_string());
  }
  run_steps(plan, src, &dst);
}

}  // namespace primcache
