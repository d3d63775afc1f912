// SPDX-License-Identifier: Apache-2.0
// The plain TCP baseline: the same bytes between the same two processes over one TCP socket per
// pair, opened along the cable the plugin's topology code picks (see paths.h, setup.cc).
// One direction: blocking send()/recv() of whole messages, the socket buffers being the only
// window TCP has. Both directions at once (--bidir, ring steps): one poll() loop, because two
// blocking senders deadlock once both socket buffers are full.
#pragma once

#include <cstddef>

#include "context.h"

namespace mesh::bench {

// One ring step over TCP: send `send_len` bytes to the next rank while receiving `recv_len`
// from the previous one (the same socket when there are two ranks).
void tcp_ring_exchange(Context& ctx, int next, const void* send, size_t send_len, int prev,
                       void* recv, size_t recv_len);

}  // namespace mesh::bench
