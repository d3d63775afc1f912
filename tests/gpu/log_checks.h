// SPDX-License-Identifier: Apache-2.0
// What one rank's NCCL log must show for its set to pass: the transport proof ("Using network
// <net>", "via NET/<net>/" lines and no other "via" line, "Loaded net plugin Mesh"), and for an
// emulated ring or line also the tuner (NCCL's "TUNER/Plugin: Using Mesh", the plugin's decision
// line) and the emulated addresses. It also recognises a connection that failed for want of a
// common subnet (no relay) and says so in words. Reads a stream, so the selftest feeds it text.
#ifndef NCCL_MESH_TESTS_GPU_LOG_CHECKS_H
#define NCCL_MESH_TESTS_GPU_LOG_CHECKS_H

#include <istream>
#include <string>

#include "launcher.h"

namespace e2e {

// Scans the log of `rank` (`path` is named in messages) into `out`: version, via-line counts,
// warnings, tuner and relay evidence, and problems. The transport and tuner proof is required
// only of ranks that exited cleanly (for the others the exit status says enough); FATAL lines
// and a failed connection to a peer without a common subnet are problems either way.
void scanRankLog(std::istream& in, const std::string& path, int rank, bool exitedCleanly,
                 const SetSpec& spec, SetOutcome& out);

// How the plugin's tuner decision line must begin for `spec` ("" when nothing is required: full
// mesh, Socket, no tuner loaded). With auto every rank decides from the node count alone:
// "steering to Ring" from 3 ranks (one GPU per emulated host), "idle" with 2.
std::string expectedTunerDecision(const SetSpec& spec);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_LOG_CHECKS_H
