// primcache/control/event.hpp — the bounded ring of recent events (primitive
// creations and where they came from) that the admin console lists.
//
// record_event stamps the event with the next sequence number (from 1) and,
// unless given, the current time, and keeps the newest event_ring_capacity
// events. Readers ask for the events after the last sequence number they saw:
//
//   primcache::control().record_event({.kind = "create", .name = "matmul",
//                                      .source = "compile", .duration_ms = 1.8,
//                                      .detail = "f32 256x256x256"});
//   primcache::event_page page = primcache::control().events_since(0);
//   // page.events: oldest first; page.next: pass it as `since` next time
//
// Record creations (the miss path), not hits: an event is a few small strings.
// The strings are built by the caller and moved in; the ring's lock is held
// only to swap them into a slot (the replaced event is freed after).
//
// Thread-safety: every member may be called from any thread at once.
// Exceptions: std::bad_alloc only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace primcache {

inline constexpr std::size_t event_ring_capacity = 256;

struct control_event {
  std::uint64_t seq = 0;          // set by record_event
  std::int64_t time_unix_ms = 0;  // 0: record_event sets the current time
  std::string kind;               // "create"
  std::string name;               // "matmul"
  std::string source;             // "compile", "memory", "persistent", ...
  double duration_ms = 0.0;
  std::string detail;  // free text
};

struct event_page {
  std::vector<control_event> events;  // seq > since, oldest first
  // The last sequence number returned; with no events, `since` or, when
  // `since` is past the newest (the process restarted), the newest.
  std::uint64_t next = 0;
};

}  // namespace primcache
