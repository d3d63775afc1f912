// Sizes and offsets NCCL 2.28.9 expects (measured from its headers on x86_64, recorded in
// shared/reference/nccl-net-abi.md section 2). A mismatch fails the build.
#include <cstddef>

#include "nccl/net.h"

static_assert(sizeof(ncclNet_v8_t) == 152);
static_assert(sizeof(ncclNet_v9_t) == 160);
static_assert(sizeof(ncclNet_v10_t) == 160);
static_assert(sizeof(ncclNet_v11_t) == 176);
static_assert(offsetof(ncclNet_v10_t, makeVDevice) == 152);
static_assert(offsetof(ncclNet_v11_t, finalize) == 160);
static_assert(offsetof(ncclNet_v11_t, setNetAttr) == 168);
static_assert(sizeof(ncclNetProperties_v8_t) == 64);
static_assert(sizeof(ncclNetProperties_v9_t) == 104);
static_assert(sizeof(ncclNetProperties_v10_t) == 104);
static_assert(sizeof(ncclNetProperties_v11_t) == 112);
static_assert(offsetof(ncclNetProperties_v11_t, ptrSupport) == 24);
static_assert(offsetof(ncclNetProperties_v11_t, forceFlush) == 32);
static_assert(offsetof(ncclNetProperties_v11_t, speed) == 36);
static_assert(offsetof(ncclNetProperties_v11_t, latency) == 44);
static_assert(offsetof(ncclNetProperties_v11_t, maxRecvs) == 52);
static_assert(offsetof(ncclNetProperties_v11_t, netDeviceType) == 56);
static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96);
static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
static_assert(sizeof(ncclNetVDeviceProps_v11_t) == 20);
static_assert(sizeof(ncclNetCommConfig_v11_t) == 4);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);
static_assert(sizeof(ncclNetDeviceHandle_v11_t) == 32);
static_assert(sizeof(ncclResult_t) == 4);
