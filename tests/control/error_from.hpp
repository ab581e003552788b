// tests/control/error_from.hpp — the primcache::error a call throws, for
// checking its status and message; error(success, "nothing thrown") when
// it throws none.
//
//   CHECK(error_from([&] { r.register_cache("x", c); }).code() == status::already_exists);
#pragma once

#include "primcache/base/error.hpp"

namespace primcache::test {

template <typename F>
error error_from(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e;
  }
  return error(status::success, "nothing thrown");
}

}  // namespace primcache::test
