// The runtime's side of kernel configurations and blobs: the shared
// configuration form and its JSON, candidate spaces, the blob format, and
// what implementations without configurations or blobs (the fake backend)
// get by default.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fake_backend.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using backend::config_space;
using backend::impl_blob;
using backend::kernel_config;

TEST_CASE("a kernel configuration round-trips through JSON", "[runtime][config][json]") {
  kernel_config c;
  c.add("mr", 8).add("nr", 48).add("kc", -3).add("big", 9223372036854775807LL);
  c.add("small", -9223372036854775807LL - 1);
  const std::string json = c.to_json();
  CHECK(json ==
        R"({"mr":8,"nr":48,"kc":-3,"big":9223372036854775807,"small":-9223372036854775808})");
  auto back = kernel_config::from_json(json);
  REQUIRE(back.has_value());
  CHECK(back.value() == c);
  CHECK(back.value().get("nr") == 48);
  CHECK_FALSE(back.value().get("nope").has_value());
  SECTION("whitespace between tokens is allowed") {
    auto spaced = kernel_config::from_json(
        " {\n \"mr\" : 8 ,\t\"nr\":48,\"kc\":-3,"
        "\"big\":9223372036854775807,"
        "\"small\":-9223372036854775808 }\n");
    REQUIRE(spaced.has_value());
    CHECK(spaced.value() == c);
  }
  SECTION("the empty object is the empty configuration") {
    CHECK(kernel_config::from_json("{}").value().empty());
    CHECK(kernel_config().to_json() == "{}");
  }
  SECTION("field order matters to equality and to the key") {
    kernel_config a, b;
    a.add("x", 1).add("y", 2);
    b.add("y", 2).add("x", 1);
    CHECK_FALSE(a == b);
    key_writer wa, wb;
    a.write_key(wa);
    b.write_key(wb);
    CHECK_FALSE(wa.finish() == wb.finish());
  }
}

TEST_CASE("malformed configuration JSON is refused with the offset and the reason",
          "[runtime][config][json]") {
  const auto [text, says] = GENERATE(table<const char*, const char*>({
      {"", "expected '{'"},
      {"[1]", "expected '{'"},
      {"{\"mr\":8", "expected ',' or '}'"},
      {"{\"mr\" 8}", "expected ':'"},
      {"{mr:8}", "double quotes"},
      {"{\"mr\":8,}", "double quotes"},
      {"{\"mr\":\"8\"}", "expected an integer"},
      {"{\"mr\":8.5}", "no fraction"},
      {"{\"mr\":1e3}", "no fraction"},
      {"{\"mr\":08}", "leading zeros"},
      {"{\"mr\":-}", "expected an integer"},
      {"{\"mr\":9223372036854775808}", "64-bit range"},
      {"{\"mr\":-9223372036854775809}", "64-bit range"},
      {"{\"mr\":true}", "expected an integer"},
      {"{\"mr\":8,\"mr\":9}", "appears twice"},
      {"{\"M R\":8}", "is not [a-z0-9_]+"},
      {"{\"m\\u0072\":8}", "escapes"},
      {"{\"mr\":8} x", "unexpected text"},
      {"{\"mr\":8}{}", "unexpected text"},
      {"{\"mr", "unterminated"},
  }));
  INFO(text);
  auto r = kernel_config::from_json(text);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.why().code == status::invalid_arguments);
  CHECK_THAT(r.why().message, Catch::Contains("offset") && Catch::Contains(says));
}

TEST_CASE("expect names the missing, unknown or misplaced field", "[runtime][config]") {
  kernel_config c;
  c.add("a", 1).add("b", 2);
  CHECK(c.expect({"a", "b"}).has_value());
  CHECK_THAT(c.expect({"a", "b", "c"}).why().message, Catch::Contains("no field 'c'"));
  CHECK_THAT(c.expect({"a"}).why().message, Catch::Contains("unknown field 'b'"));
  CHECK_THAT(c.expect({"b", "a"}).why().message, Catch::Contains("out of order"));
  SECTION("add refuses bad and repeated names") {
    CHECK_THROWS_AS(c.add("a", 3), error);
    CHECK_THROWS_AS(c.add("", 3), error);
    CHECK_THROWS_AS(c.add("A", 3), error);
    CHECK(c.fields().size() == 2);
  }
}

TEST_CASE("a config space makes its candidates on demand", "[runtime][config][space]") {
  const config_space empty;
  CHECK(empty.empty());
  CHECK_THROWS_AS(empty.at(0), error);
  int made = 0;
  const config_space big(std::uint64_t{1} << 40, [&](std::uint64_t i) {
    ++made;
    return kernel_config().add("i", static_cast<std::int64_t>(i));
  });
  CHECK(big.size() == std::uint64_t{1} << 40);
  CHECK(made == 0);
  CHECK(big.at(12345).get("i") == 12345);
  CHECK(made == 1);
  CHECK_THROWS_AS(big.at(std::uint64_t{1} << 40), error);
  const auto listed = config_space::of({kernel_config().add("x", 1), kernel_config().add("x", 2)});
  CHECK(listed.size() == 2);
  CHECK(listed.at(1).get("x") == 2);
}

