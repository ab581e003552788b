// kernel_primitive.hpp — the descriptor and implementation of every OpenCL
// primitive that runs one generated kernel.
//
// kernel_pd keeps the resolved argument descriptors, the kernel_plan (source
// with shapes and configuration baked in) and the op part of the key.
// kernel_impl — what the global primitive cache holds — keeps only the
// plan and the program BINARY: no cl_program, cl_kernel or context.
// create_resource realizes the binary in the executing engine's context
// (kernel_resource); execute enqueues on the stream's queue and returns.
//
//   auto pd = make_kernel_pd(primitive_kind::eltwise, "ocl:eltwise", attr, eng,
//                            {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}},
//                            eltwise_plan(p), op_key_writer);
//
// Thread-safety: descriptors and impls are immutable; execute may run from
// several threads (the realized kernel serializes its argument setting).
// Exceptions: primcache::error (CL failures by name, build logs).
#pragma once

#include <map>
#include <memory>

#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

class kernel_pd final : public backend::primitive_desc_impl {
 public:
  kernel_pd(backend::primitive_kind kind, const char* name, const primitive_attr& attr,
            std::map<int, memory_desc> mds, kernel_plan plan, key op_key)
      : primitive_desc_impl(kind, attr, name),
        mds_(std::move(mds)),
        plan_(std::move(plan)),
        op_key_(std::move(op_key)) {}

  memory_desc arg_md(int arg) const override;
  void write_op_key(key_writer& w) const override;
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine& eng) const override;
  const kernel_plan& plan() const noexcept { return plan_; }

 private:
  std::map<int, memory_desc> mds_;
  kernel_plan plan_;
  key op_key_;
};

class kernel_impl final : public backend::primitive_impl {
 public:
  kernel_impl(std::shared_ptr<const kernel_pd> pd, program_binary binary)
      : primitive_impl(pd), pd_(std::move(pd)), binary_(std::move(binary)) {}

  void create_resource(const engine& eng, backend::resource_mapper& mapper) const override;
  void execute(const backend::exec_ctx& ctx) const override;
  const program_binary& binary() const noexcept { return binary_; }

 private:
  std::shared_ptr<const kernel_pd> pd_;
  program_binary binary_;
};

// The kernel of one kernel_impl realized in one engine's context.
class kernel_resource final : public backend::resource {
 public:
  kernel_resource(const engine& eng, const program_binary& binary, const std::string& name);
  const realized_kernel& kernel() const noexcept { return kernel_; }

 private:
  engine engine_;  // keeps the context alive as long as the kernel
  realized_kernel kernel_;
};

result<std::shared_ptr<const backend::primitive_desc_impl>> make_kernel_pd(
    backend::primitive_kind kind, const char* name, const primitive_attr& attr,
    const backend::engine_impl& eng, std::map<int, memory_desc> mds, kernel_plan plan,
    key_writer op_key);

inline failure unimplemented(std::string message) {
  return failure{status::unimplemented, std::move(message)};
}

// The cl_mem of execution argument `arg`, or an invalid_arguments error.
cl_mem arg_buffer(const backend::exec_ctx& ctx, int arg, const char* what);

}  // namespace primcache::ocl_internal
