// SPDX-License-Identifier: Apache-2.0
#include "plugin/plugin.h"

#include <algorithm>
#include <cstring>

#include "handshake/agreement.h"
#include "handshake/handle.h"
#include "handshake/relay_hop.h"
#include "relay/agent_config.h"
#include "relay/connect_plan.h"
#include "topology/emulated_mesh.h"
#include "topology/ifname_filter.h"
#include "topology/interface.h"
#include "transport/connection_factory.h"
#include "transport/rdma/options_from_settings.h"
#include "transport/rdma/rdma_connection.h"
#include "transport/rdma/relay_send_connection.h"
#include "transport/tcp/io_pool.h"
#include "transport/tcp/stream_plan.h"
#include "util/clock.h"
#include "util/lingering_close.h"
#include "util/log.h"
#include "util/settings.h"

namespace mesh {

namespace {

// How long the last finalize waits for closed senders' bytes that the receivers' kernels have
// not acknowledged yet (lingering_close.h): a receiver that reads reaches them within moments;
// one that does not (stopped, hung) must not hold NCCL's teardown for long.
constexpr int64_t kLingerAtFinalizeMs = 1000;

// The process exit (or the unload of a build without -z nodelete) joins our threads before
// the code goes away; see Plugin::stop_at_exit for why the comms stay.
struct ShutdownAtExit {
  ~ShutdownAtExit() { Plugin::instance().stop_at_exit(); }
};

std::string describe_interfaces(const std::vector<topology::Interface>& itfs) {
  std::string s;
  for (const auto& i : itfs) s += (s.empty() ? "" : ", ") + i.name + " " + format_prefix(i.addr);
  return s.empty() ? "(none)" : s;
}

// GPU memory cannot travel over TCP (the plugin links nothing that could read it): a device that
// advertised NCCL_PTR_CUDA/DMABUF refuses a TCP connection at setup with one clear WARN, instead
// of NCCL failing later in regMr with an opaque ncclInvalidArgument (docs/rdma.md).
bool gpu_pointers(int ptr_support) {
  return (ptr_support & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF)) != 0;
}

tcp::TcpOptions tcp_options(const Settings& s) {
  tcp::TcpOptions opt;
  opt.streams = static_cast<size_t>(s.tcp_streams);
  opt.min_chunk = static_cast<size_t>(s.tcp_min_chunk);
  opt.inline_bytes = static_cast<size_t>(s.tcp_inline_bytes);
  opt.eager_bytes = static_cast<size_t>(s.tcp_eager_bytes);
  opt.eager_window_bytes = static_cast<size_t>(s.tcp_eager_window);
  opt.user_timeout_ms = s.tcp_user_timeout_ms;
  opt.io_threads = 0;  // Plugin::size_io_threads, at the first connection
  return opt;
}

}  // namespace

Plugin& Plugin::instance() {
  // Never destroyed: NCCL's proxy thread may still call into comms while static destructors
  // run at exit. Everything stays reachable from here, so LeakSanitizer reports nothing.
  static Plugin* plugin = new Plugin();
  static ShutdownAtExit at_exit;
  return *plugin;
}

bool Plugin::discover(std::string* why) {
  if (discovered_) return true;
  const Settings& s = settings();
  std::vector<topology::Interface> all;
  if (!topology::discover_mesh_interfaces(s.emulate, &all, why)) return false;
  selection_ = topology::select_interfaces(all, topology::IfnameFilter::parse(s.ifname));
  for (const std::string& note : selection_.notes)
    MESH_INFO(NCCL_INIT | NCCL_NET, "%s", note.c_str());
  const std::string missing = topology::describe_missing_cables(selection_);
  if (selection_.used.empty()) {
    *why = missing.empty() ? "no usable IPv4 interface (found: " + describe_interfaces(all) + ")" +
                                 (s.ifname.empty() ? "" : " with NCCL_MESH_IFNAME=" + s.ifname) +
                                 "; check that the mesh interfaces are up and have IPv4 addresses"
                           : missing;
    return false;
  }
  if (!missing.empty()) {
    MESH_WARN("%s", missing.c_str());
  } else if (selection_.loopback_fallback) {
    MESH_INFO(NCCL_INIT | NCCL_NET, "no non-loopback interface is up: using loopback only");
  }
  devices_ = topology::group_devices(selection_.used);
  for (size_t d = 0; d < devices_.size(); ++d) {
    std::string members;
    for (size_t m : devices_[d].members) {
      members += (members.empty() ? "" : ", ") + selection_.used[m].name + " " +
                 format_prefix(selection_.used[m].addr);
    }
    MESH_INFO(NCCL_INIT | NCCL_NET, "device %zu %s: %s, %d Mb/s, pci %s", d,
              devices_[d].name.c_str(), members.c_str(), devices_[d].speed_mbps,
              devices_[d].pci_path.empty() ? "(virtual)" : devices_[d].pci_path.c_str());
  }
  rdma_.bind(selection_.used, rdma::rdma_options(s));
  // Fixed from here on: getProperties reports it, and connect/accept refuse TCP on a device
  // that advertised GPU memory, without probing sysfs and verbs devices on every call.
  ptr_support_.clear();
  for (const topology::NetDevice& d : devices_) ptr_support_.push_back(rdma_.pointer_support(d));
  tcp_ = tcp_options(s);
  discovered_ = true;
  return true;
}

