// SPDX-License-Identifier: Apache-2.0
// Process environment every process of the suite sets before it loads the plugin.
#pragma once

#include <string>

namespace conformance {

// Rank 0 is the gtest process; every spawned mesh_conformance_peer is a peer.
enum class Rank { kTest, kPeer };

// NCCL_MESH_IFNAME of a rank. Loopback ("lo") unless MESH_CONFORMANCE_IFNAME (rank 0) /
// MESH_CONFORMANCE_PEER_IFNAME (peers; default: rank 0's) name other interfaces. Only the
// Soft-RoCE lane sets them, inside a VM whose test links are veth pairs (tests/softroce). Names
// that are not virtual interfaces are refused (stderr line, loopback used): the suite never
// runs on a real NIC, a hard rule of this workplace.
std::string rank_ifname(Rank rank);
bool on_loopback(Rank rank);

// MESH_CONFORMANCE_EXPECT_TRANSPORT=rdma|tcp: every connection the test process makes or accepts
// must report that transport in the plugin's "connected:"/"accepted:" INFO line. "" = no check.
std::string expected_transport();

// MESH_CONF_TIME_SCALE (a number >= 1, default 1): multiplies every wall-clock bound of the suite
// (timing.h), for machines much slower than a developer's (a TCG virtual machine).
double time_scale();

// MESH_CONFORMANCE_CONNECT_TIMEOUT_MS (100..3600000, default 2000): NCCL_MESH_CONNECT_TIMEOUT_MS of
// every process of the suite. Only the Soft-RoCE relay step raises it: a relayed connect waits
// for the relay agents, which start with each plugin init, to learn the cable graph (seconds).
int connect_timeout_ms();

// Sets NCCL_MESH_IFNAME (rank_ifname) and the connect timeout (connect_timeout_ms) the failure
// tests rely on, overwriting whatever the caller's environment had. On loopback the test process
// also gets a free NCCL_MESH_RELAY_PORT of its own (inherited by its peers) unless the caller's
// environment names one: processes that ctest runs side by side are then separate hosts.
void set_plugin_environment(Rank rank = Rank::kTest);

// True unless set_plugin_environment chose this process's NCCL_MESH_RELAY_PORT.
bool relay_port_from_caller();

}  // namespace conformance
