#include "kernels/conv_source.hpp"

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

}  // namespace

kernel_plan conv_plan(const conv_problem& p, const conv_config& c) {
  const std::int64_t G = p.groups(), OCG = p.oc_per_group(), ICG = p.ic_per_group();
  const std::int64_t boc = std::int64_t{c.wg_oc} * c.tile_oc;
  const std::int64_t bow = std::int64_t{c.wg_ow} * c.tile_ow;
  const std::int64_t n_ocb = (OCG + boc - 1) / boc, n_owb = (p.ow() + bow - 1) / bow;
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
  s += "  const long ocb0 = (gb % NOCB) * BOC, oc0 = ocb0 + lo * TOC;\n";
  s += "  const long owb0 = (long)get_group_id(1) * BOW, ow0 = owb0 + lw;\n";
  s += "  const long nh = get_global_id(2), n = nh / OH, oh = nh % OH;\n";
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
  } else {
    s += "  for (long ic = 0; ic < ICG; ++ic) {\n";
    s += "    const long c = g * ICG + ic;\n";
    s += "    for (int kh = 0; kh < KH; ++kh) {\n";
    s += "      const long ih = oh * SH - PT + kh * DH;\n";
    s += "      if (ih < 0 || ih >= IH) continue;\n";
    s += "      for (int kw = 0; kw < KW; ++kw) {\n";
    s += "        float a[TOW];\n";
    s += "        for (int i = 0; i < TOW; ++i) {\n";
    s += "          const long iw = (ow0 + i * WGOW) * SW - PL + kw * DW;\n";
    s += "          a[i] = (iw >= 0 && iw < IW) ? S[src_off(n, c, ih, iw)] : 0.0f;\n";
    s += "        }\n";
    s += fma_block("        ");
    if (!oc_ragged && v > 1 && oc_contiguous(p.weights)) {
      s += "          w = vload" + std::to_string(v) + "(0, W + WEI_OFF(g, oc0 + j * " +
           std::to_string(v) + ", ic, kh, kw));\n";
    } else {
      for (int e = 0; e < v; ++e) {
        const std::string o = "(oc0 + j * " + std::to_string(v) + " + " + std::to_string(e) + ")";
        const std::string load = "W[WEI_OFF(g, " + o + ", ic, kh, kw)]";
        s += "          w" + lane(v, e) + " = " +
             (oc_ragged ? o + " < OCG ? " + load + " : 0.0f" : load) + ";\n";
      }
    }
    s += "          for (int i = 0; i < TOW; ++i) acc[i][j] = fma((" + vt +
         ")(a[i]), w, acc[i][j]);\n";
    s += "        }\n      }\n    }\n  }\n";
  }

  // Store: bias, then the post-ops in order, then dst.
  s += "  for (int i = 0; i < TOW; ++i) {\n";
  s += "    const long ow = ow0 + i * WGOW;\n";
  s += "    if (ow >= OW) break;\n";
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
  return plan;
}

}  // namespace primcache::ocl_internal
