#include "kernels/matmul_source.hpp"

#include "kernels/addressing.hpp"
#include "kernels/post_op_source.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/args.h"

namespace primcache::ocl_internal {
namespace {

std::string l(std::int64_t v) {
  return std::to_string(v) + "L";
}

// Strides of a 2-D or 3-D plain descriptor as (batch, row, col); a batch of
// one (broadcast) gets stride 0.
struct strides3 {
  std::int64_t b = 0, r = 0, c = 0;
};
strides3 strides_of(const memory_desc& md) {
  const int n = md.ndims();
  strides3 s;
  s.r = md.strides()[n - 2];
  s.c = md.strides()[n - 1];
  if (n == 3 && md.dims()[0] != 1) s.b = md.strides()[0];
  return s;
}

// The register-tiled kernel's accumulator for rows i, vector j of columns.
std::string acc_name(int i, int j) {
  std::string s = "c";
  s += std::to_string(i);
  s += '_';
  s += std::to_string(j);
  return s;
}

}  // namespace

kernel_plan matmul_plan(const matmul_problem& p, const matmul_config& c) {
  const std::int64_t M = p.m(), N = p.n(), K = p.k(), B = p.batch();
  const int bm = c.wg_m * c.tile_m, bn = c.wg_n * c.tile_n, v = c.vec_width;
  const std::string vt = v == 1 ? "float" : "float" + std::to_string(v);
  const strides3 sa = strides_of(p.src), sd = strides_of(p.dst);
  strides3 sw = strides_of(p.weights);
  std::int64_t w_offset0 = p.weights.offset0();
  // Packed weights: (batches, K, Npad) row-major, N zero-padded to whole
  // work-group blocks, so a work-item's columns load as vectors with no
  // bounds checks (and transposed weights become contiguous).
  const std::int64_t n_pad = (N + bn - 1) / bn * bn, wb = p.weights_batch();
  if (p.packed_weights) {
    sw = strides3{wb != 1 ? K * n_pad : 0, n_pad, 1};
    w_offset0 = 0;
  }

  kernel_plan plan;
  plan.name = "primcache_matmul";
  std::string s;
  s += "#define TM " + std::to_string(c.tile_m) + "\n#define TN " + std::to_string(c.tile_n) +
       "\n#define TNV " + std::to_string(c.tile_n / v) + "\n#define WGM " + std::to_string(c.wg_m) +
       "\n#define WGN " + std::to_string(c.wg_n) + "\n#define TK " + std::to_string(c.tile_k) +
       "\n#define BM " + std::to_string(bm) + "\n#define BN " + std::to_string(bn) + "\n";
  s += "#define A_AT(m, k) A[(long)(m) * " + l(sa.r) + " + (long)(k) * " + l(sa.c) + "]\n";
  s += "#define W_AT(k, n) W[(long)(k) * " + l(sw.r) + " + (long)(n) * " + l(sw.c) + "]\n";

  std::string params = "__global const float* A, __global const float* W";
  plan.args = {PRIMCACHE_ARG_SRC, PRIMCACHE_ARG_WEIGHTS};
  const std::size_t packed_bytes = static_cast<std::size_t>(wb * K * n_pad) * sizeof(float);
  plan.arg_bytes = {p.src.size_bytes(), p.packed_weights ? packed_bytes : p.weights.size_bytes()};
  if (!p.bias.is_zero()) {
    params += ", __global const float* bias";
    plan.args.push_back(PRIMCACHE_ARG_BIAS);
    plan.arg_bytes.push_back(p.bias.size_bytes());
  }
  params += post_op_params(p.post_ops);
  for (const auto& op : p.post_ops) {
    if (!op.binary) continue;
    plan.args.push_back(op.arg);
    plan.arg_bytes.push_back(op.src1.size_bytes());
  }
  params += ", __global float* C";
  plan.args.push_back(PRIMCACHE_ARG_DST);
  plan.arg_bytes.push_back(p.dst.size_bytes());

  s += post_op_functions(p.post_ops);
  s += "__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))\n";
  s += "void primcache_matmul(" + params + ") {\n";
  s += "  const int ln = get_local_id(0), lm = get_local_id(1);\n";
  s += "  const long n0 = (long)get_group_id(0) * BN, m0 = (long)get_group_id(1) * BM;\n";
  s += "  const long b = get_global_id(2);\n";
  s += "  A += " + l(p.src.offset0()) + " + b * " + l(sa.b) + ";\n";
  s += "  W += " + l(w_offset0) + " + b * " + l(sw.b) + ";\n";
  // The store below reads the tile from a private array o[TM][TN] (one
  // copy per work-item, at the end) in a loop, so the bias and post-op code
  // appears once, not once per output. col0: the work-item's first column;
  // keep_col: whether its column t is its own to store.
  std::string col0 = "(n0 + ln * TN)";
  std::string keep_col = "n0 + ln * TN + t < " + l(N);
  std::string to_o;
  if (c.local_tiling) {
    s += "  " + vt + " acc[TM][TNV];\n";
    s += "  for (int i = 0; i < TM; ++i) for (int j = 0; j < TNV; ++j) acc[i][j] = (" + vt +
         ")(0.0f);\n";
    s += "  __local float As[TK][BM];\n  __local float Ws[TK][BN];\n";
    s += "  const int lid = lm * WGN + ln;\n";
    s += "  for (long k0 = 0; k0 < " + l(K) + "; k0 += TK) {\n";
    s += "    for (int i = lid; i < TK * BM; i += WGM * WGN) {\n";
    // Neighbouring work-items read neighbouring addresses: along k when src
    // is k-contiguous (row-major), along m otherwise.
    if (sa.c == 1) {
      s += "      const int kk = i % TK, mm = i / TK;\n";
    } else {
      s += "      const int kk = i / BM, mm = i % BM;\n";
    }
    s += "      const long m = m0 + mm, k = k0 + kk;\n";
    s += "      As[kk][mm] = (m < " + l(M) + " && k < " + l(K) + ") ? A_AT(m, k) : 0.0f;\n";
    s += "    }\n";
    s += "    for (int i = lid; i < TK * BN; i += WGM * WGN) {\n";
    if (sw.c == 1 || sw.r != 1) {
      s += "      const int kk = i / BN, nn = i % BN;\n";
    } else {
      s += "      const int kk = i % TK, nn = i / TK;\n";
    }
    s += "      const long n = n0 + nn, k = k0 + kk;\n";
    if (p.packed_weights) {  // n < n_pad always; the padding is zero
      s += "      Ws[kk][nn] = k < " + l(K) + " ? W_AT(k, n) : 0.0f;\n";
    } else {
      s += "      Ws[kk][nn] = (n < " + l(N) + " && k < " + l(K) + ") ? W_AT(k, n) : 0.0f;\n";
    }
    s += "    }\n";
    s += "    barrier(CLK_LOCAL_MEM_FENCE);\n";
    s += "    for (int kk = 0; kk < TK; ++kk) {\n";
    s += "      float a[TM];\n";
    s += "      for (int i = 0; i < TM; ++i) a[i] = As[kk][lm + i * WGM];\n";
    s += "      for (int j = 0; j < TNV; ++j) {\n";
    if (v == 1) {
      s += "        const float w = Ws[kk][ln * TN + j];\n";
    } else {
      s += "        const " + vt + " w = vload" + std::to_string(v) + "(0, &Ws[kk][ln * TN + j * " +
           std::to_string(v) + "]);\n";
    }
    s +=
        "        for (int i = 0; i < TM; ++i) acc[i][j] = fma((" + vt + ")(a[i]), w, acc[i][j]);\n";
    s += "      }\n    }\n";
    s += "    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n";
    to_o = "  for (int i = 0; i < TM; ++i) for (int j = 0; j < TNV; ++j) " +
           (v == 1 ? std::string("o[i][j] = acc[i][j];\n")
                   : "vstore" + std::to_string(v) + "(acc[i][j], 0, &o[i][j * " +
                         std::to_string(v) + "]);\n");
  } else {
    // Registers only, for compilers that do not unroll small loops over
    // private arrays (PoCL keeps such an array in memory and loads and
    // stores an accumulator per FMA): the tile is TM x TNV named vector
    // accumulators, the K loop is unrolled by KU in the source.
    //
    // Edges without branches in the loop: a row past M reads row M - 1
    // (its result is not stored); a column block past N starts at N - TN
    // instead (overlapping its neighbour, storing only its own columns), so
    // every load is in bounds and whole. Packed weights are zero-padded to
    // whole blocks and need neither; a matrix narrower than one tile clamps
    // each column.
    const int tnv = c.tile_n / v, ku = matmul_k_unroll(c, K);
    const bool shift = !p.packed_weights && N >= c.tile_n;
    const bool clamp = !p.packed_weights && N < c.tile_n;
    s += "  const long nb = n0 + ln * TN;\n";
    s +=
        shift ? "  const long ns = min(nb, " + l(N - c.tile_n) + ");\n" : "  const long ns = nb;\n";
    col0 = "ns";
    keep_col = shift ? "ns + t >= nb" : "ns + t < " + l(N);
    for (int i = 0; i < c.tile_m; ++i) {
      s += "  __global const float* a" + std::to_string(i) + " = A + min(m0 + lm + " +
           std::to_string(i) + " * WGM, " + l(M - 1) + ") * " + l(sa.r) + ";\n";
    }
    for (int i = 0; i < c.tile_m; ++i) {
      s += "  " + vt;
      for (int j = 0; j < tnv; ++j) {
        s += (j ? ", " : " ") + acc_name(i, j) + " = 0.0f";
      }
      s += ";\n";
    }
    const bool vector_w = sw.c == 1 && v > 1 && !clamp;
    auto step = [&](const std::string& k, const std::string& ind) {
      std::string o;
      for (int j = 0; j < tnv; ++j) {
        const std::string n = "ns + " + std::to_string(j * v);
        o += ind + "const " + vt + " w" + std::to_string(j) + " = ";
        if (vector_w) {
          o += "vload" + std::to_string(v) + "(0, &W_AT(" + k + ", " + n + "));\n";
        } else {
          o += "(" + vt + ")(";
          for (int e = 0; e < v; ++e) {
            std::string ne = n + " + " + std::to_string(e);
            if (clamp) ne = "min(" + ne + ", " + l(N - 1) + ")";
            o += std::string(e ? ", " : "") + "W_AT(" + k + ", " + ne + ")";
          }
          o += ");\n";
        }
      }
      for (int i = 0; i < c.tile_m; ++i) {
        const std::string is = std::to_string(i);
        o += ind + "{\n" + ind + "  const " + vt + " a = (" + vt + ")(a" + is + "[(" + k + ") * " +
             l(sa.c) + "]);\n";
        for (int j = 0; j < tnv; ++j) {
          const std::string acc = acc_name(i, j);
          o += ind + "  " + acc + " = fma(a, w" + std::to_string(j) + ", " + acc + ");\n";
        }
        o += ind + "}\n";
      }
      return o;
    };
    s += "  long k = 0;\n";
    s += "  for (; k + " + std::to_string(ku) + " <= " + l(K) + "; k += " + std::to_string(ku) +
         ") {\n";
    for (int u = 0; u < ku; ++u) {
      s += "    {\n" + step("k + " + std::to_string(u), "      ") + "    }\n";
    }
    s += "  }\n";
    if (K % ku != 0) {
      s += "  for (; k < " + l(K) + "; ++k) {\n" + step("k", "    ") + "  }\n";
    }
    for (int i = 0; i < c.tile_m; ++i) {
      for (int j = 0; j < tnv; ++j) {
        const std::string acc = acc_name(i, j);
        const std::string at = "&o[" + std::to_string(i) + "][" + std::to_string(j * v) + "]";
        to_o += v == 1 ? "  *(" + at + ") = " + acc + ";\n"
                       : "  vstore" + std::to_string(v) + "(" + acc + ", 0, " + at + ");\n";
      }
    }
  }

  // Store: bias, then the post-ops in order, then dst.
  const int dn = p.dst.ndims();
  s += "  float o[TM][TN];\n" + to_o;
  s += "  for (int i = 0; i < TM; ++i) {\n";
  s += "    const long m = m0 + lm + i * WGM;\n";
  s += "    if (m >= " + l(M) + ") break;\n";
  s += "    for (int t = 0; t < TN; ++t) {\n";
  s += "      if (!(" + keep_col + ")) continue;\n";
  s += "      const long n = " + col0 + " + t;\n";
  s += "      float v = o[i][t];\n";
  if (!p.bias.is_zero()) {
    const int bn_ = p.bias.ndims();
    s += "      v += bias[" + l(p.bias.offset0()) + " + n * " + l(p.bias.strides()[bn_ - 1]) +
         "];\n";
  }
  s += post_op_statements(p.post_ops, dn == 3 ? std::vector<std::string>{"b", "m", "n"}
                                              : std::vector<std::string>{"m", "n"});
  s += "      C[" + l(p.dst.offset0()) + " + b * " + l(sd.b) + " + m * " + l(sd.r) + " + n * " +
       l(sd.c) + "] = v;\n";
  s += "    }\n  }\n";
  s += "}\n";

  if (p.packed_weights) {
    // The packing kernel: user weights (any plain strides) to the packed
    // layout above, zeros in the padding.
    const strides3 su = strides_of(p.weights);
    weights_packing pk;
    pk.name = "primcache_matmul_pack";
    s += "__kernel void primcache_matmul_pack(__global const float* W, __global float* P) {\n";
    s += "  const long n = get_global_id(0), k = get_global_id(1), b = get_global_id(2);\n";
    s += "  P[(b * " + l(K) + " + k) * " + l(n_pad) + " + n] = n < " + l(N) + " ? W[" +
         l(p.weights.offset0()) + " + b * " + l(su.b) + " + k * " + l(su.r) + " + n * " + l(su.c) +
         "] : 0.0f;\n}\n";
    pk.user_bytes = p.weights.size_bytes();
    pk.packed_bytes = packed_bytes;
    pk.work_dims = 3;
    pk.global = {static_cast<std::size_t>(n_pad), static_cast<std::size_t>(K),
                 static_cast<std::size_t>(wb)};
    key_writer lk;
    lk.str("matmul");
    p.weights.write_key(lk);
    lk.i64(n_pad);
    const key layout = lk.finish();
    pk.layout_key.assign(layout.bytes().begin(), layout.bytes().end());
    plan.packing = std::move(pk);
  }

  plan.source = std::move(s);
  plan.work_dims = 3;
  plan.fixed_local = true;
  plan.local = {static_cast<std::size_t>(c.wg_n), static_cast<std::size_t>(c.wg_m), 1};
  plan.global = {static_cast<std::size_t>((N + bn - 1) / bn) * c.wg_n,
                 static_cast<std::size_t>((M + bm - 1) / bm) * c.wg_m, static_cast<std::size_t>(B)};
  if (plan.global[0] == 0) plan.global[0] = c.wg_n;
  if (plan.global[1] == 0) plan.global[1] = c.wg_m;
  if (plan.global[2] == 0) plan.global[2] = 1;
  return plan;
}

}  // namespace primcache::ocl_internal
