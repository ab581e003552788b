// primcache_console_assets.hpp — the built web console as an in-binary table,
// for the admin server to serve at "/" and "/assets/...".
//
// The definition is generated at build time (admin_ui/scripts/embed-assets.mjs
// turns the Vite build's dist/ into console_assets.cpp): the console is never
// read from the filesystem. Not installed; libs/admin includes it privately.
//
//   for (const auto& asset : primcache::admin_internal::console_assets())
//     if (asset.path == target) return respond(asset.content_type, asset.body);
//
// Thread-safety: immutable static data, readable from any thread.
// Exceptions: none.
#pragma once

#include <span>
#include <string_view>

namespace primcache::admin_internal {

struct console_asset {
  std::string_view path;          // "/" for index.html, otherwise "/assets/<file>"
  std::string_view content_type;  // e.g. "text/html; charset=utf-8"
  std::string_view body;          // the file's exact bytes
};

// Every built file, sorted by path.
std::span<const console_asset> console_assets() noexcept;

}  // namespace primcache::admin_internal
