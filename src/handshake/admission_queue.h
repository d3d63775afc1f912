// SPDX-License-Identifier: Apache-2.0
// Admission of unauthenticated handshake sockets: which accepted sockets are still pending (no
// complete hello yet), in arrival order, how many per source address, and which one to close
// when a newcomer arrives at a cap. A pure policy: no sockets, no clock, no logging; the handshake
// service (inbound.cc) owns the sockets and acts on the decisions.
//
// The policy (why: see Service::handle_listener):
//  - at most max_pending sockets pending, and at most a quarter of that (at least 1) from one
//    source address;
//  - at a cap the newcomer is admitted and a pending socket is closed: at the per-source cap the
//    oldest of that source, else the oldest of any source; in both cases the oldest one that has
//    not sent a complete hello, failing that the oldest one (a hello waiting for its extension).
//
// Not thread-safe: the service thread owns its queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>

namespace mesh::handshake {

class AdmissionQueue {
 public:
  // The caller's key for a pending socket (the service uses the socket's fd: unique while open).
  using Id = int;

  struct Entry {
    Id id = -1;
    uint32_t source = 0;      // the peer's IPv4 address, host order
    int64_t since_ms = 0;     // when it was accepted (any monotonic clock)
    bool have_hello = false;  // a complete hello arrived (its extension bytes have not)
  };

  // Who to close before admitting a newcomer.
  struct Eviction {
    Entry victim;
    bool per_source = false;  // the newcomer's source reached its share (else the total cap)
    size_t pending = 0;       // sockets pending at that cap (of the source, or in all)
  };

  // `max_pending` >= 1 (NCCL_MESH_MAX_PENDING_HANDSHAKES); 0 is treated as 1.
  explicit AdmissionQueue(size_t max_pending);

  size_t max_pending() const { return max_pending_; }
  size_t max_per_source() const { return max_per_source_; }
  size_t size() const { return order_.size(); }
  size_t pending_from(uint32_t source) const;

  // Before admitting a newcomer from `source`: the pending socket to close first, or nothing
  // when neither cap is reached. The caller closes it and calls remove().
  std::optional<Eviction> make_room(uint32_t source) const;

  // Adds the newest pending socket. False (nothing changes) if `id` is already pending.
  bool add(Id id, uint32_t source, int64_t since_ms);
  // Its hello is complete: evicted only after every socket that is still silent.
  void hello_complete(Id id);
  // No longer pending (authenticated, refused, closed, evicted or expired); unknown ids are
  // ignored.
  void remove(Id id);

  // The longest-pending socket (the first to expire), or nullptr when none is pending.
  const Entry* oldest() const;
  const Entry* find(Id id) const;

 private:
  // Oldest without a complete hello among those of `source` (all when null), else the oldest.
  const Entry* victim(const uint32_t* source) const;

  size_t max_pending_;
  size_t max_per_source_;
  std::list<Entry> order_;  // arrival order, oldest first
  std::unordered_map<Id, std::list<Entry>::iterator> index_;
  std::unordered_map<uint32_t, size_t> per_source_;  // only sources with at least one pending
};

}  // namespace mesh::handshake