ncclResult_t Plugin::init(ncclDebugLogger_t logger, uint64_t comm_id, int traffic_class,
                          bool legacy, Context** ctx) {
  if (logger != nullptr) set_logger(logger);
  std::lock_guard<std::mutex> lock(mu_);
  std::string why;
  if (!discover(&why)) {
    MESH_WARN("init failed: %s", why.c_str());
    return ncclSystemError;
  }
  join_roster();
  if (!service_.running()) {
    std::vector<Ipv4Prefix> addrs;
    for (const auto& itf : selection_.used) addrs.push_back(itf.addr);
    const Settings& s = settings();
    if (s.transport == TransportMode::kRdma && !rdma_.any_usable()) {
      MESH_WARN(
          "init failed: NCCL_MESH_TRANSPORT=rdma but no mesh interface has a usable RDMA port "
          "(run nccl-mesh-doctor; set NCCL_MESH_TRANSPORT=auto to allow TCP)");
      return ncclSystemError;
    }
    service_.set_extension_handler(
        [this](const std::vector<uint8_t>& ext, std::vector<uint8_t>* reply,
               std::shared_ptr<void>* state,
               std::string* error) { return rdma_.accept_extension(ext, reply, state, error); });
    if (!service_.start(addrs, static_cast<uint16_t>(s.handshake_port), s.connect_timeout_ms,
                        s.max_pending_handshakes, &why)) {
      MESH_WARN("init failed: %s", why.c_str());
      return ncclSystemError;
    }
    MESH_INFO(NCCL_INIT | NCCL_NET, "handshake service on port %u of %s", service_.port(),
              describe_interfaces(selection_.used).c_str());
    start_relay_agent();
  }
  if (legacy && legacy_ != nullptr) {
    *ctx = legacy_;
    return ncclSuccess;
  }
  auto* c = new Context;
  c->comm_id = comm_id;
  c->traffic_class = traffic_class;
  contexts_.insert(c);
  if (legacy) legacy_ = c;
  *ctx = c;
  return ncclSuccess;
}

void Plugin::start_relay_agent() {
  const Settings& s = settings();
  if (s.relay == 0 || relay_.running()) return;
  relay::AgentConfig cfg;
  std::string why;
  if (!relay::agent_config_from_settings(s, selection_.used, &cfg, &why)) {
    // Never run unauthenticated when a key was asked for: no relay agent at all.
    MESH_WARN(
        "relay agent not started: %s; peers without a common subnet cannot be reached from "
        "this process",
        why.c_str());
    return;
  }
  if (rdma_.any_usable()) {
    forwarder_.configure(rdma::forwarder_options(s));
    rdma::RelayForwarder* fw = &forwarder_;
    cfg.rdma_forward = [fw](relay::RdmaHandoff& h, std::string* w) { return fw->adopt(h, w); };
    const rdma::RdmaTransport* t = &rdma_;
    cfg.rdma_usable_at = [t](uint32_t local) { return t->usable_address(local); };
  }
  if (!relay_.start(cfg, &why)) {
    MESH_WARN(
        "relay agent not started: %s; peers without a common subnet cannot be reached from "
        "this process",
        why.c_str());
    return;
  }
  // This process's listeners are registered with the host's agent (this one or another's), and
  // a standby asks that agent for routes (RDMA relay) on the same local socket.
  service_.set_relay_registration(relay::agent_socket_name(cfg));
  relay_.set_local_client(&service_.relay_registrar());
}

Context* Plugin::legacy_context() {
  std::lock_guard<std::mutex> lock(mu_);
  return legacy_;
}

bool Plugin::valid_context(void* ctx) {
  return contexts_.count(static_cast<Context*>(ctx)) != 0;
}

void Plugin::close_context_objects(Context* ctx) {
  std::erase_if(relay_waits_, [ctx](const auto& w) { return w.first.first == ctx; });
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->first.first == ctx) {
      service_.cancel_connect(it->second.attempt);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->second == ctx) {
      MESH_INFO(NCCL_NET, "closing %s left open at finalize", it->first->describe().c_str());
      it->first->close();
      {
        std::lock_guard<std::mutex> mr_lock(mr_mu_);
        auto r = regions_.find(it->first);
        if (r != regions_.end()) {
          for (MemoryRegion* mr : r->second) delete mr;
          regions_.erase(r);
        }
      }
      delete it->first;
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = listens_.begin(); it != listens_.end();) {
    if (it->second == ctx) {
      service_.close_listen(it->first->endpoint);
      if (Connection* c = it->first->awaiting_ready) {
        c->close();
        delete c;
      }
      delete it->first;
      it = listens_.erase(it);
    } else {
      ++it;
    }
  }
}

