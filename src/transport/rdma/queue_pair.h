// SPDX-License-Identifier: Apache-2.0
// One RC queue pair with its own completion queue, on the RDMA port of one cable.
// Created in INIT before the handshake (its number and PSN travel in the setup message), moved
// to RTR/RTS once the peer's numbers are known.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

#include "transport/rdma/devices.h"
#include "transport/rdma/wire.h"

namespace mesh::rdma {

struct QpOptions {
  int timeout = 20;   // NCCL_MESH_IB_TIMEOUT: 4.096 us * 2^timeout per retry
  int retry_cnt = 6;  // NCCL_MESH_IB_RETRY_CNT: <= 6 (7 means "forever" on some providers)
  int traffic_class = 0;
  int rd_atomic = 1;  // RDMA READs/ATOMICs in flight each way (<= the device's max_qp_rd_atom)
};

class QueuePair {
 public:
  // Depths: a comm has at most NCCL_NET_MAX_REQUESTS messages in flight; every message is one
  // work request per QP, and the receiver adds one clear-to-send write per message. A relayed
  // sender has at most K <= kMaxRelaySlots chunks in flight; the relay host counts its work
  // requests per QP and waits rather than post beyond kSendDepth (relay_forward.h).
  static constexpr int kSendDepth = 128;
  static constexpr int kRecvDepth = 64;
  static constexpr int kCqDepth = kSendDepth + kRecvDepth;

  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  // Creates CQ + QP on `dev`/`binding` and moves the QP to INIT. nullptr with *why on failure.
  // `remote_atomic`: the peer may also post 8-byte atomics to this QP (GIN's signals).
  static std::unique_ptr<QueuePair> create(VerbsDevice* dev, const PortBinding& binding,
                                           uint32_t local_addr, uint32_t peer_addr,
                                           std::string* why, bool remote_atomic = false);

  // This QP's entry of the setup message.
  QpInfo info() const;
  // INIT -> RTR -> RTS towards `peer`; posts the receive work requests first.
  bool connect(const QpInfo& peer, const QpOptions& opt, std::string* why);
  // To the error state, for a peer this side gave up on: the QP's own work requests stop (they
  // complete with IBV_WC_WR_FLUSH_ERR) and every request the peer sends to it from now on is
  // refused, so a peer declared failed can no longer write into (or read) this side's memory
  // through it. False with *why if the device refused.
  bool to_error(std::string* why);

  ibv_qp* qp() const { return qp_; }
  ibv_cq* cq() const { return cq_; }
  VerbsDevice* device() const { return dev_; }
  const PortBinding& binding() const { return binding_; }
  uint32_t max_inline() const { return max_inline_; }
  bool post_recv(std::string* why);  // one zero-length receive for a WRITE_WITH_IMM
  // The device's event thread fails `latch` on an asynchronous error of this QP or its CQ
  // (until the QP is destroyed).
  void watch(std::weak_ptr<FailureLatch> latch);
  std::string describe() const;  // "rxe_a port 1 QP 0x11"

 private:
  QueuePair() = default;

  VerbsDevice* dev_ = nullptr;
  PortBinding binding_;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  uint8_t mtu_ = IBV_MTU_1024;
  uint16_t lid_ = 0;
  uint32_t max_inline_ = 0;
  uint32_t local_addr_ = 0;
  uint32_t peer_addr_ = 0;
};

}  // namespace mesh::rdma
