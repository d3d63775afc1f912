// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/rdma_connection.h"

#include <arpa/inet.h>
#include <endian.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "transport/rdma/completions.h"
#include "transport/requests.h"
#include "util/clock.h"
#include "util/log.h"

namespace mesh::rdma {
namespace {

// Every Nth clear-to-send write is signalled so its send-queue slots are reclaimed.
constexpr uint32_t kCtsSignalEvery = 8;
constexpr uint64_t kCtsWrFlag = 1ull << 63;

}  // namespace

RdmaConnection::RdmaConnection(std::shared_ptr<Endpoint> endpoint, UniqueFd control,
                               std::string local, std::string peer)
    : Connection(endpoint->sender() ? ObjectTag::kSend : ObjectTag::kRecv),
      sender_(endpoint->sender()),
      ep_(std::move(endpoint)),
      control_(std::move(control)),
      local_(std::move(local)),
      peer_(std::move(peer)) {
  summary_ = ep_->describe();
  set_nonblocking(control_.get(), true);
  for (Request& r : pool_) r.hdr.owner = this;
  for (FlushRequest& f : flushes_) f.hdr.owner = this;
  for (auto& qp : ep_->qps()) qp->watch(failure_);
  if (sender_) {
    // Our QPs are in RTS (connect() moved them before building this comm): tell the listener,
    // whose accept() returns the receive comm only then.
    std::string why;
    if (!send_ready_byte(control_.get(), &why)) fail(ncclRemoteError, why);
  }
}

RdmaConnection::~RdmaConnection() {
  close();
}

void RdmaConnection::close() {
  // Under the comm mutex: a call still inside isend/irecv/test/iflush on NCCL's progress thread
  // (possible at process exit, when the plugin's static destructor closes every comm while
  // NCCL's threads still run) finishes before the QPs go; later calls see ep_ == nullptr and
  // fail with a WARN instead of touching destroyed QPs.
  std::lock_guard<std::mutex> lock(mu_);
  if (control_.valid()) shutdown(control_.get(), SHUT_RDWR);
  control_.reset();
  for (FlushQp& f : flush_qps_) {
    VerbsDevice* dev = f.qp->device();
    f.qp.reset();  // the QP before the memory it reads into
    if (f.mr != nullptr) dev->release_mr(f.mr);
  }
  flush_qps_.clear();
  std::free(flush_buf_);
  flush_buf_ = nullptr;
  ep_.reset();  // destroys the QPs (which unregisters them from the async thread)
}

bool RdmaConnection::open_flush_qps(std::string* why) {
  flush_buf_ = static_cast<uint8_t*>(std::aligned_alloc(4096, 4096));
  if (flush_buf_ == nullptr) {
    *why = "out of memory for the flush buffer";
    return false;
  }
  auto& qps = ep_->qps();
  for (size_t q = 0; q < qps.size(); ++q) {
    VerbsDevice* dev = qps[q]->device();
    bool seen = false;
    for (const FlushQp& f : flush_qps_) seen |= f.qp->device() == dev;
    if (seen) continue;
    const QpInfo iq = qps[q]->info();
    FlushQp f;
    f.data_qp = q;
    f.qp = QueuePair::create(dev, qps[q]->binding(), iq.local_addr, iq.local_addr, why);
    if (!f.qp) return false;
    if (!f.qp->connect(f.qp->info(), QpOptions{}, why)) return false;
    f.qp->watch(failure_);
    f.mr = dev->acquire_mr(flush_buf_, 4096, why);
    if (f.mr == nullptr) return false;
    flush_qps_.push_back(std::move(f));
  }
  return true;
}

ncclResult_t RdmaConnection::iflush(int n, void** data, int* sizes, MemoryRegion** mrs,
                                    void** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ep_) return closed_error();
  if (failure_->failed()) return report_failure();
  // The last GPU buffer that received data: one READ orders after every earlier write.
  int last = -1;
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > 0 && mrs[i] != nullptr && mrs[i]->type == NCCL_PTR_CUDA) last = i;
  }
  if (last < 0) return ncclSuccess;  // host memory: nothing to flush
  const auto* mem = dynamic_cast<const RdmaMemory*>(mrs[last]->transport.get());
  if (mem == nullptr) return ncclSuccess;
  std::string why;
  if (flush_qps_.empty() && !open_flush_qps(&why)) {
    MESH_WARN("%s: cannot create the flush QPs: %s", describe().c_str(), why.c_str());
    for (FlushQp& fq : flush_qps_) {
      if (fq.mr != nullptr) fq.qp->device()->release_mr(fq.mr);
    }
    flush_qps_.clear();
    std::free(flush_buf_);
    flush_buf_ = nullptr;
    return ncclSystemError;
  }
  FlushRequest* f = nullptr;
  for (FlushRequest& cand : flushes_) {
    if (!cand.in_use) {
      f = &cand;
      break;
    }
  }
  if (f == nullptr) {
    MESH_WARN("%s: more than %d flushes in flight", describe().c_str(), NCCL_NET_MAX_REQUESTS);
    return ncclInternalError;
  }
  // One READ through every device that wrote into the buffer (each device's writes are ordered
  // only before its own READ), like NCCL's IB transport; the request completes when all did.
  f->in_use = true;
  f->pending = 0;
  for (FlushQp& fq : flush_qps_) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(flush_buf_);
    sge.length = 1;
    sge.lkey = fq.mr->mr->lkey;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(f - flushes_.data());
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(data[last]);
    wr.wr.rdma.rkey = mem->rkey[fq.data_qp];  // this device's registration of the buffer
    const int rc = ibv_post_send(fq.qp->qp(), &wr, &bad);
    if (rc != 0) {
      // READs already posted still complete into this slot: it stays busy until they did.
      fail(ncclSystemError,
           "posting the flush READ on " + fq.qp->describe() + " failed: " + errno_text(rc));
      if (f->pending == 0) f->in_use = false;
      return report_failure();
    }
    ++f->pending;
  }
  *request = f;
  return ncclSuccess;
}

