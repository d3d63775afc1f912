// SPDX-License-Identifier: Apache-2.0
// The relay agents' discovery datagram (UDP, NCCL_MESH_RELAY_PORT): every agent sends one about
// once a second on each mesh interface; it carries the sender's own entry (its addresses and
// the neighbours it currently hears) and the entries it has learnt from others (link-state
// flooding over periodic beacons). It comes from the network: decode_beacon() validates every
// field and the receiver also checks that the datagram's source is one of the sender's
// addresses on a subnet of ours (relay/link_state.h).
//
// Layout (big-endian):
//   [0] u32 magic 'MSHB'   [4] u8 version   [5] u8 number of host entries H (1..kMaxBeaconHosts)
//   [6] u16 reserved (0)   [8] u32 total length in bytes (header + entries + checksum)
//   [12] H x entry: u32 host id, u32 sequence, u8 address count A (1..kMaxHostAddrs),
//        u8 neighbour count N (0..kMaxNeighbours), A x {u32 address, u8 prefix}, N x u32 host id,
//        16 B entry MAC (sign_entry: HMAC-SHA256 under the cluster key of the entry's other bytes,
//        made by the host that owns the entry and flooded unchanged; zero without a key)
//   then u32 FNV-1a checksum of every byte before it.
// Entry 0 is the sender's own. A host id is host_id_of() its sorted addresses (namespaces on one
// machine share /etc/machine-id, so that cannot name a host).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/ipv4.h"

namespace mesh::relay {

inline constexpr uint32_t kBeaconMagic = 0x4D534842;  // "MSHB"
inline constexpr uint8_t kBeaconVersion = 2;          // 2: entry MACs
inline constexpr size_t kBeaconHeaderSize = 12;
inline constexpr size_t kMaxBeaconHosts = 64;
inline constexpr size_t kMaxHostAddrs = 8;
inline constexpr size_t kMaxNeighbours = 16;
inline constexpr size_t kEntryMacSize = 16;
// Largest possible beacon: fits one UDP datagram (fragmented on a 1500-byte MTU).
inline constexpr size_t kMaxBeaconSize =
    kBeaconHeaderSize +
    kMaxBeaconHosts * (10 + kMaxHostAddrs * 5 + kMaxNeighbours * 4 + kEntryMacSize) + 4;

struct HostEntry {
  uint32_t id = 0;
  uint32_t seq = 0;                          // grows with every beacon of its owner (newest wins)
  std::vector<Ipv4Prefix> addrs;             // the owner's mesh addresses, sorted
  std::vector<uint32_t> neighbours;          // ids of the hosts the owner hears directly, sorted
  std::array<uint8_t, kEntryMacSize> mac{};  // the owner's MAC under the cluster key (or zero)

  bool operator==(const HostEntry&) const = default;
};

struct Beacon {
  std::vector<HostEntry> hosts;  // [0]: the sender
};

// The cluster key (docs/relay.md, threat model): with one, every entry is signed by its owner and
// an entry whose MAC does not verify is dropped, so a host without the key cannot add, change or
// refresh any entry. Empty: no key.
using ClusterKey = std::vector<uint8_t>;
void sign_entry(HostEntry* entry, const ClusterKey& key);
bool entry_verifies(const HostEntry& entry, const ClusterKey& key);

// FNV-1a of the sorted (address, prefix) list; never 0.
uint32_t host_id_of(std::vector<Ipv4Prefix> addrs);

// False (with *why) when the beacon cannot be encoded: no host, too many hosts, addresses or
// neighbours in an entry (the caller trims first and warns).
bool encode_beacon(const Beacon& beacon, std::vector<uint8_t>* out, std::string* why);
// Validates magic, version, counts, lengths, prefixes, ids (non-zero, distinct; entry 0's id
// matches its addresses), and the checksum.
bool decode_beacon(const uint8_t* in, size_t len, Beacon* out, std::string* why);

}  // namespace mesh::relay
