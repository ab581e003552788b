// The byte format of a serialized primitive impl (primitive_impl.hpp).
#include <cstring>
#include <limits>
#include <string>

#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/version.hpp"

namespace primcache::backend {
namespace {

constexpr char kMagic[8] = {'P', 'C', 'I', 'M', 'P', 'L', '\0', '\0'};
constexpr std::size_t kDigestBytes = 16;

class writer {
 public:
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  template <typename U>
  void le(U v) {
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      out_.push_back(static_cast<std::uint8_t>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
    }
  }
  void str(const std::string& s) {
    le<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void blob(const void* p, std::size_t n) {
    le<std::uint64_t>(n);
    bytes(p, n);
  }
  std::vector<std::uint8_t>& out() { return out_; }

 private:
  std::vector<std::uint8_t> out_;
};

// Reads within the bytes before the digest; every read checks the length.
class reader {
 public:
  explicit reader(std::span<const std::uint8_t> b) : b_(b) {}
  bool bytes(void* p, std::size_t n) {
    if (n > b_.size() - pos_) return false;
    if (n) std::memcpy(p, b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename U>
  bool le(U& v) {
    if (sizeof(U) > b_.size() - pos_) return false;
    std::uint64_t x = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) x |= std::uint64_t{b_[pos_ + i]} << (8 * i);
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
  template <typename Byte>
  bool blob(std::vector<Byte>& v) {
    std::uint64_t n = 0;
    if (!le(n) || n > b_.size() - pos_) return false;
    v.resize(static_cast<std::size_t>(n));
    return bytes(v.data(), v.size());
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  std::span<const std::uint8_t> b_;
  std::size_t pos_ = 0;
};

digest128 digest_of(std::span<const std::uint8_t> bytes) {
  return key(std::as_bytes(bytes)).digest();
}

failure corrupt(const std::string& why) {
  return failure{status::corrupt_data, "the primitive blob " + why};
}

}  // namespace

std::string impl_blob::this_library() {
  const version_info& v = version();
  return std::string(v.version) + "+" + v.build_identity;
}

std::vector<std::uint8_t> impl_blob::encode() const {
  writer w;
  w.bytes(kMagic, sizeof kMagic);
  w.le<std::uint32_t>(format_version);
  w.str(producer);
  w.str(name);
  w.blob(key_bytes.data(), key_bytes.size());
  w.le<std::uint32_t>(static_cast<std::uint32_t>(isa));
  w.le<std::uint8_t>(config ? 1 : 0);
  if (config) {
    w.le<std::uint32_t>(static_cast<std::uint32_t>(config->fields().size()));
    for (const auto& f : config->fields()) {
      w.str(f.name);
      w.le<std::uint64_t>(static_cast<std::uint64_t>(f.value));
    }
  }
  w.blob(object.data(), object.size());
  w.le<std::uint32_t>(static_cast<std::uint32_t>(nested.size()));
  for (const auto& n : nested) w.blob(n.data(), n.size());
  const digest128 d = digest_of(w.out());
  w.le<std::uint64_t>(d.low);
  w.le<std::uint64_t>(d.high);
  return std::move(w.out());
}

result<impl_blob> impl_blob::decode(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return corrupt("does not start with the blob magic (not a primitive blob)");
  }
  if (bytes.size() < sizeof kMagic + 4 + kDigestBytes) return corrupt("is truncated");
  // The version first: a blob of another format is reported as such, even
  // if its checksum is laid out differently.
  std::uint32_t version = 0;
  for (int i = 0; i < 4; ++i) version |= std::uint32_t{bytes[sizeof kMagic + i]} << (8 * i);
  if (version != format_version) {
    return failure{status::unimplemented, "the primitive blob has format version " +
                                              std::to_string(version) + "; this library reads " +
                                              std::to_string(format_version)};
  }
  const auto body = bytes.first(bytes.size() - kDigestBytes);
  reader tail(bytes.last(kDigestBytes));
  digest128 stored;
  tail.le(stored.low);
  tail.le(stored.high);
  if (!(digest_of(body) == stored)) {
    return corrupt("fails its checksum (truncated or altered bytes)");
  }
  reader r(body.subspan(sizeof kMagic + 4));
  impl_blob b;
  if (!r.str(b.producer)) return corrupt("is truncated in its header");
  if (const std::string here = this_library(); b.producer != here) {
    return failure{status::invalid_arguments,
                   "the primitive blob was made by primcache " + b.producer +
                       ", not by this library (" + here +
                       "): a blob loads only in the library version and build that made it"};
  }
  std::uint32_t isa = 0;
  std::uint8_t has_config = 0;
  if (!r.str(b.name) || !r.blob(b.key_bytes) || !r.le(isa) || !r.le(has_config)) {
    return corrupt("is truncated in its header");
  }
  b.isa = static_cast<std::int32_t>(isa);
  if (has_config > 1) return corrupt("has a malformed configuration flag");
  if (has_config) {
    std::uint32_t n = 0;
    if (!r.le(n)) return corrupt("is truncated in its configuration");
    kernel_config c;
    for (std::uint32_t i = 0; i < n; ++i) {
      std::string name;
      std::uint64_t value = 0;
      if (!r.str(name) || !r.le(value)) return corrupt("is truncated in its configuration");
      try {
        c.add(name, static_cast<std::int64_t>(value));
      } catch (const error& e) {
        return corrupt("has a malformed configuration: " + e.message());
      }
    }
    b.config = std::move(c);
  }
  std::uint32_t nested = 0;
  if (!r.blob(b.object) || !r.le(nested)) return corrupt("is truncated in its object code");
  for (std::uint32_t i = 0; i < nested; ++i) {
    std::vector<std::uint8_t> n;
    if (!r.blob(n)) return corrupt("is truncated in its nested blobs");
    b.nested.push_back(std::move(n));
  }
  if (!r.done()) return corrupt("has unexpected bytes after its parts");
  return b;
}

}  // namespace primcache::backend
