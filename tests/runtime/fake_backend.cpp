#include "fake_backend.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>

#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/registry.hpp"

namespace fake {

std::atomic<int> creations{0};
std::atomic<int> last_nested_outcome{-1};
std::atomic<int> stream_waits{0};
std::atomic<int> identity_setting{0};
std::atomic<int> factory_calls_17{0};
std::atomic<int> load_failure{0};
std::atomic<int> loads{0};
std::atomic<bool> create_fails{false};

namespace {

using namespace primcache;
using namespace primcache::backend;

class fake_engine final : public engine_impl {
 public:
  explicit fake_engine(std::size_t index) : engine_impl(engine_kind::gpu, index) {}
  void write_identity(key_writer& w) const override {
    w.str("fake").u64(index()).u32(static_cast<std::uint32_t>(identity_setting.load()));
  }
  std::string describe() const override { return "fake"; }
  void* allocate(std::size_t bytes) const override { return std::malloc(bytes); }
  void deallocate(void* p) const noexcept override { std::free(p); }
  std::unique_ptr<stream_impl> create_stream() const override {
    struct counting_stream final : stream_impl {
      void wait() override { stream_waits.fetch_add(1); }
    };
    return std::make_unique<counting_stream>();
  }
};

class copy_pd_impl final : public primitive_desc_impl {
 public:
  copy_pd_impl(const primitive_attr& attr, reorder_op op, const char* name = "fake:copy")
      : primitive_desc_impl(primitive_kind::reorder, attr, name), op_(std::move(op)) {}
  memory_desc arg_md(int arg) const override {
    return arg == PRIMCACHE_ARG_FROM ? op_.src : arg == PRIMCACHE_ARG_TO ? op_.dst : memory_desc{};
  }
  void write_op_key(key_writer& w) const override {
    op_.src.write_key(w);
    op_.dst.write_key(w);
  }
  std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const override;
  const reorder_op& op() const { return op_; }

 protected:
  std::shared_ptr<const primitive_impl> load_impl(const engine& eng,
                                                  const impl_blob& blob) const override;

 private:
  reorder_op op_;
};

class copy_impl final : public primitive_impl {
 public:
  copy_impl(std::shared_ptr<const primitive_desc_impl> pd,
            std::shared_ptr<const primitive_impl> nested)
      : primitive_impl(std::move(pd)), nested_(std::move(nested)) {}
  void execute(const exec_ctx& ctx) const override {
    const void* src = ctx.arg_ptr(PRIMCACHE_ARG_FROM);
    void* dst = ctx.arg_ptr(PRIMCACHE_ARG_TO);
    if (src == nullptr || dst == nullptr) {
      throw error(status::invalid_arguments, "fake copy: src or dst missing");
    }
    const std::size_t bytes = pd().arg_md(PRIMCACHE_ARG_FROM).size_bytes();
    // Output scales are a run-time value: read from the executing
    // primitive's attributes, not from this (shared) impl's descriptor.
    const auto& scales = ctx.run_time_attr(pd()).get_output_scales();
    if (scales.empty()) {
      std::memcpy(dst, src, bytes);
      return;
    }
    const auto* in = static_cast<const float*>(src);
    auto* out = static_cast<float*>(dst);
    for (std::size_t i = 0; i < bytes / sizeof(float); ++i) out[i] = in[i] * scales[0];
  }
  std::vector<const primitive_impl*> nested() const override {
    if (!nested_) return {};
    return {nested_.get()};
  }
  std::vector<std::uint8_t> serialize() const override {
    if (pd().arg_md(PRIMCACHE_ARG_FROM).dims()[0] != 19) return primitive_impl::serialize();
    impl_blob b;
    b.name = pd().name();
    const auto k = pd().cache_key().bytes();
    b.key_bytes.assign(k.begin(), k.end());
    b.config = config();
    b.object = fake_object();
    return b.encode();
  }

