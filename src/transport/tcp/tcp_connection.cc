// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/tcp_connection.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "handshake/hello.h"
#include "transport/requests.h"
#include "transport/tcp/chunking.h"
#include "transport/tcp/peer_window.h"
#include "util/clock.h"
#include "util/lingering_close.h"
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

// Hands the whole records at the front of `buf` (read from the control socket) to `apply` in
// order and moves a partial one to the front for the next read. False as soon as `apply`
// refuses one (it failed the connection).
template <typename Apply>
bool take_records(uint8_t* buf, size_t* len, size_t record, Apply apply) {
  const size_t whole = *len / record * record;
  for (size_t off = 0; off < whole; off += record) {
    if (!apply(buf + off)) return false;
  }
  std::memmove(buf, buf + whole, *len - whole);
  *len -= whole;
  return true;
}

// The cables a connection's data sockets ride: their distinct local addresses (every cable is
// its own interface; a Spark's port halves are two). A socket whose address cannot be read counts
// as a cable of its own, so that a message is never split over fewer cables than before.
size_t count_cables(const std::vector<UniqueFd>& data) {
  std::vector<uint32_t> seen;
  size_t unknown = 0;
  for (const UniqueFd& fd : data) {
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
        sa.sin_family != AF_INET) {
      ++unknown;
      continue;
    }
    if (std::find(seen.begin(), seen.end(), sa.sin_addr.s_addr) == seen.end()) {
      seen.push_back(sa.sin_addr.s_addr);
    }
  }
  return std::max<size_t>(1, seen.size() + unknown);
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
  if (sender_) cables_ = count_cables(sockets.data);  // isend's part count
  int index = 0;
  for (UniqueFd& fd : sockets.data) {
    set_tcp_options(fd.get(), options_.user_timeout_ms);
    streams_.push_back(std::make_unique<DataStream>(std::move(fd), sender, index++, &failure_));
  }
  assisted_.assign(streams_.size(), false);
  stream_edges_.resize(streams_.size());
  if (IoPool* pool = io_pool(options_.io_threads)) {
    for (auto& s : streams_) {
      owners_.push_back(pool->pick());
      owners_.back()->attach(s.get());
    }
  }
  for (Request& r : pool_) r.hdr.owner = this;
  // Every message's header travels on a data stream (wire.h). The handshake gives a TCP
  // connection at least one (hello.cc); a connection built without any fails its first call.
  if (streams_.empty()) fail(ncclInternalError, "TCP connection without data sockets");
  // Clear-to-sends on request only where messages can go on window room: elsewhere (a relayed
  // connection, a kernel that cannot tell the window, eager sends off) most messages wait for
  // theirs, and a clear-to-send already sent for a receive posted ahead saves the ask's trip.
  uint64_t room = 0;
  cts_on_request_ = sender_ && options_.eager_bytes > 0 && options_.eager_window_bytes > 0 &&
                    peer_window_room(control_.get(), &room);
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
  // The receiver's clear-to-sends keep arriving on the sender's control socket until it has
  // posted its last receive: a plain close() would answer them with a reset, which the receiver
  // reads as a dead peer while the bytes of completed sends are still on their way to it on the
  // data streams (those close gracefully: nothing comes back on them, so their close() sends a
  // FIN behind the last byte). The receiver's side has nothing of ours left to deliver.
  if (sender_) {
    close_when_peer_done(std::move(control_), kSenderLingerMs);
  } else if (control_.valid()) {
    shutdown(control_.get(), SHUT_RDWR);
  }
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
      r.control_done = false;
      r.oversize = false;
      r.nparts = 0;
      r.awaiting_cts = false;
      r.cts_sent = false;
      r.asked = false;
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
  // The clear-to-sends are read below, only where they could change how this message goes.
  progress(/*read_records=*/false);
  if (failure_.failed()) return report_failure();
  // Like NCCL's IB transport: until the receiver has posted the matching receive, no payload
  // byte is parked in the socket; except for messages the receiver's socket buffers hold
  // whenever it posts (eager, below). Without its clear-to-send a message either waits ("retry
  // later": NULL request) or, with clear-to-sends on request, asks for it and waits in flight.
  // At least one part: the header travels in front of the first (wire.h). Parts spread a
  // message over the data streams so that I/O threads copy them in parallel; without a pool
  // NCCL's thread copies every part itself, one after the other, so a message is split only over
  // the cables (their NICs move the parts in parallel): a second part on the same cable bought
  // nothing but its own sendmsg and recv (3 ranks, 1-4 MiB all-reduce on 2 cores: 5-14% of the
  // plugin's time, measurements.md sixteenth pass). Consecutive streams ride consecutive
  // cables (plan_data_streams), so the parts land on distinct ones.
  const size_t spread = owners_.empty() ? std::min(cables_, streams_.size()) : streams_.size();
  uint32_t nparts =
      std::max<uint32_t>(1, choose_parts(size, spread, options_.min_chunk, options_.inline_bytes));
  // The clear-to-sends are read only when they could change how this message goes: it cannot
  // go yet (not cleared, no eager budget, no window room), or going early it would ask for
  // credit. Most ring and pipeline messages go early and a clear-to-send comes back only for some
  // of them (credits, asks, large buffers: wire.h), so reading the control socket first, for
  // every message, was one failed recv() per message (3 ranks, 64 KiB all-reduce: 0.94 per
  // message, a sixth of the plugin's syscalls). Records not read yet wait in the socket (at most
  // one per request in flight); one read late for a message that went early is what the early
  // path handles anyway (apply_cts).
  bool cleared = false;
  bool budgeted = false;
  bool on_window = false;
  // Behind a message that waits for its clear-to-send nothing goes early: headers and parts
  // leave in sequence order. The window is asked once per message (windows_have_room): after
  // the records, a no is checked again only against the bound (their charges may have come back).
  // `has_room`: the window already answered yes for this message (the records only return
  // charges, so that answer stands).
  auto decide = [&](bool has_room) {
    cleared = static_cast<int32_t>(cts_received_ - next_seq_) > 0;
    budgeted = !cleared && asks_waiting_ == 0 && may_send_eagerly(size);
    on_window = !cleared && asks_waiting_ == 0 && !budgeted &&
                (has_room || windows_have_room(size, &nparts));
  };
  decide(false);
  const bool early_now = budgeted || on_window;
  // Going early, a message that would ask for credit reads the records first only if one can
  // be there: a record returns charges and may spare it the ask. Where none was asked for and
  // the receiver sends none unasked, that read could only fail (3 ranks, 256 KiB all-reduce:
  // 0.35 failed reads per message, a syscall each).
  if ((!cleared && !early_now) ||
      (early_now && cts_on_request_ && credit_due(size) && cts_may_wait())) {
    progress_control(/*read_records=*/true);
    if (failure_.failed()) return report_failure();
    decide(on_window);
  }
  const bool ask = !cleared && !budgeted && !on_window && cts_on_request_ &&
                   next_seq_ - cts_received_ < static_cast<uint32_t>(early_.size()) &&
                   may_ask_now(size);
  if (!cleared && !budgeted && !on_window && !ask) return ncclSuccess;
  const uint64_t capacity = cleared ? cts_capacity_[next_seq_ % cts_capacity_.size()] : size;
  Request* r = allocate();
  if (r == nullptr) return warn_pool_exhausted(describe(), true);
  r->data = static_cast<uint8_t*>(data);
  r->size = size;
  r->seq = next_seq_++;
  tx_large_recent_ = next_large_recent(tx_large_recent_, size, options_.eager_window_bytes);
  const bool early = budgeted || on_window;
  if (early) {
    const size_t i = r->seq % early_.size();
    eager_size_[i] = size;
    on_window_[i] = on_window;
    early_[i] = true;
    (on_window ? window_outstanding_ : eager_outstanding_) += size + kHeaderSize;
  }
  uint16_t flags = 0;
  if (cts_on_request_) flags |= kFlagOnRequest;
  if (early) {
    since_credit_bytes_ += size + kHeaderSize;
    ++since_credit_msgs_;
  }
  if (early && cts_on_request_ && wants_credit(size)) flags |= kFlagCredit;
  if ((flags & kFlagCredit) != 0 || ask) {
    requested_end_ = r->seq + 1;
    since_credit_bytes_ = 0;
    since_credit_msgs_ = 0;
  }
  MessageHeader h{r->seq, flags, static_cast<uint16_t>(nparts), size};
  encode_header(h, r->header);
  r->nparts = static_cast<uint16_t>(nparts);
  if (ask) {
    // The ask goes out on the control socket (progress_control); the header and the parts
    // once the clear-to-send brings the buffer's capacity (clear_asked).
    encode_ask({r->seq, static_cast<uint16_t>(kFlagAsk | kFlagOnRequest), 0, size},
               ask_out_.data() + ask_out_len_);
    ask_out_len_ += kAskSize;  // at most one per request in flight: always fits
    r->awaiting_cts = true;
    ++asks_waiting_;
  } else {
    // Too big for the receiver's buffer: only the header goes out, so the receiver fails with
    // its own clear message; no payload byte is sent and this side fails once the header is out.
    r->oversize = size > capacity;
    if (r->oversize) r->oversize_capacity = capacity;
    if (!start_parts(r, static_cast<uint16_t>(nparts))) {
      r->in_use = false;
      return report_failure();
    }
  }
  order_[(order_head_ + order_count_) % order_.size()] = r;
  ++order_count_;
  // The clear-to-sends were read a moment ago: only write the ask; the header and the parts
  // are on their streams (start_parts), which pump_data moves without a pool.
  progress_control(/*read_records=*/false);
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
  order_[(order_head_ + order_count_) % order_.size()] = r;
  ++order_count_;
  // One clear-to-send per posted receive, until the sender says it asks for the ones it needs
  // (wire.h): then only for a message that already asked, and unasked for a buffer of at least
  // half the sender's NCCL_MESH_TCP_EAGER_WINDOW (from its hello) while one of the last two
  // headers read was of a message that large too (wire.h owes_unasked; the sender waits for
  // those without asking, may_ask_now). At most two such messages fit in the sender's bound for
  // them, so each one's charge should come back as soon as its receive is posted, not when the
  // receiver reaches its header (credit_rule); and one record per message that large costs little.
  // The buffer alone does not tell: NCCL posts every receive of its Simple protocol with the whole
  // step slot (1 MiB by default), whatever the message, and a record for each 21-85 KiB step
  // of a 3-4 rank ring cost 13-50% of the plugin's time (measurements.md, twenty-fourth pass).
  // If the headers before this receive owe it the record after all, reading them sends it
  // (clear_after_header).
  const size_t i = r->seq % asked_.size();
  r->asked = asked_[i];  // its ask came before it was posted: another one would be a repeat
  if (asked_[i] || !on_request_ ||
      (owes_unasked(rx_large_recent_) &&
       clears_unasked(r->capacity, options_.eager_window_bytes))) {
    asked_[i] = false;
    if (!queue_cts(r)) return report_failure();
  }
  // Only the clear-to-sends here. The headers, the data and the asks are read by test(), which
  // NCCL calls right after (its proxy tests every request in flight until it is done): a look
  // at the header's stream here found nothing in most ring steps and was then repeated by the
  // first test() (3 ranks, 64 KiB all-reduce: about one failed recv() per message), and an ask
  // for this receive is read when its test() finds the header missing.
  flush_cts();  // failures are latched; test() reports them
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
// With clear-to-sends on request nothing returns what an early message charged unless the
// receiver sends a clear-to-send at or past it. A message of at least half eager_window_bytes
// gets one unasked when its receive is posted (wire.h clears_unasked; after a smaller message
// or two it asks for credit instead, owes_unasked), so its charge comes back
// as soon as the receiver reaches it; it may go early while the bytes ahead of the records stay
// within the window (early_bound). A smaller message gets one only when a header asks for it
// (kFlagCredit), which the receiver answers once it has posted that receive and read the header:
// later than a record sent when the receive is posted, by the receiver's own lag. A message
// after which another of its size would take the sender past half of its bound, or that is half
// a request window ahead, asks; one asked credit returns every charge before it, so the sender
// asks again only once a quarter of the bound, or a quarter of a request window of messages,
// went early since (or its answer came). Small messages then cost one record per several, large
// ones one each.
// A small message's bound is four times the window. In a ring, where such messages run ahead,
// each step waits for the one before, so what the receiver has not read stays at a step or two
// whatever the bound; the bound mostly sets how often they ask. The credit asked at half of it
// must come back before the sender stops, with the receiver's lag in between: a 341 KiB step (3
// ranks, 1 MiB all-reduce) is sent while its receiver may still read the step before last.
// Records per such step: 1.0 under the window (cleared when posted), 0.51 under twice it, 0.21
// under four times (the all-reduce 3-6% faster: measurements.md, twenty-second pass); the 64 KiB
// steps of 4 ranks at 256 KiB ask by the request window (0.07). Large messages keep the window:
// several 512 KiB slices of a 4-16 MiB all-reduce sent before their receiver posts were read
// out of cache-cold buffers (3 ranks, 8 MiB: 1.2-1.5x the time with a 4 MiB bound). The kernel's
// windows bound both (windows_have_room).
// The small eager_bytes budget is left out: on-request connections also go on window room, so a
// full budget stops nothing, and the next clear-to-send (credit, ask) returns it with the rest.
bool TcpConnection::credit_rule(uint64_t ahead, uint64_t outstanding, size_t size,
                                uint64_t since_bytes, uint64_t since_msgs) const {
  const uint64_t another = static_cast<uint64_t>(size) + kHeaderSize;
  const uint64_t bound = early_bound(size);
  if (ahead * 2 < early_.size() && (outstanding + another) * 2 <= bound) return false;
  // A credit or ask of its own not answered yet (or answered, not read): that record returns
  // these charges too.
  return !record_requested() || since_bytes * 4 >= bound || since_msgs * 4 >= early_.size();
}

