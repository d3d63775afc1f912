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
#include "util/byte_order.h"
#include "util/log.h"

namespace mesh::rdma {
namespace {

// Work request ids on the relay's QPs: what completed.
constexpr uint64_t kWrPayload = 1ull << 62;  // | chunk index: an onward WRITE from a slot
constexpr uint64_t kWrImm = 2ull << 62;      // a message's closing WRITE_WITH_IMM
constexpr uint64_t kWrCredit = 3ull << 62;   // a credit WRITE to the connector
constexpr uint64_t kWrKind = 3ull << 62;
// Every Nth credit write is signalled so its send-queue slots are reclaimed.
constexpr uint32_t kCreditSignalEvery = 8;
// Liveness of the control sockets is checked this often while forwarding (a syscall each).
constexpr int64_t kControlCheckMs = 5;

}  // namespace

RelayForward::RelayForward(RdmaTransport& transport, ForwardSockets sockets, uint32_t slots,
                           uint32_t slot_bytes, int64_t setup_timeout_ms)
    : transport_(transport),
      sockets_(std::move(sockets)),
      slots_(slots),
      slot_bytes_(slot_bytes),
      deadline_ms_(setup_timeout_ms) {
  set_nonblocking(sockets_.up.get(), true);
  set_nonblocking(sockets_.down.get(), true);
  slot_.assign(slots_, Slot::kEmpty);
  slot_len_.assign(slots_, 0);
  slot_last_.assign(slots_, 0);
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
  if (hello.role != handshake::Role::kControl || hello.ext_len == 0 || hello.ndata != 0) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kMalformed),
              "an RDMA relay request must carry one control hello with an RDMA setup");
    return false;
  }
  if (in_.size() < handshake::kHelloSize + hello.ext_len) return true;  // read the rest
  if (!decode_setup(in_.data() + handshake::kHelloSize, hello.ext_len, &up_setup_, &why) ||
      !up_setup_.relay || up_setup_.relay_slots != 0) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kMalformed),
              "the connector's RDMA setup is not a relay hop's" + (why.empty() ? "" : ": " + why));
    return false;
  }
  up_ep_ = transport_.open_receiver(up_setup_, &why);
  if (up_ep_) down_ep_ = transport_.open_sender_on(sockets_.down_local, sockets_.down_peer, &why);
  if (!up_ep_ || !down_ep_ || !allocate_staging(&why)) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
              "cannot set up RDMA on this relay host: " + why);
    return false;
  }
  SetupMessage down = down_ep_->local_setup();
  down.traffic_class = up_setup_.traffic_class;
  const std::vector<uint8_t> ext = encode_setup(down);
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
  SetupMessage dest;
  std::string why;
  const QpOptions opt = transport_.qp_options(up_setup_.traffic_class);
  if (!decode_setup(in_.data() + handshake::kReplySize + 2, len, &dest, &why) || dest.relay ||
      !down_ep_->connect(dest, opt, &why) || !up_ep_->connect(up_setup_, opt, &why)) {
    refuse_up(static_cast<uint8_t>(handshake::HelloReply::kSetupFailed),
              "connecting the relay's QPs failed: " +
                  (why.empty() ? std::string("the destination's setup is a relay hop's") : why));
    return false;
  }
  // The destination hands out its receive comm once our QPs are in RTS (wire.h 4.).
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
        MESH_INFO(NCCL_NET,
                  "relay: forwarding %s over RDMA (%u slots of %u bytes; in: %s; out: %s)",
                  sockets_.what.c_str(), slots_, slot_bytes_, up_ep_->describe().c_str(),
                  down_ep_->describe().c_str());
      }
      return true;
    case Phase::kLive:
      break;
    case Phase::kDone:
      return false;
  }
  if (!poll_up(progress) || !forward_arrived(progress) || !poll_down(progress) ||
      !return_credits(progress))
    return false;
  if (now_ms >= next_control_check_ms_) {
    next_control_check_ms_ = now_ms + kControlCheckMs;
    if (!check_controls()) return false;
  }
  return true;
}

bool RelayForward::check_controls() {
  for (int side = 0; side < 2; ++side) {
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
    // EOF or an error: that end is gone (process exit, closed comm, or its cable failed).
    MESH_INFO(NCCL_NET, "relay: RDMA forward %s: the %s closed the connection; closing the other",
              sockets_.what.c_str(), side == 0 ? "connector" : "destination");
    finish();
    return false;
  }
  return true;
}

