#include "kernels/conv_source.hpp"

#include <functional>

#include "kernels/addressing.hpp"
#include "kernels/post_op_source.hpp"
#include "kernels/weights_packing_source.hpp"
#include "primcache/runtime/args.h"

namespace primcache::ocl_internal {
namespace {

std::string l(std::int64_t v) {
  return std::to_string(v) + "L";
}

std::string def(const char* name, std::int64_t v) {
  return std::string("#define ") + name + " " + l(v) + "\n";
}

// ".sN", the lane e of a vector of `width` floats ("" for a scalar).
std::string lane(int width, int e) {
  static const char* names[] = {".s0", ".s1", ".s2", ".s3", ".s4", ".s5", ".s6", ".s7",
                                ".s8", ".s9", ".sa", ".sb", ".sc", ".sd", ".se", ".sf"};
  return width == 1 ? std::string() : std::string(names[e]);
}

// Whether consecutive output channels of the weights are consecutive in
// memory (a plain layout with o stride 1), so a run of them is one vload.
bool oc_contiguous(const memory_desc& w) {
  const int o_dim = w.ndims() == 5 ? 1 : 0;
  return w.is_plain() && w.strides()[o_dim] == 1;
}

// The register-tiled kernel's accumulator for column i, channel vector j.
std::string acc_name(int i, int j) {
  return "c" + std::to_string(i) + "_" + std::to_string(j);
}

// The channel padding of a blocked dst (channels OC up to the padded
// count, as nChw16c pads 24 to 32) holds zeros, as a blocked layout
// promises its next reader and as the CPU backend leaves it: never what the
// buffer held, never bias or post-op(0). The work-item that stores the last
// real channel (OC - 1) at a column writes the padding's zeros at that
// column, in this kernel: every column has exactly one such work-item in
// both decompositions, and its few extra stores (fewer than a block) are
// small beside its tile's, where a second kernel would cost a launch and a
// pass over dst. `stores_last` says whether this work-item stores channel
// OC - 1 of its group; no source at all without padding.
std::string channel_padding_owner(const conv_problem& p, const std::string& stores_last) {
  if (p.dst.padded_dims()[1] == p.dst.dims()[1]) return std::string();
  return "  const int pad_owner = g == " + l(p.groups() - 1) + " && " + stores_last + ";\n";
}

std::string channel_padding_store(const conv_problem& p, const std::string& ind) {
  if (p.dst.padded_dims()[1] == p.dst.dims()[1]) return std::string();
  return ind + "if (pad_owner) {\n" + ind + "  for (long pc = " + l(p.oc()) + "; pc < " +
         l(p.dst.padded_dims()[1]) + "; ++pc) D[dst_off(n, pc, oh, ow)] = 0.0f;\n" + ind + "}\n";
}

// The work-item's part of the kernel without local tiling, for compilers
// that vectorize within a work-item and keep private arrays in memory
// (PoCL: see matmul_source.cpp). Each work-item computes TOC consecutive
// output channels (TOC / v named vectors) of TOW consecutive output
// columns of one output row, so its accumulators are TOW x TOC/v named
// registers. The loops run over the kernel's taps (kh, kw), then over the
// group's input channels, unrolled conv_ic_unroll times in the source: per
// input channel, TOC / v weight vectors (one vload each when the weights'
// output channels are contiguous, as `any` resolves them) and TOW src
// scalars, each broadcast into TOC / v FMAs.
//
// Edges, without branches in the channel loop:
// - a row of the window outside the input is skipped (per tap);
// - a tap whose TOW columns lie inside the input reads them at constant
//   offsets from one address; any other tap (padding, or columns past the
//   output in a block wider than it) reads clamped columns and selects 0
//   for those outside, and is generated only when some tap may need it;
// - a last column block past OW starts at OW - TOW instead (overlapping its
//   neighbour, storing only its own columns), and likewise a last channel
//   block past OC/G starts at OC/G - TOC; a group narrower than one tile
//   clamps each channel it loads.
void register_tiled_body(const conv_problem& p, const conv_config& c, std::string& s) {
  const std::int64_t OCG = p.oc_per_group(), ICG = p.ic_per_group(), OW = p.ow();
  const std::int64_t bow = std::int64_t{c.wg_ow} * c.tile_ow;
  const std::int64_t n_owb = (OW + bow - 1) / bow;
  const int v = c.vec_width, tocv = c.tile_oc / v, tow = c.tile_ow;
  const std::string vt = v == 1 ? "float" : "float" + std::to_string(v);
  const bool shift_oc = OCG >= c.tile_oc, clamp_oc = !shift_oc;
  const bool shift_ow = OW >= tow;
  // The src's column stride: activations block only channels, so a column
  // step is one stride whatever the layout.
  const std::int64_t ws = p.src.strides()[3];
  const std::int64_t sw = p.stride_w, dw = p.dilate_w + 1;
  // Whether any tap may read a column outside the input: the columns
  // computed span 0 .. last_col (the whole last block without the shift).
  const std::int64_t last_col = shift_ow ? OW - 1 : n_owb * bow - 1;
  const bool guard = p.pad_l > 0 || last_col * sw - p.pad_l + (p.kw() - 1) * dw >= p.iw();
  const int ku = conv_ic_unroll(c, ICG);
  const bool vector_w = !clamp_oc && v > 1 && oc_contiguous(p.weights);

  s += "  const long ocb = (gb % NOCB) * BOC + lo * TOC;\n";
  s += shift_oc ? "  const long ocs = min(ocb, " + l(OCG - c.tile_oc) + ");\n"
                : "  const long ocs = ocb;\n";
  s += "  const long owb = (long)get_group_id(1) * BOW + lw * TOW;\n";
  s += shift_ow ? "  const long ows = min(owb, " + l(OW - tow) + ");\n"
                : "  const long ows = owb;\n";
  for (int i = 0; i < tow; ++i) {
    s += "  " + vt;
    for (int j = 0; j < tocv; ++j) s += (j ? ", " : " ") + acc_name(i, j) + " = 0.0f";
    s += ";\n";
  }
  // One input channel's step: weights, then each column's FMAs. `src(i)`
  // is the expression of column i's value.
  auto step = [&](const std::string& k, const std::string& ind,
                  const std::function<std::string(int)>& src) {
    std::string o = ind + "{\n";
    for (int j = 0; j < tocv; ++j) {
      const std::string oc = "ocs + " + std::to_string(j * v);
      o += ind + "  const " + vt + " w" + std::to_string(j) + " = ";
      if (vector_w) {
        o += "vload" + std::to_string(v) + "(0, W + WEI_OFF(g, " + oc + ", " + k + ", kh, kw));\n";
      } else {
        o += "(" + vt + ")(";
        for (int e = 0; e < v; ++e) {
          std::string oe = oc + " + " + std::to_string(e);
          if (clamp_oc) oe = "min(" + oe + ", " + l(OCG - 1) + ")";
          o += std::string(e ? ", " : "") + "W[WEI_OFF(g, " + oe + ", " + k + ", kh, kw)]";
        }
        o += ");\n";
      }
    }
    for (int i = 0; i < tow; ++i) {
      o += ind + "  {\n" + ind + "    const " + vt + " a = (" + vt + ")(" + src(i) + ");\n";
      for (int j = 0; j < tocv; ++j) {
        const std::string acc = acc_name(i, j);
        o += ind + "    " + acc + " = fma(a, w" + std::to_string(j) + ", " + acc + ");\n";
      }
      o += ind + "  }\n";
    }
    return o + ind + "}\n";
  };
  // The channel loop, unrolled by ku, with `pre(k)` before each step.
  auto channel_loop =
      [&](const std::string& ind,
          const std::function<std::string(const std::string&, const std::string&)>& pre,
          const std::function<std::string(int)>& src) {
        std::string o = ind + "long ic = 0;\n";
        o += ind + "for (; ic + " + std::to_string(ku) + " <= ICG; ic += " + std::to_string(ku) +
             ") {\n";
        for (int u = 0; u < ku; ++u) {
          const std::string k = "ic + " + std::to_string(u);
          o += ind + "  {\n" + pre(k, ind + "    ") + step(k, ind + "    ", src) + ind + "  }\n";
        }
        o += ind + "}\n";
        if (ICG % ku != 0) {
          o += ind + "for (; ic < ICG; ++ic) {\n" + pre("ic", ind + "  ") +
               step("ic", ind + "  ", src) + ind + "}\n";
        }
        return o;
      };
  s += "  for (int kh = 0; kh < KH; ++kh) {\n";
  s += "    const long ih = oh * SH - PT + kh * DH;\n";
  s += "    if (ih < 0 || ih >= IH) continue;\n";
  s += "    for (int kw = 0; kw < KW; ++kw) {\n";
  s += "      const long iw0 = ows * SW - PL + kw * DW;\n";
  const std::string ind = guard ? "        " : "      ";
  if (guard) {
    s += "      if (iw0 >= 0 && iw0 + " + l((tow - 1) * sw) + " < IW) {\n";
  }
  s += channel_loop(
      ind,
      [](const std::string& k, const std::string& in) {
        return in + "__global const float* sp = S + src_off(n, g * ICG + " + k + ", ih, iw0);\n";
      },
      [&](int i) { return "sp[" + l(i * sw * ws) + "]"; });
  if (guard) {
    s += "      } else {\n";
    for (int i = 0; i < tow; ++i) {
      const std::string is = std::to_string(i);
      s += "        const long iwc" + is + " = clamp(iw0 + " + l(i * sw) + ", 0L, IW - 1);\n";
      s += "        const int ok" + is + " = iwc" + is + " == iw0 + " + l(i * sw) + ";\n";
    }
    s += channel_loop(
        ind,
        [](const std::string& k, const std::string& in) {
          return in + "const long sb = src_off(n, g * ICG + " + k + ", ih, 0);\n";
        },
        [&](int i) {
          const std::string is = std::to_string(i);
          return "ok" + is + " ? S[sb + iwc" + is + " * " + l(ws) + "] : 0.0f";
        });
    s += "      }\n";
  }
  s += "    }\n  }\n";

  // Store through a private array, so bias and post-ops appear once: bias,
  // then the post-ops in order, then dst.
  s += "  float o[TOW][TOC];\n";
  for (int i = 0; i < tow; ++i) {
    for (int j = 0; j < tocv; ++j) {
      const std::string at = "&o[" + std::to_string(i) + "][" + std::to_string(j * v) + "]";
      s += v == 1 ? "  *(" + at + ") = " + acc_name(i, j) + ";\n"
                  : "  vstore" + std::to_string(v) + "(" + acc_name(i, j) + ", 0, " + at + ");\n";
    }
  }
  // Its channels: [ocb, ocs + TOC) within the group (ocs <= ocb).
  s += channel_padding_owner(p, "ocb <= OCG - 1 && OCG - 1 < ocs + TOC");
  s += "  for (int i = 0; i < TOW; ++i) {\n";
  s += "    const long ow = ows + i;\n";
  s += shift_ow ? "    if (ow < owb) continue;\n" : "    if (ow >= OW) break;\n";
  s += channel_padding_store(p, "    ");
  s += "    for (int t = 0; t < TOC; ++t) {\n";
  s += shift_oc ? "      if (ocs + t < ocb) continue;\n" : "      if (ocs + t >= OCG) break;\n";
  s += "      const long oc = g * OCG + ocs + t;\n";
  s += "      float v = o[i][t];\n";
  if (!p.bias.is_zero()) {
    s += "      v += bias[" + l(p.bias.offset0()) + " + oc * " + l(p.bias.strides()[0]) + "];\n";
  }
  s += post_op_statements(p.post_ops, {"n", "oc", "oh", "ow"});
  s += "      D[dst_off(n, oc, oh, ow)] = v;\n";
  s += "    }\n  }\n";
}

// The packing kernel (constant weights) and the launch geometry.
void finish_plan(const conv_problem& p, const conv_config& c, std::string& s, kernel_plan& plan) {
  const std::int64_t G = p.groups(), OCG = p.oc_per_group();
  const std::int64_t boc = std::int64_t{c.wg_oc} * c.tile_oc;
  const std::int64_t bow = std::int64_t{c.wg_ow} * c.tile_ow;
  const std::int64_t n_ocb = (OCG + boc - 1) / boc, n_owb = (p.ow() + bow - 1) / bow;
  if (!p.user_weights.is_zero()) {
    plan.packing = weights_packing_for(p.user_weights, p.weights, "primcache_conv_pack", "conv", s);
  }
  plan.source = std::move(s);
  plan.work_dims = 3;
  plan.fixed_local = true;
  plan.local = {static_cast<std::size_t>(c.wg_oc), static_cast<std::size_t>(c.wg_ow), 1};
  plan.global = {static_cast<std::size_t>(G * n_ocb) * static_cast<std::size_t>(c.wg_oc),
                 static_cast<std::size_t>(n_owb) * static_cast<std::size_t>(c.wg_ow),
                 static_cast<std::size_t>(p.mb() * p.oh())};
  for (int d = 0; d < 3; ++d) {
    if (plan.global[d] == 0) plan.global[d] = plan.local[d];
  }
}

}  // namespace

kernel_plan conv_plan(const conv_problem& p, const conv_config& c) {
  const std::int64_t OCG = p.oc_per_group(), ICG = p.ic_per_group();
  const std::int64_t boc = std::int64_t{c.wg_oc} * c.tile_oc;
  const std::int64_t bow = std::int64_t{c.wg_ow} * c.tile_ow;
  const std::int64_t n_ocb = (OCG + boc - 1) / boc;
  const int v = c.vec_width;
  const std::string vt = v == 1 ? "float" : "float" + std::to_string(v);
  // Output channels past the group's end exist only in a ragged last block.
  const bool oc_ragged = OCG % boc != 0;

  kernel_plan plan;
  plan.name = "primcache_conv";
  std::string s;
  s += "#define TOC " + std::to_string(c.tile_oc) + "\n#define TOW " + std::to_string(c.tile_ow) +
       "\n#define TOCV " + std::to_string(c.tile_oc / v) + "\n#define WGOC " +
       std::to_string(c.wg_oc) + "\n#define WGOW " + std::to_string(c.wg_ow) + "\n#define TIC " +
       std::to_string(c.tile_ic) + "\n";
  s += def("BOC", boc) + def("BOW", bow) + def("NOCB", n_ocb) + def("OCG", OCG) + def("ICG", ICG) +
       def("IH", p.ih()) + def("IW", p.iw()) + def("OH", p.oh()) + def("OW", p.ow()) +
       def("KH", p.kh()) + def("KW", p.kw()) + def("SH", p.stride_h) + def("SW", p.stride_w) +
       def("DH", p.dilate_h + 1) + def("DW", p.dilate_w + 1) + def("PT", p.pad_t) +
       def("PL", p.pad_l);
  // The src columns one work-group reads in a row (local tiling).
  s += def("SPAN", (bow - 1) * p.stride_w + (p.kw() - 1) * (p.dilate_w + 1) + 1);
  s += offset_function(p.src, "src_off");
  s += offset_function(p.weights, "wei_off");
  s += offset_function(p.dst, "dst_off");
  // wei_at(g, o, i, kh, kw): o and i within group g.
  if (p.grouped()) {
    s += "#define WEI_OFF(g, o, i, kh, kw) wei_off(g, o, i, kh, kw)\n";
  } else {
    s += "#define WEI_OFF(g, o, i, kh, kw) wei_off(o, i, kh, kw)\n";
  }

  std::string params = "__global const float* S, __global const float* W";
  plan.args = {PRIMCACHE_ARG_SRC, PRIMCACHE_ARG_WEIGHTS};
  plan.arg_bytes = {p.src.size_bytes(), p.weights.size_bytes()};
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
  params += ", __global float* D";
  plan.args.push_back(PRIMCACHE_ARG_DST);
  plan.arg_bytes.push_back(p.dst.size_bytes());

  s += post_op_functions(p.post_ops);
  s += "__kernel __attribute__((reqd_work_group_size(WGOC, WGOW, 1)))\n";
  s += "void primcache_conv(" + params + ") {\n";
  s += "  const int lo = get_local_id(0), lw = get_local_id(1);\n";
  s += "  const long gb = get_group_id(0);\n";
  s += "  const long g = gb / NOCB;\n";
  s += "  const long nh = get_global_id(2), n = nh / OH, oh = nh % OH;\n";
  if (!c.local_tiling) {
    register_tiled_body(p, c, s);
    s += "}\n";
    finish_plan(p, c, s, plan);
    return plan;
  }
  s += "  const long ocb0 = (gb % NOCB) * BOC, oc0 = ocb0 + lo * TOC;\n";
  s += "  const long owb0 = (long)get_group_id(1) * BOW, ow0 = owb0 + lw;\n";
  s += "  " + vt + " acc[TOW][TOCV];\n";
  s += "  for (int i = 0; i < TOW; ++i) for (int j = 0; j < TOCV; ++j) acc[i][j] = (" + vt +
       ")(0.0f);\n";

  auto fma_block = [&](const std::string& indent) {
    return indent + "for (int j = 0; j < TOCV; ++j) {\n" + indent + "  " + vt + " w;\n";
  };
  if (c.local_tiling) {
    s += "  __local float Ws[TIC][KH][KW][BOC];\n  __local float Ss[TIC][KH][SPAN];\n";
    s += "  const int lid = lw * WGOC + lo;\n";
    s += "  const long iw0 = owb0 * SW - PL;\n";
    s += "  for (long ic0 = 0; ic0 < ICG; ic0 += TIC) {\n";
    // Neighbouring work-items stage neighbouring channels (the weights'
    // contiguous dimension in the layout `any` resolves to) and columns.
    s += "    for (int x = lid; x < TIC * KH * KW * BOC; x += WGOC * WGOW) {\n";
    s += "      const int o = x % BOC;\n      int r = x / BOC;\n";
    s += "      const int kw = r % KW;\n      r /= KW;\n";
    s += "      const int kh = r % KH, t = r / KH;\n";
    s += "      const long ic = ic0 + t, oo = ocb0 + o;\n";
    s +=
        "      Ws[t][kh][kw][o] = (ic < ICG && oo < OCG) ? W[WEI_OFF(g, oo, ic, kh, kw)] : 0.0f;\n";
    s += "    }\n";
    s += "    for (int x = lid; x < TIC * KH * SPAN; x += WGOC * WGOW) {\n";
    s += "      const int xx = x % SPAN;\n      const int r = x / SPAN;\n";
    s += "      const int kh = r % KH, t = r / KH;\n";
    s += "      const long ic = ic0 + t, ih = oh * SH - PT + kh * DH, iw = iw0 + xx;\n";
    s += "      Ss[t][kh][xx] = (ic < ICG && ih >= 0 && ih < IH && iw >= 0 && iw < IW)\n";
    s += "          ? S[src_off(n, g * ICG + ic, ih, iw)] : 0.0f;\n";
    s += "    }\n";
    s += "    barrier(CLK_LOCAL_MEM_FENCE);\n";
    s += "    for (int t = 0; t < TIC; ++t) {\n";
    s += "      for (int kh = 0; kh < KH; ++kh) {\n";
    s += "        for (int kw = 0; kw < KW; ++kw) {\n";
    s += "          float a[TOW];\n";
    s += "          for (int i = 0; i < TOW; ++i) a[i] = Ss[t][kh][(lw + i * WGOW) * SW + kw * "
         "DW];\n";
    s += fma_block("          ");
    if (v == 1) {
      s += "            w = Ws[t][kh][kw][lo * TOC + j];\n";
    } else {
      s += "            w = vload" + std::to_string(v) + "(0, &Ws[t][kh][kw][lo * TOC + j * " +
           std::to_string(v) + "]);\n";
    }
    s += "            for (int i = 0; i < TOW; ++i) acc[i][j] = fma((" + vt +
         ")(a[i]), w, acc[i][j]);\n";
    s += "          }\n        }\n      }\n    }\n";
    s += "    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n";
  }

  // Store: bias, then the post-ops in order, then dst. The work-item's
  // channels: [oc0, oc0 + TOC) within the group.
  s += channel_padding_owner(p, "oc0 <= OCG - 1 && OCG - 1 < oc0 + TOC");
  s += "  for (int i = 0; i < TOW; ++i) {\n";
  s += "    const long ow = ow0 + i * WGOW;\n";
  s += "    if (ow >= OW) break;\n";
  s += channel_padding_store(p, "    ");
  for (int t = 0; t < c.tile_oc; ++t) {
    const std::string o = "(oc0 + " + std::to_string(t) + ")";
    s += oc_ragged ? "    if (" + o + " < OCG) {\n" : "    {\n";
    s += "      const long oc = g * OCG + " + o + ";\n";
    s += "      float v = acc[i][" + std::to_string(t / v) + "]" + lane(v, t % v) + ";\n";
    if (!p.bias.is_zero()) {
      s += "      v += bias[" + l(p.bias.offset0()) + " + oc * " + l(p.bias.strides()[0]) + "];\n";
    }
    s += post_op_statements(p.post_ops, {"n", "oc", "oh", "ow"});
    s += "      D[dst_off(n, oc, oh, ow)] = v;\n    }\n";
  }
  s += "  }\n}\n";

  finish_plan(p, c, s, plan);
  return plan;
}

}  // namespace primcache::ocl_internal
