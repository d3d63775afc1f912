// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/relay_send_connection.h"

#include <arpa/inet.h>
#include <endian.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "transport/rdma/completions.h"
#include "transport/requests.h"
#include "util/clock.h"
#include "util/log.h"

namespace mesh::rdma {

RelaySendConnection::RelaySendConnection(std::shared_ptr<Endpoint> endpoint,
                                         const SetupMessage& relay, UniqueFd control,
                                         std::string local, std::string peer, std::string route)
    : Connection(ObjectTag::kSend),
      ep_(std::move(endpoint)),
      control_(std::move(control)),
      local_(std::move(local)),
      peer_(std::move(peer)),
      route_(std::move(route)),
      staging_addr_(relay.ring_addr),
      slots_(relay.relay_slots),
      slot_bytes_(relay.relay_slot_bytes) {
  summary_ = ep_->describe();
  for (size_t q = 0; q < relay.qps.size() && q < kMaxQps; ++q)
    staging_rkey_[q] = relay.qps[q].ring_rkey;
  set_nonblocking(control_.get(), true);
  for (Request& r : pool_) r.hdr.owner = this;
  for (auto& qp : ep_->qps()) qp->watch(failure_);
  // Our QPs are in RTS: the relay may now write credits (it needs nothing else from us).
  std::string why;
  if (!send_ready_byte(control_.get(), &why)) failure_->fail(ncclRemoteError, why);
}

RelaySendConnection::~RelaySendConnection() {
  close();
}

void RelaySendConnection::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (control_.valid()) shutdown(control_.get(), SHUT_RDWR);
  control_.reset();
  ep_.reset();
}

std::string RelaySendConnection::describe() const {
  return "send connection " + local_ + " -> " + peer_ + " (RDMA relayed via " + route_ + ", " +
         summary_ + ")";
}

ncclResult_t RelaySendConnection::closed_error() {
  if (!closed_warned_.exchange(true)) {
    MESH_WARN("%s: called after the comm was closed", describe().c_str());
  }
  return ncclInternalError;
}

ncclResult_t RelaySendConnection::register_memory(MemoryRegion* mr, int dmabuf_fd,
                                                  uint64_t offset) {
  return register_rdma_memory(ep_->qps(), mr, dmabuf_fd, offset, describe());
}

ncclResult_t RelaySendConnection::irecv(int, void**, size_t*, int*, MemoryRegion**,
                                        void** request) {
  *request = nullptr;
  MESH_WARN("%s: irecv on a send comm", describe().c_str());
  return ncclInternalError;
}

void RelaySendConnection::check_control() {
  if (peer_gone_ms_ >= 0 || !control_.valid()) return;
  uint8_t byte;
  const ssize_t n = recv(control_.get(), &byte, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n > 0) {
    failure_->fail(ncclRemoteError, "unexpected bytes on the control socket (protocol violation)");
    return;
  }
  peer_gone_ms_ = monotonic_ms();
}

void RelaySendConnection::poll() {
  for (auto& qp : ep_->qps()) {
    std::string why;
    const bool ok = drain_completions(*qp, &why, [&](const ibv_wc& c) {
      if (c.status != IBV_WC_SUCCESS) {
        failure_->fail(completion_code(c), completion_error(*qp, c) +
                                               "; check that the relay host " + route_ +
                                               " is alive, the cable to it, and "
                                               "NCCL_MESH_IB_TIMEOUT/NCCL_MESH_IB_RETRY_CNT");
        return false;
      }
      if (c.wr_id >= pool_.size() || !pool_[c.wr_id].in_use || pool_[c.wr_id].pending == 0) {
        failure_->fail(ncclInternalError, "send completion for a chunk that is not in flight");
        return false;
      }
      --pool_[c.wr_id].pending;
      return true;
    });
    if (!ok && !why.empty()) failure_->fail(ncclSystemError, why);
    if (!ok) return;
  }
  check_control();
  if (peer_gone_ms_ >= 0 && monotonic_ms() - peer_gone_ms_ > kPeerGoneGraceMs) {
    failure_->fail(ncclRemoteError,
                   "the relay " + route_ +
                       " closed the connection (the peer or the relay process exited, or a "
                       "cable of the route failed)");
  }
  if (!failure_->failed()) pump();
}