bool RelayForward::poll_up(bool* progress) {
  auto& qps = up_ep_->qps();
  std::string why;
  for (size_t q = 0; q < qps.size(); ++q) {
    const bool ok = drain_completions(*qps[q], &why, [&](const ibv_wc& c) {
      *progress = true;
      if (c.status != IBV_WC_SUCCESS) return fail(completion_error(*qps[q], c));
      if ((c.wr_id & kWrKind) == kWrCredit) return true;  // a signalled credit write
      if (c.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
        return fail("unexpected completion opcode " + std::to_string(c.opcode) + " on " +
                    qps[q]->describe());
      // Chunk c travels on QP c % nqps, and each QP completes in order.
      const uint64_t chunk = q + qps.size() * up_count_[q]++;
      const uint32_t imm = ntohl(c.imm_data);
      const uint32_t len = imm & ~kChunkLastFlag;
      const size_t slot = chunk % slots_;
      if (chunk < next_fwd_ || chunk >= freed_ + slots_ || slot_[slot] != Slot::kEmpty)
        return fail("the connector wrote chunk " + std::to_string(chunk) +
                    " without a free slot (" + std::to_string(freed_) +
                    " freed; protocol violation)");
      if (len > slot_bytes_)
        return fail("the connector's chunk " + std::to_string(chunk) + " claims " +
                    std::to_string(len) + " bytes in a slot of " + std::to_string(slot_bytes_));
      slot_[slot] = Slot::kArrived;
      slot_len_[slot] = len;
      slot_last_[slot] = (imm & kChunkLastFlag) != 0;
      std::string err;
      return qps[q]->post_recv(&err) || fail(err);
    });
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
  }
  return true;
}

bool RelayForward::forward_arrived(bool* progress) {
  auto& qps = down_ep_->qps();
  for (;;) {
    const size_t slot = next_fwd_ % slots_;
    if (slot_[slot] != Slot::kArrived) return true;
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
    *progress = true;
    const uint32_t len = slot_len_[slot];
    slot_[slot] = Slot::kEmpty;
    if (len > 0 && !oversize_ && msg_offset_ + len <= cts_.capacity) {
      const size_t q = next_fwd_ % qps.size();
      ibv_sge sge{};
      sge.addr = reinterpret_cast<uintptr_t>(staging_) + slot * slot_bytes_;
      sge.length = len;
      sge.lkey = down_mem_->lkey[q];
      ibv_send_wr wr{};
      ibv_send_wr* bad = nullptr;
      wr.wr_id = kWrPayload | next_fwd_;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = cts_.addr + msg_offset_;
      wr.wr.rdma.rkey = cts_.rkeys[q];
      const int rc = ibv_post_send(qps[q]->qp(), &wr, &bad);
      if (rc != 0) return fail("ibv_post_send on " + qps[q]->describe() + ": " + errno_text(rc));
      slot_[slot] = Slot::kForwarding;
    } else if (len > 0) {
      // Larger than the posted receive: nothing lands past the buffer; the size still goes on,
      // so the destination fails with its own message, as on a direct connection.
      oversize_ = true;
    }
    msg_offset_ += len;
    const bool last = slot_last_[slot] != 0;
    ++next_fwd_;
    if (last) {
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
      if ((c.wr_id & kWrKind) != kWrPayload) return true;
      const uint64_t chunk = c.wr_id & ~kWrKind;
      const size_t slot = chunk % slots_;
      if (chunk < freed_ || chunk >= next_fwd_ || slot_[slot] != Slot::kForwarding)
        return fail("completion for chunk " + std::to_string(chunk) + " that is not in flight");
      slot_[slot] = Slot::kEmpty;
      return true;
    });
    if (!ok) return why.empty() ? false : fail(why);
  }
  return true;
}

bool RelayForward::return_credits(bool* progress) {
  while (freed_ < next_fwd_ && slot_[freed_ % slots_] == Slot::kEmpty) ++freed_;
  if (freed_ == credit_sent_) return true;
  *progress = true;
  // Staged in the up endpoint's own registered clear-to-send memory, which a receiver endpoint
  // otherwise leaves unused here (the relay posts no clear-to-send to the connector).
  uint64_t v = htole64(freed_);
  uint8_t* staged = up_ep_->cts_memory();
  std::memcpy(staged, &v, sizeof(v));
  QueuePair& qp0 = *up_ep_->qps()[0];
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(staged);
  sge.length = sizeof(v);
  sge.lkey = up_ep_->cts_lkey(0);
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kWrCredit | freed_;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  // Inline: the value is copied at post time. Without inline the NIC reads `staged` later,
  // possibly after a newer count was staged there: still a count of freed slots, so still safe.
  if (sizeof(v) <= qp0.max_inline()) wr.send_flags |= IBV_SEND_INLINE;
  if (++credit_writes_ % kCreditSignalEvery == 0) wr.send_flags |= IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = up_ep_->peer_ring_addr();
  wr.wr.rdma.rkey = up_ep_->peer_ring_rkey();
  const int rc = ibv_post_send(qp0.qp(), &wr, &bad);
  if (rc != 0) return fail("posting a credit on " + qp0.describe() + ": " + errno_text(rc));
  credit_sent_ = freed_;
  return true;
}

}  // namespace mesh::rdma