// The bytes a message of `size` may have ahead of the clear-to-sends, itself included (above).
uint64_t TcpConnection::early_bound(size_t size) const {
  const uint64_t window = options_.eager_window_bytes;
  return clears_unasked(size, window) ? window : 4 * window;
}

// For a message already charged (its sequence number taken).
bool TcpConnection::wants_credit(size_t size) const {
  return credit_rule(next_seq_ - cts_received_, window_outstanding_, size, since_credit_bytes_,
                     since_credit_msgs_);
}

// Whether a message of `size` sent early now would ask for credit: the same rule once it is
// charged, counted as if it went on window room (the larger charge).
bool TcpConnection::credit_due(size_t size) const {
  const uint64_t charge = static_cast<uint64_t>(size) + kHeaderSize;
  return credit_rule(next_seq_ + 1 - cts_received_, window_outstanding_ + charge, size,
                     since_credit_bytes_ + charge, since_credit_msgs_ + 1);
}

// The first request window is still open while fewer messages than it holds were sent (after
// 2^32 messages the count wraps and it reads as open again for one window: a few reads more).
bool TcpConnection::cts_may_wait() const {
  const bool first_window = next_seq_ < static_cast<uint32_t>(early_.size());
  return unasked_cts_ || first_window || record_requested();
}

