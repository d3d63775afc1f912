// SPDX-License-Identifier: Apache-2.0
// A send or receive comm over TCP: several non-blocking data sockets that carry the messages
// (each one's header in front of its first part, wire.h; a large message in parts, in
// parallel) and one non-blocking control socket for the clear-to-sends and asks, driven by
// NCCL's own progress thread. Who moves the data sockets' bytes is decided once per process
// (io_pool.h): NCCL's progress thread itself inside isend/irecv/test (small machines), or the
// process's I/O threads (many cores).
//
// Threads: isend/irecv/test/close run on NCCL's threads and take `mu_` (a harness that tests
// from several threads stays safe); I/O threads touch only the data streams (their own lock)
// and the parts counters of requests; failures reach failure_ from any of them.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/types.h>

#include "handshake/connected_sockets.h"
#include "transport/connection.h"
#include "transport/failure_latch.h"
#include "transport/tcp/data_stream.h"
#include "transport/tcp/io_pool.h"
#include "transport/tcp/peer_window.h"
#include "transport/tcp/wire.h"

namespace mesh::tcp {

struct TcpOptions {
  size_t streams = 4;  // NCCL_MESH_TCP_STREAMS, before plan_data_streams (connector only)
  size_t min_chunk = 128 * 1024;
  // Messages up to this size go in one part (NCCL_MESH_TCP_INLINE_BYTES; with an I/O pool the
  // caller moves those itself: start_parts).
  size_t inline_bytes = 64 * 1024;
  // Bytes (headers included) a sender may write before the receiver's clear-to-send for them
  // arrived (NCCL_MESH_TCP_EAGER_BYTES); 0: every message waits for its clear-to-send.
  size_t eager_bytes = 64 * 1024;
  // Beyond eager_bytes: bytes (headers included) that may be ahead of their clear-to-sends
  // when the peer's kernel has already advertised TCP window room for all of them on every
  // socket they use (NCCL_MESH_TCP_EAGER_WINDOW; peer_window.h). 0 turns it off; so does a
  // relayed connection (plugin.cc), where the window is the relay's, not the receiver's. A
  // receiver's is its sender's (the hello's, plugin.cc accept): it sends clear-to-sends unasked
  // by that bound (wire.h clears_unasked).
  size_t eager_window_bytes = 1024 * 1024;
  // Sender: how long a message that its receiver clears unasked waits for that clear-to-send
  // before it asks anyway (wire.h, TcpConnection::may_ask_now); 0 asks at once.
  int64_t ask_grace_ns = 20000000;
  int64_t user_timeout_ms = 20000;
  size_t io_threads = 0;  // NCCL_MESH_TCP_IO_THREADS resolved; 0: the caller moves the data
};

class TcpConnection final : public Connection {
 public:
  TcpConnection(bool sender, handshake::ConnectedSockets sockets, const TcpOptions& options);
  ~TcpConnection() override;

  ncclResult_t isend(void* data, size_t size, int tag, MemoryRegion* mr, void** request) override;
  ncclResult_t irecv(int n, void** data, size_t* sizes, int* tags, MemoryRegion** mrs,
                     void** request) override;
  ncclResult_t test(RequestHeader* request, int* done, int* sizes) override;
  void close() override;
  std::string describe() const override;

 private:
  struct Request {
    RequestHeader hdr;
    bool in_use = false;
    uint8_t* data = nullptr;
    size_t capacity = 0;  // receive: the posted buffer size
    size_t size = 0;      // the message size (send: given; receive: from the header)
    uint32_t seq = 0;
    uint8_t header[kHeaderSize] = {};
    size_t header_done = 0;     // receive: header bytes read
    bool control_done = false;  // header queued (send) or read (receive)
    bool oversize = false;      // send larger than the receiver's buffer: header only, then fail
    uint64_t oversize_capacity = 0;
    uint16_t nparts = 0;        // send: the parts its header announces
    bool awaiting_cts = false;  // send: asked for its clear-to-send, nothing of it sent yet
    bool cts_sent = false;      // receive: its clear-to-send is queued or written
    bool asked = false;         // receive: the sender's ask for it arrived (wire.h: once each)
    std::atomic<int> parts_pending{0};
  };

