#include "primcache/transform/kernel_type.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

#include "primcache/base/error.hpp"

namespace primcache {
namespace {

[[noreturn]] void bad(const std::string& message) {
  throw error(status::invalid_arguments, message);
}

bool parse_size(std::string_view text, std::int64_t& out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && p == end && !text.empty();
}

// A device index: every std::size_t, as place::to_string prints it.
bool parse_index(std::string_view text, std::size_t& out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && p == end && !text.empty();
}

// The concrete tags, in enum order: the plain ones first, then the blocked
// ones (the aliases share these values).
constexpr int first_tag = static_cast<int>(format_tag::a);
constexpr int last_tag = static_cast<int>(format_tag::aBCde16c16b);

void mix(std::size_t& seed, std::size_t v) noexcept {
  seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

}  // namespace

// ---- place ------------------------------------------------------------------

std::string place::to_string() const {
  if (kind == engine_kind::cpu) return index == 0 ? "cpu" : "cpu:" + std::to_string(index);
  return "gpu:" + std::to_string(index);
}

place place::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  const auto colon = text.find(':');
  std::size_t n = 0;
  if (colon != std::string_view::npos && parse_index(text.substr(colon + 1), n)) {
    const std::string_view kind = text.substr(0, colon);
    if (kind == "gpu") return gpu(n);
    if (kind == "cpu") return {engine_kind::cpu, n};
  }
  bad("place '" + std::string(text) + "' is not cpu, cpu:N or gpu:N");
}

// ---- layout -----------------------------------------------------------------

layout::layout(format_tag tag) noexcept
    // Canonical form: an alias is the same enumerator value already.
    : tag_(tag) {}

layout layout::strided(std::vector<std::int64_t> strides) {
  if (strides.empty() || strides.size() > static_cast<std::size_t>(max_ndims)) {
    bad("a strided layout needs 1 to " + std::to_string(max_ndims) + " strides, got " +
        std::to_string(strides.size()));
  }
  // As memory_desc refuses them, and parse.
  for (std::size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] < 0) {
      bad("a strided layout's strides must not be negative: stride " + std::to_string(d) + " is " +
          std::to_string(strides[d]));
    }
  }
  layout l;
  l.strides_ = std::move(strides);
  return l;
}

layout layout::of(const memory_desc& md) {
  if (!md.is_blocked()) bad("memory descriptor " + md.to_string() + " has no resolved layout");
  for (int t = first_tag; t <= last_tag; ++t) {
    const auto tag = static_cast<format_tag>(t);
    if (ndims_of(tag) == md.ndims() && md.matches(tag)) return layout(tag);
  }
  if (!md.is_plain()) {
    bad("memory descriptor " + md.to_string() + " is blocked in a way no format tag names");
  }
  return strided({md.strides().begin(), md.strides().end()});
}

int layout::ndims() const noexcept {
  return is_tag() ? ndims_of(tag_) : static_cast<int>(strides_.size());
}

memory_desc layout::desc_for(dims_view dims, data_type dt) const {
  if (is_tag()) {
    if (tag_ == format_tag::undef || tag_ == format_tag::any) {
      bad("layout " + to_string() + " cannot describe memory");
    }
    if (ndims_of(tag_) != static_cast<int>(dims.size())) {
      bad("layout " + to_string() + " has " + std::to_string(ndims_of(tag_)) +
          " dimensions, the tensor " + std::to_string(dims.size()));
    }
    return memory_desc(dims, dt, tag_);
  }
  if (strides_.size() != dims.size()) {
    bad("layout " + to_string() + " has " + std::to_string(strides_.size()) +
        " strides, the tensor " + std::to_string(dims.size()) + " dimensions");
  }
  return memory_desc(dims, dt, dims_view(strides_));
}

std::string layout::to_string() const {
  if (is_tag()) return std::string(primcache::to_string(tag_));
  std::string s = "s";
  for (std::size_t i = 0; i < strides_.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(strides_[i]);
  }
  return s;
}

