// primcache/runtime/runtime.hpp — the runtime's user-facing C++ API, in one
// include: engines, streams, memory, attributes, primitives (matmul,
// convolution_forward, eltwise_forward, reorder) and the global primitive
// cache. Link a backend (primcache::cpu) to get its engines.
//
//   #include <primcache/runtime/runtime.hpp>
//   using namespace primcache;
//   engine eng(engine_kind::cpu, 0);
//   stream strm(eng);
//   memory::desc a_md({64, 32}, memory::data_type::f32, memory::format_tag::ab);
//   ...
//   matmul prim(matmul::primitive_desc(matmul::desc(a_md, b_md, c_md), eng));
//   prim.execute(strm, {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b},
//                       {PRIMCACHE_ARG_DST, c}});
//
// The C API is primcache/runtime/primcache.h. Errors: primcache::error.
#pragma once

#include "primcache/runtime/args.h"
#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/constant_cache.hpp"
#include "primcache/runtime/convolution.hpp"
#include "primcache/runtime/eltwise.hpp"
#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/jit_mode.hpp"
#include "primcache/runtime/matmul.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/primitive.hpp"
#include "primcache/runtime/primitive_cache.hpp"
#include "primcache/runtime/reorder.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/runtime/version.hpp"
