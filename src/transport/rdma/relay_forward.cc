// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/relay_forward.h"

#include <arpa/inet.h>
#include <endian.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "handshake/hello.h"
#include "relay/request.h"
#include "transport/rdma/completions.h"
#include "transport/rdma/rdma_memory.h"
#include "transport/rdma/relay_chunk_writer.h"
#include "util/byte_order.h"
#include "util/log.h"

namespace mesh::rdma {
namespace {

// Work request ids on the relay's QPs: what completed.
constexpr uint64_t kWrPayload = 1ull << 62;  // | chunk index: an onward WRITE from a slot
                                             // (WRITE_WITH_IMM to a next relay host)
constexpr uint64_t kWrImm = 2ull << 62;      // a message's closing WRITE_WITH_IMM
constexpr uint64_t kWrCredit = 3ull << 62;   // a credit WRITE to the connector
constexpr uint64_t kWrKind = 3ull << 62;
// Liveness of the control sockets is checked this often while forwarding (a syscall each).
constexpr int64_t kControlCheckMs = 5;
// After the connector's socket closed, completions it caused may still be on their way into
// the completion queue: the forward ends no earlier than this (a complete message it still
// finds is delivered first).
constexpr int64_t kDrainSettleMs = 100;

}  // namespace

RelayForward::RelayForward(RdmaTransport& transport, ForwardSockets sockets, uint32_t slots,
                           uint32_t slot_bytes, int64_t setup_deadline_ms, int64_t drain_timeout_ms)
    : transport_(transport),
      sockets_(std::move(sockets)),
      slots_(slots),
      slot_bytes_(slot_bytes),
      deadline_ms_(setup_deadline_ms),
      drain_timeout_ms_(drain_timeout_ms) {
  set_nonblocking(sockets_.up.get(), true);
  set_nonblocking(sockets_.down.get(), true);
  out_.assign(relay::kRelayReplySize, 0);
  relay::encode_relay_reply(relay::ReplyCode::kOk, out_.data());
}

RelayForward::~RelayForward() {
  finish();
}

void RelayForward::finish() {
  phase_ = Phase::kDone;
  // Closing both control sockets is how both endpoints learn the forward is over.
  if (sockets_.up.valid()) shutdown(sockets_.up.get(), SHUT_RDWR);
  if (sockets_.down.valid()) shutdown(sockets_.down.get(), SHUT_RDWR);
  sockets_.up.reset();
  sockets_.down.reset();
  // QPs before the memory they reach, registrations before the memory.
  up_ep_.reset();
  down_ep_.reset();
  up_mem_.reset();
  down_mem_.reset();
  std::free(staging_);
  staging_ = nullptr;
}

bool RelayForward::fail(const std::string& why) {
  MESH_WARN("relay: RDMA forward %s failed: %s; both ends were closed", sockets_.what.c_str(),
            why.c_str());
  finish();
  return false;
}

void RelayForward::refuse_up(uint8_t hello_reply, const std::string& why) {
  uint8_t r[handshake::kReplySize];
  handshake::encode_reply(static_cast<handshake::HelloReply>(hello_reply), r);
  (void)!send(sockets_.up.get(), r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (!why.empty()) {
    MESH_WARN("relay: RDMA forward %s refused: %s", sockets_.what.c_str(), why.c_str());
  }
  finish();
}

bool RelayForward::read_some(int fd, size_t want, std::vector<uint8_t>* buf, bool* progress) {
  while (buf->size() < want) {
    uint8_t tmp[2048];
    const size_t n = std::min(sizeof(tmp), want - buf->size());
    const ssize_t got = recv(fd, tmp, n, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (got <= 0) return false;
    buf->insert(buf->end(), tmp, tmp + got);
    *progress = true;
  }
  return true;
}

bool RelayForward::write_some(int fd, std::vector<uint8_t>* buf, size_t* sent, bool* progress) {
  while (*sent < buf->size()) {
    const ssize_t n =
        send(fd, buf->data() + *sent, buf->size() - *sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) return false;
    *sent += static_cast<size_t>(n);
    *progress = true;
  }
  return true;
}

bool RelayForward::allocate_staging(std::string* why) {
  const size_t bytes = static_cast<size_t>(slots_) * slot_bytes_;
  staging_ = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  if (staging_ == nullptr) {
    *why = "out of memory for " + std::to_string(bytes) + " bytes of staging";
    return false;
  }
  up_mem_ = std::make_unique<RdmaMemory>();
  down_mem_ = std::make_unique<RdmaMemory>();
  return register_for_qps(up_ep_->qps(), staging_, bytes, -1, 0, up_mem_.get(), why) &&
         register_for_qps(down_ep_->qps(), staging_, bytes, -1, 0, down_mem_.get(), why);
}

bool RelayForward::on_hello() {
  handshake::Hello hello;
  std::string why;
  if (!handshake::decode_hello(in_.data(), &hello, &why)) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kMalformed),
              "the connector's hello is invalid: " + why);
    return false;
  }
  // The whole hello is read before any refusal: a socket closed with unread bytes resets, and
  // the reset would overtake the refusal.
  if (in_.size() < handshake::kHelloSize + hello.ext_len) return true;  // read the rest
  if (hello.role != handshake::Role::kControl || hello.ext_len == 0 || hello.ndata != 0) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kMalformed),
              "an RDMA relay request must carry one control hello with an RDMA setup");
    return false;
  }
  if (!decode_setup(in_.data() + handshake::kHelloSize, hello.ext_len, &up_setup_, &why) ||
      !up_setup_.relay || up_setup_.relay_slots != 0) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kMalformed),
              "the connector's RDMA setup is not a relay hop's" + (why.empty() ? "" : ": " + why));
    return false;
  }
  up_ep_ = transport_.open_receiver(up_setup_, &why);
  std::vector<uint8_t> ext;
  if (up_ep_ && sockets_.down_relay) {
    // A middle hop: towards the next relay host we are a connector (wire.h 5.; its setup
    // carries our credit word), exactly as RelaySendConnection's host is.
    down_ep_ = transport_.open_relay_sender(sockets_.down_local, sockets_.down_peer,
                                            up_setup_.traffic_class, &ext, &why);
  } else if (up_ep_) {
    down_ep_ = transport_.open_sender_on(sockets_.down_local, sockets_.down_peer, &why);
    if (down_ep_) {
      SetupMessage down = down_ep_->local_setup();
      down.traffic_class = up_setup_.traffic_class;
      ext = encode_setup(down);
    }
  }
  if (!up_ep_ || !down_ep_ || !allocate_staging(&why)) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
              "cannot set up RDMA on this relay host: " + why);
    return false;
  }
  hello.ext_len = static_cast<uint16_t>(ext.size());
  out_.assign(handshake::kHelloSize, 0);
  handshake::encode_hello(hello, out_.data());
  out_.insert(out_.end(), ext.begin(), ext.end());
  sent_ = 0;
  in_.clear();
  phase_ = Phase::kWriteDown;
  return true;
}

