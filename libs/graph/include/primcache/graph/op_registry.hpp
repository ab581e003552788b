// primcache/graph/op_registry.hpp — op kinds and their kernels, one kernel
// per kernel type (place kind and library) of each kind.
//
//   auto& reg = primcache::op_registry::global();     // built-ins included
//   reg.add_kernel("matmul", primcache::engine_kind::cpu, "mylib",
//                  std::make_shared<my_matmul_kernel>());
//   auto k = reg.find_kernel("matmul", primcache::engine_kind::cpu, "jit");
//
// An op kind has a shape function (checks attributes and input shapes,
// returns the outputs' shapes) and, unless it accepts any, the names of the
// attributes it accepts: the executor refuses an op with another attribute
// (a misspelt "paddin" would otherwise be ignored). Each of its kernels says
// in which kernel type it wants each input (input_type) and writes each output
// (output_type), and binds to concrete descriptors on an engine (bind),
// which is where it creates its primitives. The executor transforms every
// input whose actual kernel type differs from the one the kernel wants.
//
// Built in (registered in global() on first use), for engine kinds cpu and
// gpu under library "jit", backed by the runtime's primitives (the CPU
// backend's, the OpenCL backend's):
//   matmul       src (M,K) or (B,M,K), weights (K,N) or (B,K,N), optional
//                bias (1,N); attribute post_ops.
//   convolution  src (N,C,H,W), weights (O,C,KH,KW), optional bias (O);
//                strides, padding or padding_l/padding_r, dilation,
//                weights_layout, post_ops.
//   eltwise      algorithm (relu, gelu_erf, gelu_tanh, tanh, sigmoid, exp,
//                linear, clip), alpha, beta.
//   reorder, identity  one input, read where it is; the output in the op's
//                layout and data type.
// post_ops is a list of eltwise algorithm names and "add"; each "add" reads
// one more input, after the bias, shaped like the output.
//
// Thread-safety: every member may be called concurrently (a shared lock for
// lookups, an exclusive one to change the maps; never held while a kernel
// runs). Kernels must be immutable: bind and bound kernels' execute are
// called from many threads. Exceptions: error(invalid_arguments) for empty
// names or a null kernel; shape functions and bind throw error naming the
// op and the reason.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/graph/graph.hpp"
#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/transform/kernel_type.hpp"

namespace primcache {

struct PRIMCACHE_API tensor_shape {
  std::vector<std::int64_t> dims;
  data_type type = data_type::undef;
};

// Checks an op's attributes and its inputs' shapes; returns its outputs'.
using shape_function = std::function<std::vector<tensor_shape>(
    const op_spec& op, std::span<const tensor_shape> inputs)>;

// What bind() receives: the op, where it runs, and its arguments'
// descriptors as the kernel will see them at execution.
struct PRIMCACHE_API kernel_binding {
  const op_spec* op = nullptr;
  engine eng;
  kernel_type type;                   // the op's kernel type
  std::vector<memory_desc> inputs;    // in input_type's kernel types
  std::vector<memory_desc> outputs;   // in output_type's kernel types
  std::vector<bool> constant_inputs;  // inputs that are constant tensors
};

// An op bound to descriptors on an engine: runs it.
class PRIMCACHE_API bound_kernel {
 public:
  virtual ~bound_kernel();
  // Runs on `strm` (of the bound engine); the executor waits on it after.
  virtual void execute(const stream& strm, std::span<const memory> inputs,
                       std::span<const memory> outputs) const = 0;
};

class PRIMCACHE_API op_kernel {
 public:
  virtual ~op_kernel();
  // The kernel type input `index` must arrive in when the op runs as
  // `op_type`; `actual` is the one it is in. The default: op_type with the
  // op's layout when the input has its rank, else the plain layout.
  virtual kernel_type input_type(const op_spec& op, std::size_t index, const tensor_shape& shape,
                                 const kernel_type& op_type, const kernel_type& actual) const;
  // The kernel type output `index` is written in; the default as above.
  virtual kernel_type output_type(const op_spec& op, std::size_t index, const tensor_shape& shape,
                                  const kernel_type& op_type) const;
  virtual std::unique_ptr<bound_kernel> bind(const kernel_binding& binding) const = 0;
};

// `op_layout` for a tensor of `ndims` dimensions: itself when it lays out
// that many, else the plain layout of the rank (a bias, say). The executor
// has already refused an op layout of another rank than the op's first
// output.
PRIMCACHE_API layout layout_for_rank(const layout& op_layout, int ndims);

class PRIMCACHE_API op_registry {
 public:
  op_registry();  // empty: no kinds, no kernels
  ~op_registry();
  op_registry(const op_registry&) = delete;
  op_registry& operator=(const op_registry&) = delete;

  // The process's registry, with the built-in kinds and kernels.
  static op_registry& global();
  // Adds the built-in kinds and kernels to this registry.
  void add_builtins();

  // Registers (or replaces) an op kind's shape function; the kind accepts
  // any attribute (its shape function checks the ones it reads).
  void add_kind(std::string kind, shape_function shapes);
  // The same, accepting only the attributes named in `attributes` (none
  // when empty): the executor refuses an op of the kind with another one.
  void add_kind(std::string kind, shape_function shapes, std::vector<std::string> attributes);
  // Registers (or replaces) the kernel of `kind` for (place kind, library).
  void add_kernel(std::string kind, engine_kind place_kind, std::string library,
                  std::shared_ptr<const op_kernel> kernel);
  bool remove_kernel(std::string_view kind, engine_kind place_kind, std::string_view library);

  // The shape function of a kind; empty when the kind is unknown.
  shape_function find_kind(std::string_view kind) const;
  // The attributes a kind accepts, sorted; nullopt when it accepts any (or
  // the kind is unknown).
  std::optional<std::vector<std::string>> accepted_attributes(std::string_view kind) const;
  // The kernel for (kind, place kind, library); null when none.
  std::shared_ptr<const op_kernel> find_kernel(std::string_view kind, engine_kind place_kind,
                                               std::string_view library) const;
  // Known kinds, sorted; a kind's kernels as "cpu/jit", sorted.
  std::vector<std::string> kinds() const;
  std::vector<std::string> kernels_of(std::string_view kind) const;

 private:
  struct state;
  void add_kind_entry(std::string kind, shape_function shapes,
                      std::optional<std::vector<std::string>> attributes);
  std::unique_ptr<state> state_;
};

}  // namespace primcache
