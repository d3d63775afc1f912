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
      writer_(relay) {
  summary_ = ep_->describe();
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
  const uint64_t credit = read_credit_word(ep_->cts_memory());
  if (!writer_.take_credit(credit)) {
    failure_->fail(ncclRemoteError,
                   "the relay " + route_ + " returned credit " + std::to_string(credit) + " with " +
                       std::to_string(writer_.posted()) + " chunks posted (protocol violation)");
    return;
  }
  auto& qps = ep_->qps();
  const uint32_t slot_bytes = writer_.slot_bytes();
  while (post_seq_ != next_seq_) {
    Request& r = *by_seq_[post_seq_ % by_seq_.size()];
    while (r.posted < r.chunks) {
      if (!writer_.may_post()) return;  // every slot is taken
      const size_t offset = static_cast<size_t>(r.posted) * slot_bytes;
      const size_t length = std::min<size_t>(slot_bytes, r.size - std::min(r.size, offset));
      const RelayChunkWriter::Write w =
          writer_.next(qps.size(), static_cast<uint32_t>(length), r.posted + 1 == r.chunks);
      // Inline copies with the CPU at post time: host memory only, never GPU memory.
      const bool inline_ok = r.mem != nullptr && !r.mem->gpu;
      std::string why;
      if (!post_chunk_write(*qps[w.qp], w, reinterpret_cast<uintptr_t>(r.data) + offset,
                            static_cast<uint32_t>(length), r.mem != nullptr ? r.mem->lkey[w.qp] : 0,
                            static_cast<uint64_t>(&r - pool_.data()), inline_ok, &why)) {
        failure_->fail(ncclSystemError, why);
        return;
      }
      writer_.posted_one();
      ++r.posted;
      ++r.pending;
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
  const size_t s = writer_.slot_bytes();
  r.chunks = size == 0 ? 1 : static_cast<uint32_t>((size + s - 1) / s);
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