// A message asked for its clear-to-send or credit whose record has not been read yet.
bool TcpConnection::record_requested() const {
  return static_cast<int32_t>(requested_end_ - cts_received_) > 0;
}

// A message that must wait for its clear-to-send asks for it, unless its receiver sends that
// record unasked as soon as it posts the receive or reads the header before it (a buffer of at
// least half this side's window, where one of the two messages before was that large: wire.h
// owes_unasked): the ask was then
// a syscall at each end for a record on its way anyway (3 ranks, 8-32 MiB all-reduce: every 512 KiB
// slice asked, a fifth of the sender's sendto()). Such a message waits as "retry later" (no
// request: NCCL calls isend again, which reads the control socket for the record) and asks only
// once the grace period (20 ms) is over. Where it is owed, a receive posted with a buffer at least
// the message's size always gets the record unasked, so the ask then only serves a buffer too small
// for the message (which the receiver does not clear unasked): it still fails both ends, 20 ms
// later, instead of a send that never starts. With 1 ms a third of those slices still asked
// (receivers a ring step behind). Where the record is not owed (the two messages before were
// smaller) the message asks at once. Waiting in flight instead (a request, its ask held back) let
// NCCL post the messages behind it, whose test() calls each read the control socket: 3 ranks, 8-32
// MiB, slower than retry later.
bool TcpConnection::may_ask_now(size_t size) {
  if (options_.ask_grace_ns <= 0 || !clears_unasked(size, options_.eager_window_bytes) ||
      !owes_unasked(tx_large_recent_)) {
    return true;
  }
  const int64_t now = monotonic_ns();
  if (unasked_wait_until_ns_ == 0 || unasked_wait_seq_ != next_seq_) {
    unasked_wait_seq_ = next_seq_;
    unasked_wait_until_ns_ = now + options_.ask_grace_ns;
    return false;
  }
  return now >= unasked_wait_until_ns_;
}

