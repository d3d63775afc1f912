// SPDX-License-Identifier: Apache-2.0
// Checks of the RDMA stack: GID per address, rdma-core and device nodes, the GPU-direct path.
#include <algorithm>
#include <map>

#include "tools/doctor/checks.h"

namespace mesh::doctor {
namespace {

using topology::GidChoice;
using topology::Interface;
using topology::RdmaPort;

std::string port_label(const RdmaPort& p) {
  return p.device + " port " + std::to_string(p.port);
}

bool has_module(const Inventory& inv, const char* name) {
  return inv.modules.count(name) != 0;
}

// Ethernet drivers whose NICs do RoCE/iWARP once the matching RDMA driver is loaded.
const std::map<std::string, std::string>& rdma_capable_drivers() {
  static const std::map<std::string, std::string> m = {
      {"mlx5_core", "mlx5_ib"}, {"mlx4_core", "mlx4_ib"}, {"mlx4_en", "mlx4_ib"},
      {"bnxt_en", "bnxt_re"},   {"ice", "irdma"},         {"qede", "qedr"},
  };
  return m;
}

std::string gid_fix(const RdmaPort& port, const Interface& itf, const GidChoice& auto_choice,
                    const Model& m) {
  if (m.gid_override) {
    return auto_choice.index
               ? "export NCCL_MESH_GID_INDEX=" + std::to_string(*auto_choice.index) +
                     "  (or unset it: the automatic choice is that entry)"
               : "unset NCCL_MESH_GID_INDEX and fix the GID table first (see the other lines)";
  }
  if (auto_choice.why.rfind("only RoCE v1", 0) == 0) {
    return "enable RoCE v2 on " + port.device + ": cma_roce_mode -d " + port.device + " -p " +
           std::to_string(port.port) + " -m 2 (rdma-core), and check the NIC firmware";
  }
  return "put " + format_ipv4(itf.addr.addr) + " on the netdev the RDMA port is bound to (" +
         itf.name + ", not a bond or VLAN above it) and check `rdma link show`";
}

}  // namespace

Findings check_roce_gids(const Inventory& inv, const Model& m) {
  const char* id = "roce-gid";
  Findings out;
  for (const InterfaceView& v : m.interfaces) {
    const Interface& itf = inv.interfaces[v.interface];
    for (const RdmaBinding& b : v.rdma) {
      const RdmaPort& port = inv.rdma_ports[b.port];
      const std::string subject =
          itf.name + " " + format_ipv4(itf.addr.addr) + " on " + port_label(port);
      if (!port.state.empty() && port.state.find("ACTIVE") == std::string::npos) {
        out.push_back(
            {id, Verdict::kWarn, subject,
             "RDMA port state is '" + port.state + "' (physical: '" + port.phys_state +
                 "'): no RDMA traffic until it is ACTIVE",
             "check the cable and `ip link set " + itf.name + " up`; then rdma link show"});
      }
      if (b.gid.use_lid) {
        out.push_back({id, Verdict::kOk, subject, b.gid.why, ""});
        continue;
      }
      const GidChoice auto_choice = topology::select_gid(port, itf.addr.addr);
      if (b.gid.index) {
        // An override that differs from the automatic choice is allowed but suspicious: the
        // two ends then use GIDs of different kinds or addresses.
        const bool differs = m.gid_override && auto_choice.index != b.gid.index;
        out.push_back({id, differs ? Verdict::kWarn : Verdict::kOk, subject,
                       "GID index " + std::to_string(*b.gid.index) + ": " + b.gid.why,
                       differs ? gid_fix(port, itf, auto_choice, m) : ""});
        continue;
      }
      // The plugin will not use an interface it excludes, so a missing GID there is a warning.
      out.push_back({id, v.used ? Verdict::kFail : Verdict::kWarn, subject,
                     b.gid.why + (v.used ? "" : " (the plugin does not use this interface)"),
                     gid_fix(port, itf, auto_choice, m)});
    }
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, "",
                   inv.rdma_ports.empty() ? "no RDMA port: nothing to check"
                                          : "no RDMA port carries an IPv4 address",
                   ""});
  }
  return out;
}

