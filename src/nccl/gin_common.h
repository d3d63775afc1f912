// SPDX-License-Identifier: Apache-2.0
// Declarations shared by NCCL's GIN (GPU-initiated networking) and RMA plugin tables, written
// from the layouts in shared/reference/gin-rma.md section 1.2 (NCCL 2.28.9 ... 2.31). Values,
// not code, come from NCCL: the signal operations and registration flags NCCL passes.
#ifndef NCCL_MESH_NCCL_GIN_COMMON_H
#define NCCL_MESH_NCCL_GIN_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "nccl/common.h"

#define NCCL_GIN_HANDLE_MAXSIZE 128
// iputSignal's signalOp (same values as NCCL_NET_SIGNAL_OP_*).
#define NCCL_GIN_SIGNAL_OP_INC 0x1
#define NCCL_GIN_SIGNAL_OP_ADD 0x2
// regMrSym's mrFlags.
#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
#define NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (1 << 1)
// NCCL refuses larger single operations (MAX_GIN_SIZE).
#define NCCL_MESH_MAX_GIN_SIZE (1ULL << 30)

#endif  // NCCL_MESH_NCCL_GIN_COMMON_H