  // The object code of a serializable copy.
  static std::vector<std::byte> fake_object() {
    const char text[] = "fake copy";
    const auto* p = reinterpret_cast<const std::byte*>(text);
    return {p, p + sizeof text};
  }

 private:
  std::shared_ptr<const primitive_impl> nested_;
};

std::shared_ptr<const primitive_impl> copy_pd_impl::load_impl(const engine& eng,
                                                              const impl_blob& blob) const {
  if (op_.src.dims()[0] != 19) return primitive_desc_impl::load_impl(eng, blob);
  loads.fetch_add(1);
  if (const int failure = load_failure.load(); failure == -1) {
    throw std::bad_alloc();
  } else if (failure == -2) {
    throw std::length_error("vector::reserve");
  } else if (failure == -3) {
    throw std::runtime_error("a fake loader's own exception");
  } else if (failure != 0) {
    throw error(static_cast<status>(failure), "fake loader failed as told");
  }
  if (blob.object != copy_impl::fake_object()) {
    throw error(status::corrupt_data, "fake loader: not a fake copy's object");
  }
  return std::make_shared<const copy_impl>(shared_from_this(), nullptr);
}

std::shared_ptr<const primitive_impl> copy_pd_impl::create_impl(const engine& eng) const {
  creations.fetch_add(1);
  const std::int64_t d0 = op_.src.dims()[0];
  if (d0 == 13) throw error(status::runtime_error, "fake compiler failed for 13");
  if (d0 == 19 && create_fails.load()) {
    throw error(status::runtime_error, "fake compiler failed as told");
  }
  if (d0 >= 100) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::shared_ptr<const primitive_impl> nested;
  if (d0 == 7 || d0 == 11) {
    // 11 nests itself: a creation asking for its own key.
    auto npd = copy_pd(d0 == 7 ? 8 : 11, op_.src.dims()[1]);
    auto r = create_nested_impl(backend::impl_of(npd), eng);
    last_nested_outcome.store(static_cast<int>(r.outcome));
    nested = std::move(r.value);
  }
  return std::make_shared<const copy_impl>(shared_from_this(), std::move(nested));
}

}  // namespace

std::shared_ptr<const primitive_desc_impl> copy_pd_impl_for(const primitive_attr& attr,
                                                            const reorder_op& op,
                                                            const engine_impl& eng,
                                                            const char* name) {
  auto pd = std::make_shared<copy_pd_impl>(attr, op, name);
  pd->finalize(eng, 1);
  return pd;
}

void install() {
  static const bool once = [] {
    register_engine_factory(
        engine_kind::gpu, [] { return std::size_t{2}; },
        [](std::size_t index) -> std::shared_ptr<const engine_impl> {
          return std::make_shared<const fake_engine>(index);
        });
    register_implementation(
        {"fake:copy", engine_kind::gpu, primitive_kind::reorder, 10,
         [](const op_desc& op, const primitive_attr& attr,
            const engine_impl& eng) -> result<std::shared_ptr<const primitive_desc_impl>> {
           const auto& r = std::get<reorder_op>(op);
           if (r.src.dims()[0] == 17 && factory_calls_17.fetch_add(1) == 0) {
             identity_setting.fetch_add(1);  // a setting changes while accepting
           }
           if (r.src.data_type() != data_type::f32 || !(r.src == r.dst)) {
             return failure{status::unimplemented, "fake copy only copies f32 as is"};
           }
           auto pd = std::make_shared<copy_pd_impl>(attr, r);
           pd->finalize(eng, 1);
           return std::shared_ptr<const primitive_desc_impl>(std::move(pd));
         }});
    return true;
  }();
  (void)once;
}

primcache::reorder::primitive_desc copy_pd(std::int64_t d0, std::int64_t d1) {
  install();
  primcache::engine eng(primcache::engine_kind::gpu, 0);
  primcache::memory::desc md({d0, d1}, primcache::data_type::f32, primcache::format_tag::ab);
  return primcache::reorder::primitive_desc(eng, md, eng, md);
}

}  // namespace fake