bool TcpConnection::may_send_eagerly(size_t size) const {
  const uint64_t charge = static_cast<uint64_t>(size) + kHeaderSize;
  return options_.eager_bytes > 0 && charge <= options_.eager_bytes &&
         eager_outstanding_ + charge <= options_.eager_bytes &&
         next_seq_ - cts_received_ < static_cast<uint32_t>(eager_size_.size());
}

// Eager sends beyond the budget: a message may also go before its clear-to-send when every
// socket it would use has that much room in the window the receiver's kernel has already
// advertised (peer_window.h), counting what is still queued ahead of it there: each part (the
// first with the header in front) behind its data stream's unmoved parts. Those bytes then land in
// the receiver's socket buffers even if its process posts late, so, as with the budget, none can
// wait in a zero window. This lets the 64 KiB-1 MiB messages of a ring step go without the one-way
// trip (loopback and autotuned links advertise megabytes once traffic has flowed); a fresh
// connection's small window, a late receiver that has filled its buffer, or a kernel that cannot
// tell all answer no, and the message waits for its clear-to-send as before. The bytes ahead stay
// bounded (early_bound: eager_window_bytes, 1 MiB by default, for a message of at least half of
// it, four times that for a smaller one, credit_rule): with the window alone a sender of a large
// transfer ran megabytes ahead and its receiver copied them out of cache-cold socket buffers (3-4
// ranks, 4 MiB all-reduce: 1.3-1.5x slower; measurements.md).
bool TcpConnection::windows_have_room(size_t size, uint32_t* nparts) {
  const uint64_t charge = static_cast<uint64_t>(size) + kHeaderSize;
  if (!window_known_ || options_.eager_bytes == 0 ||
      window_outstanding_ + charge > early_bound(size)) {
    return false;
  }
  if (next_seq_ - cts_received_ >= static_cast<uint32_t>(eager_size_.size())) return false;
  if (window_asked_ && window_asked_seq_ == next_seq_) return false;
  window_asked_ = true;
  window_asked_seq_ = next_seq_;
  // A message the windows of its sockets cannot take in its parts may still fit in more, smaller
  // ones over the next sockets (the receiver follows the header's part count). A socket's window
  // can stay at the 64 KiB a connection starts with while the others have grown (the receiver's
  // kernel grows a buffer only when its reader drained more than it in one round trip): there a
  // 64 KiB ring step and its header never fit, and every message on that socket asked for its
  // clear-to-send, two records and a round trip each (4 ranks, 256 KiB all-reduce: a quarter
  // of one rank's messages for a whole run; measurements.md, twenty-ninth pass). A part more
  // costs a send and a receive at each end, far less than that. Not below kMinSplitPart a part:
  // a small message the windows cannot take means a receiver that is behind, which parts do not
  // change. Each socket's kernel is asked at most once per message, whatever the part counts
  // tried: a second answer a moment later would tell the same.
  const uint32_t most = static_cast<uint32_t>(
      std::min<size_t>(streams_.size(), std::max<size_t>(*nparts, size / kMinSplitPart)));
  uint64_t measured = 0;
  for (uint32_t parts = *nparts; parts <= most; ++parts) {
    if (parts_have_room(size, parts, &measured)) {
      *nparts = parts;
      return true;
    }
  }
  return false;
}

static_assert(handshake::kMaxDataStreams <= 64, "parts_have_room keeps one bit per data stream");

