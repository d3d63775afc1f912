// SPDX-License-Identifier: Apache-2.0
// ncclTunerPlugin_v4 (NCCL 2.24 - 2.27): init(nRanks, nNodes, logger, &ctx), getCollInfo as v5
// (with regBuff), destroy. NCCL 2.28.9 still loads it when v5 is absent.
#ifndef NCCL_MESH_NCCL_TUNER_V4_H
#define NCCL_MESH_NCCL_TUNER_V4_H

#include "nccl/tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_MESH_NCCL_TUNER_V4_H
