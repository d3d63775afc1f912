// SPDX-License-Identifier: Apache-2.0
// The gin-put and gin-put-signal patterns: the pairs pattern's rows, measured over the plugin's
// GIN table (ncclGinPlugin_v13 from the same .so, driven the way NCCL's GIN proxy drives it:
// collective connect of every rank, symmetric registrations, iput/iputSignal, test), with the
// plugin's own net path (isend/irecv) and plain TCP between the same two processes as the
// references in the same run, size by size.
//
// Per pair and size, the sender puts `iters` messages of the pattern into the receiver's
// registration (at most --window in flight; a slot is refilled only after its put tested done,
// the source-reusable point NCCL's counters mean). gin-put ends the stream with a signal-only
// iputSignal (size 0, ADD 1); gin-put-signal makes every put an iputSignal INC. The receiver
// waits for the signal total, then checks every byte of the last --window messages, then
// answers with a signal-only put back; the sender's clock runs from the first put to that
// answer, as the net and TCP references' clocks run to their acknowledgements.
#pragma once

#include <memory>

#include "context.h"
#include "pairs.h"

namespace mesh::bench {

// Collective: every rank calls it (it connects the GIN comm over all ranks). `signal_every_put`
// picks gin-put-signal.
std::unique_ptr<PairTransport> make_gin_pair_transport(Context& ctx, bool signal_every_put);

// The ib_write_bw line of the report: whether an RDMA device exists here and so whether an
// RDMA reference could be measured.
std::string rdma_reference_note();

}  // namespace mesh::bench
