// services/common/default_paths.hpp — the defaults primcached and the
// primcache command line agree on: where the admin server listens and where
// the bearer token is written, so that `primcache stats` finds a daemon
// started with no arguments.
//
//   std::string path = primcache::services::default_token_file();
//   // $XDG_RUNTIME_DIR/primcached.token, else /tmp/primcached-<uid>.token
//
// Thread-safety: pure functions of the environment. Exceptions: none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace primcache::services {

inline constexpr std::string_view default_admin_address = "127.0.0.1";
inline constexpr std::uint16_t default_admin_port = 8477;

// $XDG_RUNTIME_DIR/primcached.token when XDG_RUNTIME_DIR is set and absolute,
// else /tmp/primcached-<uid>.token.
std::string default_token_file();

// "HOST:PORT" split; false when malformed (no colon, empty host, port not a
// number in [0, 65535]).
bool parse_host_port(std::string_view text, std::string& host, std::uint16_t& port);

// Whether `host` is an IP address (IPv4 or IPv6, what the admin server can
// listen on: it resolves no names), as the admin server parses it.
bool is_ip_address(const std::string& host);

}  // namespace primcache::services