namespace {

impl_blob a_blob() {
  impl_blob b;
  b.name = "test:impl";
  b.key_bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
  b.isa = 4;
  b.config = kernel_config().add("mr", 8).add("pack_b", 1);
  b.object.assign(300, std::byte{0x5a});
  impl_blob nested;
  nested.name = "test:nested";
  b.nested = {nested.encode()};
  return b;
}

}  // namespace

TEST_CASE("the blob format round-trips and refuses damaged bytes", "[runtime][blob]") {
  const impl_blob b = a_blob();
  const auto bytes = b.encode();
  auto back = impl_blob::decode(bytes);
  REQUIRE(back.has_value());
  CHECK(back.value().name == b.name);
  CHECK(back.value().key_bytes == b.key_bytes);
  CHECK(back.value().isa == 4);
  CHECK(back.value().config == b.config);
  CHECK(back.value().object == b.object);
  REQUIRE(back.value().nested.size() == 1);
  CHECK(impl_blob::decode(back.value().nested[0]).value().name == "test:nested");
  CHECK_FALSE(impl_blob::decode(back.value().nested[0]).value().config.has_value());

  SECTION("every truncation is corrupt_data") {
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      auto r = impl_blob::decode(std::span(bytes.data(), n));
      REQUIRE_FALSE(r.has_value());
      CHECK(r.why().code == status::corrupt_data);
    }
  }
  SECTION("every flipped byte is refused") {
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      auto bad = bytes;
      bad[i] ^= 0x01;
      auto r = impl_blob::decode(bad);
      REQUIRE_FALSE(r.has_value());
      // Bytes 8..11 are the format version: another version is unimplemented.
      CHECK(r.why().code == (i >= 8 && i < 12 ? status::unimplemented : status::corrupt_data));
    }
  }
  SECTION("a blob another library version or build made is refused, naming both") {
    CHECK(b.producer == impl_blob::this_library());
    CHECK(back.value().producer == b.producer);
    for (const std::string& other :
         {impl_blob::this_library() + "0", std::string("0.0.9+0"), std::string()}) {
      impl_blob foreign = a_blob();
      foreign.producer = other;
      auto r = impl_blob::decode(foreign.encode());
      REQUIRE_FALSE(r.has_value());
      CHECK(r.why().code == status::invalid_arguments);
      CHECK_THAT(r.why().message, Catch::Contains("made by primcache " + other + ", not by") &&
                                      Catch::Contains(impl_blob::this_library()));
    }
  }
  SECTION("a trailing byte is refused") {
    auto longer = bytes;
    longer.push_back(0);
    CHECK_FALSE(impl_blob::decode(longer).has_value());
  }
}

TEST_CASE("implementations without configurations or blobs keep working as before",
          "[runtime][config][blob]") {
  fake::install();
  const auto pd = fake::copy_pd(3);
  const auto& impl = backend::impl_of(pd);
  CHECK_FALSE(impl.config().has_value());
  CHECK(impl.problem_key() == impl.cache_key());
  CHECK(impl.config_candidates().empty());
  CHECK(impl.validate_config(kernel_config()).why().code == status::unimplemented);
  try {
    (void)impl.create_impl_with(engine(engine_kind::gpu, 0), kernel_config());
    FAIL("created");
  } catch (const error& e) {
    CHECK(e.code() == status::unimplemented);
  }

  SECTION("the config source is not asked for them") {
    int asked = 0;
    backend::set_config_source([&](const backend::primitive_desc_impl&) {
      ++asked;
      return kernel_config().add("x", 1);
    });
    const auto again = fake::copy_pd(3);
    backend::set_config_source({});
    CHECK(asked == 0);
    CHECK(backend::impl_of(again).cache_key() == impl.cache_key());
  }
  SECTION("a primitive that cannot serialize says so") {
    const primitive p(pd);
    try {
      (void)p.cache_blob();
      FAIL("serialized");
    } catch (const error& e) {
      CHECK(e.code() == status::unimplemented);
      CHECK_THAT(e.message(), Catch::Contains("fake:copy"));
    }
  }
  SECTION("a blob for it is refused after the checks, never loaded") {
    set_primitive_cache_capacity(0);
    set_primitive_cache_capacity(1024);
    impl_blob b;
    b.name = "fake:copy";
    const auto k = impl.cache_key().bytes();
    b.key_bytes.assign(k.begin(), k.end());
    const int before = fake::creations.load();
    try {
      primitive p(pd, b.encode());
      FAIL("loaded");
    } catch (const error& e) {
      CHECK(e.code() == status::unimplemented);
      CHECK_THAT(e.message(), Catch::Contains("not serializable"));
    }
    CHECK(fake::creations.load() == before);
    CHECK_FALSE(primitive_cache_contains(pd));
    SECTION("another implementation's blob names the mismatch") {
      b.name = "fake:other";
      CHECK_THROWS_WITH(primitive(pd, b.encode()), Catch::Contains("fake:other"));
    }
    SECTION("another descriptor's blob names the mismatch") {
      b.key_bytes.push_back(std::byte{0});
      CHECK_THROWS_WITH(primitive(pd, b.encode()), Catch::Contains("another primitive descriptor"));
    }
    SECTION("bytes that are no blob at all") {
      CHECK_THROWS_WITH(primitive(pd, std::vector<std::uint8_t>{1, 2, 3}),
                        Catch::Contains("blob magic"));
    }
  }
}

