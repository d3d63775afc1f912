// SPDX-License-Identifier: Apache-2.0
// One agent's view of the cable graph, built from the beacons it hears (relay/beacon.h): its own
// entry (its addresses and the neighbours heard within kNeighbourTtlMs) and the newest entry of
// every other host, dropped when its owner's sequence has not advanced for kExpireMs (a dead
// host or a cut cable leaves the graph within a few seconds). Not thread-safe (the agent guards
// it with its mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "relay/beacon.h"

namespace mesh::relay {

inline constexpr int64_t kBeaconIntervalMs = 500;
inline constexpr int64_t kNeighbourTtlMs = 2000;  // 4 beacons missed: the cable is gone
inline constexpr int64_t kExpireMs = 3000;

class LinkState {
 public:
  // `addrs`: this host's mesh addresses. `first_seq`: start of this host's sequence (the agent
  // uses the wall clock in 10 ms steps, so a restarted agent's beacons win over its old ones).
  LinkState(std::vector<Ipv4Prefix> addrs, uint32_t first_seq);
  // With a cluster key this host signs its own entry and accepts only entries that verify
  // (an unsigned or forged beacon changes nothing); without one (empty) every entry is taken as
  // it comes, within the limits of receive().
  void set_key(ClusterKey key) { key_ = std::move(key); }

  uint32_t self_id() const { return self_.id; }
  // A decoded beacon whose datagram came from `source`. False (with *why) when the source is not
  // one of the sender's addresses on a subnet of this host (not a neighbour's beacon); a beacon
  // of this host itself (a broadcast looped back) is ignored and returns true. With a key, a
  // beacon whose sender's entry does not verify is refused too. Entries dropped: with a key, each
  // one that does not verify; always, a flooded entry (not the sender's own) that claims an
  // address of this host or of the sender (a neighbour cannot take over those addresses).
  // *dropped (optional) counts them.
  bool receive(const Beacon& b, uint32_t source, int64_t now_ms, std::string* why,
               size_t* dropped = nullptr);
  void expire(int64_t now_ms);
  // This host's next beacon: its own entry with the sequence advanced, then the known entries
  // (at most kMaxBeaconHosts in all; *truncated set when some were left out).
  Beacon next_beacon(uint32_t seq_floor, bool* truncated);
  // Every host this agent knows, itself included (for find_route).
  std::vector<HostEntry> hosts() const;

 private:
  struct Known {
    HostEntry entry;
    int64_t refreshed_ms = 0;
  };
  ClusterKey key_;
  HostEntry self_;
  std::map<uint32_t, int64_t> heard_;  // neighbour id -> last beacon heard from it directly
  std::map<uint32_t, Known> known_;
};

}  // namespace mesh::relay