ncclResult_t Plugin::finalize(void* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  // NCCL 2.28 calls finalize even after a failed init, with a NULL or stale context.
  if (ctx == nullptr || !valid_context(ctx)) {
    MESH_INFO(NCCL_INIT, "finalize of a context this plugin does not know (failed init?)");
    return ncclSuccess;
  }
  auto* c = static_cast<Context*>(ctx);
  close_context_objects(c);
  contexts_.erase(c);
  if (c == legacy_) legacy_ = nullptr;
  c->tag = ObjectTag::kDead;
  delete c;
  if (contexts_.empty()) {
    service_.stop();  // the last communicator is gone: NCCL may dlclose us next
    relay_.stop();
    forwarder_.stop();  // before the devices close: it holds QPs and registrations
    rdma_.close_all();
    tcp::IoPool::stop_if_idle();  // every comm is closed, so no stream is attached
    // Closed senders' control sockets still wait for their receivers (lingering_close.h): a
    // moment for them to finish, then their thread stops before NCCL may dlclose us.
    stop_lingering(kLingerAtFinalizeMs);
    roster_.leave();  // no communicator left: no rank here until the next init
    MESH_INFO(NCCL_INIT, "last context finalized: handshake service stopped");
  }
  return ncclSuccess;
}

void Plugin::join_roster() {
  cpu_set_t cpus;
  std::string why;
  if (!allowed_cpus(&cpus) || !roster_.join(cpus, &why)) {
    if (roster_warned_) return;
    roster_warned_ = true;
    MESH_INFO(NCCL_INIT | NCCL_NET,
              "not on the host's roster of plugin processes (%s): the other ranks on this "
              "host size their TCP I/O threads without counting this one",
              why.empty() ? "this process's CPU set is unknown" : why.c_str());
  }
}

void Plugin::size_io_threads() {
  if (io_threads_sized_) return;
  io_threads_sized_ = true;
  const Settings& s = settings();
  const size_t cpus = tcp::usable_cpus();
  size_t sharing = 1;
  std::string why;
  cpu_set_t mine;
  if (s.tcp_io_threads < 0 && allowed_cpus(&mine)) sharing = roster_.sharing(mine, &why);
  tcp_.io_threads = tcp::resolve_io_threads(s.tcp_io_threads, cpus, sharing);
  const std::string movers = tcp_.io_threads == 0
                                 ? std::string("NCCL's progress thread")
                                 : std::to_string(tcp_.io_threads) + " I/O threads";
  if (s.tcp_io_threads > 0 && tcp_.io_threads == 0) {
    MESH_INFO(NCCL_INIT | NCCL_NET,
              "NCCL_MESH_TCP_IO_THREADS=%lld asks for as many I/O threads as this process has "
              "usable cores (%zu) or more: no pool, NCCL's progress thread moves the TCP data "
              "(the threads could not copy in parallel with it, only add hand-offs)",
              static_cast<long long>(s.tcp_io_threads), cpus);
  }
  if (s.tcp_io_threads >= 0) {
    MESH_INFO(NCCL_INIT | NCCL_NET,
              "TCP data sockets moved by %s (%zu usable cores; NCCL_MESH_TCP_IO_THREADS=%lld)",
              movers.c_str(), cpus, static_cast<long long>(s.tcp_io_threads));
  } else {
    MESH_INFO(NCCL_INIT | NCCL_NET,
              "TCP data sockets moved by %s (%zu usable cores, which %zu processes running the "
              "plugin on this host may use, this one included%s%s; NCCL_MESH_TCP_IO_THREADS)",
              movers.c_str(), cpus, sharing, why.empty() ? "" : ": ", why.c_str());
  }
}

// Applications often exit without destroying their communicators (and v6-v10 have no
// finalize), so at exit NCCL's proxy progress thread may still be inside isend/test on a comm.
// Deleting comms, QPs or registrations here would be a use-after-free in that thread; the
// kernel closes their sockets and verbs resources when the process ends. Only our own threads
// stop: the handshake service and the relay agent (joined) and, when no stream is attached, the
// TCP I/O pool.
void Plugin::stop_at_exit() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : pending_) service_.cancel_connect(p.second.attempt);
  pending_.clear();
  service_.stop();
  relay_.stop();      // relayed sockets of other hosts' connections end with this process anyway
  forwarder_.stop();  // its forwards are its own (no NCCL thread touches them): closed
  tcp::IoPool::stop_if_idle();
  stop_lingering(0);
  roster_.leave();
}

ncclResult_t Plugin::devices(int* ndev) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!discovered_) {
    MESH_WARN("devices() called before init");
    return ncclInternalError;
  }
  *ndev = static_cast<int>(devices_.size());
  return ncclSuccess;
}

