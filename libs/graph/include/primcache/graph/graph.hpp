// primcache/graph/graph.hpp — a graph of tensors and ops, the description
// the executor (executor.hpp) runs: what each tensor is (shape, data type,
// layout, place, role) and which op reads and writes it.
//
//   primcache::graph g("mlp");
//   g.add_tensor({.name = "x", .dims = {8, 64}, .type = primcache::data_type::f32,
//                 .role = primcache::tensor_role::input});
//   g.add_tensor({.name = "w", .dims = {64, 32}, .type = primcache::data_type::f32,
//                 .role = primcache::tensor_role::constant});
//   g.add_tensor({.name = "y", .role = primcache::tensor_role::output});
//   g.add_op({.name = "fc", .kind = "matmul", .inputs = {"x", "w"}, .outputs = {"y"}});
//   g.set_data("w", weights_memory);            // constants carry their data
//   std::vector<std::size_t> order = g.validate();   // throws for a bad graph
//
// Tensors. An input is given to each run; a constant carries its data in the
// graph (set_data) and never changes; an intermediate is written by one op
// and read by others; an output is written by one op and returned by each
// run. Inputs and constants need dims and a data type; their layout defaults
// to the plain row-major one of their rank and their place to the CPU.
// Produced tensors may leave everything out (the producing op decides); what
// they give is checked against what the op produces (dims, data type), and
// a layout or place they give is where the run delivers them.
//
// Ops. `kind` names an op kind of the op registry (op_registry.hpp:
// matmul, convolution, eltwise, reorder, identity are built in). An op may
// force its place (`place`), its library (`library`), its data type and the
// layout of its activations; what it leaves out comes from the executor.
// Attributes are small values (integers, floats, strings and lists of them)
// that the op kind reads (convolution strides, eltwise algorithm, ...).
//
// Finding a tensor or op by name takes constant time (the graph keeps
// indexes by name), so loading, validating and building an executor grow
// linearly with the graph.
//
// Thread-safety: a graph is a value; const members may be called from many
// threads, mutation must not race with anything. Exceptions: error —
// invalid_arguments for duplicate names and for everything validate()
// rejects (a message naming the op or tensor and the reason).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/transform/kernel_type.hpp"

namespace primcache {

enum class tensor_role : unsigned char { input, constant, intermediate, output };
PRIMCACHE_API std::string_view to_string(tensor_role role) noexcept;
PRIMCACHE_API std::optional<tensor_role> parse_tensor_role(std::string_view name) noexcept;

// How to fill a tensor that a file describes (constants, and example inputs):
// `uniform` draws from [low, high) with a fixed generator seeded by `seed`
// (the same values on every machine); `fill` sets every element to `value`.
struct PRIMCACHE_API tensor_init {
  enum class kind : unsigned char { uniform, fill };
  tensor_init::kind kind = kind::uniform;
  double low = -1.0;
  double high = 1.0;
  std::uint64_t seed = 1;
  double value = 0.0;
};

struct PRIMCACHE_API tensor_spec {
  std::string name;
  std::vector<std::int64_t> dims;         // empty: the producer's (produced tensors only)
  data_type type = data_type::undef;      // undef: the producer's (produced tensors only)
  primcache::layout layout;               // undef: plain, or the producer's
  std::optional<primcache::place> place;  // none: the CPU, or the producer's
  tensor_role role = tensor_role::input;
  std::optional<tensor_init> init;  // how a file asked to fill it
};

// An op attribute: an integer, a float, a string, or a list of integers or
// of strings.
using op_attribute = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>,
                                  std::vector<std::string>>;

struct PRIMCACHE_API op_spec {
  std::string name;
  std::string kind;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, op_attribute> attributes;
  std::optional<primcache::place> place;  // forced place; none: the executor's
  std::optional<std::string> library;     // forced library; none: the executor's
  data_type type = data_type::undef;      // undef: the first input's
  primcache::layout layout;               // activations' layout; undef: plain

  // Typed attribute access. A missing attribute gives the fallback; one of
  // another type is error(invalid_arguments) naming the op and attribute.
  // An integer is accepted where a float is asked for.
  std::int64_t int_attribute(std::string_view key, std::int64_t fallback) const;
  double float_attribute(std::string_view key, double fallback) const;
  std::string string_attribute(std::string_view key, std::string fallback) const;
  std::vector<std::int64_t> ints_attribute(std::string_view key,
                                           std::vector<std::int64_t> fallback) const;
  std::vector<std::string> strings_attribute(std::string_view key,
                                             std::vector<std::string> fallback) const;
  bool has_attribute(std::string_view key) const;
};

class PRIMCACHE_API graph {
 public:
  explicit graph(std::string name = "graph");

