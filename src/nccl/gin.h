// SPDX-License-Identifier: Apache-2.0
// NCCL's GIN and RMA plugin tables, every version this library exports (see gin_common.h).
#ifndef NCCL_MESH_NCCL_GIN_H
#define NCCL_MESH_NCCL_GIN_H

#include "nccl/gin_common.h"
#include "nccl/gin_v11.h"
#include "nccl/gin_v12.h"
#include "nccl/gin_v13.h"
#include "nccl/rma_v14.h"

#endif  // NCCL_MESH_NCCL_GIN_H