Findings check_rdma_core(const Inventory& inv) {
  const char* id = "rdma-core";
  std::vector<std::string> devices;
  for (const RdmaPort& p : inv.rdma_ports) {
    if (std::find(devices.begin(), devices.end(), p.device) == devices.end()) {
      devices.push_back(p.device);
    }
  }
  std::string dev_list;
  for (const std::string& d : devices) dev_list += (dev_list.empty() ? "" : ", ") + d;
  if (!devices.empty()) {
    if (!inv.libibverbs_loadable) {
      return {{id, Verdict::kFail, dev_list,
               "RDMA devices exist but libibverbs.so.1 cannot be loaded" +
                   (inv.libibverbs_error.empty() ? "" : " (" + inv.libibverbs_error + ")") +
                   ": no RDMA transport is possible",
               "apt-get install rdma-core libibverbs1 ibverbs-providers  (dnf install rdma-core "
               "libibverbs)"}};
    }
    if (inv.uverbs_devices == 0) {
      return {{id, Verdict::kFail, dev_list,
               "RDMA devices exist in sysfs but /dev/infiniband has no uverbs device: user space "
               "cannot open them",
               "modprobe ib_uverbs; in a container run with --device=/dev/infiniband "
               "(docker) or the RDMA device plugin (Kubernetes)"}};
    }
    return {{id, Verdict::kOk, dev_list,
             std::to_string(inv.rdma_ports.size()) + " RDMA port(s), libibverbs.so.1 loads, " +
                 std::to_string(inv.uverbs_devices) + " uverbs device(s)",
             ""}};
  }
  // No RDMA device: fine for the TCP transport, unless a NIC could do RDMA with one module more.
  Findings out;
  for (const Netdev& n : inv.netdevs) {
    const auto it = rdma_capable_drivers().find(n.driver);
    if (it == rdma_capable_drivers().end()) continue;
    out.push_back(
        {id, Verdict::kWarn, n.name,
         "driver " + n.driver + " supports RDMA but no RDMA device exists" +
             (inv.libibverbs_loadable ? "" : " and libibverbs.so.1 is missing"),
         "modprobe " + it->second + " ib_uverbs" +
             (inv.libibverbs_loadable ? "" : "; apt-get install rdma-core ibverbs-providers")});
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, "",
                   std::string("no RDMA device (/sys/class/infiniband is empty): the TCP "
                               "transport needs none; libibverbs.so.1 ") +
                       (inv.libibverbs_loadable ? "loads" : "is not installed"),
                   ""});
  }
  return out;
}

Findings check_gpudirect(const Inventory& inv) {
  const char* id = "gpudirect";
  if (has_module(inv, "nvidia_peermem")) {
    return {{id, Verdict::kOk, "nvidia_peermem",
             "nvidia_peermem is loaded: RDMA NICs can register GPU memory", ""}};
  }
  const bool nvidia = has_module(inv, "nvidia") || !inv.nvidia_driver.empty();
  if (!nvidia) {
    return {{id, Verdict::kOk, "", "no NVIDIA driver loaded: GPU-direct does not apply here", ""}};
  }
  if (inv.rdma_ports.empty()) {
    return {{id, Verdict::kOk, "",
             "no RDMA device: GPU buffers are staged through host memory (the TCP transport "
             "copies them anyway)",
             ""}};
  }
  // Without nvidia_peermem, GPUDirect RDMA needs dma-buf: the open kernel modules and Linux
  // >= 5.12. Whether a GPU exports dma-buf is only known with a CUDA context, which the doctor
  // does not create.
  const bool open_module = inv.nvidia_driver.find("Open Kernel Module") != std::string::npos;
  return {
      {id, Verdict::kWarn, "nvidia_peermem",
       std::string("nvidia_peermem is not loaded; GPUDirect RDMA then depends on dma-buf, "
                   "which cannot be verified without a GPU context (driver: ") +
           (open_module ? "open kernel module, dma-buf capable" : "not the open kernel module") +
           ", kernel " + (inv.kernel_release.empty() ? "?" : inv.kernel_release) +
           ", dma-buf needs >= 5.12)",
       "modprobe nvidia_peermem, or check dma-buf with cuDeviceGetAttribute("
       "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) on the GPU"}};
}

}  // namespace mesh::doctor
