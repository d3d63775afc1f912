// SPDX-License-Identifier: Apache-2.0
// One agent's view of the cable graph, built from the beacons it hears (relay/beacon.h): its own
// entry (its addresses and the neighbours heard within kNeighbourTtlMs) and the newest entry of
// every other host, dropped when its owner's sequence has not advanced for kExpireMs (a dead
// host or a cut cable leaves the graph within a few seconds).
//
// Retention (docs/relay.md, "Timers"): beacons are UDP and can be lost for seconds while the
// host is alive (a cable saturated by relayed TCP, a CPU-throttled container, a debugger stop).
// A neighbour this host *holds* is not dropped then: the agent decides "held" from this host's
// own state only (relay/retention.h: the local interface on the shared subnet has carrier AND
// relayed sockets of this host go to the neighbour's address on it) and passes the held ids to
// expire(). A held neighbour stays in heard_ (and so in this host's own entry and beacons), its
// own entry stays in known_, and so do the entries whose last update came through its beacons
// (the hosts behind it: without them the kept neighbour would carry no route at all; they leave
// with it). When holding stops, the normal TTL runs from the later of its last beacon and the
// last moment it was held, so a neighbour is not dropped the instant its last splice closes.
// Retention never lasts more than kRetainMaxMs past the neighbour's last beacon. Nothing in a
// beacon can start, extend or end retention: a neighbour's beacons refresh only what they always
// did, and an entry this host keeps is flooded with its old sequence, which refreshes nothing
// at other hosts (each host retains only what it holds itself; an expired entry is not taken
// back with the same sequence, see gone_).
//
// Not thread-safe: the agent's thread is the only writer and calls every method under the
// agent's mutex (first_hop() on other threads reads hosts() under it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "relay/beacon.h"

namespace mesh::relay {

inline constexpr int64_t kBeaconIntervalMs = 500;
inline constexpr int64_t kNeighbourTtlMs = 2000;  // 4 beacons missed: the cable is gone
inline constexpr int64_t kExpireMs = 3000;
// Retention's bound past a neighbour's last beacon. A live relay's beacons stop for seconds
// (saturation, throttling), not for a minute; a host hung with its link up (its agent stopped,
// its kernel still ACKing TCP, so its sockets look live) must leave the graph at some point.
// 60 s is twice the default connect timeout (NCCL_MESH_CONNECT_TIMEOUT_MS, 30 s), so a connect
// that begins while beacons are lost still finds its route for its whole deadline, and routes
// through a hung host end about a minute (plus kNeighbourTtlMs) after its last beacon.
inline constexpr int64_t kRetainMaxMs = 60000;

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
  // Drops neighbours not heard for kNeighbourTtlMs and entries not refreshed for kExpireMs,
  // except what `held` retains (ids from silent_neighbours() that this host holds now; see the
  // top of this file).
  void expire(int64_t now_ms, const std::set<uint32_t>& held = {});
  // The neighbours past kNeighbourTtlMs without a beacon but within kRetainMaxMs of it, with
  // their newest entries (their addresses): the ones the agent must decide to hold or not.
  std::vector<HostEntry> silent_neighbours(int64_t now_ms) const;
  // This host's next beacon: its own entry with the sequence advanced, then the known entries
  // (at most kMaxBeaconHosts in all; *truncated set when some were left out).
  Beacon next_beacon(uint32_t seq_floor, bool* truncated);
  // Every host this agent knows, itself included (for find_route).
  std::vector<HostEntry> hosts() const;

 private:
  static constexpr int64_t kNever = INT64_MIN / 4;  // far in the past, no overflow in sums
  struct Heard {
    int64_t beacon_ms = kNever;  // its last beacon, heard directly
    int64_t held_ms = kNever;    // the last expire() that retained it past its TTL
  };
  struct Known {
    HostEntry entry;
    int64_t refreshed_ms = 0;
    uint32_t via = 0;  // the neighbour whose beacon last brought a newer sequence
  };
  // An expired entry's last sequence, remembered for kGoneMs: longer than any copy of it can
  // live at another host (kExpireMs after it last got it, or a retention: kRetainMaxMs plus the
  // TTLs), so a copy flooded back is not taken as new. At most kMaxGone (the oldest go first:
  // forged ids cannot grow the table).
  static constexpr int64_t kGoneMs = 2 * kRetainMaxMs;
  static constexpr size_t kMaxGone = 4 * kMaxBeaconHosts;
  struct Gone {
    uint32_t seq = 0;
    int64_t at_ms = 0;
  };
  ClusterKey key_;
  HostEntry self_;
  std::map<uint32_t, Heard> heard_;  // neighbour id -> when heard and held
  std::map<uint32_t, Known> known_;
  std::map<uint32_t, Gone> gone_;
};

}  // namespace mesh::relay
