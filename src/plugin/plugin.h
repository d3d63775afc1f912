// SPDX-License-Identifier: Apache-2.0
// The version-independent plugin: every ncclNet entry point once, in the newest (v11)
// semantics. The per-version tables in src/abi/ only convert arguments and call this.
//
// Which thread touches what (NCCL 2.28.9's src/transport/net.cc and src/proxy.cc):
//  - init/devices/getProperties: application or init threads; finalize: comm destroy.
//  - listen/connect/accept/regMr/deregMr/close*: NCCL's proxy service thread.
//  - isend/irecv/test/iflush: NCCL's proxy progress thread.
//  - our handshake service thread: sockets of connections being set up (handshake/service.h).
//  - the TCP I/O threads of the process's pool (transport/tcp/io_pool.h), if it has one.
//  - the relay agent's thread (relay/agent.h): beacons and relayed sockets of this host; the
//    handshake thread asks it for first hops (under the agent's own mutex, never mu_).
// The registry mutex `mu_` is never taken on the isend/irecv/test path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "handshake/service.h"
#include "nccl/common.h"
#include "relay/agent.h"
#include "topology/selection.h"
#include "transport/connection.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/relay_forwarder.h"
#include "transport/tcp/tcp_connection.h"
#include "util/host_roster.h"

namespace mesh {

struct DeviceProperties {
  const char* name = nullptr;
  const char* pci_path = nullptr;
  uint64_t guid = 0;
  int ptr_support = NCCL_PTR_HOST;
  int speed_mbps = 0;
  int port = 1;
  float latency_us = 0;
  int max_comms = 65536;
  int max_recvs = 1;
  size_t max_p2p_bytes = NCCL_MAX_NET_SIZE_BYTES;
  size_t max_coll_bytes = NCCL_MESH_MAX_COLLNET_SIZE;
};

struct Context {
  ObjectTag tag = ObjectTag::kContext;
  uint64_t comm_id = 0;
  int traffic_class = -1;
  bool warned_ring_off_cables = false;  // warn_ring_off_cables: once per communicator
};

struct ListenComm {
  ObjectTag tag = ObjectTag::kListen;
  Context* ctx = nullptr;
  int dev = 0;
  std::shared_ptr<handshake::ListenEndpoint> endpoint;
  // An accepted RDMA comm whose connector has not yet signalled RTS (its ready byte): accept()
  // returns it only then. Owned here until handed out; closed with the listen comm.
  Connection* awaiting_ready = nullptr;
};

class Plugin {
 public:
  static Plugin& instance();

  // v11: one context per communicator. v8-v10 (legacy = true): one shared context for the
  // process, created by the first init; later legacy inits reuse it.
  ncclResult_t init(ncclDebugLogger_t logger, uint64_t comm_id, int traffic_class, bool legacy,
                    Context** ctx);
  ncclResult_t finalize(void* ctx);
  Context* legacy_context();

