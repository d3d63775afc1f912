// SPDX-License-Identifier: Apache-2.0
// The plain TCP baseline: the same bytes between the same two processes over one TCP socket per
// pair, opened along the cable the plugin's topology code picks (see paths.h, setup.cc).
// One direction: blocking send()/recv() of whole messages, the socket buffers being the only
// window TCP has. Both directions at once (--bidir, ring steps): one poll() loop, because two
// blocking senders deadlock once both socket buffers are full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "context.h"
#include "socket_io.h"

namespace mesh::bench {

// One ring step over TCP: send `send_len` bytes to the next rank while receiving `recv_len`
// from the previous one (the same socket when there are two ranks).
void tcp_ring_exchange(Context& ctx, int next, const void* send, size_t send_len, int prev,
                       void* recv, size_t recv_len);

// One ring step as NCCL's Socket transport moves it with its defaults (--tcp-like-socket): the
// step in messages of `send_slice` / `recv_slice` bytes (the plugin's slices), each one its
// 4-byte size in a send() of its own, then its bytes (a message of at most 128 bytes goes with
// its size: NCCL_SOCKET_INLINE); the receiver reads the size, checks it, then the message. One
// message at a time each way, polling (NCCL's proxy). `scratch` is kept across steps, so that
// a step allocates nothing (the plugin's ring does not either).
struct MessageScratch {
  std::vector<uint8_t> bytes;  // each sent message's size (and inline bytes), each received size
  std::vector<Segment> outs, ins;
};
void tcp_ring_exchange_messages(Context& ctx, int next, const void* send, size_t send_len,
                                size_t send_slice, int prev, void* recv, size_t recv_len,
                                size_t recv_slice, MessageScratch& scratch);

}  // namespace mesh::bench
