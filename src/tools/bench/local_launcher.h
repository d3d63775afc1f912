// SPDX-License-Identifier: Apache-2.0
// Local mode: this process becomes a small launcher. It creates the rendezvous socket on
// 127.0.0.1 (so there is no race for a port), sets NCCL_MESH_IFNAME=lo, and fork+execs its own
// binary once per rank with the same arguments plus hidden --local-* options. Rank 0 inherits
// the listening socket. The launcher then waits; once one rank fails it gives the others a
// grace period to report their side and then stops them, so nothing outlives a failed run.
#pragma once

#include "options.h"

namespace mesh::bench {

// Returns the exit code: 0 when all ranks succeed, else the most telling rank's code
// (a plugin error beats a verification failure beats a timeout beats the rest).
int run_local_launcher(int argc, char** argv, const Options& opt);

}  // namespace mesh::bench
