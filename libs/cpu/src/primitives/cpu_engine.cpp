#include "primitives/cpu_engine.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>

#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/engine.hpp"

namespace primcache::cpu_internal {

void cpu_engine::write_identity(key_writer& w) const {
  w.str("cpu:threadpool").enumeration(effective_isa());
}

std::string cpu_engine::describe() const {
  return "cpu:" + std::string(to_string(effective_isa()));
}

void* cpu_engine::allocate(std::size_t bytes) const {
  // 64-byte alignment for vector loads; aligned_alloc wants a multiple.
  const std::size_t rounded = (bytes + 63) & ~std::size_t{63};
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) {
    throw error(status::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return p;
}

void cpu_engine::deallocate(void* p) const noexcept {
  std::free(p);
}

result<post_op_chain> translate_post_ops(const primitive_attr& attr, const memory_desc& dst,
                                         int channel_dim) {
  post_op_chain chain;
  int binary_count = 0;
  for (const auto& e : attr.get_post_ops().entries()) {
    post_op op;
    if (e.kind == post_ops::kind::eltwise) {
      op.what = post_op::kind::eltwise;
      switch (e.alg) {
        case algorithm::eltwise_relu: op.eltwise.alg = eltwise_alg::relu; break;
        case algorithm::eltwise_gelu_erf: op.eltwise.alg = eltwise_alg::gelu_erf; break;
        case algorithm::eltwise_gelu_tanh: op.eltwise.alg = eltwise_alg::gelu_tanh; break;
        case algorithm::eltwise_tanh: op.eltwise.alg = eltwise_alg::tanh; break;
        case algorithm::eltwise_logistic: op.eltwise.alg = eltwise_alg::sigmoid; break;
        case algorithm::eltwise_exp: op.eltwise.alg = eltwise_alg::exp; break;
        case algorithm::eltwise_linear: op.eltwise.alg = eltwise_alg::linear; break;
        case algorithm::eltwise_clip: op.eltwise.alg = eltwise_alg::clip; break;
        default: return unimplemented("post-op " + std::string(to_string(e.alg)));
      }
      op.eltwise.alpha = e.alpha;
      op.eltwise.beta = e.beta;
      op.eltwise.scale = e.scale;
    } else {
      if (binary_count == max_binary_post_ops) {
        return unimplemented("more than " + std::to_string(max_binary_post_ops) +
                             " binary post-ops");
      }
      op.what = post_op::kind::binary_add;
      op.binary.arg_index = binary_count++;
      const memory_desc& src1 = e.src1;
      if (src1.ndims() != dst.ndims()) {
        return failure{status::invalid_arguments, "binary post-op operand " + src1.to_string() +
                                                      " and dst " + dst.to_string() +
                                                      " differ in rank"};
      }
      bool all_one = true, per_channel = true, same = true;
      for (int d = 0; d < dst.ndims(); ++d) {
        const std::int64_t s = src1.dims()[d];
        all_one = all_one && s == 1;
        per_channel = per_channel && (d == channel_dim ? s == dst.dims()[d] : s == 1);
        same = same && s == dst.dims()[d];
      }
      if (all_one) {
        op.binary.broadcast = binary_broadcast::scalar;
      } else if (per_channel && src1.is_plain() && src1.strides()[channel_dim] == 1) {
        // The kernels read the channels' values as consecutive floats: one
        // with a channel stride is refused below, never read as if dense.
        op.binary.broadcast = binary_broadcast::per_channel;
      } else if (same && src1 == dst.with_data_type(data_type::f32)) {
        op.binary.broadcast = binary_broadcast::none;
      } else {
        return unimplemented("binary post-op operand " + src1.to_string() +
                             " is neither a scalar, a dense per-channel vector, nor laid out as "
                             "dst " +
                             dst.to_string() + " (offset0 included)");
      }
    }
    chain.push_back(op);
  }
  return chain;
}

binary_operand_array collect_binary_operands(const backend::exec_ctx& ctx, const post_ops& ops,
                                             const post_op_chain& chain, dst_addressing dst,
                                             const char* what) {
  const auto& entries = ops.entries();
  if (entries.size() != chain.size()) {
    throw error(status::runtime_error,
                std::string(what) + ": the post-op chain has " + std::to_string(chain.size()) +
                    " entries, its attribute " + std::to_string(entries.size()));
  }
  binary_operand_array operands{};
  for (std::size_t i = 0; i < chain.size(); ++i) {
    if (chain[i].what != post_op::kind::binary_add) continue;
    const int arg = PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | PRIMCACHE_ARG_SRC_1;
    const void* p = ctx.arg_ptr(arg);
    if (p == nullptr) {
      throw error(status::invalid_arguments,
                  std::string(what) + ": the operand of binary post-op " + std::to_string(i) +
                      " (PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(" + std::to_string(i) +
                      ") | PRIMCACHE_ARG_SRC_1) was not passed");
    }
    const auto* operand = static_cast<const float*>(p);
    // The execution checked the memory's descriptor against the
    // attribute's (offset0 included), so the buffer holds element 0 there.
    if (chain[i].binary.broadcast != binary_broadcast::none ||
        dst == dst_addressing::caller_advances) {
      operand += entries[i].src1.offset0();
    }
    operands[static_cast<std::size_t>(chain[i].binary.arg_index)] = operand;
  }
  return operands;
}

void* required_arg(const backend::exec_ctx& ctx, int arg, const char* what, const char* name) {
  void* p = ctx.arg_ptr(arg);
  if (p == nullptr) {
    throw error(status::invalid_arguments,
                std::string(what) + ": argument " + name + " was not passed");
  }
  return p;
}

bool register_cpu_backend() {
  // A program may carry two copies of the backend (its objects and the shared
  // library, or a static archive and a shared one); each registers from its
  // static initializer. The registry is one per process: a second
  // registration would replace the engine factory (dropping the CPU device
  // that engines already made hold: memory made before it would not work
  // with primitives made after) and list every implementation twice. The
  // first copy's registration stands; the others register nothing.
  if (engine::get_count(engine_kind::cpu) != 0) {
    std::fprintf(stderr,
                 "primcache: the CPU backend is linked into this program twice (its objects "
                 "and its library?); the copy registered first is used\n");
    return false;
  }
  backend::register_engine_factory(
      engine_kind::cpu, [] { return std::size_t{1}; },
      [](std::size_t index) -> std::shared_ptr<const backend::engine_impl> {
        return std::make_shared<const cpu_engine>(index);
      });
  register_matmul_impls();
  register_conv_impls();
  register_conv_via_matmul_impls();
  register_eltwise_impls();
  register_reorder_impls();
  return true;
}

namespace {
// Linking primcache::cpu is all a user does to get cpu engines: the shared
// library registers itself when it is loaded, and in a static link this
// object is pulled in by the anchor below.
const bool registered = register_cpu_backend();
}  // namespace

}  // namespace primcache::cpu_internal

// A static archive member is linked only when something references it, and
// nothing references this one: in static builds primcache::cpu's interface
// adds -Wl,--undefined=primcache_cpu_backend_anchor (libs/cpu/CMakeLists.txt),
// which pulls this object, and with it the registration above, into the
// program.
extern "C" PRIMCACHE_API void primcache_cpu_backend_anchor() {}
