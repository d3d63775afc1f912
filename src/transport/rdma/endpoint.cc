// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/endpoint.h"

#include <cstdlib>
#include <cstring>

#include "nccl/common.h"
#include "util/ipv4.h"
#include "util/socket_util.h"

namespace mesh::rdma {

Endpoint::~Endpoint() {
  // QPs first: a QP may still reference the clear-to-send memory (the peer's writes into the
  // ring, our own staged entries) until it is destroyed; then the registrations, then memory.
  std::vector<VerbsDevice*> devices;
  for (auto& qp : qps_) devices.push_back(qp->device());
  qps_.clear();
  for (size_t q = 0; q < cts_mrs_.size(); ++q) {
    if (cts_mrs_[q] != nullptr) devices[q]->release_mr(cts_mrs_[q]);
  }
  std::free(cts_mem_);
}

bool Endpoint::add_qp(DeviceRegistry& registry, const RailBinding& rail, std::string* why) {
  VerbsDevice* dev = registry.open(rail.port.device, why);
  if (dev == nullptr) return false;
  auto qp = QueuePair::create(dev, rail.port, rail.local_addr, rail.peer_addr, why);
  if (!qp) return false;
  qps_.push_back(std::move(qp));
  return true;
}

bool Endpoint::allocate_cts(std::string* why) {
  const size_t bytes = NCCL_NET_MAX_REQUESTS * kCtsEntrySize;
  cts_mem_ = static_cast<uint8_t*>(std::aligned_alloc(4096, 4096));
  static_assert(NCCL_NET_MAX_REQUESTS * kCtsEntrySize <= 4096);
  if (cts_mem_ == nullptr) {
    *why = "out of memory for the clear-to-send ring";
    return false;
  }
  std::memset(cts_mem_, 0, 4096);
  for (auto& qp : qps_) {
    CachedMr* mr = qp->device()->acquire_mr(cts_mem_, bytes, why);
    if (mr == nullptr) return false;
    cts_mrs_.push_back(mr);
  }
  return true;
}

std::unique_ptr<Endpoint> Endpoint::for_sender(DeviceRegistry& registry,
                                               const std::vector<RailBinding>& rails, size_t nqps,
                                               std::string* why) {
  std::unique_ptr<Endpoint> ep(new Endpoint(true));
  for (size_t q = 0; q < nqps; ++q) {
    if (!ep->add_qp(registry, rails[q % rails.size()], why)) return nullptr;
  }
  if (!ep->allocate_cts(why)) return nullptr;
  return ep;
}

SetupMessage Endpoint::local_setup() const {
  SetupMessage m;
  m.ring_addr = sender_ ? reinterpret_cast<uintptr_t>(cts_mem_) : 0;
  for (size_t q = 0; q < qps_.size(); ++q) {
    QpInfo i = qps_[q]->info();
    i.ring_rkey = sender_ ? cts_mrs_[q]->mr->rkey : 0;
    m.qps.push_back(i);
  }
  return m;
}

bool Endpoint::connect(const SetupMessage& peer, const QpOptions& opt, std::string* why) {
  if (peer.qps.size() != qps_.size()) {
    *why = "the peer answered with " + std::to_string(peer.qps.size()) + " QPs for our " +
           std::to_string(qps_.size());
    return false;
  }
  for (size_t q = 0; q < qps_.size(); ++q) {
    const QpInfo mine = qps_[q]->info();
    const QpInfo& theirs = peer.qps[q];
    if (theirs.local_addr != mine.peer_addr || theirs.peer_addr != mine.local_addr) {
      *why = "the peer's QP " + std::to_string(q) + " is on cable " +
             format_ipv4(theirs.local_addr) + "-" + format_ipv4(theirs.peer_addr) + ", expected " +
             format_ipv4(mine.peer_addr) + "-" + format_ipv4(mine.local_addr);
      return false;
    }
  }
  if (!sender_) {
    peer_ring_addr_ = peer.ring_addr;
    peer_ring_rkey_ = peer.qps[0].ring_rkey;  // the receiver writes clear-to-sends on QP 0
    if (peer_ring_addr_ == 0) {
      *why = "the sender announced no clear-to-send ring";
      return false;
    }
  }
  for (size_t q = 0; q < qps_.size(); ++q) {
    if (!qps_[q]->connect(peer.qps[q], opt, why)) return false;
  }
  return true;
}

std::string Endpoint::describe() const {
  std::string s = std::to_string(qps_.size()) + (qps_.size() == 1 ? " QP" : " QPs");
  for (size_t q = 0; q < qps_.size(); ++q)
    s.append(q == 0 ? ": " : ", ").append(qps_[q]->describe());
  return s;
}

}  // namespace mesh::rdma
