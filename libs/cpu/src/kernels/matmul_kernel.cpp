#include "kernels/matmul_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "jit/target.hpp"

namespace primcache::cpu_internal {

namespace {

constexpr const char* kSymbol = "matmul_f32";
// Bounds that keep every offset, constant and scratchpad size far from
// overflow; no real matmul comes near them.
constexpr std::int64_t kMaxOffsetBytes = std::int64_t{1} << 56;
constexpr std::int64_t kMaxPackBytes = std::int64_t{1} << 30;
constexpr int kMaxThreads = 4096;

failure invalid(std::string message) {
  return {status::invalid_arguments, "matmul: " + std::move(message)};
}
failure unimplemented(std::string message) {
  return {status::unimplemented, "matmul: " + std::move(message)};
}

int vector_lanes(cpu_isa isa) {
  return static_cast<int>(isa_vector_bits(isa) / 32);
}
int vector_registers(cpu_isa isa) {
  return isa >= cpu_isa::avx512_core ? 32 : 16;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}
std::int64_t round_up(std::int64_t a, std::int64_t b) {
  return ceil_div(a, b) * b;
}

// The largest element offset of a tensor with these extents and strides,
// or nullopt when it (or its size in bytes) leaves the supported range.
std::optional<std::int64_t> max_offset(std::span<const std::int64_t> extents,
                                       std::span<const std::int64_t> strides) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < extents.size(); ++i) {
    std::int64_t term = 0;
    if (__builtin_mul_overflow(extents[i] - 1, strides[i], &term)) return std::nullopt;
    if (__builtin_add_overflow(total, term, &total)) return std::nullopt;
  }
  if (total >= kMaxOffsetBytes / 4) return std::nullopt;
  return total;
}

std::optional<failure> validate_problem(const matmul_problem& p, bool need_dense_n = true) {
  const std::pair<const char*, std::int64_t> dims[] = {
      {"batch", p.batch}, {"m", p.m}, {"n", p.n}, {"k", p.k}};
  for (const auto& [name, v] : dims) {
    if (v < 1) return invalid(std::string(name) + " " + std::to_string(v) + " is not positive");
  }
  const std::pair<const char*, const std::array<std::int64_t, 3>*> strides[] = {
      {"src", &p.src_strides}, {"weights", &p.wei_strides}, {"dst", &p.dst_strides}};
  for (const auto& [name, s] : strides) {
    for (std::int64_t v : *s) {
      if (v < 0)
        return invalid(std::string(name) + " stride " + std::to_string(v) + " is negative");
    }
  }
  const std::int64_t src_ext[] = {p.batch, p.m, p.k};
  const std::int64_t wei_ext[] = {p.batch, p.k, p.n};
  const std::int64_t dst_ext[] = {p.batch, p.m, p.n};
  if (!max_offset(src_ext, p.src_strides)) return invalid("src extent overflows");
  if (!max_offset(wei_ext, p.wei_strides)) return invalid("weights extent overflows");
  if (!max_offset(dst_ext, p.dst_strides)) return invalid("dst extent overflows");
  if (need_dense_n && p.dst_strides[2] != 1) {
    return unimplemented("dst n stride " + std::to_string(p.dst_strides[2]) +
                         " is not 1 (dst must be dense along n)");
  }
  // dst is written, so no two elements may share an address: the dims
  // sorted by stride must each step over the whole extent of the smaller ones.
  struct dim {
    std::int64_t extent, stride;
  };
  std::vector<dim> outer;
  if (p.n > 1) outer.push_back({p.n, p.dst_strides[2]});
  if (p.m > 1) outer.push_back({p.m, p.dst_strides[1]});
  if (p.batch > 1) outer.push_back({p.batch, p.dst_strides[0]});
  std::sort(outer.begin(), outer.end(), [](dim a, dim b) { return a.stride < b.stride; });
  std::int64_t span = 1;
  for (const dim& d : outer) {
    if (d.stride < span) {
      return invalid("dst strides (" + std::to_string(p.dst_strides[0]) + ", " +
                     std::to_string(p.dst_strides[1]) + ", " + std::to_string(p.dst_strides[2]) +
                     ") make elements overlap");
    }
    span = d.stride * d.extent;  // no overflow: max_offset bounded it
  }
  if (p.nthr < 1 || p.nthr > kMaxThreads) {
    return invalid("nthr " + std::to_string(p.nthr) + " is outside [1, " +
                   std::to_string(kMaxThreads) + "]");
  }
  for (const post_op& op : p.post_ops) {
    if (op.what == post_op::kind::eltwise) {
      if (op.eltwise.alg > eltwise_alg::clip) return invalid("unknown eltwise algorithm");
    } else if (op.what == post_op::kind::binary_add) {
      if (op.binary.arg_index < 0) {
        return invalid("binary post-op operand index " + std::to_string(op.binary.arg_index) +
                       " is negative");
      }
      if (op.binary.broadcast > binary_broadcast::scalar) {
        return invalid("unknown binary broadcast");
      }
    } else {
      return invalid("unknown post-op kind");
    }
  }
  return std::nullopt;
}

