// primcache/graph/graph_json.hpp — graphs as JSON (docs/graph.md has the
// format): tensors with shape, type, layout, place, role and init; ops with
// kind, inputs, outputs, attributes and placement.
//
//   primcache::graph g = primcache::load_graph_file("libs/graph/examples/mlp.json");
//   primcache::executor exec(g);
//   auto out = exec.run(primcache::make_inputs(g));
//
// Loading checks the text completely: malformed JSON (with its line and
// column), a key the format does not know, a key given twice in one
// object, a value of the wrong type or range, an unknown data type,
// layout, place or role — each an
// error(invalid_arguments) whose message starts "graph JSON" and names the
// place in the document as a JSON pointer ("/ops/2/inputs/0"). Constants
// get their data from "init" (default: uniform in [-1, 1), seed 1); a
// failure making it starts "graph JSON /tensors/N: tensor "w": " and is
// invalid_arguments when the document asks for what cannot be (a place
// with no device), but keeps the status of a failure of the machine
// (out_of_memory, runtime_error, corrupt_data, permission_denied: no
// memory for the data, a device copy that failed). The graph is then
// validated (graph::validate) before it is returned.
//
// Thread-safety: free functions over their arguments. Exceptions: error —
// invalid_arguments as above (and for a file over max_graph_file_bytes),
// a machine failure's own status while making a constant's data, not_found
// for a file that cannot be read or is not a regular file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "primcache/base/export.hpp"
#include "primcache/graph/executor.hpp"
#include "primcache/graph/graph.hpp"

namespace primcache {

PRIMCACHE_API graph load_graph_json(std::string_view text);
// The largest graph file load_graph_file reads.
inline constexpr std::uint64_t max_graph_file_bytes = std::uint64_t{64} << 20;
// A regular file of at most max_graph_file_bytes (a directory, a FIFO or a
// device is refused before it is read: not_found; a larger file:
// invalid_arguments).
PRIMCACHE_API graph load_graph_file(const std::string& path);
// Memories for every input of `g`, filled as their "init" says (default:
// uniform in [-1, 1), seed 1), in their declared kernel types.
PRIMCACHE_API executor::tensor_map make_inputs(const graph& g);

}  // namespace primcache
