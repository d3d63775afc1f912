// SPDX-License-Identifier: Apache-2.0
// An emulated ring or line of hosts on one machine, for tests and try-outs (NCCL_MESH_EMULATE):
// every "cable" between neighbours gets its own /30 subnet of 127.77.0.0/16, and each rank (one
// process) sees only the loopback addresses of its own cables. Ranks without a shared emulated
// cable then have no common subnet, exactly like hosts of a real partial mesh. Linux routes all
// of 127.0.0.0/8 to lo and treats it as local, so every 127.77.x.y address can be bound and
// reached without configuring anything.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "topology/interface.h"
#include "util/ipv4.h"

namespace mesh::topology {

enum class EmulatedShape { kRing, kLine };

struct EmulatedMesh {
  EmulatedShape shape = EmulatedShape::kRing;
  size_t ranks = 0;  // hosts in the ring or line
  size_t rank = 0;   // this process's position, 0 .. ranks-1
};

// Largest emulated mesh: 127.77.0.0/16 holds 16384 /30 cables; a bound far below keeps plans
// small and typos ("ring:40000:1") visible.
inline constexpr size_t kMaxEmulatedRanks = 1024;

// "ring:N:R" (N >= 3: cable k joins positions k and k+1 mod N) or "line:N:R" (N >= 2: cable k
// joins k and k+1, k < N-1), R in 0..N-1. False with *why on anything else.
bool parse_emulated_mesh(const std::string& text, EmulatedMesh* out, std::string* why);

// The cables of the shape, as (lower position, higher position) pairs except the ring's closing
// cable (N-1, 0); index k is cable k.
std::vector<std::pair<size_t, size_t>> emulated_cables(EmulatedShape shape, size_t ranks);

// Cable k's subnet is 127.77.0.0 + 4k /30; its first position gets .1, its second .2.
Ipv4Prefix emulated_address(size_t cable, bool second_end);

// The addresses of `mesh.rank`'s own cables, in cable order.
std::vector<Ipv4Prefix> emulated_addresses(const EmulatedMesh& mesh);

// The interfaces the plugin sees under emulation: one up, non-loopback entry named "lo" per
// address (non-loopback so that selection uses them as it would physical cables; "lo" because
// that is where Linux delivers them).
std::vector<Interface> emulated_interfaces(const EmulatedMesh& mesh);

// What the plugin and the tools discover: discover_interfaces() (read once per process and kept:
// every user in the process sees the same table), or, when `emulate` (the NCCL_MESH_EMULATE
// value) is set, emulated_interfaces(). False with *why on a malformed value.
bool discover_mesh_interfaces(const std::string& emulate, std::vector<Interface>* out,
                              std::string* why);

}  // namespace mesh::topology
