// SPDX-License-Identifier: Apache-2.0
// ncclTunerPlugin_v3 (NCCL 2.22 - 2.23): as v4 without getCollInfo's regBuff argument.
#ifndef NCCL_MESH_NCCL_TUNER_V3_H
#define NCCL_MESH_NCCL_TUNER_V3_H

#include "nccl/tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_MESH_NCCL_TUNER_V3_H
