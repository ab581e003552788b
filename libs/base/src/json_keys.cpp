#include "primcache/base/json_keys.hpp"

#include <cstdint>
#include <functional>
#include <unordered_set>
#include <vector>

namespace primcache {
namespace {

// Objects with more keys than this look a new key up in a hash index; the
// smaller ones (nearly all) compare it with each earlier key.
constexpr std::size_t kIndexFrom = 16;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {  // a lone surrogate too, as its three bytes
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// One pass over the text with an explicit stack: no recursion, each byte
// read once (a \u escape's digits twice at most).
class scanner {
 public:
  explicit scanner(std::string_view text) : text_(text) {}
  // index_'s functors point at this scanner.
  scanner(const scanner&) = delete;
  scanner& operator=(const scanner&) = delete;

  std::optional<duplicate_json_key> run() {
    if (!document()) return std::nullopt;
    return std::move(found_);
  }

 private:
  // An open object or array, in 8 bytes (a level of nesting costs memory
  // and page faults, and a text may nest a million deep): an object has
  // read `count` keys, an array begun `count` elements.
  struct frame {
    std::size_t count : 62;
    std::size_t object : 1;
    std::size_t indexed : 1;  // the object's keys are in index_
  };
  // A key of an open object: its unescaped bytes are arena_[offset, the
  // next key's offset or the arena's end). keys_ holds the keys of every
  // open object, outermost first, each object's together: the top object's
  // are the last `count`.
  struct key_ref {
    std::size_t offset;
    std::size_t hash;   // of the bytes and the depth
    std::size_t depth;  // the index of its object in stack_
  };
  struct index_hash {
    const scanner* s;
    std::size_t operator()(std::size_t k) const noexcept { return s->keys_[k].hash; }
  };
  struct index_equal {
    const scanner* s;
    bool operator()(std::size_t a, std::size_t b) const noexcept {
      return s->keys_[a].depth == s->keys_[b].depth && s->key_text(a) == s->key_text(b);
    }
  };

  std::string_view key_text(std::size_t k) const noexcept {
    const std::size_t end = k + 1 < keys_.size() ? keys_[k + 1].offset : arena_.size();
    return std::string_view(arena_).substr(keys_[k].offset, end - keys_[k].offset);
  }

  bool at_end() const noexcept { return pos_ >= text_.size(); }
  char peek() const noexcept { return text_[pos_]; }
  void skip_space() noexcept {
    while (!at_end() && is_space(peek())) ++pos_;
  }

  // The whole text: one value, whitespace around it.
  bool document() {
    skip_space();
    for (;;) {
      // A value starts at pos_ (whitespace skipped).
      if (at_end()) return false;
      const char c = peek();
      if (c == '{' || c == '[') {
        ++pos_;
        skip_space();
        stack_.push_back(frame{0, c == '{', false});
        if (!at_end() && peek() == (c == '{' ? '}' : ']')) {
          ++pos_;
          close();
        } else if (c == '[') {
          stack_.back().count = 1;
          continue;  // its first element
        } else if (!member()) {
          return false;
        } else {
          continue;  // the member's value
        }
      } else if (c == '"') {
        if (!string(nullptr)) return false;
      } else if (c == '-' || is_digit(c)) {
        if (!number()) return false;
      } else if (!literal()) {
        return false;
      }
      // A value ended: close what it ends, then find where the next starts.
      for (;;) {
        skip_space();
        if (stack_.empty()) return at_end();
        if (at_end()) return false;
        frame& f = stack_.back();
        const char d = peek();
        ++pos_;
        if (d == ',') {
          skip_space();
          if (f.object) {
            if (!member()) return false;
          } else {
            ++f.count;
          }
          break;
        }
        if (d != (f.object ? '}' : ']')) return false;
        close();
      }
    }
  }

  // At an object's key: reads it, checks it against the object's other
  // keys, and reads up to its value.
  bool member() {
    if (at_end() || peek() != '"') return false;
    const std::size_t start = pos_;
    if (found_) {
      if (!string(nullptr)) return false;
    } else {
      const std::size_t offset = arena_.size();
      if (!string(&arena_)) return false;
      add_key(offset, start);
    }
    ++stack_.back().count;
    skip_space();
    if (at_end() || peek() != ':') return false;
    ++pos_;
    skip_space();
    return true;
  }

  // Records the key now at arena_[offset, end) in the top object, or finds
  // it there already.
  void add_key(std::size_t offset, std::size_t start) {
    frame& f = stack_.back();
    const std::size_t depth = stack_.size() - 1;
    const std::string_view text = std::string_view(arena_).substr(offset);
    // The depth is in the hash: nested indexed objects that share their
    // keys would otherwise fill one bucket chain with them.
    const std::size_t hash =
        std::hash<std::string_view>{}(text) ^ (depth * std::size_t{0x9E3779B97F4A7C15});
    const std::size_t first = keys_.size() - f.count;  // the object's first key
    keys_.push_back(key_ref{offset, hash, depth});
    const std::size_t k = keys_.size() - 1;
    bool repeated = false;
    if (f.indexed) {
      repeated = !index_.insert(k).second;
    } else {
      for (std::size_t i = first; i < k && !repeated; ++i) {
        repeated = keys_[i].hash == keys_[k].hash && key_text(i) == text;
      }
      if (!repeated && k + 1 - first >= kIndexFrom) {
        for (std::size_t i = first; i <= k; ++i) index_.insert(i);
        f.indexed = true;
      }
    }
    if (!repeated) return;
    duplicate_json_key d;
    d.key = std::string(text);
    d.offset = start;
    std::size_t up_first = 0;  // the first key of stack_[i]
    for (std::size_t i = 0; i < depth; ++i) {
      const frame& up = stack_[i];
      d.object_pointer += '/';
      if (!up.object) {
        d.object_pointer += std::to_string(up.count - 1);
        continue;
      }
      up_first += up.count;
      for (char c : key_text(up_first - 1)) {
        if (c == '~') {
          d.object_pointer += "~0";
        } else if (c == '/') {
          d.object_pointer += "~1";
        } else {
          d.object_pointer += c;
        }
      }
    }
    found_ = std::move(d);
    // The rest of the text is only checked for being JSON.
    index_.clear();
    keys_.clear();
    arena_.clear();
  }

  // Pops the top frame, forgetting its keys (none are kept once a
  // duplicate is found).
  void close() {
    const frame f = stack_.back();
    stack_.pop_back();
    if (found_ || !f.object || f.count == 0) return;
    const std::size_t first = keys_.size() - f.count;
    if (f.indexed) {
      for (std::size_t i = first; i < keys_.size(); ++i) index_.erase(i);
    }
    arena_.resize(keys_[first].offset);
    keys_.resize(first);
  }

  // A string at pos_ (its opening quote); its unescaped bytes appended to
  // `out` unless null.
  bool string(std::string* out) {
    ++pos_;
    for (;;) {
      if (at_end()) return false;
      const char c = peek();
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        // Unescaped bytes run to the next quote, backslash or control.
        std::size_t end = pos_ + 1;
        while (end < text_.size() && text_[end] != '"' && text_[end] != '\\' &&
               static_cast<unsigned char>(text_[end]) >= 0x20) {
          ++end;
        }
        if (out) out->append(text_.substr(pos_, end - pos_));
        pos_ = end;
        continue;
      }
      ++pos_;
      if (at_end()) return false;
      const char e = peek();
      ++pos_;
      char plain = 0;
      switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!hex4(pos_, cp)) return false;
          pos_ += 4;
          std::uint32_t low = 0;
          // A high surrogate and a low one after it are one character.
          if (cp >= 0xD800 && cp <= 0xDBFF && pos_ + 1 < text_.size() && text_[pos_] == '\\' &&
              text_[pos_ + 1] == 'u' && hex4(pos_ + 2, low) && low >= 0xDC00 && low <= 0xDFFF) {
            pos_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          if (out) append_utf8(*out, cp);
          continue;
        }
        default: return false;
      }
      if (out) *out += plain;
    }
  }

