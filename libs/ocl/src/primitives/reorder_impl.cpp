// reorder on OpenCL engines:
//   "ocl:reorder"       both tensors on the executing device: a generated
//                       kernel over dst's padded dims (padding zeroed)
//   "ocl:reorder:copy"  between a CPU engine and an OpenCL engine, same
//                       layout: clEnqueueWriteBuffer / clEnqueueReadBuffer on
//                       the stream's queue, blocking (the host buffer is the
//                       caller's, and a CPU stream does not wait for ours)
#include <cstring>

#include "cl_error.hpp"
#include "kernel_primitive.hpp"
#include "kernels/reorder_source.hpp"
#include "ocl_stream.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primitives/registration.hpp"

namespace primcache::ocl_internal {
namespace {

using backend::primitive_kind;
using backend::reorder_op;

result<memory_desc> resolve_dst(const reorder_op& op) {
  if (op.src.is_any()) return failure{status::invalid_arguments, "reorder src cannot be any"};
  if (op.dst.is_any()) return op.src.with_data_type(op.dst.data_type());
  return op.dst;
}

result<std::shared_ptr<const backend::primitive_desc_impl>> make_reorder_pd(
    const backend::op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng) {
  const reorder_op& op = std::get<reorder_op>(desc);
  if (op.src_engine != engine_kind::gpu || op.dst_engine != engine_kind::gpu) {
    return unimplemented("not a reorder within one OpenCL device");
  }
  if (attr.has_output_scales() || !attr.get_post_ops().entries().empty()) {
    return unimplemented("attributes on OpenCL reorder");
  }
  auto dst = resolve_dst(op);
  if (!dst) return dst.why();
  if (op.src.data_type() != data_type::f32 || dst.value().data_type() != data_type::f32) {
    return unimplemented("OpenCL reorder supports f32 only");
  }
  key_writer w;
  op.src.write_key(w);
  dst.value().write_key(w);
  return make_kernel_pd(primitive_kind::reorder, "ocl:reorder", attr, eng,
                        {{PRIMCACHE_ARG_FROM, op.src}, {PRIMCACHE_ARG_TO, dst.value()}},
                        reorder_plan(op.src, dst.value()), std::move(w));
}

// CPU <-> OpenCL: a byte copy of one layout.
class copy_pd final : public backend::primitive_desc_impl {
 public:
  copy_pd(const primitive_attr& attr, memory_desc md, bool to_device)
      : primitive_desc_impl(primitive_kind::reorder, attr, "ocl:reorder:copy"),
        md_(std::move(md)),
        to_device_(to_device) {}
  memory_desc arg_md(int arg) const override {
    return (arg == PRIMCACHE_ARG_FROM || arg == PRIMCACHE_ARG_TO) ? md_ : memory_desc();
  }
  void write_op_key(key_writer& w) const override {
    md_.write_key(w);
    w.boolean(to_device_);
  }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine&) const override;
  bool to_device() const noexcept { return to_device_; }
  const memory_desc& md() const noexcept { return md_; }

 protected:
  // No code: a blob of this impl is its name and key, with no object.
  std::shared_ptr<const backend::primitive_impl> load_impl(
      const engine& eng, const backend::impl_blob& blob) const override {
    if (!blob.object.empty()) {
      throw error(status::corrupt_data,
                  "reorder (ocl:reorder:copy): the blob holds code; this implementation has none");
    }
    return create_impl(eng);
  }

 private:
  memory_desc md_;
  bool to_device_;
};

class copy_impl final : public backend::primitive_impl {
 public:
  explicit copy_impl(std::shared_ptr<const copy_pd> pd) : primitive_impl(pd), pd_(std::move(pd)) {}
  void execute(const backend::exec_ctx& ctx) const override {
    const cl_command_queue q = queue_of(backend::impl_of(*ctx.strm));
    // The whole buffer: offsets and padding travel as they are.
    const std::size_t bytes = pd_->md().size_bytes();
    if (pd_->to_device()) {
      const void* host = ctx.arg_ptr(PRIMCACHE_ARG_FROM);
      cl_mem dev = arg_buffer(ctx, PRIMCACHE_ARG_TO, "ocl:reorder:copy");
      if (host == nullptr)
        throw error(status::invalid_arguments, "reorder: from is not host memory");
      check(clEnqueueWriteBuffer(q, dev, CL_TRUE, 0, bytes, host, 0, nullptr, nullptr),
            "clEnqueueWriteBuffer");
    } else {
      void* host = ctx.arg_ptr(PRIMCACHE_ARG_TO);
      cl_mem dev = arg_buffer(ctx, PRIMCACHE_ARG_FROM, "ocl:reorder:copy");
      if (host == nullptr) throw error(status::invalid_arguments, "reorder: to is not host memory");
      check(clEnqueueReadBuffer(q, dev, CL_TRUE, 0, bytes, host, 0, nullptr, nullptr),
            "clEnqueueReadBuffer");
    }
  }
  std::vector<std::uint8_t> serialize() const override {
    backend::impl_blob b;
    b.name = pd().name();
    const auto k = pd().cache_key().bytes();
    b.key_bytes.assign(k.begin(), k.end());
    return b.encode();
  }

 private:
  std::shared_ptr<const copy_pd> pd_;
};

std::shared_ptr<const backend::primitive_impl> copy_pd::create_impl(const engine&) const {
  return std::make_shared<const copy_impl>(
      std::static_pointer_cast<const copy_pd>(shared_from_this()));
}

result<std::shared_ptr<const backend::primitive_desc_impl>> make_copy_pd(
    const backend::op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng) {
  const reorder_op& op = std::get<reorder_op>(desc);
  if (op.src_engine == op.dst_engine) return unimplemented("not a CPU <-> OpenCL reorder");
  if (attr.has_output_scales() || !attr.get_post_ops().entries().empty()) {
    return unimplemented("attributes on a CPU <-> OpenCL reorder");
  }
  auto dst = resolve_dst(op);
  if (!dst) return dst.why();
  if (!(dst.value() == op.src)) {
    return unimplemented("CPU <-> OpenCL reorders copy one layout; src " + op.src.to_string() +
                         " and dst " + dst.value().to_string() + " differ");
  }
  auto pd = std::make_shared<copy_pd>(attr, op.src, op.dst_engine == engine_kind::gpu);
  pd->finalize(eng, 1);
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

}  // namespace

void register_reorder_impls() {
  backend::register_implementation(
      {"ocl:reorder", engine_kind::gpu, primitive_kind::reorder, 100, &make_reorder_pd});
  backend::register_implementation(
      {"ocl:reorder:copy", engine_kind::gpu, primitive_kind::reorder, 90, &make_copy_pd});
}

}  // namespace primcache::ocl_internal
