// SPDX-License-Identifier: Apache-2.0
// Closing a TCP socket whose peer may still send. Linux answers close() with a reset when
// received bytes are unread, or arrive afterwards, and the reset discards what this side had not
// sent yet. A TCP sender that closes right after its last send completed (NCCL's closeSend) can
// still have headers and inline payloads queued for a slow receiver, whose clear-to-sends keep
// coming until it has posted its last receive: a reset would lose messages NCCL was told were
// sent. close_when_peer_done() sends FIN after what is queued (shutdown(SHUT_WR)) and hands the
// socket to one background thread, which reads and drops what the peer still sends and closes
// the socket once the peer's kernel has acknowledged every byte (a reset after that loses
// nothing: Linux keeps the peer's received bytes readable), at the peer's FIN or reset, or at
// the deadline.
//
// Threads: any thread may hand a socket over; the lingering sockets belong to the background
// thread, which runs only while it holds some (started by the first, ended after the last) and
// which stop_lingering() joins: the plugin calls that when its last context is finalized.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/socket_util.h"

namespace mesh {

// Sockets lingering at once; beyond it a socket is drained and closed at once (a late record
// then resets it: the behaviour without this), so a peer that never closes cannot hold more
// descriptors than this.
inline constexpr size_t kMaxLingeringSockets = 256;

// Never blocks. linger_ms: the longest the socket is kept waiting for the peer's FIN.
void close_when_peer_done(UniqueFd fd, int64_t linger_ms);

// Waits up to wait_ms for the lingering sockets' peers to finish, closes what is left and joins
// the thread (a later close_when_peer_done starts it again).
void stop_lingering(int64_t wait_ms);

// Sockets lingering now (tests).
size_t lingering_sockets();

}  // namespace mesh