// Checks that hold whatever the ISA; `lanes` adds the ISA's (0: unknown).
std::optional<failure> validate_config(const matmul_problem& p, const matmul_config& c, int lanes,
                                       int registers) {
  if (c.mr < 1 || c.nr < 1) {
    return invalid("register block " + std::to_string(c.mr) + "x" + std::to_string(c.nr) +
                   " is not positive");
  }
  if (c.nr % 8 != 0 || (lanes != 0 && c.nr % lanes != 0)) {
    return invalid("nr " + std::to_string(c.nr) + " is not a multiple of the vector width " +
                   std::to_string(lanes == 0 ? 8 : lanes));
  }
  if (lanes != 0) {
    const int nv = c.nr / lanes;
    if (c.mr * nv + nv + 1 > registers) {
      return invalid("register block " + std::to_string(c.mr) + "x" + std::to_string(c.nr) +
                     " needs more than " + std::to_string(registers) + " vector registers");
    }
  }
  if (c.kc < 1 || c.kc > (1 << 20))
    return invalid("kc " + std::to_string(c.kc) + " is out of range");
  if (c.mc < c.mr || c.mc % c.mr != 0 || c.mc > (std::int64_t{1} << 40)) {
    return invalid("mc " + std::to_string(c.mc) + " is not a positive multiple of mr");
  }
  if (c.nc < c.nr || c.nc % c.nr != 0 || c.nc > (std::int64_t{1} << 40)) {
    return invalid("nc " + std::to_string(c.nc) + " is not a positive multiple of nr");
  }
  if (c.k_unroll < 1 || c.k_unroll > 16) {
    return invalid("k_unroll " + std::to_string(c.k_unroll) + " is outside [1, 16]");
  }
  if (c.thr_m < 1 || c.thr_n < 1 || static_cast<std::int64_t>(c.thr_m) * c.thr_n > p.nthr) {
    return invalid("thread grid " + std::to_string(c.thr_m) + "x" + std::to_string(c.thr_n) +
                   " has more cells than nthr = " + std::to_string(p.nthr));
  }
  if (!c.pack_b && p.wei_strides[2] != 1) {
    return invalid("without packing the weights must be dense along n (n stride " +
                   std::to_string(p.wei_strides[2]) + ")");
  }
  if (c.pack_b && c.kc * c.nc > kMaxPackBytes / 4) {
    return invalid("packed panel kc x nc = " + std::to_string(c.kc) + "x" + std::to_string(c.nc) +
                   " is too large");
  }
  return std::nullopt;
}

std::optional<failure> validate_isa(cpu_isa isa) {
  if (isa < cpu_isa::avx2) {
    return unimplemented("needs avx2 or better, asked for " + std::string(to_string(isa)));
  }
  if (isa > detected_isa()) {
    return unimplemented(std::string(to_string(isa)) + " is beyond this host's " +
                         std::string(to_string(detected_isa())));
  }
  return std::nullopt;
}

// Scratch bytes of one thread: its packed kc x nc panel, in whole cache lines.
std::size_t pack_slot_bytes(const matmul_config& c) {
  if (!c.pack_b) return 0;
  return static_cast<std::size_t>(round_up(c.kc * c.nc * 4, 64));
}

// ---------------------------------------------------------------------------
// Default configuration.

// Estimated time of one thread's share, in units of one vector FMA.
double estimate(const matmul_problem& p, const matmul_config& c, int lanes) {
  const std::int64_t mb = ceil_div(p.m, c.mr);
  const std::int64_t nb = ceil_div(p.n, c.nr);
  const double rows = static_cast<double>(ceil_div(p.batch * mb, c.thr_m) * c.mr);
  const double cols = static_cast<double>(ceil_div(nb, c.thr_n) * c.nr);
  const int nv = c.nr / lanes;
  // A micro-kernel step issues mr * nv FMAs and mr + nv loads; the loads
  // are hidden unless the tile is thin.
  const double per_fma = 1.0 + 0.5 * std::max(0.0, double(c.mr + nv) / (c.mr * nv) - 0.35);
  double t = rows * (cols / lanes) * static_cast<double>(p.k) * per_fma;
  if (c.pack_b) {
    // Each thread packs its columns once per batch it covers.
    const double batches = static_cast<double>(ceil_div(p.batch, c.thr_m));
    t += 6.0 * cols / lanes * static_cast<double>(p.k) * batches;
  }
  // Waking a pool thread and joining it costs microseconds: small problems
  // run on fewer threads.
  t += 20000.0 * (c.thr_m * c.thr_n - 1);
  return t;
}

struct tile {
  int mr, nv;
};

matmul_config with_blocking(const matmul_problem& p, matmul_config c, int lanes) {
  (void)lanes;
  const std::int64_t unroll = c.k_unroll;
  if (c.pack_b) {
    // The innermost loop runs over the nr blocks of the packed kc x nc
    // panel (about 1 MiB: L2) with the mr x kc block of src in L1; depth
    // 256 makes each micro-kernel call long enough to hide its edges.
    c.n_inner = true;
    const std::int64_t kc_max = 256;
    const std::int64_t kblocks = ceil_div(p.k, kc_max);
    c.kc = round_up(ceil_div(p.k, kblocks), unroll);
    const std::int64_t mc_rows = std::max<std::int64_t>(c.mr, (512 * 1024) / (c.kc * 4));
    c.mc = std::max<std::int64_t>(c.mr, mc_rows / c.mr * c.mr);
    const std::int64_t nb = ceil_div(p.n, c.nr);
    const std::int64_t share = ceil_div(nb, c.thr_n) * c.nr;
    const std::int64_t nc_cols = std::max<std::int64_t>(c.nr, (1024 * 1024) / (c.kc * 4));
    c.nc = std::min(share, std::max<std::int64_t>(c.nr, nc_cols / c.nr * c.nr));
  } else {
    // Rows of the weights are read in place. When no row block reuses them
    // (M <= mr: a matrix-vector product) the weights stream from memory
    // once; short K blocks keep the pages of one block's rows few enough
    // for the TLB while the nr blocks walk along them.
    const std::int64_t kc_max = p.m <= c.mr ? 64 : 256;
    c.kc = round_up(ceil_div(p.k, ceil_div(p.k, kc_max)), unroll);
    c.mc = round_up(std::min<std::int64_t>(p.m, 4096), c.mr);
    const std::int64_t nb = ceil_div(p.n, c.nr);
    c.nc = ceil_div(nb, c.thr_n) * c.nr;
  }
  return c;
}

