// SPDX-License-Identifier: Apache-2.0
// The RDMA transport's and the RDMA relay forwarder's share of the settings table: one place for
// the plugin and nccl-mesh-relayd (which forwards RDMA relay too).
#pragma once

#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/relay_forwarder.h"
#include "util/settings.h"

namespace mesh::rdma {

RdmaOptions rdma_options(const Settings& s);
ForwarderOptions forwarder_options(const Settings& s);

}  // namespace mesh::rdma