TEST_CASE("the cache blob id is the key with the library version and build identity",
          "[runtime][blob]") {
  fake::install();
  const auto id = fake::copy_pd(3).cache_blob_id();
  CHECK(id == fake::copy_pd(3).cache_blob_id());
  CHECK_FALSE(id == fake::copy_pd(4).cache_blob_id());
  const std::string text(id.begin(), id.end());
  CHECK(text.find(version().build_identity) != std::string::npos);
  CHECK(text.find(version().version) != std::string::npos);
  const auto k = backend::impl_of(fake::copy_pd(3)).cache_key().bytes();
  CHECK(text.find(std::string(reinterpret_cast<const char*>(k.data()), k.size())) !=
        std::string::npos);
  CHECK_THROWS_AS(primitive_desc().cache_blob_id(), error);
}

namespace {

// A descriptor with configurations ("x" from 1 to 8; the heuristic's is 4)
// and nothing else: what finalize and finalize_with_config decide.
class configured_pd final : public backend::primitive_desc_impl {
 public:
  configured_pd()
      : primitive_desc_impl(backend::primitive_kind::reorder, primitive_attr(), "test:configured") {
  }
  memory_desc arg_md(int) const override { return {}; }
  void write_op_key(key_writer& w) const override { w.str("configured"); }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine&) const override {
    return nullptr;
  }
  std::optional<kernel_config> default_config() const override {
    return kernel_config().add("x", 4);
  }
  result<bool> validate_config(const kernel_config& cfg) const override {
    const auto x = cfg.get("x");
    if (!x || *x < 1 || *x > 8) return failure{status::invalid_arguments, "x must be in [1, 8]"};
    return true;
  }
};

// The same without configurations.
class configless_pd final : public backend::primitive_desc_impl {
 public:
  configless_pd()
      : primitive_desc_impl(backend::primitive_kind::reorder, primitive_attr(), "test:configless") {
  }
  memory_desc arg_md(int) const override { return {}; }
  void write_op_key(key_writer& w) const override { w.str("configless"); }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine&) const override {
    return nullptr;
  }
};

}  // namespace

TEST_CASE("a configuration given at finalize wins over the source and goes into the key",
          "[runtime][config]") {
  fake::install();
  const engine eng(engine_kind::gpu, 0);
  const auto& eng_impl = backend::impl_of(eng);
  // The config source would choose x = 2: a given configuration wins over it.
  backend::set_config_source(
      [](const backend::primitive_desc_impl&) { return kernel_config().add("x", 2); });
  configured_pd chosen;
  chosen.finalize(eng_impl, 1);
  configured_pd given;
  given.finalize_with_config(eng_impl, 1, kernel_config().add("x", 7));
  backend::set_config_source({});
  REQUIRE(chosen.config().has_value());
  CHECK(*chosen.config() == kernel_config().add("x", 2));
  REQUIRE(given.config().has_value());
  CHECK(*given.config() == kernel_config().add("x", 7));
  CHECK(given.problem_key() == chosen.problem_key());
  CHECK_FALSE(given.cache_key() == chosen.cache_key());
  configured_pd same;
  same.finalize_with_config(eng_impl, 1, kernel_config().add("x", 7));
  CHECK(same.cache_key() == given.cache_key());

  SECTION("a configuration the descriptor does not validate is refused with the reason") {
    configured_pd bad;
    try {
      bad.finalize_with_config(eng_impl, 1, kernel_config().add("x", 9));
      FAIL("finalized");
    } catch (const error& e) {
      CHECK(e.code() == status::invalid_arguments);
      CHECK_THAT(e.message(), Catch::Contains("test:configured") && Catch::Contains("[1, 8]"));
    }
  }
  SECTION("a descriptor without configurations refuses one") {
    configless_pd none;
    try {
      none.finalize_with_config(eng_impl, 1, kernel_config().add("x", 1));
      FAIL("finalized");
    } catch (const error& e) {
      CHECK(e.code() == status::invalid_arguments);
      CHECK_THAT(e.message(),
                 Catch::Contains("test:configless") && Catch::Contains("no kernel configurations"));
    }
  }
}