ncclResult_t Plugin::properties(int dev, DeviceProperties* props) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!discovered_ || dev < 0 || static_cast<size_t>(dev) >= devices_.size()) {
    MESH_WARN("getProperties: device %d does not exist (%zu devices)", dev, devices_.size());
    return ncclInvalidArgument;
  }
  const topology::NetDevice& d = devices_[static_cast<size_t>(dev)];
  *props = DeviceProperties{};
  props->name = d.name.c_str();
  props->pci_path = d.pci_path.empty() ? nullptr : d.pci_path.c_str();
  props->guid = static_cast<uint64_t>(dev);
  props->speed_mbps = d.speed_mbps;
  props->ptr_support = ptr_support_[static_cast<size_t>(dev)];
  return ncclSuccess;
}

std::vector<Ipv4Prefix> Plugin::advertised_addresses(int dev) {
  // The listening device's interfaces first: a connector that finds several rails prefers them.
  std::vector<Ipv4Prefix> addrs;
  const auto& members = devices_[static_cast<size_t>(dev)].members;
  for (size_t m : members) addrs.push_back(selection_.used[m].addr);
  for (size_t i = 0; i < selection_.used.size(); ++i) {
    if (std::find(members.begin(), members.end(), i) == members.end()) {
      addrs.push_back(selection_.used[i].addr);
    }
  }
  return addrs;
}

ncclResult_t Plugin::listen(void* ctx, int dev, void* handle, void** listen_comm) {
  *listen_comm = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!valid_context(ctx)) {
    MESH_WARN("listen: unknown context %p (init not called or already finalized)", ctx);
    return ncclInternalError;
  }
  if (dev < 0 || static_cast<size_t>(dev) >= devices_.size()) {
    MESH_WARN("listen: device %d does not exist (%zu devices)", dev, devices_.size());
    return ncclInvalidArgument;
  }
  handshake::Handle h;
  h.port = service_.port();
  h.addrs = advertised_addresses(dev);
  h.rdma_mask = rdma_.address_mask(h.addrs, handshake::kMaxHandleAddrs);
  h.agreement = handshake::local_agreement();
  if (h.addrs.size() > handshake::kMaxHandleAddrs && !warned_addr_overflow_) {
    warned_addr_overflow_ = true;
    MESH_WARN(
        "%zu local addresses but the 128-byte handle holds %zu: peers reachable only "
        "through the others cannot connect; list the mesh interfaces in NCCL_MESH_IFNAME",
        h.addrs.size(), handshake::kMaxHandleAddrs);
  }
  auto ep = service_.open_listen();
  h.nonce = ep->nonce;
  std::string why;
  if (!handshake::encode_handle(h, static_cast<uint8_t*>(handle), &why)) {
    service_.close_listen(ep);
    MESH_WARN("listen on device %d: cannot build the handle: %s", dev, why.c_str());
    return ncclInternalError;
  }
  auto* l = new ListenComm;
  l->ctx = static_cast<Context*>(ctx);
  l->dev = dev;
  l->endpoint = std::move(ep);
  listens_[l] = l->ctx;
  *listen_comm = l;
  return ncclSuccess;
}