  Request* allocate();
  // Advances the control socket and the headers (and, without a pool, the data); holds mu_.
  void progress(bool read_records = true);
  void progress_control(bool read_records = true);
  void pump_data();  // without a pool: moves data bytes on the caller's thread
  bool flush_cts();  // receiver: writes queued clear-to-sends
  bool read_cts();   // sender: reads clear-to-sends
  bool apply_cts(const ClearToSend& c);
  void release_early(uint32_t seq);
  bool clear_asked(uint32_t seq, uint64_t capacity);
  bool read_asks();                                // receiver: reads asks from the control socket
  bool write_queued(uint8_t* queue, size_t* len);  // control socket: a queue of records
  bool queue_cts(Request* r);                      // receiver
  bool accept_ask(const MessageHeader& h);         // receiver
  bool clear_after_header(Request* r, uint64_t size);  // receiver: r's header was just read
  bool progress_send(Request* r);
  bool progress_recv(Request* r);
  // Queues a message's parts (the receiver's once its header is read).
  bool start_parts(Request* r, uint16_t nparts);
  void fail(ncclResult_t code, const std::string& why);
  ncclResult_t report_failure();

  const bool sender_;
  TcpOptions options_;
  std::string peer_;
  std::string local_;
  UniqueFd control_;
  std::vector<std::unique_ptr<DataStream>> streams_;
  size_t cables_ = 1;  // distinct local addresses of the data streams (isend's part count)
  std::vector<IoThread*> owners_;  // the I/O thread of each stream (empty without a pool)
  // With a pool: streams that carry a one-part message, which the caller moves (pump_data).
  std::vector<bool> assisted_;
  // Without a pool: when pump_data() may try the sockets again after a pass that moved nothing.
  static constexpr int64_t kMaxIdleBackoffNs = 16000;
  // How long a closed sender's control socket waits for the receiver to finish (close()): the
  // receiver's FIN normally ends it as soon as it has read the last message.
  static constexpr int64_t kSenderLingerMs = 60000;
  int64_t next_pump_ns_ = 0;
  int64_t idle_backoff_ns_ = 0;

  std::mutex mu_;
  std::array<Request, NCCL_NET_MAX_REQUESTS> pool_;
  std::array<Request*, NCCL_NET_MAX_REQUESTS> order_{};  // posted, control not yet done, FIFO
  size_t order_head_ = 0;
  size_t order_count_ = 0;
  uint32_t next_seq_ = 0;
  size_t next_stream_ = 0;  // data stream that carries the next message's first part
  // The data stream that carries part `i` of the next message (start_parts places them; the
  // eager window check must look at the same sockets).
  size_t stream_of_part(uint32_t i) const { return (next_stream_ + i) % streams_.size(); }

