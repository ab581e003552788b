#include "kernels/conv_kernel.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "jit/jit_module.hpp"
#include "kernels/conv_config.hpp"
#include "kernels/conv_generator.hpp"
#include "kernels/conv_geometry.hpp"
#include "kernels/conv_schedule.hpp"
#include "kernels/conv_validation.hpp"
#include "kernels/conv_walk.hpp"
#include "kernels/kernel_failure.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr int lanes = conv_lanes;

failure unimplemented(const std::string& message) {
  return kernel_unimplemented("convolution", message);
}

}  // namespace

conv_kernel::conv_kernel(const conv_problem& p, const conv_config& c, std::unique_ptr<jit_module> m,
                         entry_fn* fn)
    : problem_(p), config_(c), module_(std::move(m)), fn_(fn) {}

conv_kernel::~conv_kernel() = default;

result<std::unique_ptr<conv_kernel>> conv_kernel::finish(const conv_problem& p,
                                                         const conv_config& c,
                                                         std::unique_ptr<jit_module> m) {
  auto fn = m->lookup_function<entry_fn>(conv_entry_symbol);
  if (!fn) return fn.why();
  auto g = analyze_conv(p);
  const conv_geometry ge = flatten_conv_pointwise(g.value());
  const conv_config ec = effective_conv_config(ge, c);
  std::unique_ptr<conv_kernel> k(new conv_kernel(p, c, std::move(m), fn.value()));
  k->geometry_ = std::make_unique<const conv_geometry>(g.value());
  auto pref = preferred_weights_desc(p);
  // Only Ohwi16o and Goihw16g are the packed layout itself; the plain
  // layout preferred for other grouped weights is always packed.
  const bool in_place = pref && (ge.depthwise || (ge.g == 1 && p.weights.ndims() == 4)) &&
                        pref.value() == p.weights && p.weights.offset0() == 0;
  k->packs_weights_ = !in_place;
  k->packed_bytes_ = static_cast<std::size_t>(conv_packed_weight_floats(ge)) * sizeof(float);
  k->work_items_ = conv_work_items(ge, ec);
  k->item_fmas_ = conv_item_fmas(ge, ec);
  if (conv_config_walks(ec)) k->walk_ = std::make_unique<const conv_walk>(conv_walk::make(ge, ec));
  // Grouped outputs whose groups split a 16-channel block are stored lane by
  // lane, which never touches a blocked dst's channel padding.
  k->zeroes_dst_padding_ =
      ge.dst.blocked && ge.g > 1 && !ge.depthwise && ge.ocg % lanes != 0 && ge.oc % lanes != 0;
  return k;
}

result<std::unique_ptr<conv_kernel>> conv_kernel::create(const conv_problem& p,
                                                         const conv_config& c, cpu_isa isa) {
  auto g = analyze_conv(p);
  if (!g) return g.why();
  if (auto ok = check_conv_config(c); !ok) return ok.why();
  if (isa > detected_isa()) {
    return unimplemented("ISA " + std::string(to_string(isa)) + " is not supported by this host");
  }
  if (isa < cpu_isa::avx2) {
    return unimplemented("ISA " + std::string(to_string(isa)) + " is below avx2");
  }
  const conv_geometry ge = flatten_conv_pointwise(g.value());
  const conv_config ec = effective_conv_config(ge, c);
  auto m = jit_module::compile("conv_fwd_f32", isa, conv_compile_settings_for(ge, ec),
                               [&](llvm::Module& mod) { generate_conv(p, ge, ec, isa, mod); });
  if (!m) return m.why();
  return finish(p, c, std::move(m).value());
}

result<std::unique_ptr<conv_kernel>> conv_kernel::load(const conv_problem& p, const conv_config& c,
                                                       std::span<const std::byte> object,
                                                       cpu_isa highest) {
  auto g = analyze_conv(p);
  if (!g) return g.why();
  if (auto ok = check_conv_config(c); !ok) return ok.why();
  auto m = jit_module::load("conv_fwd_f32", object, highest);
  if (!m) return m.why();
  return finish(p, c, std::move(m).value());
}

const std::vector<std::byte>& conv_kernel::object() const {
  return module_->object();
}

cpu_isa conv_kernel::isa() const {
  return module_->isa();
}

std::size_t conv_kernel::scratchpad_bytes() const {
  return packs_weights_ ? packed_bytes_ : 0;
}

void conv_kernel::write_packing_key(key_writer& w) const {
  w.str("conv_packing").i64(problem_.groups);
  problem_.weights.write_key(w);
}

void conv_kernel::pack_weights(const float* user, float* packed, thread_pool& pool) const {
  conv_pack_weights(*geometry_, problem_.weights, problem_.nthr, user, packed, pool);
}