void RdmaConnection::poll_flush() {
  for (FlushQp& fq : flush_qps_) {
    ibv_wc wc[8];
    const int n = ibv_poll_cq(fq.qp->cq(), 8, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        fail(ncclSystemError, "flush READ on " + fq.qp->describe() + " failed: " +
                                  fq.qp->device()->api()->wc_status_str(wc[i].status));
        continue;
      }
      if (wc[i].wr_id < flushes_.size() && flushes_[wc[i].wr_id].pending > 0)
        --flushes_[wc[i].wr_id].pending;
    }
  }
}

bool RdmaConnection::poll_ready(std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ep_) {
    *why = "the comm was closed";
    return false;
  }
  if (sender_ || ready_) return true;
  uint8_t byte = 0;
  const ssize_t n = recv(control_.get(), &byte, 1, MSG_DONTWAIT);
  if (n == 1 && byte == kReadyByte) {
    ready_ = true;
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (n == 1) {
    *why = "the connector sent byte " + std::to_string(byte) +
           " instead of its ready byte (protocol violation)";
  } else if (n == 0) {
    *why =
        "the connector closed the connection before its QPs were ready (its process exited "
        "or it closed the comm)";
  } else {
    *why = "reading the connector's ready byte failed: " + errno_text(errno);
  }
  return false;
}

std::string RdmaConnection::describe() const {
  return std::string(sender_ ? "send" : "receive") + " connection " + local_ +
         (sender_ ? " -> " : " <- ") + peer_ + " (RDMA, " + summary_ + ")";
}

void RdmaConnection::fail(ncclResult_t code, const std::string& why) {
  failure_->fail(code, why);
}

ncclResult_t RdmaConnection::report_failure() {
  return failure_->report(describe());
}