ncclResult_t Plugin::connect(void* ctx, int dev, void* handle, void** send_comm) {
  *send_comm = nullptr;
  handshake::Handle h;
  std::string why;
  if (!handshake::decode_handle(static_cast<const uint8_t*>(handle), handshake::kHandleSize, &h,
                                &why)) {
    MESH_WARN("connect: the handle received from the peer is invalid: %s", why.c_str());
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!valid_context(ctx)) {
    MESH_WARN("connect: unknown context %p (init not called or already finalized)", ctx);
    return ncclInternalError;
  }
  if (dev < 0 || static_cast<size_t>(dev) >= devices_.size()) {
    MESH_WARN("connect: device %d does not exist (%zu devices)", dev, devices_.size());
    return ncclInvalidArgument;
  }
  auto* c = static_cast<Context*>(ctx);
  const auto key = std::make_pair(c, h.nonce);
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    const auto rails = topology::choose_rails(selection_.used, h.addrs,
                                              devices_[static_cast<size_t>(dev)].members);
    handshake::ConnectRequest req;
    req.nonce = h.nonce;
    req.port = h.port;
    req.timeout_ms = settings().connect_timeout_ms;
    req.tcp_window = static_cast<uint32_t>(tcp_.eager_window_bytes);
    PendingConnect pc;
    // Shared settings that differ: the connect still runs, so that the listener learns it too
    // and fails its accept (a peer left waiting would hang NCCL); it fails with this text.
    pc.disagreement = handshake::describe_disagreement(handshake::local_agreement(), "this host",
                                                       h.agreement, "the peer's host");
    if (rails.empty()) {
      const int64_t since = relay_waits_.emplace(key, monotonic_ms()).first->second;
      const RelayPlan plan =
          plan_relayed_connect(h, static_cast<size_t>(dev), c->traffic_class, since, &req, &pc);
      if (plan == RelayPlan::kWait) return ncclSuccess;  // no comm yet: NCCL calls again
      relay_waits_.erase(key);
      if (plan == RelayPlan::kFail) return ncclSystemError;
    } else if (!plan_connect(rails, h, static_cast<size_t>(dev), c->traffic_class, &req, &pc)) {
      return ncclSystemError;
    }
    pc.attempt = service_.start_connect(req);
    pending_[key] = std::move(pc);
    return ncclSuccess;
  }
  PendingConnect pc = it->second;
  auto& attempt = pc.attempt;
  switch (attempt->status.load(std::memory_order_acquire)) {
    case handshake::ConnectStatus::kPending:
      return ncclSuccess;
    case handshake::ConnectStatus::kFailed:
      pending_.erase(it);
      if (attempt->settings_differ) {
        MESH_WARN(
            "connect to %s failed: the hosts' shared settings differ: %s. Set the same "
            "values on every host (NCCL's ranks must pick the same algorithms, or its "
            "collectives hang)",
            attempt->description.c_str(),
            pc.disagreement.empty() ? "(the peer's handle showed no difference: settings "
                                      "changed between listen and connect?)"
                                    : pc.disagreement.c_str());
        return ncclInvalidUsage;
      }
      // An RDMA relay refused on a chain: the refusing relay host is one of the route's (its own
      // log names the cable without RDMA); say which hosts those are.
      MESH_WARN("connect to %s failed: %s%s", attempt->description.c_str(), attempt->error.c_str(),
                pc.relay_rdma ? ("; RDMA relay route: " + pc.relay_path).c_str() : "");
      return ncclRemoteError;
    case handshake::ConnectStatus::kDone:
      break;
  }
  pending_.erase(it);
  if (!attempt->route.empty()) {
    MESH_INFO(NCCL_NET | NCCL_INIT, "connect to %s: relayed over %s; %s",
              attempt->description.c_str(), pc.relay_rdma ? "RDMA" : "TCP", attempt->route.c_str());
    warn_ring_off_cables(c, attempt->description, attempt->route);
  }
  handshake::ConnectedSockets& sockets = attempt->result;
  if (pc.relay_rdma) {
    rdma::SetupMessage relay_setup;
    if (!rdma_.connect_relay_sender(*pc.rdma, sockets.peer_extension, c->traffic_class,
                                    &relay_setup, &why)) {
      MESH_WARN("connect to %s: RDMA relay setup failed: %s", attempt->description.c_str(),
                why.c_str());
      return ncclSystemError;
    }
    auto conn = std::make_unique<rdma::RelaySendConnection>(
        pc.rdma, relay_setup, std::move(sockets.control), std::move(sockets.local),
        std::move(sockets.peer), pc.relay_host);
    *send_comm = adopt(std::move(conn), c, "connected");
    return ncclSuccess;
  }
  if (pc.rdma) {
    if (!rdma_.connect_sender(*pc.rdma, sockets.peer_extension, c->traffic_class, &why)) {
      MESH_WARN("connect to %s: RDMA setup failed: %s", attempt->description.c_str(), why.c_str());
      return ncclSystemError;
    }
    sockets.transport_state = pc.rdma;
  }
  // Through a relay, the TCP window a sender sees is the relay's buffer, not the receiver's: a
  // window-checked eager send could then wait behind a late receiver (tcp_connection.cc).
  size_io_threads();
  tcp::TcpOptions tcp = tcp_;
  if (!attempt->route.empty()) tcp.eager_window_bytes = 0;
  *send_comm = adopt(make_connection(true, std::move(sockets), tcp), c, "connected");
  return ncclSuccess;
}

bool Plugin::plan_connect(const std::vector<topology::Rail>& rails, const handshake::Handle& h,
                          size_t dev, int traffic_class, handshake::ConnectRequest* req,
                          PendingConnect* pc) {
  const TransportMode mode = settings().transport;
  const std::vector<topology::Rail> rdma = rdma_.usable_rails(rails, h);
  if (rdma.empty() && mode == TransportMode::kRdma) {
    MESH_WARN(
        "connect: NCCL_MESH_TRANSPORT=rdma but no cable to the peer (%s) has a usable RDMA "
        "port at both ends; run nccl-mesh-doctor on both hosts, or use "
        "NCCL_MESH_TRANSPORT=auto to allow TCP",
        relay::describe_prefixes(h.addrs).c_str());
    return false;
  }
  const bool gpu = gpu_pointers(ptr_support_[dev]);
  std::string why;
  if (!rdma.empty()) {
    pc->rdma = rdma_.open_sender(rdma, traffic_class, &req->extension, &why);
    if (pc->rdma) {
      req->rails = rdma;
      req->ndata = 0;
      return true;
    }
    if (!gpu || mode == TransportMode::kRdma) {  // else the GPU WARN below says it
      MESH_WARN("connect to %s: RDMA setup failed: %s%s", relay::describe_prefixes(h.addrs).c_str(),
                why.c_str(), mode == TransportMode::kRdma ? "" : "; using TCP for this connection");
    }
    if (mode == TransportMode::kRdma) return false;
  }
  if (gpu) {
    const topology::Rail& r = rails[0];
    MESH_WARN(
        "connect: device %s advertises GPU memory (NCCL_PTR_CUDA/DMABUF), but the connection "
        "to the peer over %s %s -> %s would use TCP (%s), which cannot carry GPU buffers. "
        "Fix RDMA on that cable at both ends (run nccl-mesh-doctor on both hosts), or set "
        "NCCL_MESH_TRANSPORT=tcp on every rank so no device advertises GPU memory",
        devices_[dev].name.c_str(), selection_.used[r.local_index].name.c_str(),
        format_ipv4(r.local.addr).c_str(), format_ipv4(r.peer_addr).c_str(),
        rdma.empty() ? "no usable RDMA port at both ends" : ("RDMA setup failed: " + why).c_str());
    return false;
  }
  req->rails = rails;
  req->ndata = tcp::plan_data_streams(tcp_.streams, rails.size());
  return true;
}

