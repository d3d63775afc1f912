// SPDX-License-Identifier: Apache-2.0
// Plugin::warn_ring_off_cables: the one WARN that says NCCL's ring is not on the cables.
//
// The net plugin cannot see which connection NCCL makes for which algorithm, so the hint is
// inferred: this library's tuner (same process, same communicator id) steers the communicator to
// Ring and NCCL has so far run its collectives on Ring alone; a relayed connection then most
// likely joins two ring neighbours without a cable. Send/recv and all-to-all never consult the
// tuner, so a relayed connection made for them in such a communicator also triggers the WARN: its
// text says so. v6-v10 contexts carry no communicator id and never warn.
#include "plugin/plugin.h"
#include "plugin/tuner_context.h"
#include "util/log.h"

namespace mesh {

void Plugin::warn_ring_off_cables(Context* c, const std::string& peer, const std::string& route) {
  if (c->warned_ring_off_cables || !tuner_ring_only(c->comm_id)) return;
  c->warned_ring_off_cables = true;
  MESH_WARN(
      "communicator 0x%llx runs its collectives on NCCL's Ring (this library's tuner), but its "
      "connection to %s goes through relay hosts (%s): NCCL's ring joins each node to the next in "
      "rank order, "
      "so ranks were not launched in cable order and ring traffic crosses relay hosts (twice the "
      "cable load; GPU memory then needs RDMA on every cable of the route). Unless this "
      "connection is a send/recv or all-to-all pair, launch ranks in cable order: "
      "`nccl-mesh-doctor --hosts FILE --probe` prints it ('Host order for NCCL's ring'); "
      "torchrun: give each host --node-rank in that order (static rendezvous, not c10d's "
      "dynamic one); mpirun: a hostfile in that order with --map-by node; srun: "
      "SLURM_HOSTFILE in that order with --distribution=arbitrary",
      static_cast<unsigned long long>(c->comm_id), peer.c_str(), route.c_str());
}

}  // namespace mesh