RdmaConnection::Request* RdmaConnection::take_slot(uint32_t seq) {
  // The request 32 sequences back shares this sequence's by_seq_ entry (and clear-to-send slot).
  // Its data has normally all arrived: with at most 32 outstanding, a later request completed,
  // and each QP completes in order. If it is still completing, the caller retries.
  const Request* prev = by_seq_[seq % by_seq_.size()];
  if (prev != nullptr && prev->in_use && prev->pending > 0) return nullptr;
  for (Request& r : pool_) {
    if (!r.in_use) return &r;
  }
  return nullptr;
}

ncclResult_t RdmaConnection::closed_error() {
  if (!closed_warned_.exchange(true)) {
    MESH_WARN(
        "%s: called after the comm was closed (process exit with NCCL's threads still "
        "running?)",
        describe().c_str());
  }
  return ncclInternalError;
}

size_t RdmaConnection::in_flight() const {
  size_t n = 0;
  for (const Request& r : pool_) n += r.in_use ? 1 : 0;
  return n;
}

ncclResult_t RdmaConnection::register_memory(MemoryRegion* mr, int dmabuf_fd, uint64_t offset) {
  return register_rdma_memory(ep_->qps(), mr, dmabuf_fd, offset, describe());
}

void RdmaConnection::check_control() {
  if (peer_gone_ms_ >= 0 || !control_.valid()) return;
  uint8_t byte;
  const ssize_t n = recv(control_.get(), &byte, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n > 0 && !sender_ && !ready_ && byte == kReadyByte) {
    ready_ = true;  // accept() normally reads it (poll_ready); harmless here
    return;
  }
  if (n > 0) {
    fail(ncclRemoteError, "unexpected bytes on the control socket (protocol violation)");
    return;
  }
  peer_gone_ms_ = monotonic_ms();
}

void RdmaConnection::poll() {
  auto& qps = ep_->qps();
  ibv_wc wc[16];
  for (size_t q = 0; q < qps.size(); ++q) {
    for (;;) {
      const int n = ibv_poll_cq(qps[q]->cq(), 16, wc);
      if (n < 0) {
        fail(ncclSystemError, "ibv_poll_cq on " + qps[q]->describe() + " failed");
        return;
      }
      for (int i = 0; i < n; ++i) {
        const ibv_wc& c = wc[i];
        if (c.status != IBV_WC_SUCCESS) {
          fail(completion_code(c), completion_error(*qps[q], c) +
                                       "; check that the peer process is alive, the cable, and "
                                       "NCCL_MESH_IB_TIMEOUT/NCCL_MESH_IB_RETRY_CNT");
          continue;
        }
        if (sender_) {
          const uint32_t seq = static_cast<uint32_t>(c.wr_id);
          Request* rp = by_seq_[seq % by_seq_.size()];
          if (rp == nullptr || !rp->in_use || rp->seq != seq || rp->pending == 0) {
            fail(ncclInternalError,
                 "send completion for message " + std::to_string(seq) + " that is not in flight");
            continue;
          }
          --rp->pending;
          continue;
        }
        if (c.wr_id & kCtsWrFlag) continue;  // a signalled clear-to-send write
        if (c.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
          fail(ncclRemoteError, "unexpected completion opcode " + std::to_string(c.opcode) +
                                    " on " + qps[q]->describe());
          continue;
        }
        const uint32_t seq = completed_[q]++;
        Request* rp = by_seq_[seq % by_seq_.size()];
        const uint64_t size = ntohl(c.imm_data);
        if (rp == nullptr || !rp->in_use || rp->seq != seq || rp->pending == 0) {
          fail(ncclRemoteError, "data for message " + std::to_string(seq) + " arrived on " +
                                    qps[q]->describe() +
                                    " before its receive was posted (protocol violation)");
          continue;
        }
        Request& r = *rp;
        if (size > r.capacity) {
          fail(ncclInvalidUsage, oversize_at_receiver(size, r.capacity));
          continue;
        }
        if (r.pending != qps.size() && r.size != size) {
          fail(ncclRemoteError, "QPs disagree on the size of message " + std::to_string(seq));
          continue;
        }
        r.size = size;
        --r.pending;
        std::string why;
        if (!qps[q]->post_recv(&why)) fail(ncclSystemError, why);
      }
      if (n < 16) break;
    }
  }
  check_control();
  // Like EOF on a TCP connection, a closed control socket fails the comm; the grace lets the
  // peer's last completions (already on the wire when its kernel closed the socket) arrive.
  if (peer_gone_ms_ >= 0 && monotonic_ms() - peer_gone_ms_ > kPeerGoneGraceMs) {
    fail(ncclRemoteError, in_flight() > 0
                              ? "the peer closed the connection (its process exited or closed "
                                "its comm) with requests in flight"
                              : "the peer closed the connection (its process exited or closed "
                                "its comm)");
  }
}