void conv_kernel::execute(const conv_args& args, void* scratchpad, thread_pool& pool) const {
  const auto* wei = static_cast<const float*>(args.weights);
  if (args.packed_weights != nullptr) {
    wei = args.packed_weights;
  } else if (packs_weights_) {
    auto* packed = static_cast<float*>(scratchpad);
    pack_weights(wei, packed, pool);
    wei = packed;
  }
  const auto* src = static_cast<const float*>(args.src);
  const auto* bias = static_cast<const float*>(args.bias);
  auto* dst = static_cast<float*>(args.dst);
  const std::int64_t items = work_items_;
  entry_fn* fn = fn_;
  // Each share runs its home range, then helps with what others have not
  // started (kernels/conv_schedule.hpp): a late worker no longer holds the
  // region up for its whole range, and a thread keeps its rows from one
  // execution to the next. Every item writes its own outputs, each summed
  // in the kernel's fixed order, so the split changes no result.
  const int nthr = std::min(problem_.nthr, pool.size());
  if (walk_) {
    run_walk(args, wei, nthr, pool);
  } else if (nthr <= 1 || items >= (std::int64_t{1} << 31)) {
    pool.parallel_for(nthr, [&](int ithr, int n) {
      const range r = balance(items, ithr, n);
      if (r.begin < r.end) fn(src, wei, bias, dst, args.binary_operands, r.begin, r.end);
    });
  } else {
    conv_item_schedule s(items, nthr, conv_chunk_for(items, nthr, item_fmas_));
    const std::thread::id caller = std::this_thread::get_id();
    pool.parallel_for(nthr, [&](int ithr, int n) {
      const int home = s.claim_home(conv_home_for_this_thread(caller, n), ithr);
      for (range r = s.next(home); r.begin < r.end; r = s.next(home)) {
        fn(src, wei, bias, dst, args.binary_operands, r.begin, r.end);
      }
    });
  }
  if (zeroes_dst_padding_) zero_dst_padding(dst);
}

void conv_kernel::run_walk(const conv_args& args, const float* wei, int nthr,
                           thread_pool& pool) const {
  const conv_walk& w = *walk_;
  const auto* src = static_cast<const float*>(args.src);
  const auto* bias = static_cast<const float*>(args.bias);
  auto* dst = static_cast<float*>(args.dst);
  entry_fn* fn = fn_;
  auto call = [&](std::int64_t b, std::int64_t e) {
    fn(src, wei, bias, dst, args.binary_operands, b, e);
  };
  const std::int64_t units = w.units();
  const std::vector<std::int64_t>& cells = w.cell_starts();
  if (nthr <= 1 || units >= (std::int64_t{1} << 31)) {
    // Static: the one cell's balanced ranges, or each thread its cells.
    pool.parallel_for(nthr, [&](int ithr, int n) {
      if (w.cells() == 1) {
        w.run(balance(units, ithr, n), call);
        return;
      }
      for (int c = ithr; c < w.cells(); c += n) {
        w.run({cells[static_cast<std::size_t>(c)], cells[static_cast<std::size_t>(c) + 1]}, call);
      }
    });
    return;
  }
  // The homes: the cells of a thread partition, else nthr balanced ranges
  // of the one cell; a share runs its home, then what others left.
  std::optional<conv_item_schedule> s;
  if (w.cells() == 1) {
    s.emplace(units, nthr, conv_chunk_for(units, nthr, item_fmas_));
  } else {
    s.emplace(cells, conv_chunk_for(units, w.cells(), item_fmas_));
  }
  const std::thread::id caller = std::this_thread::get_id();
  pool.parallel_for(nthr, [&](int ithr, int n) {
    const int home = s->claim_home(conv_home_for_this_thread(caller, n), ithr);
    for (range r = s->next(home); r.begin < r.end; r = s->next(home)) w.run(r, call);
  });
}

void conv_kernel::zero_dst_padding(float* dst) const {
  // nChw16c: outer strides (N, C blocks, H, W), then the 16 lanes of a block.
  const memory_desc& d = problem_.dst;
  const auto dims = d.dims();
  const auto s = d.strides();
  const std::int64_t valid = dims[1] % lanes;
  float* last_block = dst + d.offset0() + (dims[1] / lanes) * s[1] + valid;
  for (std::int64_t n = 0; n < dims[0]; ++n)
    for (std::int64_t h = 0; h < dims[2]; ++h)
      for (std::int64_t w = 0; w < dims[3]; ++w)
        std::fill_n(last_block + n * s[0] + h * s[2] + w * s[3], lanes - valid, 0.f);
}
}  // namespace primcache::cpu_internal
