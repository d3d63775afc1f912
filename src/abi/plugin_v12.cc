// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v12 (NCCL 2.30, current RCCL): v11's table and semantics; the properties add
// railId/planeId (reported as NCCL_NET_ID_UNDEF: see fill_properties) and room for 8 devices per
// virtual NIC.
#include "abi/context_table.h"

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v12_t ncclNetPlugin_v12 =
    mesh::abi::context_table<ncclNet_v12_t, ncclNetCommConfig_v12_t, ncclNetProperties_v12_t>();
}  // extern "C"
