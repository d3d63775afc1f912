// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/rdma_transport.h"

#include <algorithm>
#include <filesystem>

#include "transport/rdma/wire.h"
#include "util/log.h"

namespace mesh::rdma {

void RdmaTransport::bind(const std::vector<topology::Interface>& used, const RdmaOptions& options) {
  used_ = used;
  options_ = options;
  ports_.assign(used_.size(), PortBinding{});
  any_usable_ = false;
  if (options_.mode == TransportMode::kTcp) return;
  if (options_.host_as_gpu) {
    MESH_WARN(
        "NCCL_MESH_TEST_HOST_AS_GPU=1 (testing only): RDMA devices without a GPU driver "
        "advertise NCCL_PTR_CUDA; host memory registered as NCCL_PTR_CUDA is treated as GPU "
        "memory. Unset it outside tests");
  }
  std::string why;
  if (!registry_.available(&why)) {
    if (options_.mode == TransportMode::kRdma)
      MESH_WARN("NCCL_MESH_TRANSPORT=rdma but %s", why.c_str());
    else
      MESH_INFO(NCCL_INIT | NCCL_NET, "RDMA unavailable (%s): TCP only", why.c_str());
    return;
  }
  ports_ = bind_interfaces(used_, options_.gid_index);
  for (size_t i = 0; i < ports_.size(); ++i) {
    const PortBinding& b = ports_[i];
    const std::string& itf = used_[i].name;
    if (b.usable) {
      any_usable_ = true;
      MESH_INFO(NCCL_INIT | NCCL_NET, "%s: RDMA on %s", itf.c_str(), b.why.c_str());
    } else if (b.why.rfind("no RDMA port", 0) == 0) {
      MESH_INFO(NCCL_INIT | NCCL_NET, "%s: %s, TCP to peers on its cable", itf.c_str(),
                b.why.c_str());
    } else {
      // An RDMA port exists but cannot be used: the user expects RDMA here.
      MESH_WARN("%s: %s; peers on this cable use TCP (run nccl-mesh-doctor)", itf.c_str(),
                b.why.c_str());
    }
  }
}

int RdmaTransport::pointer_support(const topology::NetDevice& d) {
  // GPU memory is only usable where every cable of the device is RDMA; GPUDirect needs the
  // peer-memory module (NCCL_PTR_CUDA) or dma-buf registration (NCCL_PTR_DMABUF).
  int support = NCCL_PTR_HOST;
  if (!any_usable_) return support;
  for (size_t m : d.members) {
    if (!ports_[m].usable) return support;
  }
  std::error_code ec;
  const bool peermem = std::filesystem::exists("/sys/module/nvidia_peermem", ec) ||
                       std::filesystem::exists("/sys/kernel/mm/memory_peers/nv_mem/version", ec);
  const bool gpu_driver = std::filesystem::exists("/dev/nvidiactl", ec);
  if (peermem) support |= NCCL_PTR_CUDA;
  // The stand-in for GPU memory in tests (docs/rdma.md): only where no real GPU could be meant.
  if (!gpu_driver && options_.host_as_gpu) support |= NCCL_PTR_CUDA;
  // dma-buf only when every RDMA device of the device's cables can register one (a connection
  // stripes over all of them).
  bool dmabuf = gpu_driver;
  for (size_t m : d.members) {
    std::string why;
    VerbsDevice* dev = dmabuf ? registry_.open(ports_[m].device, &why) : nullptr;
    dmabuf = dev != nullptr && dev->dmabuf_supported();
  }
  if (dmabuf) support |= NCCL_PTR_DMABUF;
  return support;
}

uint32_t RdmaTransport::address_mask(const std::vector<Ipv4Prefix>& addrs, size_t max) const {
  uint32_t mask = 0;
  for (size_t i = 0; i < addrs.size() && i < max; ++i) {
    for (size_t u = 0; u < used_.size(); ++u) {
      if (used_[u].addr.addr == addrs[i].addr && ports_[u].usable) mask |= 1u << i;
    }
  }
  return mask;
}

std::vector<topology::Rail> RdmaTransport::usable_rails(const std::vector<topology::Rail>& rails,
                                                        const handshake::Handle& peer) const {
  std::vector<topology::Rail> out;
  if (!any_usable_) return out;
  for (const topology::Rail& r : rails) {
    if (!ports_[r.local_index].usable) continue;
    for (size_t i = 0; i < peer.addrs.size(); ++i) {
      if (peer.addrs[i].addr == r.peer_addr && ((peer.rdma_mask >> i) & 1u) != 0) out.push_back(r);
    }
  }
  return out;
}

std::shared_ptr<Endpoint> RdmaTransport::open_sender(const std::vector<topology::Rail>& rails,
                                                     int traffic_class, std::vector<uint8_t>* setup,
                                                     std::string* why) {
  // QPs per connection: a multiple of the cables, so each cable carries an equal share.
  std::vector<RailBinding> bindings;
  for (size_t i = 0; i < rails.size() && i < kMaxQps; ++i) {
    bindings.push_back({ports_[rails[i].local_index], rails[i].local.addr, rails[i].peer_addr});
  }
  const size_t n = bindings.size();
  const size_t nqps = std::min(kMaxQps, (options_.qps_per_conn + n - 1) / n * n);
  std::shared_ptr<Endpoint> ep = Endpoint::for_sender(registry_, bindings, nqps, why);
  if (ep) {
    SetupMessage local = ep->local_setup();
    local.traffic_class = traffic_class;  // the listener applies it to its QPs too
    *setup = encode_setup(local);
  }
  return ep;
}

QpOptions RdmaTransport::qp_options(int traffic_class) const {
  QpOptions opt = options_.qp;
  if (traffic_class >= 0 && traffic_class <= 255) opt.traffic_class = traffic_class;
  return opt;
}

bool RdmaTransport::connect_sender(Endpoint& ep, const std::vector<uint8_t>& peer_setup,
                                   int traffic_class, std::string* why) const {
  SetupMessage peer;
  return decode_setup(peer_setup.data(), peer_setup.size(), &peer, why) &&
         ep.connect(peer, qp_options(traffic_class), why);
}

bool RdmaTransport::port_of(uint32_t addr, PortBinding* out, std::string* why) const {
  for (size_t i = 0; i < used_.size(); ++i) {
    if (used_[i].addr.addr != addr) continue;
    if (!ports_[i].usable) {
      *why = used_[i].name + " has no usable RDMA port" +
             (ports_[i].why.empty() ? "" : " (" + ports_[i].why + ")");
      return false;
    }
    *out = ports_[i];
    return true;
  }
  *why = "the peer targets " + format_ipv4(addr) + ", which is not a mesh address of this host";
  return false;
}

bool RdmaTransport::usable_address(uint32_t addr) const {
  PortBinding b;
  std::string why;
  return any_usable_ && port_of(addr, &b, &why);
}

std::unique_ptr<Endpoint> RdmaTransport::open_receiver(const SetupMessage& peer, std::string* why) {
  auto lookup = [this](uint32_t addr, PortBinding* out, std::string* w) {
    return port_of(addr, out, w);
  };
  return Endpoint::for_receiver(registry_, peer, lookup, why);
}

std::shared_ptr<Endpoint> RdmaTransport::open_sender_on(uint32_t local, uint32_t peer,
                                                        std::string* why) {
  RailBinding rail;
  if (!port_of(local, &rail.port, why)) return nullptr;
  rail.local_addr = local;
  rail.peer_addr = peer;
  const size_t nqps = std::clamp<size_t>(options_.qps_per_conn, 1, kMaxQps);
  return Endpoint::for_sender(registry_, {rail}, nqps, why);
}

std::shared_ptr<Endpoint> RdmaTransport::open_relay_sender(uint32_t local, uint32_t relay,
                                                           int traffic_class,
                                                           std::vector<uint8_t>* setup,
                                                           std::string* why) {
  std::shared_ptr<Endpoint> ep = open_sender_on(local, relay, why);
  if (ep) {
    SetupMessage m = ep->local_setup();  // ring address: the credit word (wire.h 5.)
    m.traffic_class = traffic_class;
    m.relay = true;
    *setup = encode_setup(m);
  }
  return ep;
}

bool RdmaTransport::connect_relay_sender(Endpoint& ep, const std::vector<uint8_t>& relay_setup,
                                         int traffic_class, SetupMessage* relay,
                                         std::string* why) const {
  return decode_relay_answer(relay_setup.data(), relay_setup.size(), relay, why) &&
         ep.connect(*relay, qp_options(traffic_class), why);
}

bool RdmaTransport::accept_extension(const std::vector<uint8_t>& ext, std::vector<uint8_t>* reply,
                                     std::shared_ptr<void>* state, std::string* why) {
  SetupMessage peer;
  if (!decode_setup(ext.data(), ext.size(), &peer, why)) return false;
  if (peer.relay) {
    *why = "the connector asked for a relay hop, but this is its destination";
    return false;
  }
  std::shared_ptr<Endpoint> ep = open_receiver(peer, why);
  if (!ep || !ep->connect(peer, qp_options(peer.traffic_class), why)) return false;
  *reply = encode_setup(ep->local_setup());
  *state = ep;
  return true;
}

}  // namespace mesh::rdma
