// SPDX-License-Identifier: Apache-2.0
// The per-message header of a TCP connection (64 bytes on a data socket, big-endian):
//   [0] u32 sequence number (0, 1, 2, ... per connection: detects a desynchronised stream)
//   [4] u16 flags (below)
//   [6] u16 number of parts on the data sockets (1 .. number of data sockets)
//   [8] u64 message size in bytes
//   [16] 48 bytes of zeros (hello version 7): a payload behind a 16-byte header sat 16 bytes off
//   the cache-line alignment of the sender's buffer in the socket's pages, and the kernel's copy
//   of such bytes took 2.5x as long (4 ranks, 256 KiB all-reduce; NCCL's messages are multiples
//   of 64 bytes; docs/measurements.md, nineteenth pass). The receiver fails a header whose
//   padding is not zero (reserved, like the clear-to-send's).
// Where it travels (hello version 5): on the data socket that carries the message's first part,
// right in front of it, so that a message costs one segment and one syscall on each side where
// a header of its own on the control socket cost two of each (docs/measurements.md, issue 28).
// Part i of a message goes on data socket (first + i) mod N, where `first` is 0 for message 0
// and then the previous message's first plus its part count (next_first_stream), except after
// a one-part message of fewer than kSpreadMinBytes, whose successor starts on the same socket
// (hello version 10): both ends follow the same sequence, so the receiver knows which socket
// carries the next header, and reads it there once that socket's earlier parts are done. The
// control socket carries no payload: asks one way, clear-to-sends the other. A data socket that
// ends where a header would start is the sender's close after its last message: it fails only the
// receives posted for messages that never came (when they are tested); an end anywhere else cuts a
// message short and fails the connection. Flags: kOnRequest: the sender asks for the clear-to-sends
// it needs (kAsk), so the receiver stops sending one per posted receive from this record on (it
// never starts again). kCredit: a message sent before its clear-to-send whose sender wants one back
// anyway, to free what it charged (tcp_connection.cc). An ask record (kAsk, with kOnRequest, 0
// parts; the header's 16 bytes of fields, kAskSize) travels on the control socket: "message `seq`
// waits for its clear-to-send"; its header proper (without kAsk) follows on its data socket
// once the clear-to-send arrived. Asks come in sequence order; one may arrive before the
// headers of earlier messages, and after its own (a clear-to-send sent when the receive was
// posted may have let the header go first): the receiver drops an ask for a header it has read.
// It is peer-supplied: the receiver checks the sequence, the flags, the part count against its
// data sockets and the size against the posted buffer before touching memory.
//
// Clear-to-send, receiver -> sender on the same control socket (16 bytes, big-endian), in
// strictly increasing sequence order:
//   [0] u32 sequence number of the receive   [4] u32 reserved (0)   [8] u64 buffer capacity
// Until the sender's first kOnRequest record the receiver sends one per posted receive. After
// it, only for an ask, a kCredit header, a header too large for its buffer (so that the sender
// fails with the capacity too), and unasked for a receive whose buffer is at least half the
// sender's eager window (clears_unasked: the window comes in the sender's hello,
// handshake/hello.h) when one of the two messages before it is at least that large too
// (owes_unasked, hello version 9): at the latest once the header before it is read, at once
// when the receive is posted if one of the last two headers read was that large (a record
// more than owed is harmless). The buffer alone does not say how large the message is: NCCL
// posts its whole step slot for every message. Two, not one: a pipeline of such messages has
// a smaller one at the end of each ring step, and the next step's first should not wait for
// an ask. A sequence number it skips is a message the sender sent before its clear-to-send
// (a skip over any other is a protocol violation). A sender need not ask for a message of at
// least that half where it is owed (its buffer is at least as large, or the message fails): it
// asks only once a grace period has passed without the clear-to-send, which an ask never
// harms (the receiver answers a receive once) and which turns a buffer too small for the
// message into the usual failure instead of a wait. Where it is not owed, the sender asks at
// once when it cannot send.
// The sender moves a message's bytes only after its clear-to-send arrived, except eager messages
// (tcp_connection.cc: a small budget, or TCP window room the receiver's kernel has advertised,
// which its socket buffers then hold). Without it a late receiver (a rank busy computing) leaves
// the sender's data parked in a zero TCP window, and Linux aborts such a connection after
// TCP_USER_TIMEOUT even though the peer is alive.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mesh::tcp {