  // Four hex digits at `at`.
  bool hex4(std::size_t at, std::uint32_t& value) const noexcept {
    if (at > text_.size() || text_.size() - at < 4) return false;
    value = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      const int v = hex_value(text_[at + i]);
      if (v < 0) return false;
      value = value * 16 + static_cast<std::uint32_t>(v);
    }
    return true;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  bool number() noexcept {
    if (peek() == '-') ++pos_;
    if (at_end()) return false;
    if (peek() == '0') {
      ++pos_;
    } else if (!digits()) {
      return false;
    }
    if (!at_end() && peek() == '.') {
      ++pos_;
      if (!digits()) return false;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digits()) return false;
    }
    return true;
  }
  // One digit or more.
  bool digits() noexcept {
    const std::size_t start = pos_;
    while (!at_end() && is_digit(peek())) ++pos_;
    return pos_ > start;
  }

  bool literal() noexcept {
    for (std::string_view word : {"true", "false", "null"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return true;
      }
    }
    return false;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::vector<frame> stack_;
  std::string arena_;          // the open objects' keys, unescaped, end to end
  std::vector<key_ref> keys_;  // the open objects' keys, each object's together
  std::unordered_set<std::size_t, index_hash, index_equal> index_{0, index_hash{this},
                                                                  index_equal{this}};
  std::optional<duplicate_json_key> found_;
};

}  // namespace

std::optional<duplicate_json_key> find_duplicate_json_key(std::string_view json_text) {
  return scanner(json_text).run();
}

}  // namespace primcache