  const std::string& name() const noexcept { return name_; }
  // Adds a tensor; a name used before is error(invalid_arguments).
  void add_tensor(tensor_spec tensor);
  // Adds an op; its outputs that were not declared become intermediates.
  // A name used before (or an empty name or kind) is invalid_arguments.
  void add_op(op_spec op);
  // The data of a constant tensor (or example data of an input): its
  // descriptor must be the one the tensor's dims, type and layout give, on
  // the tensor's place. The graph keeps the memory (a handle: copies share
  // the buffer); its id (memory::get_id) keys the transformed constants.
  void set_data(std::string_view tensor, memory data);
  // The data set for a tensor; an empty memory when there is none.
  memory data(std::string_view tensor) const;

  const std::vector<tensor_spec>& tensors() const noexcept { return tensors_; }
  const std::vector<op_spec>& ops() const noexcept { return ops_; }
  const tensor_spec* find_tensor(std::string_view name) const noexcept;
  const op_spec* find_op(std::string_view name) const noexcept;
  std::vector<std::string> names_of(tensor_role role) const;

  // Checks the structure and returns the ops' indices in an order that
  // runs every producer before its readers. Throws invalid_arguments for: an
  // op reading a tensor nobody declares or produces, an op without outputs,
  // a tensor produced twice, an input or constant produced by an op, an
  // intermediate or output nobody produces, an input or constant without
  // dims or data type, an input or constant over max_tensor_bytes, a
  // constant without data, and a cycle (the message lists the ops around it).
  std::vector<std::size_t> validate() const;

 private:
  // Hashes names as string_views, so that lookups by string_view need no
  // string.
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  using name_index = std::unordered_map<std::string, std::size_t, name_hash, std::equal_to<>>;

  std::string name_;
  std::vector<tensor_spec> tensors_;
  std::vector<op_spec> ops_;
  // Name -> position in tensors_ / ops_, kept by everything that adds to
  // them: find_tensor and find_op (every op's inputs and outputs, in
  // loading, validate() and the executor) in constant time, not a scan.
  name_index tensor_index_;
  name_index op_index_;
  std::map<std::string, memory, std::less<>> data_;
};

// The most bytes one tensor of a graph may take: 4 GiB, both its elements
// times the element size and the bytes its buffer spans in its layout
// (memory_desc::size_bytes), where the padding of blocked layouts is
// allowed beyond the limit but not the gaps that plain strides leave
// ("s2048,1" for 1048576x1 f32: 4 MiB of elements in 8 GiB). validate()
// refuses a larger input or constant, make_tensor_data a larger tensor, and
// the executor a larger tensor an op writes, delivers or reads transformed,
// so that nothing of that size is allocated at load or on every run.
inline constexpr std::uint64_t max_tensor_bytes = std::uint64_t{1} << 32;
// Throws error(invalid_arguments) when a tensor of `dims` and `type` takes
// more than max_tensor_bytes; the message starts with `what` (the tensor)
// and gives its shape, type, bytes and the limit.
PRIMCACHE_API void check_tensor_bytes(const std::string& what,
                                      const std::vector<std::int64_t>& dims, data_type type);
// The descriptor of a tensor of `dims` and `type` in `layout`
// (layout::desc_for), once both of its sizes are within max_tensor_bytes:
// check_tensor_bytes, then the bytes its buffer spans, padding of blocked
// layouts aside. Throws error(invalid_arguments) starting with `what`: "...
// is 1048576x1 f32 in layout s2048,1: its buffer spans 8589934592 bytes,
// more than the limit of 4294967296 bytes per graph tensor"; desc_for's
// failure (a layout that cannot lay out `dims`) keeps its status, prefixed
// with `what` and the layout.
PRIMCACHE_API memory_desc checked_tensor_desc(const std::string& what,
                                              const primcache::layout& layout,
                                              const std::vector<std::int64_t>& dims,
                                              data_type type);

// The plain row-major layout of `ndims` dimensions (a, ab, abc, ...).
PRIMCACHE_API primcache::layout plain_layout(int ndims);
// The kernel type a declared input or constant tensor is in (its layout
// and place defaulted), read by `lib`.
PRIMCACHE_API kernel_type declared_type(const tensor_spec& tensor, const library& lib);
// A memory of the tensor's declared kernel type on its place, filled as
// `init` says (computed on the host in f32, then converted). Throws
// invalid_arguments for a tensor over max_tensor_bytes and for init values
// that are not finite floats (NaN, or larger than FLT_MAX in magnitude).
PRIMCACHE_API memory make_tensor_data(const tensor_spec& tensor, const tensor_init& init);

}  // namespace primcache