Plugin::RelayPlan Plugin::plan_relayed_connect(const handshake::Handle& h, size_t dev,
                                               int traffic_class, int64_t since_ms,
                                               handshake::ConnectRequest* req, PendingConnect* pc) {
  const Settings& s = settings();
  relay::RelayNeeds needs;
  needs.relay_on = s.relay != 0 && relay_.running();
  needs.relay_off =
      s.relay == 0 ? "off (NCCL_MESH_RELAY=0)" : "unavailable (the relay agent did not start)";
  needs.local_subnets = describe_interfaces(selection_.used);
  needs.gpu = gpu_pointers(ptr_support_[dev]);
  needs.rdma_only = s.transport == TransportMode::kRdma;
  const uint32_t all_peer = h.addrs.size() >= 32 ? ~0u : (1u << h.addrs.size()) - 1;
  needs.rdma_worth_trying = s.transport == TransportMode::kAuto && rdma_.any_usable() &&
                            (h.rdma_mask & all_peer) == all_peer;
  // Equal-cost relay hosts (both ways round a ring) share the connections: the random nonce
  // picks one, the same on every call for this connection.
  const uint16_t spread = static_cast<uint16_t>(h.nonce[0] | (h.nonce[1] << 8));
  relay::ConnectPlan plan = relay::plan_relayed_connect(
      needs, h.addrs,
      [&](relay::FirstHop* first, std::string* why) {
        return relay_.route_for_rdma(h.addrs, spread, first, why, since_ms);
      },
      [&](uint32_t local) { return rdma_.usable_address(local); });
  req->relay_dest = h.addrs;
  req->relay_origin = relay_.host_id();
  if (plan.kind == relay::PlanKind::kRdma) {
    std::string why;
    pc->rdma = rdma_.open_relay_sender(plan.first.local.addr, plan.first.peer_addr, traffic_class,
                                       &req->extension, &why);
    if (pc->rdma) {
      pc->relay_rdma = true;
      pc->relay_host = plan.first.route;
      pc->relay_path = plan.first.path;
      req->ndata = 0;
      // The QPs are on the cable to this relay host: every attempt goes there.
      req->relay = handshake::rdma_relay_resolver(plan.first);
      MESH_INFO(NCCL_NET, "connect: %s", plan.message.c_str());
      return RelayPlan::kOk;
    }
    plan = relay::after_rdma_setup_failed(needs, h.addrs, why);
  }
  switch (plan.kind) {
    case relay::PlanKind::kWait:
      return RelayPlan::kWait;
    case relay::PlanKind::kFail:  // the planner logged the WARN
      return RelayPlan::kFail;
    case relay::PlanKind::kRdma:
    case relay::PlanKind::kTcp:
      break;
  }
  MESH_INFO(NCCL_NET, "connect: %s", plan.message.c_str());
  req->relay = handshake::tcp_relay_resolver(&relay_, h.addrs, since_ms);
  req->ndata = tcp::plan_data_streams(tcp_.streams, 1);
  return RelayPlan::kOk;
}

void* Plugin::adopt(std::unique_ptr<Connection> conn, Context* ctx, const char* what) {
  Connection* c = conn.release();
  connections_[c] = ctx;
  MESH_INFO(NCCL_NET | NCCL_INIT, "%s: %s", what, c->describe().c_str());
  return c;
}

