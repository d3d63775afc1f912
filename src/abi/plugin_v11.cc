// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v11 (NCCL 2.28-2.29): per-communicator init/finalize with a context.
#include "abi/context_table.h"

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 =
    mesh::abi::context_table<ncclNet_v11_t, ncclNetCommConfig_v11_t, ncclNetProperties_v11_t>();
}  // extern "C"
