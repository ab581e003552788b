/* primcache/runtime/args.h — execution argument indices, shared by the C++
 * and the C API.
 *
 *   prim.execute(s, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, w},
 *                    {PRIMCACHE_ARG_DST, dst},
 *                    {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, addend}});
 *
 * The values are stable (part of the C ABI). */
#ifndef PRIMCACHE_RUNTIME_ARGS_H
#define PRIMCACHE_RUNTIME_ARGS_H

#define PRIMCACHE_ARG_SRC 1
#define PRIMCACHE_ARG_SRC_0 1
#define PRIMCACHE_ARG_SRC_1 2
#define PRIMCACHE_ARG_FROM PRIMCACHE_ARG_SRC
#define PRIMCACHE_ARG_DST 17
#define PRIMCACHE_ARG_TO PRIMCACHE_ARG_DST
#define PRIMCACHE_ARG_WEIGHTS 33
#define PRIMCACHE_ARG_BIAS 41
/* The operand of binary post-op number idx (0-based position in the chain):
 * PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(idx) | PRIMCACHE_ARG_SRC_1. */
#define PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP_BASE 16384
#define PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(idx) \
  (PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP_BASE * ((idx) + 1))

#endif