ncclResult_t Plugin::accept(void* listen_comm, void** recv_comm) {
  *recv_comm = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto* l = static_cast<ListenComm*>(listen_comm);
  auto it = listens_.find(l);
  if (it == listens_.end()) {
    MESH_WARN("accept: %p is not an open listen comm", listen_comm);
    return ncclInternalError;
  }
  std::unique_ptr<Connection> conn(l->awaiting_ready);
  l->awaiting_ready = nullptr;
  if (!conn) {
    handshake::ConnectedSockets sockets;
    std::string failure;
    if (!service_.take_ready(l->endpoint, &sockets, &failure)) {
      if (failure.empty()) return ncclSuccess;
      MESH_WARN(
          "accept on device %d failed: the hosts' shared settings differ: %s. Set the same "
          "values on every host",
          l->dev, failure.c_str());
      return ncclInvalidUsage;
    }
    if (!sockets.transport_state && gpu_pointers(ptr_support_[static_cast<size_t>(l->dev)])) {
      MESH_WARN(
          "accept: device %s advertises GPU memory (NCCL_PTR_CUDA/DMABUF), but the connection "
          "from %s to %s uses TCP (the peer did not set up RDMA on that cable), which cannot "
          "carry GPU buffers. Fix RDMA on that cable at both ends (run nccl-mesh-doctor on both "
          "hosts), or set NCCL_MESH_TRANSPORT=tcp on every rank",
          devices_[static_cast<size_t>(l->dev)].name.c_str(), sockets.peer.c_str(),
          sockets.local.c_str());
      return ncclSystemError;
    }
    // The receiver sends clear-to-sends unasked by the sender's window bound, which the sender
    // counts on to leave out asks (transport/tcp/wire.h): the sender's number, not this host's.
    size_io_threads();
    tcp::TcpOptions tcp = tcp_;
    tcp.eager_window_bytes = sockets.peer_tcp_window;
    conn = make_connection(false, std::move(sockets), tcp);
  }
  // RDMA: the connector's QPs may still be in INIT; wait (non-blocking) for its ready byte.
  std::string why;
  if (!conn->poll_ready(&why)) {
    if (why.empty()) {
      l->awaiting_ready = conn.release();
      return ncclSuccess;
    }
    MESH_WARN("accept: %s: %s", conn->describe().c_str(), why.c_str());
    conn->close();
    return ncclRemoteError;
  }
  *recv_comm = adopt(std::move(conn), l->ctx, "accepted");
  return ncclSuccess;
}

ncclResult_t Plugin::close_listen(void* listen_comm) {
  std::lock_guard<std::mutex> lock(mu_);
  auto* l = static_cast<ListenComm*>(listen_comm);
  auto it = listens_.find(l);
  if (it == listens_.end()) {
    MESH_WARN("closeListen: %p is not an open listen comm (closed twice?)", listen_comm);
    return ncclInternalError;
  }
  service_.close_listen(l->endpoint);
  if (l->awaiting_ready != nullptr) {
    l->awaiting_ready->close();
    delete l->awaiting_ready;
    l->awaiting_ready = nullptr;
  }
  listens_.erase(it);
  l->tag = ObjectTag::kDead;
  delete l;
  return ncclSuccess;
}

ncclResult_t Plugin::close_connection(void* comm, ObjectTag expected) {
  Connection* conn = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = connections_.find(static_cast<Connection*>(comm));
    if (it == connections_.end() || it->first->tag() != expected) {
      MESH_WARN("%s: %p is not an open %s comm (closed twice?)",
                expected == ObjectTag::kSend ? "closeSend" : "closeRecv", comm,
                expected == ObjectTag::kSend ? "send" : "receive");
      return ncclInternalError;
    }
    conn = it->first;
    connections_.erase(it);
  }
  conn->close();  // joins the data threads; outside mu_ so other comms keep connecting
  {
    std::lock_guard<std::mutex> lock(mr_mu_);
    auto r = regions_.find(conn);
    if (r != regions_.end()) {
      for (MemoryRegion* mr : r->second) delete mr;
      regions_.erase(r);
    }
  }
  delete conn;
  return ncclSuccess;
}

namespace {
Connection* as_connection(void* comm) {
  auto* c = static_cast<Connection*>(comm);
  if (c == nullptr || (c->tag() != ObjectTag::kSend && c->tag() != ObjectTag::kRecv))
    return nullptr;
  return c;
}
}  // namespace

bool Plugin::rdma_cable(void* comm, rdma::VerbsDevice** dev, rdma::RailBinding* rail) {
  const auto* c = dynamic_cast<const rdma::RdmaConnection*>(as_connection(comm));
  if (c == nullptr || c->endpoint().qps().empty()) return false;
  const rdma::QueuePair& qp = *c->endpoint().qps().front();
  const rdma::QpInfo info = qp.info();
  *dev = qp.device();
  rail->port = qp.binding();
  rail->local_addr = info.local_addr;
  rail->peer_addr = info.peer_addr;
  return true;
}

ncclResult_t Plugin::reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return register_region(comm, data, size, type, 0, -1, mhandle);
}