// Whether every socket that part i of a message of `size` in `nparts` parts would ride has window
// room for it (the first with the header in front) behind that stream's unmoved parts. `measured`:
// the streams (bit k) whose kernel was asked already for this message.
bool TcpConnection::parts_have_room(size_t size, uint32_t nparts, uint64_t* measured) {
  for (uint32_t i = 0; i < nparts; ++i) {
    // Parts of one message go to distinct streams (nparts <= streams).
    const size_t k = stream_of_part(i);
    const DataStream& s = *streams_[k];
    // Unmoved is read before the kernel is asked (in socket_has_room): a byte an I/O thread
    // moves in between counts as unsent (more need, less sent, a smaller edge), never the other
    // way. Only this thread pushes, so pushed_bytes() does not move meanwhile.
    const uint64_t unmoved = s.unmoved_bytes();
    const uint64_t sent = s.pushed_bytes() - unmoved;
    const uint64_t need = part_range(size, nparts, i).length + (i == 0 ? kHeaderSize : 0) + unmoved;
    const uint64_t bit = uint64_t{1} << k;
    const bool may_ask = (*measured & bit) == 0;
    *measured |= bit;
    if (!socket_has_room(stream_edges_[k], s.fd(), sent, need, unmoved == 0, may_ask)) {
      return false;
    }
  }
  return true;
}

// `need` more bytes after the `sent` the socket has taken: within the edge remembered from an
// earlier answer, no syscall; otherwise the kernel is asked again (peer_window.h WindowEdge).
// `exact`: nothing of the stream is queued, so no I/O thread can move a byte while the kernel is
// asked and `sent` is all the socket took (WindowEdge may then learn its offset). `may_ask`
// false: the remembered edge alone answers.
bool TcpConnection::socket_has_room(WindowEdge& edge, int fd, uint64_t sent, uint64_t need,
                                    bool exact, bool may_ask) {
  if (edge.covers(sent, need)) return true;
  if (!may_ask) return false;
  uint64_t room = 0;
  if (!edge.measure(fd, sent, &room, exact)) {
    window_known_ = false;  // not TCP (a test's socketpair) or an old kernel: ask no more
    return false;
  }
  return need <= room;
}