bool RelayForward::on_down_reply() {
  handshake::HelloReply reply;
  if (!handshake::decode_reply(in_.data(), &reply)) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
              "the destination answered with bytes that are not an nccl-mesh reply");
    return false;
  }
  if (reply != handshake::HelloReply::kAccepted) {
    // Its refusal (wrong nonce, busy, ...) is the connector's to handle: passed on unchanged.
    MESH_INFO(NCCL_NET, "relay: RDMA forward %s: the destination %s", sockets_.what.c_str(),
              handshake::reply_text(reply));
    refuse_up(static_cast<uint8_t>(reply), "");
    return false;
  }
  if (in_.size() < handshake::kReplySize + 2) return true;
  const size_t len = get_u16(in_.data() + handshake::kReplySize);
  if (len == 0 || len > handshake::kMaxExtension) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
              "the destination answered with an extension of " + std::to_string(len) + " bytes");
    return false;
  }
  if (in_.size() < handshake::kReplySize + 2 + len) return true;
  std::string why;
  const QpOptions opt = transport_.qp_options(up_setup_.traffic_class);
  const uint8_t* ext_in = in_.data() + handshake::kReplySize + 2;
  bool down_ok = false;
  if (sockets_.down_relay) {
    // The next relay host's staging ring: our chunks go into it as a connector's do. Our own
    // slots shrink to its slot size when that is smaller, so a chunk always fits downstream
    // and its number (and tag) stays the same along the whole chain.
    SetupMessage next;
    down_ok = transport_.connect_relay_sender(*down_ep_, std::vector<uint8_t>(ext_in, ext_in + len),
                                              up_setup_.traffic_class, &next, &why);
    if (down_ok) {
      next_ = RelayChunkWriter(next);
      slot_bytes_ = std::min(slot_bytes_, next_.slot_bytes());
    }
  } else {
    SetupMessage dest;
    if (!decode_setup(ext_in, len, &dest, &why))
      down_ok = false;
    else if (dest.relay)
      why = "the destination's setup is a relay hop's";
    else
      down_ok = down_ep_->connect(dest, opt, &why);
  }
  if (!down_ok || !up_ep_->connect(up_setup_, opt, &why)) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
              "connecting the relay's QPs failed: " + why);
    return false;
  }
  // The destination hands out its receive comm once our QPs are in RTS (wire.h 4.); a next
  // relay host takes the same byte from us as from a connector.
  if (!send_ready_byte(sockets_.down.get(), &why)) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed), why);
    return false;
  }
  SetupMessage mine = up_ep_->local_setup();
  mine.relay = true;
  mine.relay_slots = slots_;
  mine.relay_slot_bytes = slot_bytes_;
  mine.ring_addr = reinterpret_cast<uintptr_t>(staging_);
  for (size_t q = 0; q < mine.qps.size(); ++q) mine.qps[q].ring_rkey = up_mem_->rkey[q];
  const std::vector<uint8_t> ext = encode_setup(mine);
  out_.assign(handshake::kReplySize + 2, 0);
  handshake::encode_reply(handshake::HelloReply::kAccepted, out_.data());
  put_u16(out_.data() + handshake::kReplySize, static_cast<uint16_t>(ext.size()));
  out_.insert(out_.end(), ext.begin(), ext.end());
  sent_ = 0;
  in_.clear();
  phase_ = Phase::kWriteUp;
  return true;
}