void RelaySendConnection::pump() {
  // The relay's NIC writes the number of chunks it has freed. A value beyond what we posted is a
  // protocol violation, never trusted as a credit; a lower one than already seen is stale (a
  // NIC that re-executed a duplicated WRITE, or a non-inline credit read late) and ignored.
  const uint64_t credit = le64toh(
      __atomic_load_n(reinterpret_cast<const uint64_t*>(ep_->cts_memory()), __ATOMIC_ACQUIRE));
  if (!accept_credit(credit, chunks_posted_, &credit_seen_)) {
    failure_->fail(ncclRemoteError,
                   "the relay " + route_ + " returned credit " + std::to_string(credit) + " with " +
                       std::to_string(chunks_posted_) + " chunks posted (protocol violation)");
    return;
  }
  auto& qps = ep_->qps();
  while (post_seq_ != next_seq_) {
    Request& r = *by_seq_[post_seq_ % by_seq_.size()];
    while (r.posted < r.chunks) {
      if (chunks_posted_ >= credit_seen_ + slots_) return;  // every slot is taken
      const uint64_t c = chunks_posted_;
      const size_t q = c % qps.size();
      const size_t offset = static_cast<size_t>(r.posted) * slot_bytes_;
      const size_t length = std::min<size_t>(slot_bytes_, r.size - std::min(r.size, offset));
      const bool last = r.posted + 1 == r.chunks;
      ibv_sge sge{};
      sge.addr = reinterpret_cast<uintptr_t>(r.data) + offset;
      sge.length = static_cast<uint32_t>(length);
      sge.lkey = r.mem != nullptr ? r.mem->lkey[q] : 0;
      ibv_send_wr wr{};
      ibv_send_wr* bad = nullptr;
      wr.wr_id = static_cast<uint64_t>(&r - pool_.data());
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(chunk_imm(static_cast<uint32_t>(length), last, c));
      wr.send_flags = IBV_SEND_SIGNALED;
      // Inline copies with the CPU at post time: host memory only, never GPU memory.
      if (length > 0 && length <= qps[q]->max_inline() && r.mem != nullptr && !r.mem->gpu)
        wr.send_flags |= IBV_SEND_INLINE;
      wr.sg_list = &sge;
      wr.num_sge = length > 0 ? 1 : 0;
      wr.wr.rdma.remote_addr = staging_addr_ + (c % slots_) * slot_bytes_;
      wr.wr.rdma.rkey = staging_rkey_[q];
      const int rc = ibv_post_send(qps[q]->qp(), &wr, &bad);
      if (rc != 0) {
        failure_->fail(ncclSystemError,
                       "ibv_post_send on " + qps[q]->describe() + " failed: " + errno_text(rc));
        return;
      }
      ++r.posted;
      ++r.pending;
      ++chunks_posted_;
    }
    ++post_seq_;
  }
}

ncclResult_t RelaySendConnection::isend(void* data, size_t size, int /*tag*/, MemoryRegion* mr,
                                        void** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ep_) return closed_error();
  poll();
  if (failure_->failed()) return report_failure();
  const RdmaMemory* mem = nullptr;
  if (const ncclResult_t rc = memory_for_send(describe(), size, mr, &mem); rc != ncclSuccess)
    return rc;
  Request* rp = nullptr;
  for (Request& r : pool_) {
    if (!r.in_use) {
      rp = &r;
      break;
    }
  }
  if (rp == nullptr) return warn_pool_exhausted(describe(), true);
  Request& r = *rp;
  r.in_use = true;
  r.seq = next_seq_++;
  r.data = static_cast<const uint8_t*>(data);
  r.size = size;
  r.mem = mem;
  r.chunks = size == 0 ? 1 : static_cast<uint32_t>((size + slot_bytes_ - 1) / slot_bytes_);
  r.posted = 0;
  r.pending = 0;
  by_seq_[r.seq % by_seq_.size()] = &r;
  pump();
  if (failure_->failed()) return report_failure();
  *request = &r;
  return ncclSuccess;
}

ncclResult_t RelaySendConnection::test(RequestHeader* request, int* done, int* sizes) {
  auto* r = reinterpret_cast<Request*>(request);
  *done = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ep_) return closed_error();
  if (!is_in_flight(pool_, r)) return warn_not_in_flight(describe());
  poll();
  if (r->posted == r->chunks && r->pending == 0) {
    *done = 1;
    if (sizes != nullptr) *sizes = reported_size(r->size);
    r->in_use = false;
    return ncclSuccess;
  }
  if (failure_->failed()) return report_failure();
  return ncclSuccess;
}

}  // namespace mesh::rdma
