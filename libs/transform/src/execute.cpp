#include <string>

#include "primcache/base/error.hpp"
#include "primcache/runtime/reorder.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/transform/transform_plan.hpp"

namespace primcache {
namespace {

// The engine a step between these places runs on: the GPU's when either
// side is a GPU (as reorder chooses).
engine step_engine(const place& from, const place& to) {
  return (from.is_cpu() ? to : from).get_engine();
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

void check_source(const transform_plan& plan, const memory& src) {
  if (!src) throw error(status::invalid_arguments, "execute_plan: the source memory is empty");
  const memory_desc& md = src.get_desc();
  const memory_desc want = plan.from.layout.desc_for(md.dims(), plan.from.data_type);
  if (!(want == md) || !(place::of(src.get_engine()) == plan.from.place)) {
    throw error(status::invalid_arguments, "execute_plan: the source " + md.to_string() + " on " +
                                               place::of(src.get_engine()).to_string() +
                                               " is not of the plan's kernel type " +
                                               plan.from.to_string());
  }
}

// Runs one data-moving step from `cur` into `dst`.
void run_step(const transform_step& step, const memory& cur, const memory& dst) {
  stream strm(step_engine(step.from.place, step.to.place));
  if (step.kind == transform_kind::user) {
    (*step.function)(cur, dst, strm);
  } else {
    // Through the primitive cache: the same reorder is compiled once (the
    // scale is a run-time argument of the kernel, only its mask is keyed).
    primitive_attr attr;
    if (step.from.scale != step.to.scale) {
      attr.set_output_scales(0, {step.from.scale / step.to.scale});
    }
    reorder(cur, dst, attr).execute(strm, cur, dst);
  }
  strm.wait();
}

}  // namespace

memory execute_plan(const transform_plan& plan, const memory& src) {
  check_source(plan, src);
  const auto dims = src.get_desc().dims();
  memory cur = src;
  for (const transform_step& step : plan.steps) {
    if (step.kind == transform_kind::library) continue;
    memory dst(step.to.layout.desc_for(dims, step.to.data_type), step.to.place.get_engine());
    run_step(step, cur, dst);
    cur = dst;
  }
  return cur;
}

void execute_plan(const transform_plan& plan, const memory& src, const memory& dst) {
  check_source(plan, src);
  if (!dst) throw error(status::invalid_arguments, "execute_plan: the destination is empty");
  const auto dims = src.get_desc().dims();
  const memory_desc want = plan.to.layout.desc_for(dims, plan.to.data_type);
  if (!(want == dst.get_desc()) || !(place::of(dst.get_engine()) == plan.to.place)) {
    throw error(status::invalid_arguments,
                "execute_plan: the destination " + dst.get_desc().to_string() + " on " +
                    place::of(dst.get_engine()).to_string() + " is not of the plan's kernel type " +
                    plan.to.to_string());
  }
  std::size_t last = plan.steps.size();
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i].kind != transform_kind::library) last = i;
  }
  if (last == plan.steps.size()) {
    // Nothing moves the data: copy it (same descriptor, same place).
    stream strm(step_engine(plan.from.place, plan.to.place));
    reorder(src, dst).execute(strm, src, dst);
    strm.wait();
    return;
  }
  memory cur = src;
  for (std::size_t i = 0; i <= last; ++i) {
    const transform_step& step = plan.steps[i];
    if (step.kind == transform_kind::library) continue;
    memory next = i == last ? dst
                            : memory(step.to.layout.desc_for(dims, step.to.data_type),
                                     step.to.place.get_engine());
    run_step(step, cur, next);
    cur = next;
  }
}

}  // namespace primcache