ncclResult_t RdmaConnection::isend(void* data, size_t size, int /*tag*/, MemoryRegion* mr,
                                   void** request) {
  *request = nullptr;
  if (!sender_) return ncclInternalError;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ep_) return closed_error();
  poll();
  if (failure_->failed()) return report_failure();
  const RdmaMemory* mem = nullptr;
  if (const ncclResult_t rc = memory_for_send(describe(), size, mr, &mem); rc != ncclSuccess)
    return rc;
  if (in_flight() >= pool_.size()) return warn_pool_exhausted(describe(), true);
  // The receiver's clear-to-send for this sequence: written by its NIC, the marker last.
  const uint8_t* slot = ep_->cts_memory() + (next_seq_ % pool_.size()) * kCtsEntrySize;
  const uint32_t marker =
      le32toh(__atomic_load_n(reinterpret_cast<const uint32_t*>(slot + 60), __ATOMIC_ACQUIRE));
  if (marker != next_seq_ + 1) return ncclSuccess;  // not posted yet: NCCL retries
  Request* rp = take_slot(next_seq_);
  if (rp == nullptr)
    return ncclSuccess;  // the previous user of this sequence's slot is
                         // still completing: retry
  Request& r = *rp;
  const CtsEntry cts = decode_cts_entry(slot);
  const bool oversize = size > cts.capacity;
  auto& qps = ep_->qps();
  for (size_t q = 0; q < qps.size(); ++q) {
    // Too big for the receiver: zero-length writes carry the size, so the receiver fails with
    // its own message and no byte lands outside its buffer.
    const Slice s = oversize ? Slice{} : split(size, qps.size(), q);
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(data) + s.offset;
    sge.length = static_cast<uint32_t>(s.length);
    sge.lkey = mem != nullptr ? mem->lkey[q] : 0;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = next_seq_;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(static_cast<uint32_t>(size));
    wr.send_flags = IBV_SEND_SIGNALED;
    // Inline makes the verbs library copy the payload with the CPU at post time: host memory
    // only (a GPU address would fault or put garbage on the wire).
    if (s.length > 0 && s.length <= qps[q]->max_inline() && !mem->gpu)
      wr.send_flags |= IBV_SEND_INLINE;
    wr.sg_list = &sge;
    wr.num_sge = s.length > 0 ? 1 : 0;
    wr.wr.rdma.remote_addr = cts.addr + s.offset;
    wr.wr.rdma.rkey = cts.rkeys[q];
    const int rc = ibv_post_send(qps[q]->qp(), &wr, &bad);
    if (rc != 0) {
      fail(ncclSystemError,
           "ibv_post_send on " + qps[q]->describe() + " failed: " + errno_text(rc));
      return report_failure();
    }
  }
  r.in_use = true;
  r.seq = next_seq_++;
  r.size = size;
  r.pending = qps.size();
  by_seq_[r.seq % by_seq_.size()] = &r;
  if (oversize) {
    fail(ncclInvalidUsage, oversize_at_sender(size, cts.capacity));
    return report_failure();
  }
  *request = &r;
  return ncclSuccess;
}