// The thread grid with the smallest estimated time.
matmul_config with_best_grid(const matmul_problem& p, matmul_config c, int lanes) {
  double best = std::numeric_limits<double>::infinity();
  matmul_config best_c = c;
  for (int cells : {p.nthr, 1}) {
    for (int tm = 1; tm <= cells; ++tm) {
      if (cells % tm != 0) continue;
      matmul_config t = c;
      t.thr_m = tm;
      t.thr_n = cells / tm;
      t = with_blocking(p, t, lanes);
      const double e = estimate(p, t, lanes);
      if (e < best) {
        best = e;
        best_c = t;
      }
    }
  }
  return best_c;
}

}  // namespace

matmul_problem matmul_problem::dense(std::int64_t batch, std::int64_t m, std::int64_t n,
                                     std::int64_t k) {
  matmul_problem p;
  p.batch = batch;
  p.m = m;
  p.n = n;
  p.k = k;
  p.src_strides = {m * k, k, 1};
  p.wei_strides = {k * n, n, 1};
  p.dst_strides = {m * n, n, 1};
  return p;
}

void matmul_problem::write_key(key_writer& w) const {
  w.i64(batch).i64(m).i64(n).i64(k);
  for (const auto* s : {&src_strides, &wei_strides, &dst_strides}) {
    for (std::int64_t v : *s) w.i64(v);
  }
  w.boolean(with_bias);
  cpu_internal::write_key(w, post_ops);
  w.i32(nthr);
}

void matmul_config::write_key(key_writer& w) const {
  w.i32(mr).i32(nr).i64(kc).i64(mc).i64(nc).i32(k_unroll).boolean(pack_b).boolean(n_inner);
  w.i32(thr_m).i32(thr_n);
}

matmul_config default_matmul_config(const matmul_problem& p, cpu_isa isa) {
  const int lanes = vector_lanes(isa);
  const int regs = vector_registers(isa);
  const std::int64_t m = std::max<std::int64_t>(p.m, 1);
  const std::int64_t n = std::max<std::int64_t>(p.n, 1);
  const int nthr = std::max(p.nthr, 1);

  std::vector<tile> tiles;
  if (lanes == 16) {
    tiles = {{8, 3}, {6, 4}, {7, 3}, {12, 2}, {14, 2}, {28, 1}, {4, 6}, {3, 7}, {2, 8}, {1, 8}};
  } else {
    tiles = {{6, 2}, {4, 3}, {5, 2}, {14, 1}, {3, 4}, {2, 5}, {1, 7}};
  }
  // Rows: a tile no taller than M. Columns: no wider than N needs.
  matmul_config best;
  double best_t = std::numeric_limits<double>::infinity();
  for (tile t : tiles) {
    if (t.mr * t.nv + t.nv + 1 > regs) continue;
    matmul_config c;
    c.mr = static_cast<int>(std::min<std::int64_t>(t.mr, m));
    c.nr = static_cast<int>(std::min<std::int64_t>(t.nv, ceil_div(n, lanes))) * lanes;
    c.k_unroll = 4;
    const bool dense_n = p.wei_strides[2] == 1;
    // Packing pays when each weight panel serves several row blocks and the
    // rows of the weights are far apart (cache-set conflicts, TLB misses).
    const bool reused = p.m >= 3 * c.mr;
    const bool scattered = p.wei_strides[1] * 4 > 2048 || p.k * p.n * 4 > (256 << 10);
    c.pack_b = !dense_n || (reused && scattered);
    c.thr_m = nthr;
    c.thr_n = 1;
    c = with_best_grid(p, c, lanes);
    const double e = estimate(p, c, lanes);
    if (e < best_t * 0.999) {
      best_t = e;
      best = c;
    }
  }
  return best;
}

std::vector<matmul_config> matmul_config_candidates(const matmul_problem& p, cpu_isa isa) {
  const int lanes = vector_lanes(isa);
  const int regs = vector_registers(isa);
  const matmul_config def = default_matmul_config(p, isa);
  std::vector<matmul_config> out;
  auto add = [&](matmul_config c) {
    if (validate_config(p, c, lanes, regs)) return;
    if (c == def) return;
    if (std::find(out.begin(), out.end(), c) != out.end()) return;
    out.push_back(c);
  };
  // Another register tile.
  {
    matmul_config c = def;
    c.mr = std::max(1, def.mr / 2);
    c.nr = lanes;
    c.mc = round_up(def.mc, c.mr);
    c.nc = round_up(def.nc, c.nr);
    add(c);
  }
  // Packing toggled (where the weights allow running without it).
  {
    matmul_config c = def;
    c.pack_b = !def.pack_b;
    c = with_blocking(p, c, lanes);
    add(c);
  }
  // A shallower K block with a different unroll and loop order.
  {
    matmul_config c = def;
    c.kc = std::max<std::int64_t>(1, std::min<std::int64_t>(def.kc, p.k) / 2 + 1);
    c.k_unroll = def.k_unroll == 1 ? 3 : 1;
    c.n_inner = !def.n_inner;
    add(c);
  }
  // The other thread grids.
  for (int tm = 1; tm <= p.nthr; ++tm) {
    if (p.nthr % tm != 0 || tm == def.thr_m) continue;
    matmul_config c = def;
    c.thr_m = tm;
    c.thr_n = p.nthr / tm;
    add(c);
  }
  // Small cache blocks: several mc, nc and kc blocks even for small shapes.
  {
    matmul_config c = def;
    c.pack_b = true;
    c.mc = c.mr;
    c.nc = c.nr;
    c.kc = std::max<std::int64_t>(1, std::min<std::int64_t>(p.k, 64) / 3 + 1);
    c.k_unroll = 2;
    add(c);
  }
  return out;
}

// ---------------------------------------------------------------------------
// IR generation.