  ncclResult_t devices(int* ndev);
  ncclResult_t properties(int dev, DeviceProperties* props);

  ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm);
  ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm);
  ncclResult_t accept(void* listen_comm, void** recv_comm);
  ncclResult_t close_listen(void* listen_comm);
  ncclResult_t close_connection(void* comm, ObjectTag expected);

  ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                             void** mhandle);
  ncclResult_t dereg_mr(void* comm, void* mhandle);

  ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request);
  ncclResult_t iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t test(void* request, int* done, int* sizes);
  // GIN's one-sided path (gin/one_sided.h): the verbs device and the cable (port, addresses) of
  // the first QP of a direct RDMA send or receive comm; false for TCP and relayed comms.
  bool rdma_cable(void* comm, rdma::VerbsDevice** dev, rdma::RailBinding* rail);

  // At process exit: joins our threads but leaves comms open (NCCL may still use them).
  void stop_at_exit();

 private:
  Plugin() = default;
  bool discover(std::string* why);  // caller holds mu_
  bool valid_context(void* ctx);    // caller holds mu_
  void close_context_objects(Context* ctx);
  std::vector<Ipv4Prefix> advertised_addresses(int dev);
  struct PendingConnect;
  // connect()'s first call: picks RDMA or TCP for the peer (NCCL_MESH_TRANSPORT) and fills the
  // handshake request; false after a WARN when no allowed transport can reach it, or when
  // device `dev` advertised GPU memory and the connection could only use TCP (docs/rdma.md).
  bool plan_connect(const std::vector<topology::Rail>& rails, const handshake::Handle& h,
                    size_t dev, int traffic_class, handshake::ConnectRequest* req,
                    PendingConnect* pc);
  // connect() for a peer without a common subnet (docs/relay.md): carries out the relay
  // layer's plan (relay/connect_plan.h: RDMA through one relay host, or TCP through the
  // agents): opens the RDMA sender on the planned cable, or hands the handshake the TCP hop
  // resolver. kWait: the route is not known yet (connect() returns no comm; NCCL calls again);
  // kFail after a WARN.
  enum class RelayPlan { kOk, kWait, kFail };
  RelayPlan plan_relayed_connect(const handshake::Handle& h, size_t dev, int traffic_class,
                                 int64_t since_ms, handshake::ConnectRequest* req,
                                 PendingConnect* pc);
  void start_relay_agent();  // caller holds mu_; after the handshake service started
  // The TCP I/O threads, sized at the first connection (caller holds mu_): by then NCCL's
  // bootstrap has run, so every rank of the communicator has initialized its plugin (and
  // joined the host's roster) and the count of processes sharing these cores is complete.
  void size_io_threads();
  // On the host's roster from every init to the last finalize (caller holds mu_): so that the
  // ranks sizing their I/O threads at their first connection count this one; failing that, one
  // INFO line, and the others size without it (nothing else depends on it).
  void join_roster();
  // A relayed connection in a communicator whose collectives this library's tuner steers to
  // Ring, and that has so far run Ring alone: NCCL's ring neighbours are then not cable
  // neighbours (ranks launched out of cable order). One WARN per communicator, with the fix.
  void warn_ring_off_cables(Context* c, const std::string& peer, const std::string& route);
  // Registers a connection built by make_connection with the context; the comm for NCCL.
  void* adopt(std::unique_ptr<Connection> conn, Context* ctx, const char* what);
  ncclResult_t register_region(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);

  std::mutex mu_;
  bool discovered_ = false;
  topology::Selection selection_;
  std::vector<topology::NetDevice> devices_;
  std::vector<int> ptr_support_;  // NCCL_PTR_* per device, fixed by discover()
  // Transports: RDMA's port bindings are made once in init (discover), before the handshake
  // service starts, and read-only afterwards, also by the service thread.
  rdma::RdmaTransport rdma_;
  tcp::TcpOptions tcp_;
  bool io_threads_sized_ = false;
  HostRoster roster_{HostRoster::default_dir()};  // joined by init, left by the last finalize
  bool roster_warned_ = false;
  handshake::Service service_;
  relay::Agent relay_;                     // started with the service when NCCL_MESH_RELAY=1
  rdma::RelayForwarder forwarder_{rdma_};  // the relay agent's RDMA half (docs/relay.md)
  std::set<Context*> contexts_;
  Context* legacy_ = nullptr;
  std::map<ListenComm*, Context*> listens_;
  std::map<Connection*, Context*> connections_;
  // connect() in progress, keyed by (context, nonce of the peer's listen): NCCL re-calls
  // connect with the same handle until it returns a comm.
  struct PendingConnect {
    std::shared_ptr<handshake::OutgoingConnect> attempt;
    std::shared_ptr<rdma::Endpoint> rdma;  // set when the connection will use RDMA
    bool relay_rdma = false;               // rdma goes to a relay host (relay_send_connection.h)
    std::string relay_host;                // that relay host's address, for messages
    std::string relay_path;                // the route's relay hosts, for the WARN of a refusal
    std::string disagreement;  // the shared settings that differ from the peer's handle ("": none)
  };
  std::map<std::pair<Context*, handshake::Nonce>, PendingConnect> pending_;
  // Relayed connects still waiting for a route (RelayPlan::kWait): since when.
  std::map<std::pair<Context*, handshake::Nonce>, int64_t> relay_waits_;
  bool warned_addr_overflow_ = false;

  std::mutex mr_mu_;  // registrations: regMr runs on the service thread during traffic
  std::map<const void*, std::set<MemoryRegion*>> regions_;
};

}  // namespace mesh
