#include "constant_weights.hpp"

#include <string_view>

#include "cl_error.hpp"
#include "kernel_primitive.hpp"
#include "ocl_engine.hpp"
#include "ocl_stream.hpp"
#include "primcache/base/error.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/args.h"
#include "primcache/runtime/constant_cache.hpp"

namespace primcache::ocl_internal {

std::shared_ptr<const constant_buffer> packed_weights_slot::get(std::uint64_t memory_id) const {
  lock_guard<mutex> lock(mu_);
  return memory_id_ == memory_id ? buffer_ : nullptr;
}

void packed_weights_slot::set(std::uint64_t memory_id,
                              std::shared_ptr<const constant_buffer> buffer) const {
  std::shared_ptr<const constant_buffer> old;  // released outside the lock
  lock_guard<mutex> lock(mu_);
  old = std::move(buffer_);
  memory_id_ = memory_id;
  buffer_ = std::move(buffer);
}

void packed_weights_slot::clear() const {
  std::shared_ptr<const constant_buffer> old;
  lock_guard<mutex> lock(mu_);
  if (!buffer_) return;
  old = std::move(buffer_);
  memory_id_ = 0;
}

std::string constant_weights_key(const weights_packing& packing, cl_context context,
                                 std::uint64_t memory_id) {
  key_writer w;
  w.str("ocl_packed_weights").raw(packing.layout_key);
  w.str("context").u64(reinterpret_cast<std::uintptr_t>(context));
  w.str("memory_id").u64(memory_id);
  const key k = w.finish();
  return std::string(reinterpret_cast<const char*>(k.bytes().data()), k.bytes().size());
}

std::shared_ptr<const constant_buffer> packed_constant_weights(
    const backend::exec_ctx& ctx, const engine& eng, const realized_kernel& packer,
    const weights_packing& packing, const packed_weights_slot& slot, const char* what) {
  const memory* weights = ctx.arg(PRIMCACHE_ARG_WEIGHTS);
  if (weights == nullptr) {
    throw error(status::invalid_arguments, std::string(what) + ": argument weights was not passed");
  }
  const cl_mem user = arg_buffer(ctx, PRIMCACHE_ARG_WEIGHTS, what);
  const ocl_engine& ocl = ocl_engine_of(backend::impl_of(eng));
  const cl_context context = ocl.context();
  const std::uint64_t id = weights->get_id();
  const constant_key ck(ocl_backend_id, constant_weights_key(packing, context, id));
  constant_tensor_cache& cache = constant_tensor_cache_for(eng);
  const std::size_t bytes = packing.packed_bytes;
  auto r = cache.get_or_add(ck, bytes, [&]() -> std::shared_ptr<const constant_buffer> {
    // Packed by this primitive before, and not kept then: offered again.
    if (auto kept = slot.get(id)) return kept;
    // The buffer retains the context (OpenCL), so the engine may go first.
    auto buf = make_constant_buffer(
        bytes,
        [context](std::size_t n) -> void* {
          cl_int err = CL_SUCCESS;
          cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE, n == 0 ? 1 : n, nullptr, &err);
          check(err, "clCreateBuffer (constant weights of " + std::to_string(n) + " bytes)");
          return m;
        },
        [](void* m, std::size_t) { clReleaseMemObject(static_cast<cl_mem>(m)); });
    packer.pack(queue_of(backend::impl_of(*ctx.strm)), packing, user,
                static_cast<cl_mem>(buf->data()));
    return buf;
  });
  if (r.outcome == lookup_outcome::miss) {
    // Kept or not, this primitive remembers what it packed: when the cache
    // keeps nothing, the next execution offers it again instead of packing.
    slot.set(id, r.value);
    // No one can look this entry up once the id is gone: drop it then.
    backend::on_data_release(*weights, ck.bytes(), [ck, &cache]() noexcept {
      try {
        cache.remove_if_exist(ck);
      } catch (...) {
        // Out of memory while removing: the entry stays until an eviction.
      }
    });
  } else {
    slot.clear();  // the cache holds the buffer
  }
  return r.value;
}

}  // namespace primcache::ocl_internal