namespace {

using values = std::vector<llvm::Value*>;

class matmul_generator {
 public:
  matmul_generator(const matmul_problem& p, const matmul_config& c, cpu_isa isa, llvm::Module& m)
      : p_(p),
        c_(c),
        lanes_(vector_lanes(isa)),
        m_(m),
        ctx_(m.getContext()),
        b_(ctx_),
        f32_(b_.getFloatTy()),
        i64_(b_.getInt64Ty()),
        i32_(b_.getInt32Ty()),
        ptr_(llvm::PointerType::get(ctx_, 0)),
        vec_(llvm::FixedVectorType::get(f32_, lanes_)),
        mblocks_(ceil_div(p.m, c.mr)),
        nblocks_(ceil_div(p.n, c.nr)),
        m_tail_(static_cast<int>(p.m % c.mr)),
        n_tail_(static_cast<int>(p.n % c.nr)) {}

  void build() {
    if (c_.pack_b) {
      pack_full_ = build_pack(c_.nr, "matmul_pack");
      if (n_tail_ != 0) pack_tail_ = build_pack(n_tail_, "matmul_pack_tail");
    }
    for (int mt = 0; mt < 2; ++mt) {
      for (int nt = 0; nt < 2; ++nt) {
        const int rows = mt ? m_tail_ : c_.mr;
        const int cols = nt ? n_tail_ : c_.nr;
        if (rows == 0 || cols == 0) continue;
        micro_[mt][nt] = build_micro_kernel(
            rows, cols, "matmul_micro_" + std::to_string(rows) + "x" + std::to_string(cols));
      }
    }
    build_driver();
  }

 private:
  llvm::Value* i64c(std::int64_t v) { return llvm::ConstantInt::get(i64_, v); }
  llvm::Value* gep(llvm::Value* base, llvm::Value* index) {
    return b_.CreateGEP(f32_, base, index);
  }
  llvm::Value* gep(llvm::Value* base, std::int64_t index) { return gep(base, i64c(index)); }

  llvm::Function* declare(const std::string& name, llvm::Type* ret,
                          llvm::ArrayRef<llvm::Type*> params, bool external) {
    auto* fn = llvm::Function::Create(
        llvm::FunctionType::get(ret, params, false),
        external ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage, name, m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    if (!external) fn->addFnAttr(llvm::Attribute::NoInline);
    return fn;
  }

  // A <lanes x i1> constant with the first `n` lanes set.
  llvm::Constant* lane_mask(int n) {
    std::vector<llvm::Constant*> bits;
    for (int i = 0; i < lanes_; ++i) bits.push_back(b_.getInt1(i < n));
    return llvm::ConstantVector::get(bits);
  }
  llvm::Value* zero_vec() { return llvm::Constant::getNullValue(vec_); }

  // Loads `n` (1..lanes) consecutive floats; the others read as 0.
  llvm::Value* load_vec(llvm::Value* p, int n) {
    if (n >= lanes_) return b_.CreateAlignedLoad(vec_, p, llvm::Align(4));
    return b_.CreateMaskedLoad(vec_, p, llvm::Align(4), lane_mask(n), zero_vec());
  }
  void store_vec(llvm::Value* v, llvm::Value* p, int n) {
    if (n >= lanes_) {
      b_.CreateAlignedStore(v, p, llvm::Align(4));
    } else {
      b_.CreateMaskedStore(v, p, llvm::Align(4), lane_mask(n));
    }
  }
  // Loads n floats at p, p + stride, ...; the others read as 0.
  llvm::Value* gather_vec(llvm::Value* p, std::int64_t stride, int n) {
    std::vector<llvm::Constant*> idx;
    for (int i = 0; i < lanes_; ++i) idx.push_back(llvm::ConstantInt::get(i64_, i * stride));
    llvm::Value* ptrs = b_.CreateGEP(f32_, p, llvm::ConstantVector::get(idx));
    return b_.CreateMaskedGather(vec_, ptrs, llvm::Align(4), lane_mask(std::min(n, lanes_)),
                                 zero_vec());
  }

  // for (i = begin; i < end; i += step) carried = body(i, carried);
  // returns the carried values at exit. begin/end are i64 values.
  values emit_loop(llvm::Value* begin, llvm::Value* end, std::int64_t step, const values& init,
                   const std::function<values(llvm::Value*, const values&)>& body,
                   const char* name) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, std::string(name) + ".head", fn);
    auto* loop = llvm::BasicBlock::Create(ctx_, std::string(name) + ".body", fn);
    auto* exit = llvm::BasicBlock::Create(ctx_, std::string(name) + ".exit", fn);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* i = b_.CreatePHI(i64_, 2, name);
    i->addIncoming(begin, pre);
    values cur;
    std::vector<llvm::PHINode*> phis;
    for (llvm::Value* v : init) {
      llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
      phi->addIncoming(v, pre);
      phis.push_back(phi);
      cur.push_back(phi);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(i, end), loop, exit);
    b_.SetInsertPoint(loop);
    values next = body(i, cur);
    llvm::BasicBlock* latch = b_.GetInsertBlock();
    i->addIncoming(b_.CreateAdd(i, i64c(step)), latch);
    for (std::size_t j = 0; j < phis.size(); ++j) phis[j]->addIncoming(next[j], latch);
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
    return cur;
  }