bool RelayForward::step(int64_t now_ms, bool* progress) {
  if (phase_ == Phase::kDone) return false;
  if (phase_ != Phase::kLive && now_ms > deadline_ms_) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
              "setup did not finish in time (the connector or the destination stopped "
              "answering)");
    return false;
  }
  switch (phase_) {
    case Phase::kReplyOk:
      if (!write_some(sockets_.up.get(), &out_, &sent_, progress)) {
        finish();
        return false;
      }
      if (sent_ == out_.size()) phase_ = Phase::kReadHello;
      return true;
    case Phase::kReadHello: {
      size_t want = handshake::kHelloSize;
      if (in_.size() >= handshake::kHelloSize) want += get_u16(in_.data() + 10);  // ext length
      if (!read_some(sockets_.up.get(), want, &in_, progress)) {
        finish();  // the connector gave up
        return false;
      }
      if (in_.size() < handshake::kHelloSize) return true;
      return on_hello();
    }
    case Phase::kWriteDown:
      if (!write_some(sockets_.down.get(), &out_, &sent_, progress)) {
        refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
                  "the destination closed its handshake socket");
        return false;
      }
      if (sent_ == out_.size()) {
        in_.clear();
        phase_ = Phase::kReadDownReply;
      }
      return true;
    case Phase::kReadDownReply: {
      size_t want = handshake::kReplySize;
      if (in_.size() >= handshake::kReplySize) want += 2;
      if (in_.size() >= handshake::kReplySize + 2)
        want += get_u16(in_.data() + handshake::kReplySize);
      if (!read_some(sockets_.down.get(), want, &in_, progress)) {
        refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
                  "the destination closed its handshake socket before answering");
        return false;
      }
      if (in_.size() < handshake::kReplySize) return true;
      return on_down_reply();
    }
    case Phase::kWriteUp:
      if (!write_some(sockets_.up.get(), &out_, &sent_, progress)) {
        finish();
        return false;
      }
      if (sent_ == out_.size()) {
        phase_ = Phase::kLive;
        chunks_ = std::make_unique<RelayChunks>(slots_, slot_bytes_, up_ep_->qps().size());
        for (auto& qp : up_ep_->qps()) qp->watch(up_async_);
        for (auto& qp : down_ep_->qps()) qp->watch(down_async_);
        MESH_INFO(NCCL_NET,
                  "relay: forwarding %s over RDMA (%u slots of %u bytes; in: %s; out: %s)",
                  sockets_.what.c_str(), slots_, slot_bytes_, up_ep_->describe().c_str(),
                  down_ep_->describe().c_str());
      }
      return true;
    case Phase::kLive:
      now_ms_ = now_ms;
      break;
    case Phase::kDone:
      return false;
  }
  if (!check_async_errors() || !poll_up(progress) || !forward_arrived(progress) ||
      !poll_down(progress) || !return_credits(progress))
    return false;
  if (now_ms >= next_control_check_ms_) {
    next_control_check_ms_ = now_ms + kControlCheckMs;
    if (!check_controls()) return false;
  }
  if (draining() && drained(now_ms)) return false;
  return true;
}

