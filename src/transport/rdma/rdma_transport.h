// SPDX-License-Identifier: Apache-2.0
// The RDMA transport as the orchestrator (plugin/) sees it: which mesh interfaces have a
// usable RDMA port, the opened verbs devices, and the policy built on them: what memory an
// NCCL device can take, which rails to a peer can carry RDMA, and both halves of a
// connection's QP setup (the connector's sender endpoint and the listener's answer to the
// handshake extension).
//
// Threads: bind() runs once in init under the plugin mutex, before the handshake service
// starts, and close_all() once the service has stopped; in between the bindings are
// read-only, read by NCCL's proxy service thread (listen, connect, getProperties) and by the
// handshake service thread (accept_extension). The device registry locks itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "handshake/handle.h"
#include "topology/interface.h"
#include "topology/selection.h"
#include "transport/rdma/devices.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/queue_pair.h"
#include "util/ipv4.h"
#include "util/settings.h"

namespace mesh::rdma {

struct RdmaOptions {
  TransportMode mode = TransportMode::kAuto;  // NCCL_MESH_TRANSPORT
  int gid_index = -1;                         // NCCL_MESH_GID_INDEX (< 0: automatic)
  size_t qps_per_conn = 2;                    // NCCL_MESH_QPS_PER_CONN
  QpOptions qp;                               // NCCL_MESH_IB_TIMEOUT / NCCL_MESH_IB_RETRY_CNT
  bool host_as_gpu = false;                   // NCCL_MESH_TEST_HOST_AS_GPU (testing only)
};

class RdmaTransport {
 public:
  // One port binding per interface of `used` (same order), each logged: INFO where RDMA works
  // or no port exists, WARN where a port exists but cannot be used. Nothing is bound with
  // NCCL_MESH_TRANSPORT=tcp or without libibverbs.
  void bind(const std::vector<topology::Interface>& used, const RdmaOptions& options);
  // Closes every opened device; the caller guarantees no connection uses them any more.
  void close_all() { registry_.close_all(); }

  bool any_usable() const { return any_usable_; }
  // NCCL_PTR_* for an NCCL device: host memory always; GPU memory only where every cable of
  // the device is RDMA and GPUDirect is really available (peer-memory module: NCCL_PTR_CUDA,
  // dma-buf registration: NCCL_PTR_DMABUF, when every RDMA device of its cables takes one).
  // With NCCL_MESH_TEST_HOST_AS_GPU, NCCL_PTR_CUDA on hosts without a GPU driver.
  int pointer_support(const topology::NetDevice& d);
  // The handle's RDMA mask: bit i set when addrs[i] (i < max) is a local address whose
  // interface has a usable RDMA port.
  uint32_t address_mask(const std::vector<Ipv4Prefix>& addrs, size_t max) const;
  // The rails to the peer that can carry RDMA: usable here and, per the peer's handle, there.
  // Empty means TCP.
  std::vector<topology::Rail> usable_rails(const std::vector<topology::Rail>& rails,
                                           const handshake::Handle& peer) const;

  // Connector: the sender endpoint over `rails` (from usable_rails()) and, in *setup, the message
  // its control hello carries. Its QPs are NCCL_MESH_QPS_PER_CONN rounded up to a multiple of the
  // cables (at most kMaxQps), so each cable carries an equal share. `traffic_class` (the
  // context's, -1 = unset) travels in the setup message so the listener's QPs use it too.
  // nullptr with *why.
  std::shared_ptr<Endpoint> open_sender(const std::vector<topology::Rail>& rails, int traffic_class,
                                        std::vector<uint8_t>* setup, std::string* why);
  // Connector, once the handshake is done: checks the listener's answer and moves the QPs to
  // RTS with the context's traffic class.
  bool connect_sender(Endpoint& ep, const std::vector<uint8_t>& peer_setup, int traffic_class,
                      std::string* why) const;
  // Handshake service thread, listener's side (the service's extension handler): builds the
  // receiver endpoint for the connector's setup message, connects it, and returns the answer
  // in *reply and the endpoint in *state (which accept() turns into the connection).
  bool accept_extension(const std::vector<uint8_t>& ext, std::vector<uint8_t>* reply,
                        std::shared_ptr<void>* state, std::string* why);

  // RDMA relay (docs/relay.md). True when the mesh interface with local address `addr` has a
  // usable RDMA port.
  bool usable_address(uint32_t addr) const;
  // Connector of a relayed connection: the sender endpoint on the cable to the relay
  // (`local` -> `relay`), and in *setup its relay-hop setup message (wire.h 5.).
  std::shared_ptr<Endpoint> open_relay_sender(uint32_t local, uint32_t relay, int traffic_class,
                                              std::vector<uint8_t>* setup, std::string* why);
  // Connector, once the relay answered: checks the answer is a relay's (slots and slot size
  // present), moves the QPs to RTS and returns the decoded answer in *relay.
  bool connect_relay_sender(Endpoint& ep, const std::vector<uint8_t>& relay_setup,
                            int traffic_class, SetupMessage* relay, std::string* why) const;
  // The relay host's two halves: a receiver for the connector's QPs (each on the port of the
  // local address it targets; not yet connected) and a sender over one cable to the
  // destination (NCCL_MESH_QPS_PER_CONN QPs).
  std::unique_ptr<Endpoint> open_receiver(const SetupMessage& peer, std::string* why);
  std::shared_ptr<Endpoint> open_sender_on(uint32_t local, uint32_t peer, std::string* why);
  // The QP settings with a traffic class (-1 or out of range: the provider's default).
  QpOptions qp_options(int traffic_class) const;

 private:
  bool port_of(uint32_t addr, PortBinding* out, std::string* why) const;

  std::vector<topology::Interface> used_;
  std::vector<PortBinding> ports_;  // one per interface of used_
  bool any_usable_ = false;
  RdmaOptions options_;
  DeviceRegistry registry_;
};

}  // namespace mesh::rdma