  // Emits then() when cond holds (no values flow out).
  void emit_if(llvm::Value* cond, const std::function<void()>& then, const char* name) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* yes = llvm::BasicBlock::Create(ctx_, std::string(name) + ".then", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, std::string(name) + ".done", fn);
    b_.CreateCondBr(cond, yes, done);
    b_.SetInsertPoint(yes);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // void pack(const float* wei_b, float* buf, i64 k0, i64 kc, i64 nb0, i64 nb1):
  // copies weights rows [k0, k0 + kc) of column blocks [nb0, nb1) into
  // buf, block j at buf + (j - nb0) * kc_max * nr, row k at + k * nr, with
  // columns beyond N as zeros. `cols` is the width of every block in
  // [nb0, nb1) (nr, or the tail width for the single last block).
  llvm::Function* build_pack(int cols, const std::string& name) {
    llvm::Function* fn = declare(name, b_.getVoidTy(), {ptr_, ptr_, i64_, i64_, i64_, i64_}, false);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* wei = fn->getArg(0);
    llvm::Value* buf = fn->getArg(1);
    llvm::Value* k0 = fn->getArg(2);
    llvm::Value* kc = fn->getArg(3);
    const std::int64_t sk = p_.wei_strides[1];
    const std::int64_t sn = p_.wei_strides[2];
    const int nv = c_.nr / lanes_;
    emit_loop(
        fn->getArg(4), fn->getArg(5), 1, {},
        [&](llvm::Value* j, const values&) {
          llvm::Value* src_col = gep(wei, b_.CreateMul(j, i64c(c_.nr * sn)));
          llvm::Value* dst_blk =
              gep(buf, b_.CreateMul(b_.CreateSub(j, fn->getArg(4)), i64c(c_.kc * c_.nr)));
          emit_loop(
              i64c(0), kc, 1, {},
              [&](llvm::Value* k, const values&) {
                llvm::Value* src_row = gep(src_col, b_.CreateMul(b_.CreateAdd(k, k0), i64c(sk)));
                llvm::Value* dst_row = gep(dst_blk, b_.CreateMul(k, i64c(c_.nr)));
                for (int v = 0; v < nv; ++v) {
                  const int n = std::clamp(cols - v * lanes_, 0, lanes_);
                  llvm::Value* x = zero_vec();
                  if (n > 0) {
                    llvm::Value* at = gep(src_row, std::int64_t{v} * lanes_ * sn);
                    x = sn == 1 ? load_vec(at, n) : gather_vec(at, sn, n);
                  }
                  b_.CreateAlignedStore(x, gep(dst_row, std::int64_t{v} * lanes_), llvm::Align(4));
                }
                return values{};
              },
              "pack.k");
          return values{};
        },
        "pack.j");
    b_.CreateRetVoid();
    return fn;
  }

