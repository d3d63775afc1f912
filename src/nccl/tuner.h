// SPDX-License-Identifier: Apache-2.0
// NCCL's tuner-plugin ABI (src/include/plugin/nccl_tuner.h and nccl_common.h of NCCL 2.28.9): the
// collective, algorithm and protocol numbering every tuner version shares, and one header per
// table version this library exports. NCCL opens a tuner from the net plugin's own library when
// NCCL_TUNER_PLUGIN is unset and probes ncclTunerPlugin_v5, _v4, _v3, _v2 in that order
// (NCCL 2.28.9's src/plugin/tuner.cc). Plain C compatible.
#ifndef NCCL_MESH_NCCL_TUNER_H
#define NCCL_MESH_NCCL_TUNER_H

#include "nccl/tuner_common.h"

#include "nccl/tuner_v3.h"
#include "nccl/tuner_v4.h"
#include "nccl/tuner_v5.h"

#endif  // NCCL_MESH_NCCL_TUNER_H
