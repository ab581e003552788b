#include "kernels/weights_packing_source.hpp"

#include "kernels/addressing.hpp"
#include "primcache/keyhash/key.hpp"

namespace primcache::ocl_internal {

weights_packing weights_packing_for(const memory_desc& user, const memory_desc& packed,
                                    const std::string& name, const std::string& what,
                                    std::string& source) {
  const int n = packed.ndims();
  std::int64_t count = 1;
  for (std::int64_t d : packed.padded_dims()) count *= d;
  source += offset_function(user, name + "_from_off") + offset_function(packed, name + "_to_off");
  source += "__kernel void " + name + "(__global const float* from, __global float* to) {\n";
  source += "  const long gid = get_global_id(0);\n";
  source += "  if (gid >= " + std::to_string(count) + "L) return;\n";
  source += index_split(packed.padded_dims(), "gid", "i");
  std::string inside = "1";
  for (int d = 0; d < n; ++d) {
    inside += " && i" + std::to_string(d) + " < " + std::to_string(packed.dims()[d]) + "L";
  }
  source += "  to[" + name + "_to_off(" + index_list(n, "i") + ")] = (" + inside + ") ? from[" +
            name + "_from_off(" + index_list(n, "i") + ")] : 0.0f;\n}\n";

  weights_packing pk;
  pk.name = name;
  pk.user_bytes = user.size_bytes();
  pk.packed_bytes = packed.size_bytes();
  pk.work_dims = 1;
  pk.global = {static_cast<std::size_t>(count == 0 ? 1 : count), 1, 1};
  key_writer w;
  w.str(what);
  user.write_key(w);
  packed.write_key(w);
  const key k = w.finish();
  pk.layout_key.assign(k.bytes().begin(), k.bytes().end());
  return pk;
}

}  // namespace primcache::ocl_internal
