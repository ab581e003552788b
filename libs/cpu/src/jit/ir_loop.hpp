// jit/ir_loop.hpp — the counted loop every kernel generator emits: an i64
// induction variable from `begin` stepping by a constant, values carried
// around the loop in phis, and the body emitted by a callback at the
// builder's insertion point.
//
//   // acc = sum of x[i] for i in [0, n)
//   auto done = emit_counted_loop(b, b.getInt64(0), n, 1, {zero},
//       [&](llvm::Value* i, const ir_values& acc) -> ir_values {
//         return {b.CreateFAdd(acc[0], load_x(i))};
//       });
//   llvm::Value* sum = done.carried[0];
//
// The builder must be inside a function; on return it is at the start of the
// loop's exit block. Thread-safety: touches only the builder's function.
// Exceptions: what the body throws (the IR is then incomplete) and LLVM's
// allocation failures.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace primcache::cpu_internal {

using ir_values = std::vector<llvm::Value*>;

// When an iteration runs: while index < end (the last iteration may run past
// end by less than a step), or while index + step <= end (only whole steps;
// the caller finishes the remainder from the returned index).
enum class loop_test : std::uint8_t { index_below_end, step_within_end };

struct loop_exit {
  llvm::Value* index = nullptr;  // the induction variable's phi: its value at exit
  ir_values carried;             // the carried values' phis: their values at exit
};

// The body gets the index and the carried values of this iteration and
// returns the carried values of the next (as many, of the same types).
using loop_body = std::function<ir_values(llvm::Value* index, const ir_values& carried)>;

// for (index = begin; test; index += step) carried = body(index, carried);
// begin and end are i64 values. Blocks are named <name>.head, .body, .exit.
loop_exit emit_counted_loop(llvm::IRBuilderBase& b, llvm::Value* begin, llvm::Value* end,
                            std::int64_t step, const ir_values& init, const loop_body& body,
                            loop_test test = loop_test::index_below_end,
                            std::string_view name = "loop");

// The same loop (index_below_end) in the bottom-tested form loop rotation
// gives it, emitted so: the body, then the test and the branch back, in one
// block when the body emits no control flow, so that no IR pass needs to
// rotate it. With `guarded`, a test before the loop skips it when begin >=
// end; without, the caller knows that begin < end (one iteration at least).
// The returned index is the first index the loop did not run (begin when it
// ran none); the carried values are the last iteration's (init when none).
loop_exit emit_bottom_tested_loop(llvm::IRBuilderBase& b, llvm::Value* begin, llvm::Value* end,
                                  std::int64_t step, const ir_values& init, const loop_body& body,
                                  bool guarded, std::string_view name = "loop");

}  // namespace primcache::cpu_internal
