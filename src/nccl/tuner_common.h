// SPDX-License-Identifier: Apache-2.0
// What every version of NCCL's tuner-plugin ABI shares (NCCL 2.28.9's nccl_common.h and
// plugin/nccl_tuner.h): the collective numbering and the cost table's rows and columns.
#ifndef NCCL_MESH_NCCL_TUNER_COMMON_H
#define NCCL_MESH_NCCL_TUNER_COMMON_H

#include "nccl/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// NCCL's ncclFunc_t (nccl_common.h). getCollInfo is called for the first five only.
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclNumFuncs = 11
} ncclFunc_t;

// Rows and columns of the cost table getCollInfo receives: float[numAlgo][numProto], row-major,
// passed as float** (NCCL casts a 2-D array). An entry is the estimated time in microseconds;
// NCCL picks the smallest entry >= 0 (and below one hour); NCCL_ALGO_PROTO_IGNORE marks a
// combination that is unsupported or disabled and is never picked.
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_ALGO_PROTO_IGNORE -1.0

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_MESH_NCCL_TUNER_COMMON_H
