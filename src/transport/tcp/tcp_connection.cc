// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/tcp_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/requests.h"
#include "transport/tcp/chunking.h"
#include "transport/tcp/peer_window.h"
#include "util/clock.h"
#include "util/log.h"

namespace mesh::tcp {
namespace {

// The process's pool, or null (the caller moves the bytes). A pool that cannot start (no
// threads or descriptors left) is reported once and the connections work without it.
IoPool* io_pool(size_t threads) {
  if (threads == 0) return nullptr;
  std::string why;
  IoPool* pool = IoPool::get(threads, &why);
  if (pool == nullptr && !why.empty()) {
    MESH_WARN(
        "could not start %zu TCP I/O threads (%s); NCCL's progress thread moves the "
        "TCP data itself (slower on fast links). Check the process's thread and descriptor "
        "limits, or set NCCL_MESH_TCP_IO_THREADS=0 to silence this.",
        threads, why.c_str());
  }
  return pool;
}

}  // namespace

TcpConnection::TcpConnection(bool sender, handshake::ConnectedSockets sockets,
                             const TcpOptions& options)
    : Connection(sender ? ObjectTag::kSend : ObjectTag::kRecv),
      sender_(sender),
      options_(options),
      peer_(sockets.peer),
      local_(sockets.local),
      control_(std::move(sockets.control)) {
  set_nonblocking(control_.get(), true);
  set_tcp_options(control_.get(), options_.user_timeout_ms);
  int index = 0;
  for (UniqueFd& fd : sockets.data) {
    set_tcp_options(fd.get(), options_.user_timeout_ms);
    streams_.push_back(std::make_unique<DataStream>(std::move(fd), sender, index++, &failure_));
  }
  assisted_.assign(streams_.size(), false);
  if (IoPool* pool = io_pool(options_.io_threads)) {
    for (auto& s : streams_) {
      owners_.push_back(pool->pick());
      owners_.back()->attach(s.get());
    }
  }
  for (Request& r : pool_) r.hdr.owner = this;
}

TcpConnection::~TcpConnection() {
  close();
}

void TcpConnection::close() {
  std::lock_guard<std::mutex> lock(mu_);
  // Detach first: once detach() returns, no I/O thread touches the stream again.
  for (size_t i = 0; i < owners_.size(); ++i) owners_[i]->detach(streams_[i].get());
  owners_.clear();
  for (auto& s : streams_) s->close();
  if (control_.valid()) shutdown(control_.get(), SHUT_RDWR);
  control_.reset();
}

std::string TcpConnection::describe() const {
  return std::string(sender_ ? "send" : "receive") + " connection " + local_ +
         (sender_ ? " -> " : " <- ") + peer_ + " (TCP, " + std::to_string(streams_.size()) +
         " data streams)";
}

void TcpConnection::fail(ncclResult_t code, const std::string& why) {
  failure_.fail(code, why);  // keeps the first cause: later errors are its consequences
}

ncclResult_t TcpConnection::report_failure() {
  return failure_.report(describe());
}

TcpConnection::Request* TcpConnection::allocate() {
  for (Request& r : pool_) {
    if (!r.in_use) {
      r.in_use = true;
      r.header_done = 0;
      r.header_parsed = false;
      r.inline_payload = false;
      r.payload_done = 0;
      r.control_done = false;
      r.parts_pending.store(0, std::memory_order_relaxed);
      return &r;
    }
  }
  return nullptr;
}

ncclResult_t TcpConnection::isend(void* data, size_t size, int /*tag*/, MemoryRegion* /*mr*/,
                                  void** request) {
  *request = nullptr;
  if (!sender_) return ncclInternalError;
  if (failure_.failed()) return report_failure();
  std::lock_guard<std::mutex> lock(mu_);
  progress();
  if (failure_.failed()) return report_failure();
  // Like NCCL's IB transport: until the receiver has posted the matching receive, answer
  // "retry later" (NULL request) instead of parking the bytes in the socket; except for a few
  // small messages (eager, below), which the receiver's socket buffer holds whenever it posts.
  const bool cleared = static_cast<int32_t>(cts_received_ - next_seq_) > 0;
  uint32_t nparts = choose_parts(size, streams_.size(), options_.min_chunk, options_.inline_bytes);
  const bool budgeted = !cleared && may_send_eagerly(size);
  const bool on_window = !cleared && !budgeted && windows_have_room(size, nparts);
  if (!cleared && !budgeted && !on_window) return ncclSuccess;
  const uint64_t capacity = cleared ? cts_capacity_[next_seq_ % cts_capacity_.size()] : size;
  Request* r = allocate();
  if (r == nullptr) return warn_pool_exhausted(describe(), true);
  r->data = static_cast<uint8_t*>(data);
  r->size = size;
  r->seq = next_seq_++;
  if (!cleared) {
    eager_size_[r->seq % eager_size_.size()] = size;
    on_window_[r->seq % on_window_.size()] = on_window;
    (on_window ? window_outstanding_ : eager_outstanding_) += size + kHeaderSize;
  }
  MessageHeader h{r->seq, static_cast<uint16_t>(nparts == 0 ? kFlagInline : 0),
                  static_cast<uint16_t>(nparts), size};
  encode_header(h, r->header);
  r->inline_payload = nparts == 0;
  // Too big for the receiver's buffer: only the header goes out, so the receiver fails with its
  // own clear message; no payload byte is sent and this side fails once the header is out.
  r->oversize = size > capacity;
  if (r->oversize) {
    r->oversize_capacity = capacity;
    nparts = 0;
  }
  if (nparts > 0 && !start_parts(r, static_cast<uint16_t>(nparts))) {
    r->in_use = false;
    return report_failure();
  }
  order_[(order_head_ + order_count_) % order_.size()] = r;
  ++order_count_;
  // The clear-to-sends were read a moment ago: only write the header (and inline payload).
  progress_control(/*read_clear_to_sends=*/false);
  pump_data();
  *request = r;
  return ncclSuccess;
}

ncclResult_t TcpConnection::irecv(int n, void** data, size_t* sizes, int* /*tags*/,
                                  MemoryRegion** /*mrs*/, void** request) {
  *request = nullptr;  // always overwritten: NCCL may have pre-set it to 0x1
  if (sender_) return ncclInternalError;
  if (n != 1) return warn_grouped_receive(describe(), n);
  if (failure_.failed()) return report_failure();
  std::lock_guard<std::mutex> lock(mu_);
  Request* r = allocate();
  if (r == nullptr) return warn_pool_exhausted(describe(), false);
  r->data = static_cast<uint8_t*>(data[0]);
  r->capacity = sizes[0];
  r->size = 0;
  r->seq = next_seq_++;
  encode_cts({r->seq, 0, r->capacity}, cts_out_.data() + cts_out_len_);
  cts_out_len_ += kCtsSize;  // at most one record per request in flight: always fits
  order_[(order_head_ + order_count_) % order_.size()] = r;
  ++order_count_;
  progress();
  *request = r;
  return ncclSuccess;
}

// Eager sends. Waiting for the clear-to-send costs a one-way trip whenever the receiver posts
// at about the time the sender does (every step of a ring, a ping-pong, ranks a little out of
// step), and NCCL's Socket transport never waits for it. The clear-to-send exists so that a late
// receiver never leaves bytes in a zero TCP window, where TCP_USER_TIMEOUT would kill a healthy
// connection; eager bytes are bounded so that this cannot happen: at most eager_bytes (64 KiB by
// default, headers included) and NCCL_NET_MAX_REQUESTS messages ahead of the clear-to-sends,
// which the receiver's socket buffer (tcp_rmem's default 128 KiB) takes in whole, so no byte
// waits in the sender's socket. The receiver needs no change: it reads a header only for a
// posted receive and checks the size against that buffer before touching it; the sender checks
// the capacity when the clear-to-send arrives (read_cts) and fails the connection if the message
// did not fit, as the receiver does.
bool TcpConnection::may_send_eagerly(size_t size) const {
  const uint64_t charge = static_cast<uint64_t>(size) + kHeaderSize;
  return options_.eager_bytes > 0 && charge <= options_.eager_bytes &&
         eager_outstanding_ + charge <= options_.eager_bytes &&
         next_seq_ - cts_received_ < static_cast<uint32_t>(eager_size_.size());
}

// Eager sends beyond the budget: a message may also go before its clear-to-send when every
// socket it would use has that much room in the window the receiver's kernel has already
// advertised (peer_window.h), counting what is still queued ahead of it there: the header (and
// an inline payload) behind the control socket's unsent headers, each part behind its data
// stream's unmoved parts. Those bytes then land in the receiver's socket buffers even if its
// process posts late, so, as with the budget, none can wait in a zero window. This lets the
// 64 KiB-1 MiB messages of a ring step go without the one-way trip (loopback and autotuned
// links advertise megabytes once traffic has flowed); a fresh connection's small window, a late
// receiver that has filled its buffer, or a kernel that cannot tell all answer no, and the
// message waits for its clear-to-send as before.
// The bytes ahead stay bounded (eager_window_bytes, 1 MiB by default): with the window alone a
// sender of a large transfer ran megabytes ahead and its receiver copied them out of cache-cold
// socket buffers (3-4 ranks, 4 MiB all-reduce: 1.3-1.5x slower; measurements.md).
bool TcpConnection::windows_have_room(size_t size, uint32_t nparts) {
  const uint64_t charge = static_cast<uint64_t>(size) + kHeaderSize;
  if (!window_known_ || options_.eager_bytes == 0 ||
      window_outstanding_ + charge > options_.eager_window_bytes) {
    return false;
  }
  if (next_seq_ - cts_received_ >= static_cast<uint32_t>(eager_size_.size())) return false;
  if (window_asked_ && window_asked_seq_ == next_seq_) return false;
  window_asked_ = true;
  window_asked_seq_ = next_seq_;
  uint64_t control = kHeaderSize + (nparts == 0 ? size : 0);
  for (size_t i = 0; i < order_count_; ++i) {
    const Request* q = order_[(order_head_ + i) % order_.size()];
    const size_t payload = q->inline_payload && !q->oversize ? q->size : 0;
    control += (kHeaderSize - q->header_done) + (payload - q->payload_done);
  }
  if (!socket_has_room(control_.get(), control)) return false;
  for (uint32_t i = 0; i < nparts; ++i) {
    // Parts of one message go to distinct streams (nparts <= streams).
    const DataStream& s = *streams_[stream_of_part(i)];
    const uint64_t need = part_range(size, nparts, i).length + s.unmoved_bytes();
    if (!socket_has_room(s.fd(), need)) return false;
  }
  return true;
}

bool TcpConnection::socket_has_room(int fd, uint64_t need) {
  uint64_t room = 0;
  if (!peer_window_room(fd, &room)) {
    window_known_ = false;  // not TCP (a test's socketpair) or an old kernel: ask no more
    return false;
  }
  return need <= room;
}

bool TcpConnection::start_parts(Request* r, uint16_t nparts) {
  r->parts_pending.store(nparts, std::memory_order_relaxed);
  // Parts go to the streams round-robin, continuing where the previous message stopped: a
  // message smaller than NCCL_MESH_TCP_MIN_CHUNK x streams (NCCL's 128 KiB p2p chunks, small
  // collective steps) would otherwise always ride stream 0 while the others idle. Both sides
  // call this in sequence order with the same part counts, so each stream's byte order agrees.
  for (uint16_t i = 0; i < nparts; ++i) {
    const PartRange range = part_range(r->size, nparts, i);
    const size_t s = stream_of_part(i);
    if (!streams_[s]->push({r->data + range.offset, range.length, &r->parts_pending})) {
      fail(ncclInternalError, "data stream queue overflow (more requests in flight than slots)");
      return false;
    }
    // With a pool, the caller moves a one-part message itself (pump_data): the pool would add
    // a hand-off (eventfd write, thread wake-up before the first byte moves) and no parallel
    // copy. Messages of several parts (NCCL's large-transfer slices among them) go to the I/O
    // threads as before: there the caller, NCCL's one proxy thread for every connection, would
    // otherwise copy a share of all bytes.
    if (owners_.empty()) continue;
    const bool caller = nparts == 1;
    if (caller) assisted_[s] = true;
    // The stream changes hands only when it goes from one kind of message to the other: its
    // thread stops (or starts again) watching its socket.
    if (streams_[s]->caller_moves() != caller) {
      streams_[s]->set_caller_moves(caller);
      owners_[s]->watch(streams_[s].get(), !caller);
    }
    if (!caller) owners_[s]->notify();
  }
  next_stream_ = (next_stream_ + nparts) % streams_.size();
  next_pump_ns_ = 0;  // new bytes to move: no back-off for them
  return true;
}

void TcpConnection::progress() {
  progress_control();
  pump_data();
}

// Without a pool the caller moves every stream's queued bytes until its socket would block.
// Parts were queued in sequence order on both sides, so each stream's byte order agrees.
// With a pool it moves only the streams that carry a one-part message (start_parts), and skips a
// stream an I/O thread is moving (try_pump): whichever of them holds the stream moves its whole
// queue in order. The I/O thread leaves a stream the caller moves alone (DataStream::
// caller_moves) and does not watch its socket: NCCL tests every request until it is done, so
// the caller's next test() moves what the socket would not take this time. A several-part
// message queued behind it hands the stream back to the thread (start_parts), and the caller
// keeps moving the stream too until its queue is empty: whoever holds it moves it in order.
//
// Back-off: NCCL's proxy calls test() in a tight loop, and a pass that finds every socket full
// (sender) or empty (receiver) is one failed syscall per stream. After such a pass the next one
// waits 1 us, doubling up to kMaxIdleBackoffNs, and any byte moved resets it. The kernel keeps
// moving data from the socket buffers meanwhile (megabytes with autotuning, far more than 16 us
// of a 100 Gb/s link), so the link stays busy while the caller stops burning CPU on EAGAIN.
void TcpConnection::pump_data() {
  const bool pool = !owners_.empty();
  if (pool && std::none_of(assisted_.begin(), assisted_.end(), [](bool a) { return a; })) return;
  const int64_t now = monotonic_ns();
  if (now < next_pump_ns_) return;
  bool moved = false;
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (failure_.failed()) return;
    DataStream& s = *streams_[i];
    if (!pool) {
      if (s.has_work()) moved |= s.pump();
    } else if (assisted_[i]) {
      if (s.has_work()) {
        moved |= s.try_pump();
      } else {
        // Its queue ran empty: the parts the caller took on are done. The stream stays the
        // caller's (unwatched by its thread) until a several-part message is queued on it.
        assisted_[i] = false;
      }
    }
  }
  if (moved) {
    idle_backoff_ns_ = 0;
    next_pump_ns_ = 0;
  } else {
    idle_backoff_ns_ = std::clamp<int64_t>(idle_backoff_ns_ * 2, 1000, kMaxIdleBackoffNs);
    next_pump_ns_ = now + idle_backoff_ns_;
  }
}