ncclResult_t Plugin::register_region(void* comm, void* data, size_t size, int type, uint64_t offset,
                                     int fd, void** mhandle) {
  *mhandle = nullptr;
  Connection* conn = as_connection(comm);
  if (conn == nullptr) {
    MESH_WARN("regMr: %p is not a send or receive comm", comm);
    return ncclInternalError;
  }
  // GPU memory needs a transport that moves it without the CPU: NCCL only passes it when the
  // device advertised NCCL_PTR_CUDA, i.e. every cable of the device is RDMA.
  if (!conn->accepts_memory(type)) {
    MESH_WARN(
        "regMr: memory type %d is not supported on %s (host memory only here; is "
        "NCCL_NET_GDR_LEVEL forcing GPU Direct?)",
        type, conn->describe().c_str());
    return ncclInvalidArgument;
  }
  if (data == nullptr && size > 0) {
    MESH_WARN("regMr: NULL buffer of %zu bytes", size);
    return ncclInvalidArgument;
  }
  auto* mr = new MemoryRegion;
  mr->data = data;
  mr->size = size;
  mr->type = type;
  mr->owner = comm;
  const ncclResult_t rc = conn->register_memory(mr, fd, offset);
  if (rc != ncclSuccess) {
    delete mr;
    return rc;
  }
  std::lock_guard<std::mutex> lock(mr_mu_);
  regions_[comm].insert(mr);  // overlapping registrations are independent entries
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t Plugin::reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                                   int fd, void** mhandle) {
  // NCCL passes fd -1 for host memory; a real dma-buf (GPU memory) is registered through it.
  return register_region(comm, data, size, type, offset, fd, mhandle);
}

ncclResult_t Plugin::dereg_mr(void* comm, void* mhandle) {
  std::lock_guard<std::mutex> lock(mr_mu_);
  auto it = regions_.find(comm);
  auto* mr = static_cast<MemoryRegion*>(mhandle);
  if (it == regions_.end() || it->second.erase(mr) == 0) {
    MESH_WARN("deregMr: %p is not a registration of comm %p (deregistered twice?)", mhandle, comm);
    return ncclInternalError;
  }
  if (it->second.empty()) regions_.erase(it);
  mr->tag = ObjectTag::kDead;
  delete mr;
  return ncclSuccess;
}

namespace {
// NCCL hands back the mhandle it got from regMr; a foreign pointer is reported, not used.
bool valid_region(void* mhandle, const void* comm) {
  auto* mr = static_cast<MemoryRegion*>(mhandle);
  return mr == nullptr || (mr->tag == ObjectTag::kMemory && mr->owner == comm);
}
}  // namespace

ncclResult_t Plugin::isend(void* comm, void* data, size_t size, int tag, void* mhandle,
                           void** request) {
  *request = nullptr;
  Connection* c = as_connection(comm);
  if (c == nullptr || c->tag() != ObjectTag::kSend) {
    MESH_WARN("isend: %p is not a send comm", comm);
    return ncclInternalError;
  }
  if (data == nullptr && size > 0) {
    MESH_WARN("isend: NULL buffer of %zu bytes", size);
    return ncclInvalidArgument;
  }
  if (!valid_region(mhandle, comm)) {
    MESH_WARN("isend: %p is not a registration of send comm %p", mhandle, comm);
    return ncclInvalidArgument;
  }
  return c->isend(data, size, tag, static_cast<MemoryRegion*>(mhandle), request);
}

ncclResult_t Plugin::irecv(void* comm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** request) {
  *request = nullptr;
  Connection* c = as_connection(comm);
  if (c == nullptr || c->tag() != ObjectTag::kRecv) {
    MESH_WARN("irecv: %p is not a receive comm", comm);
    return ncclInternalError;
  }
  if (n < 1 || data == nullptr || sizes == nullptr) {
    MESH_WARN("irecv: invalid arguments (n=%d)", n);
    return ncclInvalidArgument;
  }
  if (mhandles != nullptr && !valid_region(mhandles[0], comm)) {
    MESH_WARN("irecv: %p is not a registration of receive comm %p", mhandles[0], comm);
    return ncclInvalidArgument;
  }
  return c->irecv(n, data, sizes, tags, reinterpret_cast<MemoryRegion**>(mhandles), request);
}

ncclResult_t Plugin::iflush(void* comm, int n, void** data, int* sizes, void** mhandles,
                            void** request) {
  // Host memory: received bytes are visible once test() reports them and the transport returns
  // a NULL request (already complete). GPU memory on RDMA: a loopback RDMA READ (rdma/).
  *request = nullptr;
  Connection* c = as_connection(comm);
  if (c == nullptr || c->tag() != ObjectTag::kRecv) {
    MESH_WARN("iflush: %p is not a receive comm", comm);
    return ncclInternalError;
  }
  if (n < 1 || data == nullptr || sizes == nullptr || mhandles == nullptr) return ncclSuccess;
  for (int i = 0; i < n; ++i) {
    if (!valid_region(mhandles[i], comm)) {
      MESH_WARN("iflush: %p is not a registration of receive comm %p", mhandles[i], comm);
      return ncclInvalidArgument;
    }
  }
  return c->iflush(n, data, sizes, reinterpret_cast<MemoryRegion**>(mhandles), request);
}

ncclResult_t Plugin::test(void* request, int* done, int* sizes) {
  auto* r = static_cast<RequestHeader*>(request);
  if (done != nullptr) *done = 0;
  if (r == nullptr || r->tag != ObjectTag::kRequest || r->owner == nullptr || done == nullptr) {
    MESH_WARN("test: %p is not a request of this plugin", request);
    return ncclInternalError;
  }
  return r->owner->test(r, done, sizes);
}

}  // namespace mesh
