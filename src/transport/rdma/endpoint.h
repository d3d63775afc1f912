// SPDX-License-Identifier: Apache-2.0
// The RDMA half of a connection while it is being set up: its queue pairs (one or more per
// cable) and its clear-to-send memory. The connector builds one in connect() and ships
// local_setup() in its hello; the listener's handshake service builds one from the connector's
// message (for_receiver()) and answers with its own. Both then move their QPs to RTS and the
// endpoint becomes an RdmaConnection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/rdma/devices.h"
#include "transport/rdma/queue_pair.h"
#include "transport/rdma/wire.h"

namespace mesh::rdma {

// One cable of the connection: the local interface's RDMA port and both addresses.
struct RailBinding {
  PortBinding port;
  uint32_t local_addr = 0;
  uint32_t peer_addr = 0;
};

class Endpoint {
 public:
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Connector (sender): `nqps` QPs spread round-robin over `rails`.
  static std::unique_ptr<Endpoint> for_sender(DeviceRegistry& registry,
                                              const std::vector<RailBinding>& rails, size_t nqps,
                                              std::string* why);
  // Listener (receiver): one QP per QP of the sender's message, each on the local RDMA port
  // of the address the sender targeted. `binding_of` maps a local IPv4 address to its port.
  template <typename Lookup>
  static std::unique_ptr<Endpoint> for_receiver(DeviceRegistry& registry, const SetupMessage& peer,
                                                Lookup binding_of, std::string* why);

  SetupMessage local_setup() const;
  // Checks that `peer` answers our QPs cable by cable, then moves every QP to RTS.
  bool connect(const SetupMessage& peer, const QpOptions& opt, std::string* why);

  bool sender() const { return sender_; }
  std::vector<std::unique_ptr<QueuePair>>& qps() { return qps_; }
  const std::vector<std::unique_ptr<QueuePair>>& qps() const { return qps_; }
  uint8_t* cts_memory() { return cts_mem_; }
  // lkey/rkey of the clear-to-send memory for QP q (its device's registration).
  uint32_t cts_lkey(size_t q) const { return cts_mrs_[q]->mr->lkey; }
  uint64_t peer_ring_addr() const { return peer_ring_addr_; }
  uint32_t peer_ring_rkey() const { return peer_ring_rkey_; }
  std::string describe() const;

 private:
  explicit Endpoint(bool sender) : sender_(sender) {}
  bool add_qp(DeviceRegistry& registry, const RailBinding& rail, std::string* why);
  bool allocate_cts(std::string* why);

  bool sender_;
  std::vector<std::unique_ptr<QueuePair>> qps_;
  // Sender: the ring the receiver writes; receiver: the entries it writes from.
  uint8_t* cts_mem_ = nullptr;
  std::vector<CachedMr*> cts_mrs_;  // per QP (QPs on one device share one registration)
  uint64_t peer_ring_addr_ = 0;
  uint32_t peer_ring_rkey_ = 0;
};

template <typename Lookup>
std::unique_ptr<Endpoint> Endpoint::for_receiver(DeviceRegistry& registry, const SetupMessage& peer,
                                                 Lookup binding_of, std::string* why) {
  std::unique_ptr<Endpoint> ep(new Endpoint(false));
  for (const QpInfo& q : peer.qps) {
    RailBinding rail;
    rail.local_addr = q.peer_addr;
    rail.peer_addr = q.local_addr;
    if (!binding_of(q.peer_addr, &rail.port, why)) return nullptr;
    if (!ep->add_qp(registry, rail, why)) return nullptr;
  }
  if (!ep->allocate_cts(why)) return nullptr;
  return ep;
}

}  // namespace mesh::rdma