  // Clear-to-send (wire.h). Receiver: records not yet written. Sender: bytes of a partly read
  // record, and the capacity announced for each sequence number still to be sent.
  std::array<uint8_t, NCCL_NET_MAX_REQUESTS * kCtsSize> cts_out_{};
  size_t cts_out_len_ = 0;
  // Clear-to-sends are read in batches (one recv() for every record that has arrived).
  uint8_t cts_in_[NCCL_NET_MAX_REQUESTS * kCtsSize] = {};
  size_t cts_in_len_ = 0;
  // Sender: one past the last clear-to-send's sequence number (the receiver may skip the messages
  // sent before theirs, clear-to-sends on request: wire.h).
  uint32_t cts_received_ = 0;
  std::array<uint64_t, NCCL_NET_MAX_REQUESTS> cts_capacity_{};
  // Clear-to-sends on request (wire.h kFlagOnRequest; design.md): the sender asks for the ones
  // it needs instead of the receiver sending one per posted receive. On when messages can go on
  // window room (a direct TCP connection whose kernel reports windows, NCCL_MESH_TCP_EAGER_WINDOW
  // and NCCL_MESH_TCP_EAGER_BYTES above 0); off, the receiver sends them all as before.
  bool cts_on_request_ = false;
  // Sender: asks not yet written (at record boundaries only), and the messages that wait for
  // their clear-to-send after asking (everything behind them waits too: sequence order).
  std::array<uint8_t, NCCL_NET_MAX_REQUESTS * kAskSize> ask_out_{};
  size_t ask_out_len_ = 0;
  size_t asks_waiting_ = 0;
  // Sender: a message whose receiver sends its clear-to-send unasked (wire.h) does not ask
  // within the grace period: isend answers "retry later" until the record comes or the period
  // is over. Which message waits so (next_seq_ when it first did), and until when (0: none has
  // waited yet; a deadline on the steady clock is never 0).
  // Only where one of the two messages before it was that large itself (wire.h owes_unasked):
  // which of messages next_seq_ - 1 and - 2 were (wire.h next_large_recent).
  bool may_ask_now(size_t size);
  uint8_t tx_large_recent_ = kLargeRecentAtStart;
  uint32_t unasked_wait_seq_ = 0;
  int64_t unasked_wait_until_ns_ = 0;
  // Sender: which messages went before their clear-to-send and still charge eager_bytes or
  // eager_window_bytes (released by their clear-to-send, or by a later one that skips them).
  std::array<bool, NCCL_NET_MAX_REQUESTS> early_{};
  // Sender, clear-to-sends on request: what can bring a record (isend reads the control socket
  // for one only then). One past the last message that asked for its clear-to-send or credit
  // (an ask, kFlagCredit); whether the receiver also sends them unasked (for a buffer of at
  // least half this side's NCCL_MESH_TCP_EAGER_WINDOW, irecv: a record for a message past the
  // first request window that nobody asked for). cts_may_wait() also counts the first request
  // window, while it is open (next_seq_ below it: the receiver sends one per posted receive until
  // it reads the first on-request header, which it reads before it can post a receive past it).
  uint32_t requested_end_ = 0;
  bool unasked_cts_ = false;
  bool cts_may_wait() const;
  bool record_requested() const;
  bool credit_rule(uint64_t ahead, uint64_t outstanding, size_t size, uint64_t since_bytes,
                   uint64_t since_msgs) const;
  uint64_t early_bound(size_t size) const;
  // Sender: bytes (headers included) and messages that went early since the last one that asked
  // for its clear-to-send or credit (credit_rule: one credit asked at a time).
  uint64_t since_credit_bytes_ = 0;
  uint64_t since_credit_msgs_ = 0;
  bool wants_credit(size_t size) const;
  bool credit_due(size_t size) const;
  // Receiver: whether the sender asks for its clear-to-sends (sticky), the sequence number of
  // the next header proper, and asks read before their receive was posted.
  bool on_request_ = false;
  uint32_t rx_next_header_ = 0;
  // Receiver: which of the last two headers read were of messages of at least half the
  // sender's window (wire.h next_large_recent): while one was, irecv sends a large buffer's
  // clear-to-send unasked at once (wire.h owes_unasked).
  uint8_t rx_large_recent_ = kLargeRecentAtStart;
  std::array<bool, NCCL_NET_MAX_REQUESTS> asked_{};
  // Sender, eager messages (sent before their clear-to-send): the bytes they charge against
  // eager_bytes until it arrives, and each one's size, to check against the capacity it brings.
  bool may_send_eagerly(size_t size) const;
  uint64_t eager_outstanding_ = 0;
  std::array<uint64_t, NCCL_NET_MAX_REQUESTS> eager_size_{};
  // Window-checked eager sends (windows_have_room): their bytes ahead of the clear-to-sends,
  // and which messages went that way. Asked at most once per message (a "no" costs a few
  // syscalls and NCCL retries isend in a tight loop; the clear-to-send follows anyway), and
  // never again once the kernel could not answer.
  // May raise `nparts` (more, smaller parts over the next streams) where that lets it go.
  bool windows_have_room(size_t size, uint32_t* nparts);
  bool parts_have_room(size_t size, uint32_t nparts, uint64_t* measured);
  static constexpr size_t kMinSplitPart = 16 * 1024;
  bool socket_has_room(WindowEdge& edge, int fd, uint64_t sent, uint64_t need, bool exact,
                       bool may_ask);
  uint64_t window_outstanding_ = 0;
  std::array<bool, NCCL_NET_MAX_REQUESTS> on_window_{};
  bool window_known_ = true;
  // The window edges last measured (peer_window.h), one per data stream (its bytes:
  // DataStream::pushed_bytes).
  std::vector<WindowEdge> stream_edges_;
  bool window_asked_ = false;
  uint32_t window_asked_seq_ = 0;

  // Receiver: ask records read from the control socket (a partial one kept for the next read),
  // whether the sender has closed it, and the test() calls that found a header missing since
  // the last header was read.
  std::array<uint8_t, 2 * NCCL_NET_MAX_REQUESTS * kAskSize> ask_in_{};
  size_t ask_in_len_ = 0;
  bool control_eof_ = false;
  // Receiver: a data stream ended where the next header would start (DataStream::kEndOfStream).
  bool peer_closed_ = false;
  static constexpr unsigned kAskPolls = 8;
  unsigned ask_polls_ = 0;

  FailureLatch failure_;  // data streams fail() it from the I/O threads
};

}  // namespace mesh::tcp