inline constexpr size_t kHeaderFieldsSize = 16;
inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kAskSize = kHeaderFieldsSize;
// 0x1 was kInline (the payload on the control socket) up to hello version 4.
inline constexpr uint16_t kFlagOnRequest = 0x2;
inline constexpr uint16_t kFlagCredit = 0x4;
inline constexpr uint16_t kFlagAsk = 0x8;

struct MessageHeader {
  uint32_t seq = 0;
  uint16_t flags = 0;
  uint16_t nparts = 0;
  uint64_t size = 0;
};

// Where message k+1's first part goes, from message k's (`first`), its size and part count, on
// a connection of `streams` data sockets. Spreading messages over the sockets lets large ones
// move in parallel (I/O threads, NICs, the receiving host's cores) and lets a one-part message
// of a Spark's port halves take the other cable; a message of a few hundred bytes gains none of
// that, and walking NCCL's small steps over four sockets cost each socket its own ACK per
// message and the receiver a cold socket per read: 8 ranks on 2 cores, 1 KiB ring all-reduce,
// 1.08-1.14x the time of NCCL's own Socket transport with the walk, 0.99-1.03x without it; 0.56
// pure ACKs per message against 0.19 (docs/measurements.md, twenty-eighth pass). Both ends know
// message k's size and parts before message k+1's header (the receiver from k's header).
inline constexpr uint64_t kSpreadMinBytes = 4096;
inline size_t next_first_stream(size_t first, uint64_t size, uint16_t nparts, size_t streams) {
  if (nparts <= 1 && size < kSpreadMinBytes) return first;
  return (first + nparts) % streams;
}

// kHeaderSize bytes: the fields and the zero padding.
void encode_header(const MessageHeader& h, uint8_t* out);
// kAskSize bytes: the fields alone.
void encode_ask(const MessageHeader& h, uint8_t* out);
// The fields of a header or an ask.
MessageHeader decode_header(const uint8_t* in);
// Whether a data socket's header has its padding zero (kHeaderFieldsSize..kHeaderSize).
bool header_padding_is_zero(const uint8_t* in);

inline constexpr size_t kCtsSize = 16;

struct ClearToSend {
  uint32_t seq = 0;
  uint32_t reserved = 0;
  uint64_t capacity = 0;
};

void encode_cts(const ClearToSend& c, uint8_t* out);
ClearToSend decode_cts(const uint8_t* in);

// Whether `bytes` (a receive buffer, or a message) is large enough for the clear-to-send
// unasked, on a connection whose sender's eager window is `window` (above; 0: every one is).
inline bool clears_unasked(uint64_t bytes, uint64_t window) {
  return bytes * 2 >= window;
}

// Which of the last two messages on a connection were large (clears_unasked): bit 0 the last,
// bit 1 the one before; both sides keep it, the sender as it sends, the receiver as it reads
// the headers (in the same sequence order). Before the first message both count as large.
inline constexpr uint8_t kLargeRecentAtStart = 3;
inline uint8_t next_large_recent(uint8_t recent, uint64_t bytes, uint64_t window) {
  return static_cast<uint8_t>(((recent << 1) & 2) | (clears_unasked(bytes, window) ? 1 : 0));
}
// Whether the next receive is owed its clear-to-send unasked (if its buffer is large): one of
// the two messages before it was large.
inline bool owes_unasked(uint8_t recent) {
  return recent != 0;
}

}  // namespace mesh::tcp
