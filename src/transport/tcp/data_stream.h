// SPDX-License-Identifier: Apache-2.0
// One data socket of a TCP connection and the queue of message parts it carries. The socket is
// non-blocking and is moved by whichever thread owns the connection's data path (io_pool.h):
// NCCL's own progress thread inside isend/irecv/test on small machines (one kernel copy per
// byte, no hand-off), or one I/O thread of the process-wide pool where one core cannot fill
// the link. docs/design.md ("TCP data path: where the CPU goes") has the measurements behind
// this: a thread per socket cost 1.1-2.1x plain TCP's CPU per byte in wake-ups and hand-offs.
//
// Every message's header travels on the stream that carries its first part, right in front of
// it (wire.h): the sender's part 0 carries the header as a prefix (one sendmsg for both), and
// the receiver reads a header with read_header() once the stream's earlier parts are done. A
// receiving stream reads through a small stage, so that a small message (header and payload)
// costs one recv(), and several that arrived together cost one; a larger payload is read
// straight into its buffer, and what follows it on the stream (the next header) into the stage
// in the same recvmsg(). Nothing is read into a posted buffer past its message's end.
//
// Threads: push() and read_header() from the connection's caller; pump() from the owner
// (caller or I/O thread), all serialised by mu_ (try_pump() and read_header() skip instead of
// waiting) once an I/O thread may move the stream (mark_shared(), IoThread::attach); without a
// pool every call comes from the connection's caller under the connection's own lock, and mu_
// is not taken. The parts counters are atomics read by the caller's test(); errors go to the
// connection's FailureLatch from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <sys/types.h>

#include "nccl/common.h"
#include "transport/failure_latch.h"
#include "transport/tcp/wire.h"
#include "util/socket_util.h"

namespace mesh::tcp {

struct Part {
  uint8_t* ptr = nullptr;
  size_t length = 0;
  std::atomic<int>* pending = nullptr;  // decremented (release) when this part is done
  // Sender: the message's header, written in front of the part (part 0 only; kHeaderSize
  // bytes that the request owns until the part is done). Null for the other parts.
  const uint8_t* header = nullptr;
};

class DataStream {
 public:
  DataStream(UniqueFd fd, bool sender, int index, FailureLatch* failure);
  DataStream(const DataStream&) = delete;
  DataStream& operator=(const DataStream&) = delete;

  // Queues a part; the queue holds NCCL_NET_MAX_REQUESTS parts (one per request in flight),
  // which the comm's request pool guarantees. False if it is full or the stream is closed.
  bool push(const Part& part);
  // Moves queued bytes until the socket would block or the queue is empty; a socket error or
  // EOF fails the connection (FailureLatch). Returns true if any byte moved. try_pump() returns
  // false at once when another thread is pumping (that one runs until EAGAIN or empty).
  bool pump();
  bool try_pump();
  // Receiver: reads up to `want` bytes of the next message header into dst, once every queued
  // part is done (the header follows them on the stream). Returns the bytes read, 0 when none
  // can be read now (parts still queued, another thread pumping, nothing arrived), -1 when the
  // stream failed (FailureLatch says why), kEndOfStream when the stream ended cleanly where a
  // header would start: the sender closed its comm after its last message on this stream, which
  // fails no message it sent (the caller decides what it means for the receives still posted).
  static constexpr ssize_t kEndOfStream = -3;
  // Receiver: what one recv() into the stage takes (a header with a small payload, or several).
  static constexpr size_t kStageBytes = 4096;
  ssize_t read_header(uint8_t* dst, size_t want);
  // A lock-free hint for pollers: parts are queued.
  bool has_work() const { return queued_.load(std::memory_order_acquire) > 0; }
  // Bytes queued and not yet moved (sender: not yet in the socket). Read without the lock by
  // the eager-send check (tcp_connection.cc), which reads it before the socket's own queue, so
  // bytes moving between the two reads are counted twice, never missed.
  size_t unmoved_bytes() const { return unmoved_bytes_.load(std::memory_order_acquire); }
  // Bytes ever queued by push(): with unmoved_bytes() (read first), how many the socket has
  // taken, for the eager-send check's remembered window edge (peer_window.h WindowEdge).
  uint64_t pushed_bytes() const { return pushed_bytes_.load(std::memory_order_acquire); }
  int fd() const { return fd_.get(); }
  // With an I/O pool: the connection's caller moves this stream's queue itself (one-part
  // messages, tcp_connection.cc), so its I/O thread leaves it alone and does not watch its
  // socket for it. Set and cleared by the caller only.
  void set_caller_moves(bool v) { caller_moves_.store(v, std::memory_order_release); }
  bool caller_moves() const { return caller_moves_.load(std::memory_order_acquire); }
  bool sender() const { return sender_; }
  // An I/O thread may move this stream from now on: its calls take mu_. Set by
  // IoThread::attach() before the thread can see the stream, and before the connection's
  // caller uses it; never cleared (a detached stream is only closed).
  void mark_shared() { shared_.store(true, std::memory_order_release); }
  void close();  // shuts the socket down and closes it; later pushes fail

 private:
  // mu_ when the stream is shared (mark_shared()), else nothing: without a pool one uncontended
  // lock per push, pump and header read was about 2% of the plugin's CPU samples (3 ranks, 1 KiB
  // all-reduce on one core), for callers already serialised by the connection's lock.
  class Guard {
   public:
    Guard(DataStream& s, bool wait);
    bool held() const { return held_; }

   private:
    std::unique_lock<std::mutex> lock_;
    bool held_ = true;
  };
  bool pump_locked();
  // read_header() once the guard is held and no part is queued.
  ssize_t header_locked(uint8_t* dst, size_t want);
  // The next bytes of the stream into dst: staged ones first, then the socket. Negative: the
  // socket would block (kWouldBlock), failed (-1, fail_io), or ended where `may_end` allows it
  // (kEndOfStream; elsewhere an end of stream is a failure: a message cut short).
  static constexpr ssize_t kWouldBlock = -2;
  ssize_t receive(uint8_t* dst, size_t want, bool may_end = false);
  ssize_t send_part(const Part& part);
  void fail_io(ssize_t n, int err);

  std::mutex mu_;
  UniqueFd fd_;
  const bool sender_;
  const int index_;
  FailureLatch* failure_;
  std::array<Part, NCCL_NET_MAX_REQUESTS> ring_{};
  size_t head_ = 0;
  size_t count_ = 0;
  size_t done_ = 0;  // bytes of the head part already moved (sender: its header's first)
  // A first part up to this size (header included) is copied and sent with send() (send_part).
  static constexpr size_t kSmallSendBytes = 4096;
  // Receiver: bytes read from the socket ahead of the part or header that consumes them.
  std::vector<uint8_t> stage_ = std::vector<uint8_t>(kStageBytes);
  size_t stage_begin_ = 0;
  size_t stage_end_ = 0;
  bool ended_ = false;  // receiver: the stream ended cleanly at a message boundary
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> unmoved_bytes_{0};
  std::atomic<uint64_t> pushed_bytes_{0};
  std::atomic<bool> caller_moves_{false};
  std::atomic<bool> shared_{false};
};

}  // namespace mesh::tcp
