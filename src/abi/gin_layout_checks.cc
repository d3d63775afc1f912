// SPDX-License-Identifier: Apache-2.0
// Sizes and offsets of the GIN/RMA tables and configs NCCL reads, on LP64: 8 bytes per table
// member in NCCL's order (shared/reference/gin-rma.md 1.2). A mismatch fails the build instead
// of NCCL calling the wrong function.
#include <cstddef>

#include "nccl/gin.h"

#define MESH_OFFSET(type, member, at) \
  static_assert(offsetof(type, member) == (at), #type "." #member)

static_assert(sizeof(ncclGin_v11_t) == 19 * 8);
MESH_OFFSET(ncclGin_v11_t, connect, 5 * 8);
MESH_OFFSET(ncclGin_v11_t, createContext, 6 * 8);
MESH_OFFSET(ncclGin_v11_t, regMrSym, 7 * 8);
MESH_OFFSET(ncclGin_v11_t, closeListen, 12 * 8);
MESH_OFFSET(ncclGin_v11_t, iput, 13 * 8);
MESH_OFFSET(ncclGin_v11_t, iputSignal, 14 * 8);
MESH_OFFSET(ncclGin_v11_t, test, 15 * 8);
MESH_OFFSET(ncclGin_v11_t, ginProgress, 16 * 8);
MESH_OFFSET(ncclGin_v11_t, queryLastError, 17 * 8);
MESH_OFFSET(ncclGin_v11_t, finalize, 18 * 8);

static_assert(sizeof(ncclGin_v12_t) == 19 * 8);
MESH_OFFSET(ncclGin_v12_t, connect, 5 * 8);
MESH_OFFSET(ncclGin_v12_t, iput, 13 * 8);
MESH_OFFSET(ncclGin_v12_t, finalize, 18 * 8);

static_assert(sizeof(ncclGinConfig_v13_t) == 5 * 4);
MESH_OFFSET(ncclGinConfig_v13_t, nContexts, 8);
MESH_OFFSET(ncclGinConfig_v13_t, trafficClass, 16);
static_assert(sizeof(ncclGin_v13_t) == 21 * 8);
MESH_OFFSET(ncclGin_v13_t, createContext, 6 * 8);
MESH_OFFSET(ncclGin_v13_t, iput, 13 * 8);
MESH_OFFSET(ncclGin_v13_t, iputSignal, 14 * 8);
MESH_OFFSET(ncclGin_v13_t, iget, 15 * 8);
MESH_OFFSET(ncclGin_v13_t, iflush, 16 * 8);
MESH_OFFSET(ncclGin_v13_t, test, 17 * 8);
MESH_OFFSET(ncclGin_v13_t, ginProgress, 18 * 8);
MESH_OFFSET(ncclGin_v13_t, queryLastError, 19 * 8);
MESH_OFFSET(ncclGin_v13_t, finalize, 20 * 8);

static_assert(sizeof(ncclRmaConfig_v14_t) == 3 * 4);
MESH_OFFSET(ncclRmaConfig_v14_t, rankStride, 8);
static_assert(sizeof(ncclRma_v14_t) == 21 * 8);
MESH_OFFSET(ncclRma_v14_t, createContext, 6 * 8);
MESH_OFFSET(ncclRma_v14_t, regMrSym, 7 * 8);
MESH_OFFSET(ncclRma_v14_t, iput, 13 * 8);
MESH_OFFSET(ncclRma_v14_t, iputSignal, 14 * 8);
MESH_OFFSET(ncclRma_v14_t, iget, 15 * 8);
MESH_OFFSET(ncclRma_v14_t, test, 17 * 8);
MESH_OFFSET(ncclRma_v14_t, rmaProgress, 18 * 8);
MESH_OFFSET(ncclRma_v14_t, finalize, 20 * 8);
static_assert(sizeof(ncclRma_v15_t) == sizeof(ncclRma_v14_t));
MESH_OFFSET(ncclRma_v15_t, iget, 15 * 8);
MESH_OFFSET(ncclRma_v15_t, finalize, 20 * 8);

// The properties every GIN/RMA getProperties fills are the net ones (abi_layout_checks.cc).
static_assert(NCCL_NET_DEVICE_GIN_PROXY == 2);
static_assert(NCCL_GIN_SIGNAL_OP_INC == 1 && NCCL_GIN_SIGNAL_OP_ADD == 2);