void TcpConnection::progress_control(bool read_clear_to_sends) {
  if (sender_ ? read_clear_to_sends && !read_cts() : !flush_cts()) return;
  while (order_count_ > 0 && !failure_.failed()) {
    Request* r = order_[order_head_];
    const bool complete = sender_ ? progress_send(r) : progress_recv(r);
    if (!complete) return;
    r->control_done = true;
    order_head_ = (order_head_ + 1) % order_.size();
    --order_count_;
  }
}

bool TcpConnection::flush_cts() {
  size_t done = 0;
  while (done < cts_out_len_) {
    const ssize_t n = send(control_.get(), cts_out_.data() + done, cts_out_len_ - done,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      const bool remote = errno == ECONNRESET || errno == EPIPE;
      fail(remote ? ncclRemoteError : ncclSystemError,
           "control socket send failed: " + errno_text(errno) +
               (remote ? " (the peer closed the connection or its process died)" : ""));
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (done > 0) {
    std::memmove(cts_out_.data(), cts_out_.data() + done, cts_out_len_ - done);
    cts_out_len_ -= done;
  }
  return true;
}

bool TcpConnection::read_cts() {
  for (;;) {
    const size_t asked = sizeof(cts_in_) - cts_in_len_;
    const ssize_t n = recv(control_.get(), cts_in_ + cts_in_len_, asked, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) {
      fail(ncclRemoteError, n == 0 ? "the peer closed the connection (process exited or closed "
                                     "its receive comm)"
                                   : "control socket receive failed: " + errno_text(errno));
      return false;
    }
    cts_in_len_ += static_cast<size_t>(n);
    const size_t whole = cts_in_len_ / kCtsSize * kCtsSize;
    for (size_t off = 0; off < whole; off += kCtsSize) {
      if (!apply_cts(decode_cts(cts_in_ + off))) return false;
    }
    std::memmove(cts_in_, cts_in_ + whole, cts_in_len_ - whole);
    cts_in_len_ -= whole;
    // A short read means the socket was drained: no need for a recv() that says EAGAIN.
    if (static_cast<size_t>(n) < asked) return true;
  }
}

// One clear-to-send record, in sequence order.
bool TcpConnection::apply_cts(const ClearToSend& c) {
  // The receiver can have at most NCCL_NET_MAX_REQUESTS receives posted ahead of our sends
  // (behind them: the messages we sent eagerly).
  if (c.seq != cts_received_ || c.reserved != 0 ||
      static_cast<int32_t>(cts_received_ - next_seq_) >=
          static_cast<int32_t>(cts_capacity_.size())) {
    fail(ncclRemoteError, "malformed clear-to-send (sequence " + std::to_string(c.seq) +
                              ", expected " + std::to_string(cts_received_) +
                              "): stream corrupted");
    return false;
  }
  if (static_cast<int32_t>(c.seq - next_seq_) < 0) {
    // A message already sent eagerly: its bytes now have a posted buffer.
    const uint64_t size = eager_size_[c.seq % eager_size_.size()];
    (on_window_[c.seq % on_window_.size()] ? window_outstanding_ : eager_outstanding_) -=
        size + kHeaderSize;
    if (size > c.capacity) {
      fail(ncclInvalidUsage, oversize_at_sender(size, c.capacity));
      return false;
    }
  } else {
    cts_capacity_[c.seq % cts_capacity_.size()] = c.capacity;
  }
  ++cts_received_;
  return true;
}

// Writes the header (and an inline payload) without blocking; true once all of it is out.
bool TcpConnection::progress_send(Request* r) {
  const size_t payload = r->inline_payload && !r->oversize ? r->size : 0;
  while (r->header_done < kHeaderSize || r->payload_done < payload) {
    iovec iov[2];
    int cnt = 0;
    if (r->header_done < kHeaderSize) {
      iov[cnt++] = {r->header + r->header_done, kHeaderSize - r->header_done};
    }
    if (r->payload_done < payload) {
      iov[cnt++] = {r->data + r->payload_done, payload - r->payload_done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(cnt);
    const ssize_t n = sendmsg(control_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return false;
      const bool remote = errno == ECONNRESET || errno == EPIPE;
      fail(remote ? ncclRemoteError : ncclSystemError,
           "control socket send failed: " + errno_text(errno) +
               (remote ? " (the peer closed the connection or its process died)" : ""));
      return false;
    }
    size_t moved = static_cast<size_t>(n);
    const size_t h = std::min(moved, kHeaderSize - r->header_done);
    r->header_done += h;
    r->payload_done += moved - h;
  }
  if (r->oversize) {
    fail(ncclInvalidUsage, oversize_at_sender(r->size, r->oversize_capacity));
    return false;
  }
  return true;
}

// Reads and validates the header, then the inline payload or hands parts to the workers.
bool TcpConnection::progress_recv(Request* r) {
  while (r->header_done < kHeaderSize) {
    const ssize_t n = read_control(r->header + r->header_done, kHeaderSize - r->header_done,
                                   "the peer closed the connection (process exited or closed "
                                   "its send comm)");
    if (n <= 0) return false;
    r->header_done += static_cast<size_t>(n);
  }
  if (!r->header_parsed) {
    const MessageHeader h = decode_header(r->header);
    if (h.seq != r->seq) {
      fail(ncclRemoteError, "message header out of sequence (expected " + std::to_string(r->seq) +
                                ", got " + std::to_string(h.seq) + "): stream corrupted");
      return false;
    }
    const bool is_inline = (h.flags & kFlagInline) != 0;
    if ((h.flags & ~kFlagInline) != 0 || (is_inline && h.nparts != 0) ||
        (!is_inline && (h.nparts == 0 || h.nparts > streams_.size()))) {
      fail(ncclRemoteError, "malformed message header (flags " + std::to_string(h.flags) + ", " +
                                std::to_string(h.nparts) + " parts for " +
                                std::to_string(streams_.size()) + " data streams)");
      return false;
    }
    if (h.size > r->capacity) {
      fail(ncclInvalidUsage, oversize_at_receiver(h.size, r->capacity));
      return false;
    }
    r->size = h.size;
    r->inline_payload = is_inline;
    r->header_parsed = true;
    if (!is_inline && !start_parts(r, h.nparts)) return false;
  }
  if (!r->inline_payload) return true;
  while (r->payload_done < r->size) {
    const ssize_t n = read_control(r->data + r->payload_done, r->size - r->payload_done,
                                   "the peer closed the connection in the middle of a message");
    if (n <= 0) return false;
    r->payload_done += static_cast<size_t>(n);
  }
  return true;
}

// The receiver's control stream: headers and inline payloads, read through a small stage so
// that a small message costs one recv() for header and payload together (and several messages
// that arrived together cost one), instead of one for the header and one for the payload. Large
// payloads are read straight into the posted buffer once the stage is empty (no second copy).
// Bytes past the current message stay staged for the next receive. Nothing is written into a
// posted buffer before its header was validated: the stage is ours.
ssize_t TcpConnection::read_control(uint8_t* dst, size_t want, const char* eof_what) {
  if (rx_begin_ == rx_end_) {
    rx_begin_ = rx_end_ = 0;
    const bool direct = want >= rx_stage_.size() / 2;
    const ssize_t n = recv(control_.get(), direct ? dst : rx_stage_.data(),
                           direct ? want : rx_stage_.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (n <= 0) {
      fail(ncclRemoteError,
           n == 0 ? std::string(eof_what) : "control socket receive failed: " + errno_text(errno));
      return -1;
    }
    if (direct) return n;
    rx_end_ = static_cast<size_t>(n);
  }
  const size_t k = std::min(want, rx_end_ - rx_begin_);
  std::memcpy(dst, rx_stage_.data() + rx_begin_, k);
  rx_begin_ += k;
  return static_cast<ssize_t>(k);
}

ncclResult_t TcpConnection::test(RequestHeader* request, int* done, int* sizes) {
  auto* r = reinterpret_cast<Request*>(request);
  *done = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!is_in_flight(pool_, r)) return warn_not_in_flight(describe());
  // Finished already (an inline send is usually done inside isend()): report it without a
  // syscall; the other requests progress from their own test() calls and from isend/irecv.
  if (r->control_done && r->parts_pending.load(std::memory_order_acquire) == 0 &&
      !failure_.failed()) {
    *done = 1;
    if (sizes != nullptr) *sizes = reported_size(r->size);
    r->in_use = false;
    return ncclSuccess;
  }
  // Its control bytes are done and its parts are still on the streams: only move data (none
  // with a pool: the I/O threads do). NCCL's proxy thread calls test() in a tight loop over every
  // request in flight; a recv() on the control socket per call costs CPU that the copies need.
  // Requests whose control bytes are not done (a header to read, a clear-to-send to write)
  // drive the control socket from their own test() calls, and isend() reads clear-to-sends.
  if (r->control_done && r->parts_pending.load(std::memory_order_acquire) != 0 &&
      !failure_.failed()) {
    pump_data();
  } else {
    progress();
  }
  if (r->control_done && r->parts_pending.load(std::memory_order_acquire) == 0) {
    *done = 1;
    if (sizes != nullptr) *sizes = reported_size(r->size);
    r->in_use = false;
    return ncclSuccess;
  }
  if (failure_.failed()) return report_failure();
  return ncclSuccess;
}

}  // namespace mesh::tcp
