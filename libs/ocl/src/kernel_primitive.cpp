#include "kernel_primitive.hpp"

#include <algorithm>

#include "cl_error.hpp"
#include "ocl_engine.hpp"
#include "ocl_storage.hpp"
#include "ocl_stream.hpp"
#include "primcache/base/error.hpp"

namespace primcache::ocl_internal {

memory_desc kernel_pd::arg_md(int arg) const {
  auto it = mds_.find(arg);
  return it == mds_.end() ? memory_desc() : it->second;
}

void kernel_pd::write_op_key(key_writer& w) const {
  w.raw(op_key_.bytes());
}

std::shared_ptr<const backend::primitive_impl> kernel_pd::create_impl(const engine& eng) const {
  auto self = std::static_pointer_cast<const kernel_pd>(shared_from_this());
  const ocl_engine& ocl = ocl_engine_of(backend::impl_of(eng));
  return std::make_shared<const kernel_impl>(self, build_binary(ocl, plan_),
                                             device_identity::of(ocl.device_info()));
}

std::optional<backend::kernel_config> kernel_pd::default_config() const {
  if (!tuning_) return std::nullopt;
  return tuning_->default_config;
}

backend::config_space kernel_pd::config_candidates() const {
  if (!tuning_) return {};
  return tuning_->candidates();
}

result<bool> kernel_pd::validate_config(const backend::kernel_config& cfg) const {
  if (!tuning_) return primitive_desc_impl::validate_config(cfg);
  return tuning_->validate(cfg);
}

std::shared_ptr<const backend::primitive_impl> kernel_pd::create_impl_with(
    const engine& eng, const backend::kernel_config& cfg) const {
  if (!tuning_) return primitive_desc_impl::create_impl_with(eng, cfg);
  if (auto ok = tuning_->validate(cfg); !ok) {
    throw error(ok.why().code, std::string(name()) + ": " + ok.why().message);
  }
  auto candidate = std::make_shared<kernel_pd>(*this);
  candidate->plan_ = tuning_->plan(cfg);
  const ocl_engine& ocl = ocl_engine_of(backend::impl_of(eng));
  return std::make_shared<const kernel_impl>(candidate, build_binary(ocl, candidate->plan_),
                                             device_identity::of(ocl.device_info()), cfg);
}

void kernel_pd::follow_chosen_config() {
  if (tuning_ && config() && *config() != tuning_->default_config) {
    plan_ = tuning_->plan(*config());
  }
}

namespace {

// The binary of a blob realized for `ocl`, with the plan's kernels in it.
// The driver has the last word on a binary (one of another driver build,
// or altered): a refusal must throw here, where the runtime counts the blob
// as rejected and caches nothing, not at create_resource, after the impl was
// filed in the primitive cache and failed every later creation. Only a
// refusal (refuses_binary) is invalid_arguments, which makes a store erase
// the entry; any other failure (the device out of resources or memory, not
// available) keeps its status, out_of_memory or runtime_error, so that one
// process's trouble does not erase an entry a fleet shares.
std::shared_ptr<const realized_program> realize_loaded_binary(const ocl_engine& ocl,
                                                              const program_binary& binary,
                                                              const kernel_plan& plan,
                                                              const std::string& who) {
  try {
    auto program = ocl.program_for(binary, plan.name);
    const realized_kernel main_kernel(program, plan.name);
    if (plan.packing) {
      const realized_kernel packing_kernel(program, plan.packing->name);
    }
    return program;
  } catch (const cl_failure& e) {
    if (!refuses_binary(e.cl_code())) {
      throw error(e.code(), who + ": the OpenCL driver of " + ocl.describe() +
                                " could not load the blob's program binary now (" + e.message() +
                                ")");
    }
    throw error(status::invalid_arguments, who + ": the OpenCL driver of " + ocl.describe() +
                                               " refuses the blob's program binary (" +
                                               e.message() + ")");
  }
}

}  // namespace

std::shared_ptr<const backend::primitive_impl> kernel_pd::load_impl(
    const engine& eng, const backend::impl_blob& blob) const {
  // The runtime checked the name, the key (device identity and the kernel
  // configuration are in it) and the checksum; the record is checked
  // against this engine's device and the source this descriptor generates,
  // and the binary against the driver.
  const std::string who = std::string(to_string(kind())) + " (" + name() + ")";
  const ocl_engine& ocl = ocl_engine_of(backend::impl_of(eng));
  const device_identity id = device_identity::of(ocl.device_info());
  auto binary = read_binary_record(blob.object, id, plan_.source);
  if (!binary) throw error(binary.why().code, who + ": " + binary.why().message);
  auto self = std::static_pointer_cast<const kernel_pd>(shared_from_this());
  // The impl first: the program is keyed by the address of the binary it
  // owns.
  auto impl = std::make_shared<kernel_impl>(self, std::move(binary).value(), id);
  impl->hold(realize_loaded_binary(ocl, impl->binary(), plan_, who));
  return impl;
}

std::vector<std::uint8_t> kernel_impl::serialize() const {
  backend::impl_blob b;
  b.name = pd().name();
  const auto k = pd().cache_key().bytes();
  b.key_bytes.assign(k.begin(), k.end());
  b.config = config();
  b.object = write_binary_record(made_for_, pd_->plan().source, binary_);
  return b.encode();
}

kernel_resource::kernel_resource(const engine& eng, const program_binary& binary,
                                 const kernel_plan& plan)
    : engine_(eng),
      kernel_(ocl_engine_of(backend::impl_of(eng)).program_for(binary, plan.name), plan.name) {
  if (plan.packing) {
    packing_ = std::make_unique<realized_kernel>(
        ocl_engine_of(backend::impl_of(eng)).program_for(binary, plan.name), plan.packing->name);
  }
}

void kernel_impl::hold(std::shared_ptr<const realized_program> program) const {
  lock_guard<mutex> lock(programs_mu_);
  if (std::find(programs_.begin(), programs_.end(), program) != programs_.end()) return;
  // The oldest goes first: an application that makes a context per session
  // must not have every cached impl keep every context it ever ran in.
  if (programs_.size() >= max_held_programs) programs_.erase(programs_.begin());
  programs_.push_back(std::move(program));
}

void kernel_impl::create_resource(const engine& eng, backend::resource_mapper& mapper) const {
  if (mapper.has(this)) return;
  mapper.add(this, std::make_unique<kernel_resource>(eng, binary_, pd_->plan()));
  // Kept past this primitive: without it, a primitive made from the cached
  // impl after the last one went away loaded and built the binary again (a
  // graph's per-run transforms did, every run), and with PoCL's kernel
  // cache off, a program released while another was built from the same
  // binary aborted PoCL.
  hold(ocl_engine_of(backend::impl_of(eng)).program_for(binary_, pd_->plan().name));
}

cl_mem arg_buffer(const backend::exec_ctx& ctx, int arg, const char* what, cl_context context) {
  const auto* s = dynamic_cast<const buffer_storage*>(ctx.arg_storage(arg));
  if (s == nullptr || s->mem() == nullptr) {
    throw error(status::invalid_arguments, std::string(what) + ": argument " + std::to_string(arg) +
                                               " is not an OpenCL buffer");
  }
  // The runtime checks every argument's engine against the primitive's,
  // but a reorder's source and destination engines may be two OpenCL
  // engines of different contexts; OpenCL leaves such a launch undefined.
  if (context != nullptr && s->engine().context() != context) {
    throw error(status::invalid_arguments,
                std::string(what) + ": argument " + std::to_string(arg) + " is a buffer of " +
                    s->engine().describe() +
                    " in another OpenCL context than the executing engine's; a kernel reads only "
                    "buffers of its own context (copy through the host first)");
  }
  return s->mem();
}

void kernel_impl::execute(const backend::exec_ctx& ctx) const {
  const auto* r = ctx.resources->get<kernel_resource>(this);
  if (r == nullptr) {
    throw error(status::runtime_error, std::string(pd().name()) + ": no realized kernel");
  }
  const kernel_plan& plan = pd_->plan();
  std::vector<cl_mem> mems;
  mems.reserve(plan.args.size());
  std::shared_ptr<const constant_buffer> packed;  // held until the kernel is enqueued
  if (plan.packing) {
    packed = packed_constant_weights(ctx, r->get_engine(), *r->packing_kernel(), *plan.packing,
                                     r->last_packed(), pd().name());
  }
  const cl_context context = ocl_engine_of(backend::impl_of(r->get_engine())).context();
  for (int arg : plan.args) {
    mems.push_back(packed && arg == PRIMCACHE_ARG_WEIGHTS
                       ? static_cast<cl_mem>(packed->data())
                       : arg_buffer(ctx, arg, pd().name(), context));
  }
  queue_stream& strm = queue_stream_of(backend::impl_of(*ctx.strm));
  if (!strm.profiling()) {
    r->kernel().enqueue(strm.queue(), plan, mems);
    return;
  }
  cl_event done = nullptr;
  r->kernel().enqueue(strm.queue(), plan, mems, &done);
  strm.record(done);
}

result<std::shared_ptr<const backend::primitive_desc_impl>> make_kernel_pd(
    backend::primitive_kind kind, const char* name, const primitive_attr& attr,
    const backend::engine_impl& eng, std::map<int, memory_desc> mds, kernel_plan plan,
    key_writer op_key, std::shared_ptr<const kernel_tuning> tuning) {
  auto pd = std::make_shared<kernel_pd>(kind, name, attr, std::move(mds), std::move(plan),
                                        op_key.finish(), std::move(tuning));
  pd->finalize(eng, 1);
  pd->follow_chosen_config();
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

}  // namespace primcache::ocl_internal