bool RelayForward::check_async_errors() {
  // The device's event thread latched an asynchronous QP or CQ error of a leg: that leg's QPs
  // are unusable. The connector's leg is over anyway once it closed (its QPs are gone).
  if (down_async_->failed() || (up_async_->failed() && !draining())) {
    (down_async_->failed() ? down_async_ : up_async_)
        ->report("relay: RDMA forward " + sockets_.what + " ended, both ends closed");
    finish();
    return false;
  }
  return true;
}

bool RelayForward::drained(int64_t now_ms) {
  const bool writes_done =
      chunks_->writing() == 0 &&
      std::all_of(down_sq_.begin(), down_sq_.end(), [](uint32_t n) { return n == 0; });
  if (!chunks_->holds_complete_message() && writes_done &&
      now_ms >= drain_since_ms_ + kDrainSettleMs) {
    if (chunks_->holds_any() || have_cts_) {
      MESH_INFO(NCCL_NET,
                "relay: RDMA forward %s: the connector closed in the middle of a message (its "
                "send never completed): the destination's receive of it fails",
                sockets_.what.c_str());
    }
    MESH_INFO(NCCL_NET,
              "relay: RDMA forward %s: every complete message the connector left was delivered "
              "(%llu chunks); closing",
              sockets_.what.c_str(), static_cast<unsigned long long>(chunks_->next_chunk()));
    finish();
    return true;
  }
  if (now_ms - drain_since_ms_ > drain_timeout_ms_) {
    MESH_WARN(
        "relay: RDMA forward %s: the connector closed %lld ms ago and the destination has not "
        "received %llu chunk(s) of its completed sends (%s); closing: the destination's "
        "receives fail (NCCL_MESH_RELAY_RDMA_DRAIN_MS=%lld)",
        sockets_.what.c_str(), static_cast<long long>(now_ms - drain_since_ms_),
        static_cast<unsigned long long>(chunks_->arrivals() - chunks_->next_chunk()),
        writes_done ? "it did not post their receives" : "their writes did not complete",
        static_cast<long long>(drain_timeout_ms_));
    finish();
    return true;
  }
  return false;
}

bool RelayForward::connector_closed() {
  if (draining()) return true;
  uint8_t byte;
  if (recv(sockets_.up.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK) != 0) return false;
  start_drain();
  return true;
}

void RelayForward::start_drain() {
  // The connector closed its comm or exited: its completed sends are held here, some perhaps
  // not yet forwarded. Deliver them, then close (drained()).
  MESH_INFO(NCCL_NET,
            "relay: RDMA forward %s: the connector closed the connection; delivering the "
            "complete messages held (%llu chunks arrived, %llu forwarded) before closing",
            sockets_.what.c_str(), static_cast<unsigned long long>(chunks_->arrivals()),
            static_cast<unsigned long long>(chunks_->next_chunk()));
  drain_since_ms_ = now_ms_;
}

bool RelayForward::check_controls() {
  for (int side = draining() ? 1 : 0; side < 2; ++side) {
    const int fd = side == 0 ? sockets_.up.get() : sockets_.down.get();
    uint8_t byte;
    const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n == 1 && side == 0 && !up_ready_ && byte == kReadyByte) {
      up_ready_ = true;
      continue;
    }
    if (n == 1)
      return fail(std::string("unexpected bytes on the ") +
                  (side == 0 ? "connector's" : "destination's") +
                  " control socket (protocol violation)");
    if (side == 0) {
      start_drain();
      continue;
    }
    // The destination is gone (process exit, closed comm, or its cable failed).
    MESH_INFO(NCCL_NET,
              "relay: RDMA forward %s: the destination closed the connection; closing "
              "the connector's",
              sockets_.what.c_str());
    finish();
    return false;
  }
  return true;
}