layout layout::parse(std::string_view text) {
  if (text == "undef") return layout();
  if (auto tag = parse_format_tag(text)) return layout(*tag);
  if (text.size() > 1 && text[0] == 's') {
    std::vector<std::int64_t> strides;
    std::string_view rest = text.substr(1);
    bool ok = true;
    while (ok) {
      const auto comma = rest.find(',');
      std::int64_t v = 0;
      ok = parse_size(rest.substr(0, comma), v) && v >= 0;
      if (ok) strides.push_back(v);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    if (ok && !strides.empty() && strides.size() <= static_cast<std::size_t>(max_ndims)) {
      return strided(std::move(strides));
    }
  }
  bad("layout '" + std::string(text) + "' is neither a format tag nor s<stride>,<stride>,...");
}

// ---- library ----------------------------------------------------------------

std::string library::problem() const {
  if (name.empty()) return "the library name is empty";
  if (name.find('/') != std::string::npos) return "the library name '" + name + "' contains '/'";
  return {};
}

// ---- kernel_type ------------------------------------------------------------

kernel_type kernel_type::of(const memory& mem, primcache::library lib) {
  if (!mem) bad("kernel_type::of: the memory is empty");
  const memory_desc& md = mem.get_desc();
  return {place::of(mem.get_engine()), md.data_type(), layout::of(md), std::move(lib)};
}

namespace {

bool is_integer(data_type dt) {
  return dt == data_type::s8 || dt == data_type::u8 || dt == data_type::s32;
}

// The shortest text that reads back as the same float.
std::string scale_text(float scale) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, scale);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(scale);
}

}  // namespace

std::string kernel_type::scale_problem() const {
  if (!std::isfinite(scale) || !(scale > 0.f)) {
    return "scale " + scale_text(scale) + " is not a finite positive number";
  }
  if (scale != 1.f && !is_integer(data_type)) {
    return "scale " + scale_text(scale) + " on " + std::string(primcache::to_string(data_type)) +
           " data (only s8, u8 and s32 carry a scale)";
  }
  return {};
}

std::string kernel_type::to_string() const {
  std::string dt(primcache::to_string(data_type));
  if (scale != 1.f) {
    dt.push_back('*');
    dt += scale_text(scale);
  }
  return place.to_string() + "/" + dt + "/" + layout.to_string() + "/" + library.name;
}

kernel_type kernel_type::parse(std::string_view text) {
  std::string_view parts[4];
  std::string_view rest = text;
  for (int i = 0; i < 4; ++i) {
    const auto slash = rest.find('/');
    if ((slash == std::string_view::npos) != (i == 3)) {
      bad("kernel type '" + std::string(text) + "' is not <place>/<data type>/<layout>/<library>");
    }
    parts[i] = rest.substr(0, slash);
    if (slash != std::string_view::npos) rest = rest.substr(slash + 1);
  }
  kernel_type t;
  try {
    t.place = place::parse(parts[0]);
    if (const auto star = parts[1].find('*'); star != std::string_view::npos) {
      const std::string_view number = parts[1].substr(star + 1);
      const char* end = number.data() + number.size();
      auto [p, ec] = std::from_chars(number.data(), end, t.scale);
      if (ec != std::errc() || p != end || number.empty()) {
        bad("scale '" + std::string(number) + "' is not a number");
      }
      parts[1] = parts[1].substr(0, star);
    }
    if (parts[1] == "undef") {
      t.data_type = data_type::undef;
    } else if (auto dt = parse_data_type(parts[1])) {
      t.data_type = *dt;
    } else {
      bad("'" + std::string(parts[1]) + "' is not a data type");
    }
    if (auto why = t.scale_problem(); !why.empty()) bad(why);
    t.layout = layout::parse(parts[2]);
    t.library = {std::string(parts[3])};
    if (auto why = t.library.problem(); !why.empty()) bad(why);
  } catch (const error& e) {
    bad("kernel type '" + std::string(text) + "': " + e.message());
  }
  return t;
}

std::size_t kernel_type::hash() const noexcept {
  std::size_t seed = std::hash<int>()(static_cast<int>(place.kind));
  mix(seed, place.index);
  mix(seed, static_cast<std::size_t>(data_type));
  mix(seed, static_cast<std::size_t>(layout.tag()));
  for (std::int64_t s : layout.strides()) mix(seed, static_cast<std::size_t>(s));
  mix(seed, std::hash<std::string>()(library.name));
  std::uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  mix(seed, scale_bits);
  return seed;
}

}  // namespace primcache
