// SPDX-License-Identifier: Apache-2.0
// NCCL's network-plugin ABI, every version this library exports: the shared declarations
// (common.h) and one header per version, the way NCCL keeps them in src/include/plugin/net/.
// For the ABI tables, the tools and the tests; layers below the ABI include only nccl/common.h.
#ifndef NCCL_MESH_NCCL_NET_H
#define NCCL_MESH_NCCL_NET_H

#include "nccl/common.h"
#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v12.h"
#include "nccl/net_v6.h"
#include "nccl/net_v7.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"

#endif  // NCCL_MESH_NCCL_NET_H