bool RelayForward::poll_up(bool* progress) {
  auto& qps = up_ep_->qps();
  std::string why;
  for (size_t q = 0; q < qps.size(); ++q) {
    if (up_closed_ & (1u << q)) continue;
    const bool ok = drain_completions(*qps[q], &why, [&](const ibv_wc& c) {
      *progress = true;
      if (c.status != IBV_WC_SUCCESS) {
        // A credit WRITE that found the connector's QP gone can complete in error before its
        // closed socket was seen: then it is the connector's close, and the forward drains.
        if (!draining() && !connector_closed()) return fail(completion_error(*qps[q], c));
        // The connector's QP is gone (a credit write found no one): everything that arrived
        // on it completed before this, in order; the rest are flushed receives.
        MESH_INFO(NCCL_NET, "relay: RDMA forward %s: the connector's leg is closed (%s)",
                  sockets_.what.c_str(), completion_error(*qps[q], c).c_str());
        up_closed_ |= 1u << q;
        return false;
      }
      if ((c.wr_id & kWrKind) == kWrCredit) {
        if (up_sq_ > 0) --up_sq_;
        return true;
      }
      if (c.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
        return fail("unexpected completion opcode " + std::to_string(c.opcode) + " on " +
                    qps[q]->describe());
      std::string err;
      if (!chunks_->arrived(q, ntohl(c.imm_data), &err))
        return fail(err + " on " + qps[q]->describe());
      if (draining()) return true;  // nothing more is written to these QPs
      return qps[q]->post_recv(&err) || fail(err);
    });
    if (!ok && (up_closed_ & (1u << q))) continue;
    if (!ok) return why.empty() ? false : fail(why);
  }
  return true;
}

bool RelayForward::post_imm_writes(uint64_t size) {
  auto& qps = down_ep_->qps();
  // The destination sees the message's size; beyond the immediate's range it fails anyway.
  const uint32_t imm = size > kMaxMessageSize ? 0xFFFFFFFFu : static_cast<uint32_t>(size);
  for (size_t q = 0; q < qps.size(); ++q) {
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = kWrImm | msg_seq_;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(imm);
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.num_sge = 0;
    wr.wr.rdma.remote_addr = cts_.addr;
    wr.wr.rdma.rkey = cts_.rkeys[q];
    const int rc = ibv_post_send(qps[q]->qp(), &wr, &bad);
    if (rc != 0) return fail("ibv_post_send on " + qps[q]->describe() + ": " + errno_text(rc));
    ++down_sq_[q];
  }
  return true;
}

bool RelayForward::room_for(size_t payload_qp, bool payload, bool last) const {
  const size_t n = down_ep_->qps().size();
  for (size_t q = 0; q < n; ++q) {
    const uint32_t need = (payload && q == payload_qp ? 1u : 0u) + (last ? 1u : 0u);
    if (down_sq_[q] + need > static_cast<uint32_t>(QueuePair::kSendDepth)) return false;
  }
  return true;
}

bool RelayForward::forward_to_relay(bool* progress) {
  // A middle hop: chunk c goes from our slot into the next relay host's slot c % K' with the
  // same immediate (length, tag, last flag), paced by its credits; its completion frees our
  // slot (and so returns our credit upstream).
  auto& qps = down_ep_->qps();
  const uint64_t credit = read_credit_word(down_ep_->cts_memory());
  if (!next_.take_credit(credit))
    return fail("the next relay host returned credit " + std::to_string(credit) + " with " +
                std::to_string(next_.posted()) + " chunks posted (protocol violation)");
  for (;;) {
    RelayChunks::Next n;
    if (!chunks_->next(&n) || !next_.may_post()) return true;
    const RelayChunkWriter::Write w = next_.next(qps.size(), n.length, n.last);
    if (w.chunk != n.chunk)
      return fail("chunk " + std::to_string(n.chunk) + " would go on as chunk " +
                  std::to_string(w.chunk) + " (internal error)");
    if (!room_for(w.qp, true, false)) return true;  // the send queue drains first
    *progress = true;
    std::string why;
    if (!post_chunk_write(*qps[w.qp], w,
                          reinterpret_cast<uintptr_t>(staging_) + n.slot * slot_bytes_, n.length,
                          down_mem_->lkey[w.qp], kWrPayload | n.chunk,
                          /*inline_ok=*/false, &why))  // no CPU reads the payload
      return fail(why);
    ++down_sq_[w.qp];
    next_.posted_one();
    chunks_->forwarded(true);
  }
}

bool RelayForward::forward_arrived(bool* progress) {
  if (sockets_.down_relay) return forward_to_relay(progress);
  auto& qps = down_ep_->qps();
  for (;;) {
    RelayChunks::Next n;
    if (!chunks_->next(&n)) return true;
    if (!have_cts_) {
      // The destination's clear-to-send for this message: written by its NIC, the marker last.
      const uint8_t* entry =
          down_ep_->cts_memory() + (msg_seq_ % NCCL_NET_MAX_REQUESTS) * kCtsEntrySize;
      const uint32_t marker =
          le32toh(__atomic_load_n(reinterpret_cast<const uint32_t*>(entry + 60), __ATOMIC_ACQUIRE));
      if (marker != msg_seq_ + 1) return true;  // not posted yet: the chunks wait in staging
      cts_ = decode_cts_entry(entry);
      have_cts_ = true;
    }
    const size_t q = n.chunk % qps.size();
    // Larger than the posted receive: nothing lands past the buffer; the size still goes on,
    // so the destination fails with its own message, as on a direct connection.
    if (n.length > 0 && msg_offset_ + n.length > cts_.capacity) oversize_ = true;
    const bool payload = n.length > 0 && !oversize_;
    if (!room_for(q, payload, n.last)) return true;  // the send queues drain first
    *progress = true;
    if (payload) {
      ibv_sge sge{};
      sge.addr = reinterpret_cast<uintptr_t>(staging_) + n.slot * slot_bytes_;
      sge.length = n.length;
      sge.lkey = down_mem_->lkey[q];
      ibv_send_wr wr{};
      ibv_send_wr* bad = nullptr;
      wr.wr_id = kWrPayload | n.chunk;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = cts_.addr + msg_offset_;
      wr.wr.rdma.rkey = cts_.rkeys[q];
      const int rc = ibv_post_send(qps[q]->qp(), &wr, &bad);
      if (rc != 0) return fail("ibv_post_send on " + qps[q]->describe() + ": " + errno_text(rc));
      ++down_sq_[q];
    }
    chunks_->forwarded(payload);
    msg_offset_ += n.length;
    if (n.last) {
      if (!post_imm_writes(msg_offset_)) return false;
      ++msg_seq_;
      have_cts_ = false;
      msg_offset_ = 0;
      oversize_ = false;
    }
  }
}

bool RelayForward::poll_down(bool* progress) {
  auto& qps = down_ep_->qps();
  std::string why;
  for (size_t q = 0; q < qps.size(); ++q) {
    const bool ok = drain_completions(*qps[q], &why, [&](const ibv_wc& c) {
      *progress = true;
      if (c.status != IBV_WC_SUCCESS) return fail(completion_error(*qps[q], c));
      const uint64_t kind = c.wr_id & kWrKind;
      if (kind != kWrPayload && kind != kWrImm)
        return fail("completion of unknown work request " + std::to_string(c.wr_id) + " on " +
                    qps[q]->describe());
      if (down_sq_[q] == 0)
        return fail("more send completions than work requests on " + qps[q]->describe() +
                    " (a duplicated completion: provider fault)");
      --down_sq_[q];
      std::string err;
      return kind != kWrPayload || chunks_->written(c.wr_id & ~kWrKind, &err) ||
             fail(err + " on " + qps[q]->describe());
    });
    if (!ok) return why.empty() ? false : fail(why);
  }
  return true;
}

bool RelayForward::return_credits(bool* progress) {
  // Draining: the connector is gone, and nothing it could still write would be a completed send.
  if (draining()) return true;
  const uint64_t freed = chunks_->freed();
  if (freed == credit_sent_) return true;
  // Every credit write is signalled and counted: the send queue never overflows, whatever the
  // slot count; a credit that must wait is merged into the next (the word is a running count).
  if (up_sq_ >= static_cast<uint32_t>(QueuePair::kSendDepth)) return true;
  *progress = true;
  // Staged in the up endpoint's own registered clear-to-send memory, which a receiver endpoint
  // otherwise leaves unused here (the relay posts no clear-to-send to the connector).
  uint64_t v = htole64(freed);
  uint8_t* staged = up_ep_->cts_memory();
  std::memcpy(staged, &v, sizeof(v));
  QueuePair& qp0 = *up_ep_->qps()[0];
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(staged);
  sge.length = sizeof(v);
  sge.lkey = up_ep_->cts_lkey(0);
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kWrCredit | freed;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  // Inline: the value is copied at post time. Without inline the NIC reads `staged` later,
  // possibly after a newer count was staged there: still a count of freed slots, so still safe
  // (and the connector ignores a count lower than one it saw).
  if (sizeof(v) <= qp0.max_inline()) wr.send_flags |= IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = up_ep_->peer_ring_addr();
  wr.wr.rdma.rkey = up_ep_->peer_ring_rkey();
  const int rc = ibv_post_send(qp0.qp(), &wr, &bad);
  if (rc != 0) return fail("posting a credit on " + qp0.describe() + ": " + errno_text(rc));
  ++up_sq_;
  credit_sent_ = freed;
  return true;
}

}  // namespace mesh::rdma