  // void micro(const float* a, const float* bp, float* c, i64 kc, i32 flags,
  //            const float* bias, const float* const* binary, i64 dst_off, i64 col):
  // c[rows x cols] (+)= a[rows x kc] * bp[kc x cols]; flags bit 0: first K
  // block (start from 0, else from c), bit 1: last K block (apply bias and
  // post-ops). a has src's strides, bp row stride ldb; dst_off is the
  // tile's element offset in dst (for same-shape binary operands), col its
  // first column (for per-column operands and bias).
  llvm::Function* build_micro_kernel(int rows, int cols, const std::string& name) {
    llvm::Function* fn = declare(name, b_.getVoidTy(),
                                 {ptr_, ptr_, ptr_, i64_, i32_, ptr_, ptr_, i64_, i64_}, false);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* a = fn->getArg(0);
    llvm::Value* bp = fn->getArg(1);
    llvm::Value* c = fn->getArg(2);
    llvm::Value* kc = fn->getArg(3);
    llvm::Value* flags = fn->getArg(4);
    const int nv = static_cast<int>(ceil_div(cols, lanes_));
    auto width = [&](int v) { return std::min(lanes_, cols - v * lanes_); };
    const std::int64_t sam = p_.src_strides[1];
    const std::int64_t sak = p_.src_strides[2];
    const std::int64_t ldb = c_.pack_b ? c_.nr : p_.wei_strides[1];
    const std::int64_t ldc = p_.dst_strides[1];
    // Without packing, B's columns past N are outside the tensor.
    const bool mask_b = !c_.pack_b;

    // Initial accumulators: zeros for the first K block, else dst.
    llvm::BasicBlock* entry = b_.GetInsertBlock();
    auto* from_c = llvm::BasicBlock::Create(ctx_, "init.load", fn);
    auto* start = llvm::BasicBlock::Create(ctx_, "init.done", fn);
    llvm::Value* first = b_.CreateICmpNE(b_.CreateAnd(flags, 1), b_.getInt32(0));
    b_.CreateCondBr(first, start, from_c);
    b_.SetInsertPoint(from_c);
    values loaded;
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < nv; ++v) {
        loaded.push_back(load_vec(gep(c, r * ldc + std::int64_t{v} * lanes_), width(v)));
      }
    }
    b_.CreateBr(start);
    b_.SetInsertPoint(start);
    values acc;
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      llvm::PHINode* phi = b_.CreatePHI(vec_, 2);
      phi->addIncoming(zero_vec(), entry);
      phi->addIncoming(loaded[i], from_c);
      acc.push_back(phi);
    }

    // One K step at index k: nv loads of B, one broadcast of A per row,
    // rows * nv FMAs.
    auto step = [&](llvm::Value* k, std::int64_t dk, values cur) {
      llvm::Value* kk = dk == 0 ? k : b_.CreateAdd(k, i64c(dk));
      llvm::Value* brow = gep(bp, b_.CreateMul(kk, i64c(ldb)));
      llvm::Value* acol = gep(a, b_.CreateMul(kk, i64c(sak)));
      values bv;
      for (int v = 0; v < nv; ++v) {
        llvm::Value* at = gep(brow, std::int64_t{v} * lanes_);
        bv.push_back(mask_b ? load_vec(at, width(v)) : load_vec(at, lanes_));
      }
      for (int r = 0; r < rows; ++r) {
        llvm::Value* s = b_.CreateAlignedLoad(f32_, gep(acol, r * sam), llvm::Align(4));
        llvm::Value* splat = b_.CreateVectorSplat(lanes_, s);
        for (int v = 0; v < nv; ++v) {
          llvm::Value*& x = cur[r * nv + v];
          x = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_}, {splat, bv[v], x});
        }
      }
      return cur;
    };
    const std::int64_t u = c_.k_unroll;
    llvm::Value* kmain = u == 1 ? kc : b_.CreateMul(b_.CreateUDiv(kc, i64c(u)), i64c(u));
    acc = emit_loop(
        i64c(0), kmain, u, acc,
        [&](llvm::Value* k, const values& cur) {
          values x = cur;
          for (std::int64_t d = 0; d < u; ++d) x = step(k, d, x);
          return x;
        },
        "k");
    if (u > 1) {
      acc = emit_loop(
          kmain, kc, 1, acc, [&](llvm::Value* k, const values& cur) { return step(k, 0, cur); },
          "k.rem");
    }

    auto store_all = [&](const values& x) {
      for (int r = 0; r < rows; ++r) {
        for (int v = 0; v < nv; ++v) {
          store_vec(x[r * nv + v], gep(c, r * ldc + std::int64_t{v} * lanes_), width(v));
        }
      }
    };
    const bool has_epilogue = p_.with_bias || !p_.post_ops.empty();
    if (!has_epilogue) {
      store_all(acc);
      b_.CreateRetVoid();
      return fn;
    }
    auto* epi = llvm::BasicBlock::Create(ctx_, "epilogue", fn);
    auto* plain = llvm::BasicBlock::Create(ctx_, "partial", fn);
    llvm::Value* last = b_.CreateICmpNE(b_.CreateAnd(flags, 2), b_.getInt32(0));
    b_.CreateCondBr(last, epi, plain);
    b_.SetInsertPoint(plain);
    store_all(acc);
    b_.CreateRetVoid();

    b_.SetInsertPoint(epi);
    llvm::Value* col = fn->getArg(8);
    llvm::Value* dst_off = fn->getArg(7);
    values bias;
    if (p_.with_bias) {
      llvm::Value* bias_col = gep(fn->getArg(5), col);
      for (int v = 0; v < nv; ++v) {
        bias.push_back(load_vec(gep(bias_col, std::int64_t{v} * lanes_), width(v)));
      }
    }
    // Operand pointers, and the operands that do not change along rows.
    const std::size_t nops = p_.post_ops.size();
    values op_ptr(nops, nullptr);
    std::vector<values> op_cols(nops);
    for (std::size_t i = 0; i < nops; ++i) {
      const post_op& op = p_.post_ops[i];
      if (op.what != post_op::kind::binary_add) continue;
      llvm::Value* slot = b_.CreateGEP(ptr_, fn->getArg(6), i64c(op.binary.arg_index));
      op_ptr[i] = b_.CreateAlignedLoad(ptr_, slot, llvm::Align(8));
      if (op.binary.broadcast == binary_broadcast::scalar) {
        llvm::Value* s = b_.CreateAlignedLoad(f32_, op_ptr[i], llvm::Align(4));
        op_cols[i].assign(nv, b_.CreateVectorSplat(lanes_, s));
      } else if (op.binary.broadcast == binary_broadcast::per_channel) {
        llvm::Value* base = gep(op_ptr[i], col);
        for (int v = 0; v < nv; ++v) {
          op_cols[i].push_back(load_vec(gep(base, std::int64_t{v} * lanes_), width(v)));
        }
      } else {
        op_ptr[i] = gep(op_ptr[i], dst_off);
      }
    }
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < nv; ++v) {
        llvm::Value* x = acc[r * nv + v];
        if (p_.with_bias) x = b_.CreateFAdd(x, bias[v]);
        x = emit_post_ops(b_, x, p_.post_ops, [&](int i, const binary_add_op& op) -> llvm::Value* {
          if (op.broadcast != binary_broadcast::none) return op_cols[i][v];
          return load_vec(gep(op_ptr[i], r * ldc + std::int64_t{v} * lanes_), width(v));
        });
        store_vec(x, gep(c, r * ldc + std::int64_t{v} * lanes_), width(v));
      }
    }
    b_.CreateRetVoid();
    return fn;
  }

  // The exported function; see matmul_kernel::function.
  void build_driver() {
    llvm::Function* fn =
        declare(kSymbol, b_.getVoidTy(),
                {ptr_, ptr_, ptr_, ptr_, ptr_, ptr_, i64_, i64_, i64_, i64_, i64_}, true);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* batch = fn->getArg(6);
    llvm::Value* src = gep(fn->getArg(0), b_.CreateMul(batch, i64c(p_.src_strides[0])));
    llvm::Value* wei = gep(fn->getArg(1), b_.CreateMul(batch, i64c(p_.wei_strides[0])));
    llvm::Value* bias = fn->getArg(2);
    llvm::Value* dst_off_b = b_.CreateMul(batch, i64c(p_.dst_strides[0]));
    llvm::Value* dst = gep(fn->getArg(3), dst_off_b);
    llvm::Value* binary = fn->getArg(4);
    llvm::Value* pack = fn->getArg(5);
    llvm::Value* mb0 = fn->getArg(7);
    llvm::Value* mb1 = fn->getArg(8);
    llvm::Value* nb0 = fn->getArg(9);
    llvm::Value* nb1 = fn->getArg(10);
    const std::int64_t ncb = c_.nc / c_.nr;
    const std::int64_t mcb = c_.mc / c_.mr;

    emit_loop(
        nb0, nb1, ncb, {},
        [&](llvm::Value* jc, const values&) {
          llvm::Value* jce = smin(b_.CreateAdd(jc, i64c(ncb)), nb1);
          emit_loop(
              i64c(0), i64c(p_.k), c_.kc, {},
              [&](llvm::Value* pc, const values&) {
                llvm::Value* kcur = smin(i64c(c_.kc), b_.CreateSub(i64c(p_.k), pc));
                llvm::Value* first = b_.CreateZExt(b_.CreateICmpEQ(pc, i64c(0)), i32_);
                llvm::Value* last = b_.CreateZExt(
                    b_.CreateICmpSGE(b_.CreateAdd(pc, i64c(c_.kc)), i64c(p_.k)), i32_);
                llvm::Value* flags = b_.CreateOr(first, b_.CreateShl(last, 1));
                if (c_.pack_b) emit_packing(wei, pack, pc, kcur, jc, jce);
                emit_loop(
                    mb0, mb1, mcb, {},
                    [&](llvm::Value* ic, const values&) {
                      llvm::Value* ice = smin(b_.CreateAdd(ic, i64c(mcb)), mb1);
                      tile_args t{src,  wei, bias, dst,   dst_off_b, binary,
                                  pack, pc,  kcur, flags, jc};
                      auto rows_loop = [&](llvm::Value* jr) {
                        emit_loop(
                            ic, ice, 1, {},
                            [&](llvm::Value* ir, const values&) {
                              emit_tile(t, ir, jr);
                              return values{};
                            },
                            "ir");
                      };
                      if (c_.n_inner) {
                        emit_loop(
                            ic, ice, 1, {},
                            [&](llvm::Value* ir, const values&) {
                              emit_loop(
                                  jc, jce, 1, {},
                                  [&](llvm::Value* jr, const values&) {
                                    emit_tile(t, ir, jr);
                                    return values{};
                                  },
                                  "jr");
                              return values{};
                            },
                            "ir");
                      } else {
                        emit_loop(
                            jc, jce, 1, {},
                            [&](llvm::Value* jr, const values&) {
                              rows_loop(jr);
                              return values{};
                            },
                            "jr");
                      }
                      return values{};
                    },
                    "ic");
                return values{};
              },
              "pc");
          return values{};
        },
        "jc");
    b_.CreateRetVoid();
  }

  llvm::Value* smin(llvm::Value* x, llvm::Value* y) {
    return b_.CreateSelect(b_.CreateICmpSLT(x, y), x, y);
  }

  // Packs column blocks [jc, jce): full blocks with the full packer, the
  // last block of the matrix with the tail packer when N % nr != 0.
  void emit_packing(llvm::Value* wei, llvm::Value* pack, llvm::Value* pc, llvm::Value* kcur,
                    llvm::Value* jc, llvm::Value* jce) {
    if (n_tail_ == 0) {
      b_.CreateCall(pack_full_, {wei, pack, pc, kcur, jc, jce});
      return;
    }
    llvm::Value* full_end = smin(jce, i64c(nblocks_ - 1));
    emit_if(
        b_.CreateICmpSLT(jc, full_end),
        [&] {
          b_.CreateCall(pack_full_, {wei, pack, pc, kcur, jc, full_end});
        },
        "pack.full");
    emit_if(
        b_.CreateICmpEQ(jce, i64c(nblocks_)),
        [&] {
          // The tail block sits at (nblocks - 1 - jc) in the buffer; the
          // packer indexes relative to its nb0, so shift the buffer.
          llvm::Value* at =
              gep(pack, b_.CreateMul(b_.CreateSub(i64c(nblocks_ - 1), jc), i64c(c_.kc * c_.nr)));
          b_.CreateCall(pack_tail_, {wei, at, pc, kcur, i64c(nblocks_ - 1), i64c(nblocks_)});
        },
        "pack.tail");
  }

  struct tile_args {
    llvm::Value *src, *wei, *bias, *dst, *dst_off_b, *binary, *pack, *pc, *kcur, *flags, *jc;
  };

  void emit_tile(const tile_args& t, llvm::Value* ir, llvm::Value* jr) {
    llvm::Value* row = b_.CreateMul(ir, i64c(c_.mr));
    llvm::Value* col = b_.CreateMul(jr, i64c(c_.nr));
    llvm::Value* a = gep(t.src, b_.CreateAdd(b_.CreateMul(row, i64c(p_.src_strides[1])),
                                             b_.CreateMul(t.pc, i64c(p_.src_strides[2]))));
    llvm::Value* bp = nullptr;
    if (c_.pack_b) {
      bp = gep(t.pack, b_.CreateMul(b_.CreateSub(jr, t.jc), i64c(c_.kc * c_.nr)));
    } else {
      bp = gep(t.wei, b_.CreateAdd(b_.CreateMul(t.pc, i64c(p_.wei_strides[1])), col));
    }
    llvm::Value* off = b_.CreateAdd(b_.CreateMul(row, i64c(p_.dst_strides[1])), col);
    llvm::Value* c = gep(t.dst, off);
    llvm::Value* dst_off = b_.CreateAdd(t.dst_off_b, off);
    std::vector<llvm::Value*> args = {a, bp, c, t.kcur, t.flags, t.bias, t.binary, dst_off, col};

    auto call = [&](int mt, int nt) { b_.CreateCall(micro_[mt][nt], args); };
    auto by_n = [&](int mt) {
      if (n_tail_ == 0) {
        call(mt, 0);
        return;
      }
      llvm::Function* fn = b_.GetInsertBlock()->getParent();
      auto* full = llvm::BasicBlock::Create(ctx_, "n.full", fn);
      auto* tail = llvm::BasicBlock::Create(ctx_, "n.tail", fn);
      auto* done = llvm::BasicBlock::Create(ctx_, "n.done", fn);
      b_.CreateCondBr(b_.CreateICmpEQ(jr, i64c(nblocks_ - 1)), tail, full);
      b_.SetInsertPoint(full);
      call(mt, 0);
      b_.CreateBr(done);
      b_.SetInsertPoint(tail);
      call(mt, 1);
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    };
    if (m_tail_ == 0) {
      by_n(0);
      return;
    }
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* full = llvm::BasicBlock::Create(ctx_, "m.full", fn);
    auto* tail = llvm::BasicBlock::Create(ctx_, "m.tail", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, "m.done", fn);
    b_.CreateCondBr(b_.CreateICmpEQ(ir, i64c(mblocks_ - 1)), tail, full);
    b_.SetInsertPoint(full);
    by_n(0);
    b_.CreateBr(done);
    b_.SetInsertPoint(tail);
    by_n(1);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  const matmul_problem& p_;
  const matmul_config& c_;
  const int lanes_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* f32_;
  llvm::Type* i64_;
  llvm::Type* i32_;
  llvm::Type* ptr_;
  llvm::FixedVectorType* vec_;
  const std::int64_t mblocks_;
  const std::int64_t nblocks_;
  const int m_tail_;
  const int n_tail_;
  llvm::Function* pack_full_ = nullptr;
  llvm::Function* pack_tail_ = nullptr;
  llvm::Function* micro_[2][2] = {};
};

