// services/cli/resolve.hpp — the first step of http_request: a host's
// lookup bounded by the request's deadline, although the system's resolver
// cannot be interrupted.
//
//   auto endpoints = primcache::cli::resolve_within("localhost", 8477, deadline, "10 s");
//
// Exceptions: primcache::cli::connect_error (http_client.hpp).
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace primcache::cli {

// The lookup of `host`:`port` by `lookup` (the system's resolver when
// empty), run on a thread of its own and waited for until `deadline`: its
// endpoints, or connect_error "cannot resolve HOST:PORT: REASON" when it
// fails or has not answered by then (the thread is then left to finish on
// its own; what it finds is dropped). `within`: the timeout as messages
// say it. http_request's first step; a parameter so that tests can play a
// name server that does not answer.
using lookup_fn = std::function<boost::asio::ip::tcp::resolver::results_type(
    const std::string& host, const std::string& port)>;
boost::asio::ip::tcp::resolver::results_type resolve_within(
    const std::string& host, std::uint16_t port, std::chrono::steady_clock::time_point deadline,
    const std::string& within, lookup_fn lookup = {});

}  // namespace primcache::cli
