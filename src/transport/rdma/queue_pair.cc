// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/ipv4.h"
#include "util/random.h"
#include "util/socket_util.h"

namespace mesh::rdma {

QueuePair::~QueuePair() {
  const VerbsApi* api = dev_ != nullptr ? dev_->api() : nullptr;
  if (api == nullptr) return;
  if (qp_ != nullptr) {
    dev_->unwatch_qp(qp_->qp_num);
    api->destroy_qp(qp_);
  }
  if (cq_ != nullptr) {
    dev_->unwatch_cq(cq_);
    api->destroy_cq(cq_);
  }
}

void QueuePair::watch(std::weak_ptr<FailureLatch> latch) {
  dev_->watch_cq(cq_, latch);
  dev_->watch_qp(qp_->qp_num, std::move(latch));
}

std::string QueuePair::describe() const {
  char qpn[16];
  std::snprintf(qpn, sizeof(qpn), "0x%x", qp_ != nullptr ? qp_->qp_num : 0);
  return binding_.device + " port " + std::to_string(binding_.port) + " QP " + qpn;
}

std::unique_ptr<QueuePair> QueuePair::create(VerbsDevice* dev, const PortBinding& binding,
                                             uint32_t local_addr, uint32_t peer_addr,
                                             std::string* why, bool remote_atomic) {
  const VerbsApi* api = dev->api();
  std::unique_ptr<QueuePair> q(new QueuePair);
  q->dev_ = dev;
  q->binding_ = binding;
  q->local_addr_ = local_addr;
  q->peer_addr_ = peer_addr;
  const std::string where = binding.device + " port " + std::to_string(binding.port);

  ibv_port_attr pa{};
  if (api->query_port(dev->context(), static_cast<uint8_t>(binding.port), &pa) != 0) {
    *why = "ibv_query_port on " + where + " failed: " + errno_text(errno);
    return nullptr;
  }
  if (pa.state != IBV_PORT_ACTIVE) {
    *why = where + " is not active (state " + std::to_string(pa.state) + "): check the cable";
    return nullptr;
  }
  q->mtu_ = static_cast<uint8_t>(pa.active_mtu);
  q->lid_ = pa.lid;

  q->cq_ = api->create_cq(dev->context(), kCqDepth, nullptr, nullptr, 0);
  if (q->cq_ == nullptr) {
    *why = "ibv_create_cq on " + where + " failed: " + errno_text(errno);
    return nullptr;
  }
  ibv_qp_init_attr init{};
  init.send_cq = q->cq_;
  init.recv_cq = q->cq_;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // selective signalling: the data path chooses what completes
  init.cap.max_send_wr = kSendDepth;
  init.cap.max_recv_wr = kRecvDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  // Inline: the clear-to-send entry and small slices go without a DMA read of our memory.
  // Providers that cannot inline that much refuse the QP: retry without inline data.
  for (uint32_t inl : {static_cast<uint32_t>(kCtsEntrySize), 0u}) {
    init.cap.max_inline_data = inl;
    q->qp_ = api->create_qp(dev->pd(), &init);
    if (q->qp_ != nullptr) break;
  }
  if (q->qp_ == nullptr) {
    *why = "ibv_create_qp on " + where + " failed: " + errno_text(errno);
    return nullptr;
  }
  q->max_inline_ = init.cap.max_inline_data;
  uint32_t psn = 0;
  fill_random(&psn, sizeof(psn));
  q->psn_ = psn & 0xFFFFFF;

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(binding.port);
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                      (remote_atomic ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  if (api->modify_qp(q->qp_, &a,
                     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    *why = "moving " + q->describe() + " to INIT failed: " + errno_text(errno);
    return nullptr;
  }
  return q;
}

QpInfo QueuePair::info() const {
  QpInfo i;
  i.qpn = qp_->qp_num;
  i.psn = psn_;
  std::memcpy(i.gid, binding_.gid.data(), sizeof(i.gid));
  i.lid = lid_;
  i.mtu = mtu_;
  i.local_addr = local_addr_;
  i.peer_addr = peer_addr_;
  return i;
}

bool QueuePair::post_recv(std::string* why) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = 0;
  wr.num_sge = 0;  // WRITE_WITH_IMM consumes a receive but places its data by address
  const int rc = ibv_post_recv(qp_, &wr, &bad);
  if (rc != 0) {
    *why = "ibv_post_recv on " + describe() + " failed: " + errno_text(rc);
    return false;
  }
  return true;
}

bool QueuePair::connect(const QpInfo& peer, const QpOptions& opt, std::string* why) {
  const VerbsApi* api = dev_->api();
  for (int i = 0; i < kRecvDepth; ++i) {
    if (!post_recv(why)) return false;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(mtu_, peer.mtu));
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = static_cast<uint8_t>(opt.rd_atomic);
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(binding_.port);
  if (binding_.use_lid) {
    a.ah_attr.is_global = 0;
    a.ah_attr.dlid = peer.lid;
  } else {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, sizeof(peer.gid));
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(binding_.gid_index);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = static_cast<uint8_t>(opt.traffic_class);
  }
  if (api->modify_qp(qp_, &a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    *why = "moving " + describe() + " to RTR towards " + format_ipv4(peer_addr_) +
           " failed: " + errno_text(errno) +
           " (on RoCE: is the peer's address reachable through this port? check GID/ARP)";
    return false;
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.sq_psn = psn_;
  r.timeout = static_cast<uint8_t>(opt.timeout);
  r.retry_cnt = static_cast<uint8_t>(opt.retry_cnt);
  r.rnr_retry = 6;  // receives are always pre-posted: an RNR NAK means something is wrong
  r.max_rd_atomic = static_cast<uint8_t>(opt.rd_atomic);
  if (api->modify_qp(qp_, &r,
                     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    *why = "moving " + describe() + " to RTS failed: " + errno_text(errno);
    return false;
  }
  return true;
}

bool QueuePair::to_error(std::string* why) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (dev_->api()->modify_qp(qp_, &a, IBV_QP_STATE) != 0) {
    *why = "moving " + describe() + " to the error state failed: " + errno_text(errno);
    return false;
  }
  return true;
}

}  // namespace mesh::rdma
