#include <cstring>
#include <span>

#include "kernels/padded_index_walk.hpp"
#include "kernels/reorder_config.hpp"
#include "kernels/reorder_kernel.hpp"
#include "primcache/tensor/numeric.hpp"

namespace primcache::cpu_internal {
namespace {

// Reads element `off` of a buffer of type dt as f32.
float read_f32(const void* base, data_type dt, std::int64_t off) {
  switch (dt) {
    case data_type::f32: return static_cast<const float*>(base)[off];
    case data_type::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(base)[off]);
    case data_type::f16: return f16_to_f32(static_cast<const std::uint16_t*>(base)[off]);
    case data_type::s8: return static_cast<const std::int8_t*>(base)[off];
    case data_type::u8: return static_cast<const std::uint8_t*>(base)[off];
    default: return static_cast<float>(static_cast<const std::int32_t*>(base)[off]);
  }
}

void write_f32(void* base, data_type dt, std::int64_t off, float v) {
  switch (dt) {
    case data_type::f32: static_cast<float*>(base)[off] = v; break;
    case data_type::bf16: static_cast<std::uint16_t*>(base)[off] = f32_to_bf16(v); break;
    case data_type::f16: static_cast<std::uint16_t*>(base)[off] = f32_to_f16(v); break;
    case data_type::s8: static_cast<std::int8_t*>(base)[off] = f32_to_s8(v); break;
    case data_type::u8: static_cast<std::uint8_t*>(base)[off] = f32_to_u8(v); break;
    default: static_cast<std::int32_t*>(base)[off] = f32_to_s32(v); break;
  }
}

}  // namespace

void reorder_reference(const reorder_problem& p, const reorder_args& args) {
  const memory_desc& s = p.src;
  const memory_desc& d = p.dst;
  const bool raw = reorder_is_raw(p);
  const std::size_t es = size_of(d.data_type());
  for_each_padded_index(d, [&](dims_view i, bool real) {
    const std::int64_t doff = d.offset_of(i);
    if (!real) {
      std::memset(static_cast<char*>(args.dst) + doff * static_cast<std::int64_t>(es), 0, es);
      return;
    }
    const std::int64_t soff = s.offset_of(i);
    if (raw) {
      std::memcpy(static_cast<char*>(args.dst) + doff * static_cast<std::int64_t>(es),
                  static_cast<const char*>(args.src) + soff * static_cast<std::int64_t>(es), es);
      return;
    }
    float v = read_f32(args.src, s.data_type(), soff);
    if (p.scales == reorder_scales::common) v *= args.scales[0];
    if (p.scales == reorder_scales::per_dim) {
      v *= args.scales[i[static_cast<std::size_t>(p.scale_dim)]];
    }
    write_f32(args.dst, d.data_type(), doff, v);
  });
}

}  // namespace primcache::cpu_internal
