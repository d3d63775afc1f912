// SPDX-License-Identifier: Apache-2.0
// Ring all-reduce of float32 host buffers across all ranks: reduce-scatter then all-gather,
// 2(N-1) steps, each sending one chunk (1/N of the data) to the next rank while receiving one
// from the previous rank. Over the plugin a step is pipelined in --slice-bytes messages with a
// window, the receive side reducing each slice as it lands; over TCP a step is one poll()
// exchange of the whole chunk, then the reduction.
//
// ring-traffic moves the same chunks but adds nothing (the reduce-scatter's incoming chunks are
// dropped): the traffic NCCL's ring all-reduce puts on the network plugin, whose reductions run
// on the GPU, so its busbw is the ceiling for NCCL's all_reduce over this transport on this
// host. Over the plugin it runs as NCCL's ring does, not step by step: slice k of step s+1
// leaves once slice k of step s has arrived, and --channels C splits every chunk over C
// connections per neighbour (NCCL's channels), all progressed by one loop. Run step by step on
// one connection, NCCL over the plugin outran it by 24-63% on an H200 (not a ceiling).
//
// Verification: warm-up iterations use fresh inputs every time and every result element is
// checked (a receive buffer still holding old data cannot pass); the timed iterations reuse one
// input, and their last result is checked.
#pragma once

#include <vector>

#include "context.h"
#include "report.h"

namespace mesh::bench {

std::vector<Row> run_ring(Context& ctx);

}  // namespace mesh::bench