std::string module_name(const matmul_problem& p) {
  return "matmul_f32_" + std::to_string(p.batch) + "x" + std::to_string(p.m) + "x" +
         std::to_string(p.n) + "x" + std::to_string(p.k);
}

}  // namespace

// ---------------------------------------------------------------------------
// The kernel.

matmul_kernel::matmul_kernel(const matmul_problem& p, const matmul_config& cfg,
                             std::unique_ptr<jit_module> module, function* fn)
    : problem_(p), config_(cfg), module_(std::move(module)), fn_(fn) {}

result<std::unique_ptr<matmul_kernel>> matmul_kernel::finish(
    const matmul_problem& p, const matmul_config& cfg, result<std::unique_ptr<jit_module>> module) {
  if (!module) return module.why();
  auto fn = module.value()->lookup_function<function>(kSymbol);
  if (!fn) return fn.why();
  return std::unique_ptr<matmul_kernel>(
      new matmul_kernel(p, cfg, std::move(module).value(), fn.value()));
}

result<std::unique_ptr<matmul_kernel>> matmul_kernel::create(const matmul_problem& p,
                                                             const matmul_config& cfg,
                                                             cpu_isa isa) {
  if (auto f = validate_isa(isa)) return *f;
  if (auto f = validate_problem(p)) return *f;
  if (auto f = validate_config(p, cfg, vector_lanes(isa), vector_registers(isa))) return *f;
  return finish(p, cfg, jit_module::compile(module_name(p), isa, [&](llvm::Module& m) {
                  matmul_generator(p, cfg, isa, m).build();
                }));
}