bool RdmaConnection::post_cts(Request* r, void* data, const RdmaMemory* mem) {
  CtsEntry e;
  e.addr = reinterpret_cast<uintptr_t>(data);
  e.capacity = r->capacity;
  for (size_t q = 0; q < ep_->qps().size(); ++q) e.rkeys[q] = mem != nullptr ? mem->rkey[q] : 0;
  e.seq_plus_one = r->seq + 1;
  const size_t slot = r->seq % pool_.size();
  uint8_t* staging = ep_->cts_memory() + slot * kCtsEntrySize;
  encode_cts_entry(e, staging);
  QueuePair& qp0 = *ep_->qps()[0];
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(staging);
  sge.length = kCtsEntrySize;
  sge.lkey = ep_->cts_lkey(0);
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kCtsWrFlag | r->seq;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  // Unsignalled except every Nth: its completion also frees the slots of the ones before.
  if (++cts_posted_ % kCtsSignalEvery == 0) wr.send_flags |= IBV_SEND_SIGNALED;
  if (kCtsEntrySize <= qp0.max_inline()) wr.send_flags |= IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = ep_->peer_ring_addr() + slot * kCtsEntrySize;
  wr.wr.rdma.rkey = ep_->peer_ring_rkey();
  const int rc = ibv_post_send(qp0.qp(), &wr, &bad);
  if (rc != 0) {
    fail(ncclSystemError,
         "posting the clear-to-send on " + qp0.describe() + " failed: " + errno_text(rc));
    return false;
  }
  return true;
}

ncclResult_t RdmaConnection::irecv(int n, void** data, size_t* sizes, int* /*tags*/,
                                   MemoryRegion** mrs, void** request) {
  *request = nullptr;  // always overwritten: NCCL may have pre-set it to 0x1
  if (sender_) return ncclInternalError;
  if (n != 1) return warn_grouped_receive(describe(), n);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ep_) return closed_error();
  poll();
  if (failure_->failed()) return report_failure();
  MemoryRegion* mr = mrs != nullptr ? mrs[0] : nullptr;
  const auto* mem = mr != nullptr ? dynamic_cast<const RdmaMemory*>(mr->transport.get()) : nullptr;
  if (sizes[0] > 0 && mem == nullptr) {
    MESH_WARN("%s: irecv of %zu bytes without an RDMA registration (mhandle %p)",
              describe().c_str(), sizes[0], static_cast<void*>(mr));
    return ncclInvalidArgument;
  }
  if (in_flight() >= pool_.size()) return warn_pool_exhausted(describe(), false);
  Request* rp = take_slot(next_seq_);
  if (rp == nullptr) return ncclSuccess;  // see take_slot: retry
  Request& r = *rp;
  r.in_use = true;
  r.seq = next_seq_++;
  r.capacity = sizes[0];
  r.size = 0;
  r.pending = ep_->qps().size();
  by_seq_[r.seq % by_seq_.size()] = &r;
  if (!post_cts(&r, data[0], mem)) return report_failure();
  *request = &r;
  return ncclSuccess;
}

ncclResult_t RdmaConnection::test(RequestHeader* request, int* done, int* sizes) {
  auto* r = reinterpret_cast<Request*>(request);
  *done = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ep_) return closed_error();
  auto* f = reinterpret_cast<FlushRequest*>(request);
  if (f >= flushes_.data() && f < flushes_.data() + flushes_.size()) {
    if (!f->in_use) {
      MESH_WARN("%s: test() on a flush that is not in flight", describe().c_str());
      return ncclInternalError;
    }
    poll_flush();
    if (f->pending == 0) {
      *done = 1;
      if (sizes != nullptr) *sizes = 0;
      f->in_use = false;
      return ncclSuccess;
    }
    if (failure_->failed()) return report_failure();
    return ncclSuccess;
  }
  if (!is_in_flight(pool_, r)) return warn_not_in_flight(describe());
  poll();
  if (r->pending == 0) {
    *done = 1;
    if (sizes != nullptr) *sizes = reported_size(r->size);
    r->in_use = false;
    return ncclSuccess;
  }
  if (failure_->failed()) return report_failure();
  return ncclSuccess;
}

}  // namespace mesh::rdma
