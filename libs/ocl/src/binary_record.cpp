#include "binary_record.hpp"

#include <cstdint>
#include <cstring>

#include "primcache/keyhash/key.hpp"

namespace primcache::ocl_internal {
namespace {

constexpr char kMagic[8] = {'P', 'C', 'O', 'C', 'L', 'B', 'I', 'N'};
// 2: the identity carries `versions`.
constexpr std::uint32_t kVersion = 2;

digest128 source_digest(const std::string& source) {
  return key(std::as_bytes(std::span<const char>(source.data(), source.size()))).digest();
}

class reader {
 public:
  explicit reader(std::span<const std::byte> b) : b_(b) {}
  template <typename U>
  bool le(U& v) {
    if (sizeof(U) > b_.size() - pos_) return false;
    std::uint64_t x = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      x |= std::uint64_t{std::to_integer<std::uint8_t>(b_[pos_ + i])} << (8 * i);
    }
    v = static_cast<U>(x);
    pos_ += sizeof(U);
    return true;
  }
  bool str(std::string& s) {
    std::uint32_t n = 0;
    if (!le(n) || n > b_.size() - pos_) return false;
    s.assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool bytes(program_binary& v) {
    std::uint64_t n = 0;
    if (!le(n) || n > b_.size() - pos_) return false;
    v.resize(static_cast<std::size_t>(n));
    if (n) std::memcpy(v.data(), b_.data() + pos_, v.size());
    pos_ += v.size();
    return true;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  std::span<const std::byte> b_;
  std::size_t pos_ = 0;
};

failure corrupt(const std::string& why) {
  return failure{status::corrupt_data, "the OpenCL binary record " + why};
}

std::string describe(const device_identity& id) {
  return "device '" + id.device + "' (platform '" + id.platform + "', driver '" + id.driver +
         "', versions '" + id.versions + "')";
}

}  // namespace

device_identity device_identity::of(const device_entry& dev) {
  return {dev.platform_name, dev.device_name, dev.driver_version, dev.versions};
}

std::vector<std::byte> write_binary_record(const device_identity& id, const std::string& source,
                                           const program_binary& binary) {
  key_writer w;
  w.raw(std::as_bytes(std::span<const char>(kMagic, sizeof kMagic)));
  w.u32(kVersion).str(id.platform).str(id.device).str(id.driver).str(id.versions);
  const digest128 d = source_digest(source);
  w.u64(d.low).u64(d.high);
  w.u64(binary.size());
  const key head = w.finish();
  std::vector<std::byte> out(head.bytes().begin(), head.bytes().end());
  const auto* b = reinterpret_cast<const std::byte*>(binary.data());
  out.insert(out.end(), b, b + binary.size());
  return out;
}

result<program_binary> read_binary_record(std::span<const std::byte> record,
                                          const device_identity& id, const std::string& source) {
  if (record.size() < sizeof kMagic || std::memcmp(record.data(), kMagic, sizeof kMagic) != 0) {
    return corrupt("does not start with its magic (not an OpenCL primitive's binary)");
  }
  reader r(record.subspan(sizeof kMagic));
  std::uint32_t version = 0;
  if (!r.le(version)) return corrupt("is truncated");
  if (version != kVersion) {
    return failure{status::unimplemented, "the OpenCL binary record has version " +
                                              std::to_string(version) + "; this library reads " +
                                              std::to_string(kVersion)};
  }
  device_identity made_for;
  digest128 digest;
  program_binary binary;
  if (!r.str(made_for.platform) || !r.str(made_for.device) || !r.str(made_for.driver) ||
      !r.str(made_for.versions) || !r.le(digest.low) || !r.le(digest.high)) {
    return corrupt("is truncated in its header");
  }
  if (!r.bytes(binary)) return corrupt("is truncated in its binary");
  if (!r.done()) return corrupt("has unexpected bytes after the binary");
  if (!(made_for == id)) {
    return failure{status::invalid_arguments, "the OpenCL binary was built for " +
                                                  describe(made_for) + ", not for this engine's " +
                                                  describe(id)};
  }
  if (!(digest == source_digest(source))) {
    return failure{status::invalid_arguments,
                   "the OpenCL binary was built from other OpenCL C source than this descriptor "
                   "generates (another version of the kernel generator)"};
  }
  if (binary.empty()) return corrupt("holds an empty binary");
  return binary;
}

}  // namespace primcache::ocl_internal
