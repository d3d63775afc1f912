// SPDX-License-Identifier: Apache-2.0
// What the plugin would make of an Inventory: which interfaces it uses (and why not the others),
// the NCCL devices it exposes, and the GID each RDMA-backed address would use. Computed with the
// plugin's own topology functions, so the doctor cannot disagree with the plugin.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tools/doctor/inventory.h"
#include "topology/ifname_filter.h"
#include "topology/rdma_sysfs.h"
#include "topology/selection.h"

namespace mesh::doctor {

// The environment variable the RDMA transport reads to force a GID index. Not part of the
// plugin's settings table yet (the TCP transport does not use it).
inline constexpr const char* kGidIndexEnv = "NCCL_MESH_GID_INDEX";

struct RdmaBinding {
  size_t port = 0;  // index into Inventory::rdma_ports
  topology::GidChoice gid;
};

struct InterfaceView {
  size_t interface = 0;  // index into Inventory::interfaces
  bool used = false;
  std::string excluded_why;     // why select_interfaces left it out (Exclusion::why)
  std::string excluded_reason;  // topology::left_out_name: "default-route", "switch", ...
  std::string include_hint;     // how to use it anyway (Exclusion::include)
  std::vector<RdmaBinding> rdma;
};

struct Model {
  topology::IfnameFilter filter;
  topology::Selection selection;
  std::vector<topology::NetDevice> devices;
  std::optional<int> gid_override;        // NCCL_MESH_GID_INDEX when it parses
  std::string gid_override_error;         // why it does not, empty otherwise
  std::vector<InterfaceView> interfaces;  // parallel to Inventory::interfaces
};

Model build_model(const Inventory& inv);

// NCCL_MESH_GID_INDEX: 0..65535 (GID tables are at most a few hundred entries).
std::optional<int> parse_gid_index(const std::string& text, std::string* why);

}  // namespace mesh::doctor