result<std::unique_ptr<matmul_kernel>> matmul_kernel::load(const matmul_problem& p,
                                                           const matmul_config& cfg,
                                                           std::span<const std::byte> object) {
  if (auto f = validate_problem(p)) return *f;
  if (auto f = validate_config(p, cfg, 0, 0)) return *f;
  return finish(p, cfg, jit_module::load(module_name(p), object));
}

std::size_t matmul_kernel::scratchpad_bytes() const noexcept {
  return pack_slot_bytes(config_) * static_cast<std::size_t>(config_.thr_m * config_.thr_n);
}

void matmul_kernel::execute(const matmul_args& args, void* scratchpad, thread_pool& pool) const {
  const matmul_problem& p = problem_;
  const matmul_config& c = config_;
  const std::int64_t mblocks = ceil_div(p.m, c.mr);
  const std::int64_t nblocks = ceil_div(p.n, c.nr);
  const std::int64_t rows = p.batch * mblocks;
  const std::size_t slot = pack_slot_bytes(c);
  const int cells = c.thr_m * c.thr_n;
  pool.parallel_for(cells, [&](int ithr, int nthr) {
    float* pack = slot == 0 ? nullptr
                            : reinterpret_cast<float*>(static_cast<std::byte*>(scratchpad) +
                                                       slot * static_cast<std::size_t>(ithr));
    // A pool smaller than the grid gives some threads several cells.
    for (int cell = ithr; cell < cells; cell += nthr) {
      const range r = balance(rows, cell / c.thr_n, c.thr_m);
      const range cr = balance(nblocks, cell % c.thr_n, c.thr_n);
      if (r.begin >= r.end || cr.begin >= cr.end) continue;
      for (std::int64_t b = r.begin / mblocks; b * mblocks < r.end; ++b) {
        const std::int64_t mb0 = std::max(r.begin, b * mblocks) - b * mblocks;
        const std::int64_t mb1 = std::min(r.end, (b + 1) * mblocks) - b * mblocks;
        fn_(args.src, args.weights, args.bias, args.dst, args.binary_operands, pack, b, mb0, mb1,
            cr.begin, cr.end);
      }
    }
  });
}

result<bool> check_matmul_problem(const matmul_problem& p, bool for_reference) {
  if (auto bad = validate_problem(p, !for_reference)) return *bad;
  return true;
}

void matmul_reference(const matmul_problem& p, const matmul_args& args) {
  std::vector<float> operands(p.post_ops.size(), 0.f);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t i = 0; i < p.m; ++i) {
      for (std::int64_t j = 0; j < p.n; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          acc += static_cast<double>(
                     args.src[b * p.src_strides[0] + i * p.src_strides[1] + k * p.src_strides[2]]) *
                 args.weights[b * p.wei_strides[0] + k * p.wei_strides[1] + j * p.wei_strides[2]];
        }
        if (p.with_bias) acc += args.bias[j];
        const std::int64_t off = b * p.dst_strides[0] + i * p.dst_strides[1] + j * p.dst_strides[2];
        for (std::size_t o = 0; o < p.post_ops.size(); ++o) {
          const post_op& op = p.post_ops[o];
          if (op.what != post_op::kind::binary_add) continue;
          const float* x = args.binary_operands[op.binary.arg_index];
          operands[o] = op.binary.broadcast == binary_broadcast::none          ? x[off]
                        : op.binary.broadcast == binary_broadcast::per_channel ? x[j]
                                                                               : x[0];
        }
        args.dst[off] =
            apply_post_ops_reference(static_cast<float>(acc), p.post_ops, operands.data());
      }
    }
  }
}

}  // namespace primcache::cpu_internal