// Queues a message's parts; the sender's first carries the header in front (wire.h), and a send
// too large for the receiver's buffer (oversize) queues the header alone.
bool TcpConnection::start_parts(Request* r, uint16_t nparts) {
  if (r->oversize) nparts = 1;
  r->parts_pending.store(nparts, std::memory_order_relaxed);
  // Parts go to the streams round-robin, continuing where the previous message stopped: a
  // message smaller than NCCL_MESH_TCP_MIN_CHUNK x streams (NCCL's 128 KiB p2p chunks, small
  // collective steps) would otherwise always ride stream 0 while the others idle. A message
  // under wire.h's kSpreadMinBytes leaves the next one where it started (next_first_stream).
  // Both sides call this in sequence order with the same sizes and part counts, so each
  // stream's byte order agrees.
  for (uint16_t i = 0; i < nparts; ++i) {
    const PartRange range = r->oversize ? PartRange{} : part_range(r->size, nparts, i);
    const size_t s = stream_of_part(i);
    const uint8_t* header = sender_ && i == 0 ? r->header : nullptr;
    if (!streams_[s]->push({r->data + range.offset, range.length, &r->parts_pending, header})) {
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
  next_stream_ = next_first_stream(next_stream_, r->size, nparts, streams_.size());
  next_pump_ns_ = 0;  // new bytes to move: no back-off for them
  return true;
}

void TcpConnection::progress(bool read_records) {
  progress_control(read_records);
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
  // The clock is read only while a back-off is pending or when one starts: a pass that moves
  // bytes, or finds no queued part (no syscall to save), needs none (3 ranks, 1 KiB all-reduce:
  // clock_gettime was 2% of the plugin's CPU samples).
  if (next_pump_ns_ != 0) {
    if (monotonic_ns() < next_pump_ns_) return;
    next_pump_ns_ = 0;
  }
  bool moved = false;
  bool tried = false;
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (failure_.failed()) return;
    DataStream& s = *streams_[i];
    if (!pool) {
      if (s.has_work()) {
        tried = true;
        moved |= s.pump();
      }
    } else if (assisted_[i]) {
      if (s.has_work()) {
        tried = true;
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
  } else if (tried) {
    idle_backoff_ns_ = std::clamp<int64_t>(idle_backoff_ns_ * 2, 1000, kMaxIdleBackoffNs);
    next_pump_ns_ = monotonic_ns() + idle_backoff_ns_;
  }
}

// Sender: reads clear-to-sends, writes asks, and retires the messages whose header is queued on
// its stream. Receiver: writes clear-to-sends, reads asks, and reads the headers of posted
// receives in sequence order. `read_records` false skips the read of the control socket (the
// sender's isend has just read it; the receiver's test() reads asks itself, once kAskPolls
// calls found a header missing since the last header arrived).
void TcpConnection::progress_control(bool read_records) {
  if (sender_) {
    if (read_records && !read_cts()) return;
    if (!write_queued(ask_out_.data(), &ask_out_len_)) return;
  } else {
    if (!flush_cts()) return;
    if (read_records && !read_asks()) return;
  }
  while (!failure_.failed() && order_count_ > 0) {
    Request* r = order_[order_head_];
    const bool complete = sender_ ? progress_send(r) : progress_recv(r);
    if (!complete) break;
    r->control_done = true;
    order_head_ = (order_head_ + 1) % order_.size();
    --order_count_;
  }
  // Receiver: the clear-to-sends the headers just read asked for.
  if (!sender_ && !failure_.failed()) flush_cts();
}

// Queues r's clear-to-send, after those of the posted receives before it that have none yet:
// clear-to-sends must leave in increasing sequence order (the sender reads a skipped number as
// "sent before its clear-to-send"), and one for an earlier receive is never wrong (it clears an
// ask, or returns an early message's charge).
bool TcpConnection::queue_cts(Request* r) {
  for (size_t k = 0; k < order_count_; ++k) {
    Request* q = order_[(order_head_ + k) % order_.size()];
    if (static_cast<int32_t>(q->seq - r->seq) > 0) break;
    if (q->cts_sent) continue;
    if (cts_out_len_ + kCtsSize > cts_out_.size()) {
      fail(ncclInternalError, "clear-to-send queue overflow (the sender reads none)");
      return false;
    }
    encode_cts({q->seq, 0, q->capacity}, cts_out_.data() + cts_out_len_);
    cts_out_len_ += kCtsSize;
    q->cts_sent = true;
  }
  return true;
}

bool TcpConnection::flush_cts() {
  return write_queued(cts_out_.data(), &cts_out_len_);
}

// Writes what the control socket takes of a queue of records (clear-to-sends, asks) without
// blocking, and keeps the rest at its front (a record partly written stays the next bytes).
// False only when the socket failed.
bool TcpConnection::write_queued(uint8_t* queue, size_t* len) {
  size_t done = 0;
  while (done < *len) {
    const ssize_t n = send(control_.get(), queue + done, *len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
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
    std::memmove(queue, queue + done, *len - done);
    *len -= done;
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
    if (!take_records(cts_in_, &cts_in_len_, kCtsSize,
                      [this](const uint8_t* c) { return apply_cts(decode_cts(c)); })) {
      return false;
    }
    // A short read means the socket was drained: no need for a recv() that says EAGAIN.
    if (static_cast<size_t>(n) < asked) return true;
  }
}

// One clear-to-send record. They come in increasing sequence order; one that skips sequence
// numbers returns what the skipped messages charged: each must be a message this side sent
// before its clear-to-send (the receiver skips no other, wire.h).
bool TcpConnection::apply_cts(const ClearToSend& c) {
  const int32_t past_received = static_cast<int32_t>(c.seq - cts_received_);
  // The receiver can have at most NCCL_NET_MAX_REQUESTS receives posted ahead of our sends.
  const int32_t ahead = static_cast<int32_t>(c.seq - next_seq_);
  if (c.reserved != 0 || past_received < 0 || ahead >= static_cast<int32_t>(cts_capacity_.size())) {
    fail(ncclRemoteError, "malformed clear-to-send (sequence " + std::to_string(c.seq) +
                              ", expected " + std::to_string(cts_received_) +
                              " or later): stream corrupted");
    return false;
  }
  for (uint32_t j = cts_received_; j != c.seq; ++j) {
    if (static_cast<int32_t>(j - next_seq_) >= 0 || !early_[j % early_.size()]) {
      fail(ncclRemoteError, "clear-to-send " + std::to_string(c.seq) + " skips message " +
                                std::to_string(j) + ", which needs its own: stream corrupted");
      return false;
    }
    release_early(j);
  }
  if (ahead < 0) {
    const size_t i = c.seq % early_.size();
    if (early_[i]) {
      // A message already sent eagerly: its bytes now have a posted buffer.
      const uint64_t size = eager_size_[i];
      release_early(c.seq);
      if (size > c.capacity) {
        fail(ncclInvalidUsage, oversize_at_sender(size, c.capacity));
        return false;
      }
    } else if (!clear_asked(c.seq, c.capacity)) {
      return false;
    }
  } else {
    cts_capacity_[c.seq % cts_capacity_.size()] = c.capacity;
  }
  // A record past the first request window (so posted after the receiver read the first
  // on-request header) for a message that asked for nothing: the receiver sends them unasked
  // (large buffers), so one may be waiting at any time.
  if (static_cast<int32_t>(c.seq - requested_end_) >= 0 &&
      c.seq >= static_cast<uint32_t>(early_.size())) {
    unasked_cts_ = true;
  }
  cts_received_ = c.seq + 1;
  return true;
}

void TcpConnection::release_early(uint32_t seq) {
  const size_t i = seq % early_.size();
  (on_window_[i] ? window_outstanding_ : eager_outstanding_) -= eager_size_[i] + kHeaderSize;
  early_[i] = false;
}

// The clear-to-send of a message that asked for it: its header, payload and parts may go now,
// in sequence order (progress_send stops at the first message still waiting).
bool TcpConnection::clear_asked(uint32_t seq, uint64_t capacity) {
  Request* r = nullptr;
  for (size_t k = 0; k < order_count_ && r == nullptr; ++k) {
    Request* q = order_[(order_head_ + k) % order_.size()];
    if (q->seq == seq && q->awaiting_cts) r = q;
  }
  if (r == nullptr) {
    fail(ncclRemoteError, "clear-to-send " + std::to_string(seq) +
                              " for a message that did not ask for one: stream corrupted");
    return false;
  }
  r->awaiting_cts = false;
  --asks_waiting_;
  // Too big for the receiver's buffer: only the header goes out (start_parts), then this side
  // fails (progress_send).
  r->oversize = r->size > capacity;
  if (r->oversize) r->oversize_capacity = capacity;
  return start_parts(r, r->nparts);
}

// True once the message's header is queued on its stream (not waiting for its clear-to-send).
// A send too large for the receiver's buffer fails once its header is out.
bool TcpConnection::progress_send(Request* r) {
  if (r->awaiting_cts) return false;
  if (!r->oversize) return true;
  if (r->parts_pending.load(std::memory_order_acquire) != 0) return false;
  fail(ncclInvalidUsage, oversize_at_sender(r->size, r->oversize_capacity));
  return false;
}

// Reads and validates the header from the stream that carries the message's first part (wire.h),
// then queues the parts; the first follows the header on the same stream.
bool TcpConnection::progress_recv(Request* r) {
  DataStream& stream = *streams_[next_stream_];
  while (r->header_done < kHeaderSize) {
    const ssize_t n = stream.read_header(r->header + r->header_done, kHeaderSize - r->header_done);
    if (n == DataStream::kEndOfStream) peer_closed_ = true;  // fails this receive in test()
    if (n <= 0) return false;  // not arrived yet, earlier parts still queued, or failed
    r->header_done += static_cast<size_t>(n);
  }
  const MessageHeader h = decode_header(r->header);
  if (h.seq != r->seq) {
    fail(ncclRemoteError, "message header out of sequence on data stream " +
                              std::to_string(next_stream_) + " (expected " +
                              std::to_string(r->seq) + ", got " + std::to_string(h.seq) +
                              "): stream corrupted");
    return false;
  }
  if ((h.flags & ~(kFlagOnRequest | kFlagCredit)) != 0 || h.nparts == 0 ||
      h.nparts > streams_.size()) {
    fail(ncclRemoteError, "malformed message header (flags " + std::to_string(h.flags) + ", " +
                              std::to_string(h.nparts) + " parts for " +
                              std::to_string(streams_.size()) + " data streams)");
    return false;
  }
  if (!header_padding_is_zero(r->header)) {
    fail(ncclRemoteError, "malformed message header (padding not zero): stream corrupted");
    return false;
  }
  on_request_ = on_request_ || (h.flags & kFlagOnRequest) != 0;
  if (h.size > r->capacity) {
    // The sender fails with the capacity too, as when it had a clear-to-send before sending.
    if (!r->cts_sent && queue_cts(r)) flush_cts();
    fail(ncclInvalidUsage, oversize_at_receiver(h.size, r->capacity));
    return false;
  }
  r->size = h.size;
  ++rx_next_header_;
  ask_polls_ = 0;  // test(): asks are read only after kAskPolls calls without a header
  if ((h.flags & kFlagCredit) != 0 && !r->cts_sent && !queue_cts(r)) return false;
  if (!clear_after_header(r, h.size)) return false;
  return start_parts(r, h.nparts);
}

// After the header of message r (wire.h owes_unasked): if it or the one before was of at least
// half the sender's window, the next receive is owed its clear-to-send unasked, if that one is
// posted with a buffer that large and got none when it was posted (the header before it was
// not read yet, and the last two read were small). This one needs no record of its own any
// more: its header is here, so it went before its clear-to-send, and the next record skips it.
bool TcpConnection::clear_after_header(Request* r, uint64_t size) {
  rx_large_recent_ = next_large_recent(rx_large_recent_, size, options_.eager_window_bytes);
  if (!owes_unasked(rx_large_recent_) || !on_request_ || order_count_ < 2 ||
      order_[order_head_] != r) {
    return true;
  }
  Request* next = order_[(order_head_ + 1) % order_.size()];
  if (next->cts_sent || !clears_unasked(next->capacity, options_.eager_window_bytes)) return true;
  r->cts_sent = true;
  return queue_cts(next);
}

// The receiver's control socket carries only asks (wire.h), read in batches: one recv() per call
// (at most kAskBytes, so a peer that streams them cannot hold NCCL's thread here). The sender's
// end of stream is no error here: it closes its comm once its sends are done, and their bytes
// may still be arriving on the data streams, where a missing header then fails the receive.
bool TcpConnection::read_asks() {
  if (control_eof_) return true;
  const ssize_t n = recv(control_.get(), ask_in_.data() + ask_in_len_, ask_in_.size() - ask_in_len_,
                         MSG_DONTWAIT);
  if (n < 0) {
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return true;
    fail(ncclRemoteError, "control socket receive failed: " + errno_text(err) +
                              (err == ECONNRESET ? " (the peer's process died?)" : ""));
    return false;
  }
  if (n == 0) {
    control_eof_ = true;
    return true;
  }
  ask_in_len_ += static_cast<size_t>(n);
  return take_records(ask_in_.data(), &ask_in_len_, kAskSize,
                      [this](const uint8_t* a) { return accept_ask(decode_header(a)); });
}

// An ask (wire.h): the message with that sequence number waits for its clear-to-send. Answered
// at once if its receive is posted (and was not answered already, before the sender's first
// on-request record), else when it is (irecv). Asks come in order, within one request window of
// the posted receives, and once each. An ask for a message whose header was already read is
// dropped: the header and the ask travel on different sockets, and the clear-to-send that let
// the header go was this side's (sent when the receive was posted).
bool TcpConnection::accept_ask(const MessageHeader& h) {
  // The sender asks only within one request window of the clear-to-sends it has, and those
  // are for receives this side has posted: an ask at or past that bound is no ask of a sender.
  const int32_t unposted = static_cast<int32_t>(h.seq - next_seq_);
  const auto window = static_cast<int32_t>(asked_.size());
  if ((h.flags & kFlagAsk) == 0 || (h.flags & ~(kFlagAsk | kFlagOnRequest)) != 0 || h.nparts != 0 ||
      unposted >= window || (unposted >= 0 && asked_[h.seq % asked_.size()])) {
    fail(ncclRemoteError, "malformed ask for a clear-to-send (sequence " + std::to_string(h.seq) +
                              ", flags " + std::to_string(h.flags) + ", next receive " +
                              std::to_string(next_seq_) + "): stream corrupted");
    return false;
  }
  on_request_ = on_request_ || (h.flags & kFlagOnRequest) != 0;
  if (static_cast<int32_t>(h.seq - rx_next_header_) < 0) return true;  // its header came first
  for (size_t k = 0; k < order_count_; ++k) {
    Request* q = order_[(order_head_ + k) % order_.size()];
    if (q->seq != h.seq) continue;
    // Once each, for a posted receive too: a peer repeating one ask would otherwise keep
    // NCCL's thread answering it.
    if (q->asked) {
      fail(ncclRemoteError, "ask for the clear-to-send of message " + std::to_string(h.seq) +
                                " repeated: stream corrupted");
      return false;
    }
    q->asked = true;
    return q->cts_sent || queue_cts(q);
  }
  asked_[h.seq % asked_.size()] = true;  // its receive is not posted yet (irecv answers it)
  return true;
}

ncclResult_t TcpConnection::test(RequestHeader* request, int* done, int* sizes) {
  auto* r = reinterpret_cast<Request*>(request);
  *done = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!is_in_flight(pool_, r)) return warn_not_in_flight(describe());
  // Finished already (a small send is usually done inside isend()): report it without a
  // syscall; the other requests progress from their own test() calls and from isend/irecv.
  if (r->control_done && r->parts_pending.load(std::memory_order_acquire) == 0 &&
      !failure_.failed()) {
    *done = 1;
    if (sizes != nullptr) *sizes = reported_size(r->size);
    r->in_use = false;
    return ncclSuccess;
  }
  // Its header is done and its parts are still on the streams: only move data (none with a
  // pool: the I/O threads do). NCCL's proxy thread calls test() in a tight loop over every
  // request in flight; a recv() for the next header or record per call costs CPU that the
  // copies need. Requests whose header is not done (to read, or waiting for its clear-to-send)
  // drive the headers and the control socket from their own test() calls, and isend() reads
  // clear-to-sends.
  if (r->control_done && r->parts_pending.load(std::memory_order_acquire) != 0 &&
      !failure_.failed()) {
    pump_data();
  } else if (sender_) {
    progress(/*read_records=*/true);
  } else {
    // A receiver waiting for a header polls its stream on every call, and the asks on the
    // control socket only once kAskPolls calls found a header missing: a
    // message asks only while its header waits for the clear-to-send, so a call that read the
    // header has no ask to answer for it, and most messages never ask (they go on the eager
    // budget or on window room). Reading the asks on every kAskPolls-th call and irecv() was
    // 0.27-0.34 failed recv() per message on a control socket that carried no ask at all (3
    // ranks, 1 KiB and 256 KiB all-reduce, strace). The calls are counted since the last header
    // arrived (progress_recv resets the count): a message that asked holds back its own header
    // and every later one (sequence order), so its ask is read within kAskPolls calls of the
    // last header before it, while a ring whose headers arrive within a few polls each never
    // reads the control socket (counted across messages, 0.09-0.10 failed reads per message,
    // 3 ranks, 64 KiB-1 MiB).
    progress(/*read_records=*/false);
    if (!r->control_done && !failure_.failed() && ++ask_polls_ >= kAskPolls) {
      ask_polls_ = 0;
      if (read_asks()) flush_cts();  // the clear-to-sends the asks just queued
    }
  }
  if (r->control_done && r->parts_pending.load(std::memory_order_acquire) == 0) {
    *done = 1;
    if (sizes != nullptr) *sizes = reported_size(r->size);
    r->in_use = false;
    return ncclSuccess;
  }
  // The sender closed after its last message: this receive's header never comes. Only a
  // receive that is tested fails (NCCL may keep one posted that it no longer waits for, as GIN
  // does after the goodbye; failing the connection at the end of stream turned the completion
  // of the goodbye itself into an error with a WARN), and only one whose header is missing.
  if (peer_closed_ && !r->control_done) {
    fail(ncclRemoteError,
         "the peer closed the connection (process exited or closed its send comm) before "
         "sending message " +
             std::to_string(r->seq));
  }
  if (failure_.failed()) return report_failure();
  return ncclSuccess;
}

}  // namespace mesh::tcp
