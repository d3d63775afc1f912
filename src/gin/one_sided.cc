// SPDX-License-Identifier: Apache-2.0
#include "gin/one_sided.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "transport/rdma/wire.h"
#include "util/settings.h"
#include "util/socket_util.h"

namespace mesh::gin {

namespace {
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;
}  // namespace

RdmaRegistration::~RdmaRegistration() {
  for (auto& [dev, mr] : mrs_) dev->api()->dereg_mr(mr);
}

bool RdmaRegistration::add(rdma::VerbsDevice* dev, void* data, size_t size, std::string* why) {
  if (on(dev) != nullptr) return true;
  ibv_mr* mr = dev->api()->reg_mr(dev->pd(), data, size, kAccess);
  if (mr == nullptr) {
    *why = "ibv_reg_mr of " + std::to_string(size) + " bytes on " + dev->name() +
           " failed: " + errno_text(errno) +
           " (GPU memory needs nvidia-peermem; check ulimit -l for host memory)";
    return false;
  }
  mrs_.emplace_back(dev, mr);
  return true;
}

const ibv_mr* RdmaRegistration::on(const rdma::VerbsDevice* dev) const {
  for (const auto& [d, mr] : mrs_)
    if (d == dev) return mr;
  return nullptr;
}

std::unique_ptr<OneSided> OneSided::create(rdma::VerbsDevice* dev, const rdma::RailBinding& rail,
                                           std::string* why) {
  ibv_device_attr attr{};
  if (dev->api()->query_device(dev->context(), &attr) != 0) {
    *why = "ibv_query_device on " + dev->name() + " failed: " + errno_text(errno);
    return nullptr;
  }
  if (attr.atomic_cap == IBV_ATOMIC_NONE) {
    *why = dev->name() + " has no RDMA atomics (atomic_cap NONE)";
    return nullptr;
  }
  std::unique_ptr<OneSided> s(new OneSided);
  s->dev_ = dev;
  s->rd_atomic_ = std::clamp(std::min(attr.max_qp_rd_atom, attr.max_qp_init_rd_atom), 1, 16);
  s->qp_ = rdma::QueuePair::create(dev, rail.port, rail.local_addr, rail.peer_addr, why, true);
  if (!s->qp_) return nullptr;
  s->qp_->watch(s->async_);
  s->fetch_ = static_cast<uint64_t*>(std::aligned_alloc(64, 64));
  if (s->fetch_ == nullptr) {
    *why = "out of memory";
    return nullptr;
  }
  s->fetch_mr_ = dev->api()->reg_mr(dev->pd(), s->fetch_, 64, IBV_ACCESS_LOCAL_WRITE);
  if (s->fetch_mr_ == nullptr) {
    *why = "ibv_reg_mr of 64 bytes on " + dev->name() + " failed: " + errno_text(errno);
    return nullptr;
  }
  return s;
}

OneSided::~OneSided() {
  qp_.reset();  // before the memory its work requests named
  if (fetch_mr_ != nullptr) dev_->api()->dereg_mr(fetch_mr_);
  std::free(fetch_);
}

std::vector<uint8_t> OneSided::setup() const {
  rdma::SetupMessage m;
  m.qps.push_back(qp_->info());
  return rdma::encode_setup(m);
}

bool OneSided::connect(const std::vector<uint8_t>& peer_setup, std::string* why) {
  rdma::SetupMessage m;
  if (!rdma::decode_setup(peer_setup.data(), peer_setup.size(), &m, why)) return false;
  const rdma::QpInfo mine = qp_->info();
  // The peer's QP must be on the other end of our cable.
  if (m.qps.size() != 1 || m.qps[0].local_addr != mine.peer_addr ||
      m.qps[0].peer_addr != mine.local_addr) {
    *why = "the peer's QP is not on the other end of this cable";
    return false;
  }
  rdma::QpOptions opt;
  opt.timeout = static_cast<int>(settings().ib_timeout);
  opt.retry_cnt = static_cast<int>(settings().ib_retry_cnt);
  opt.rd_atomic = rd_atomic_;
  return qp_->connect(m.qps[0], opt, why);
}

bool OneSided::post(ibv_send_wr* first, std::string* why) {
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_->qp(), first, &bad);
  if (rc != 0) {
    *why = "ibv_post_send on " + qp_->describe() + " failed: " + errno_text(rc);
    return false;
  }
  return true;
}

bool OneSided::write_and_add(const ibv_mr* local, uint64_t laddr, uint32_t size, uint64_t raddr,
                             uint32_t rkey, bool add, uint64_t add_raddr, uint32_t add_rkey,
                             uint64_t add_value, uint64_t op, std::string* why) {
  ibv_sge data{laddr, size, local != nullptr ? local->lkey : 0};
  ibv_sge old{reinterpret_cast<uintptr_t>(fetch_), 8, fetch_mr_->lkey};
  ibv_send_wr wr[2]{};
  int n = 0;
  if (size > 0) {
    ibv_send_wr& w = wr[n++];
    w.wr_id = op;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.sg_list = &data;
    w.num_sge = 1;
    w.wr.rdma.remote_addr = raddr;
    w.wr.rdma.rkey = rkey;
    ++writes;
  }
  if (add) {
    ibv_send_wr& w = wr[n++];
    w.wr_id = op;
    w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    w.sg_list = &old;
    w.num_sge = 1;
    w.wr.atomic.remote_addr = add_raddr;
    w.wr.atomic.compare_add = add_value;
    w.wr.atomic.rkey = add_rkey;
    ++atomics;
  }
  if (n == 0) return true;
  if (n == 2) wr[0].next = &wr[1];
  wr[n - 1].send_flags = IBV_SEND_SIGNALED;
  if (!post(wr, why)) return false;
  in_flight_ += n;
  return true;
}

bool OneSided::read(const ibv_mr* local, uint64_t laddr, uint32_t size, uint64_t raddr,
                    uint32_t rkey, uint64_t op, std::string* why) {
  ibv_sge data{laddr, size, local->lkey};
  ibv_send_wr w{};
  w.wr_id = op;
  w.opcode = IBV_WR_RDMA_READ;
  w.sg_list = &data;
  w.num_sge = 1;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = raddr;
  w.wr.rdma.rkey = rkey;
  if (!post(&w, why)) return false;
  ++reads;
  in_flight_ += 1;
  return true;
}

}  // namespace mesh::gin
