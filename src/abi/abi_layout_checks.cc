// SPDX-License-Identifier: Apache-2.0
// Sizes and offsets of every struct NCCL reads from or hands to the plugin, on x86_64/aarch64
// (LP64). v8-v11: measured from NCCL 2.28.9's headers (src/include/plugin/net/net_v8.h ...
// net_v11.h); v12: NCCL 2.30's net_v12.h (128-byte properties, maxP2pBytes at 104); v6/v7:
// the member lists of NCCL's net_v6.h/net_v7.h laid out by the LP64 rules (8-byte pointers and
// size_t, 4-byte int/float/enum). A mismatch fails the build instead of corrupting NCCL's memory.
#include <cstddef>

#include "nccl/net.h"
#include "nccl/tuner.h"

#define MESH_OFFSET(type, member, at) \
  static_assert(offsetof(type, member) == (at), #type "." #member)

// ---- common ----
static_assert(sizeof(ncclResult_t) == 4);
static_assert(sizeof(ncclNetDeviceType) == 4);
static_assert(sizeof(ncclNetDeviceHandle_v7_t) == 32);
MESH_OFFSET(ncclNetDeviceHandle_v7_t, netDeviceVersion, 4);
MESH_OFFSET(ncclNetDeviceHandle_v7_t, handle, 8);
MESH_OFFSET(ncclNetDeviceHandle_v7_t, size, 16);
MESH_OFFSET(ncclNetDeviceHandle_v7_t, needsProxyProgress, 24);

// ---- function tables: 8 bytes per member, in NCCL's order ----
static_assert(sizeof(ncclNet_v6_t) == 17 * 8);
static_assert(sizeof(ncclNet_v7_t) == 19 * 8);
static_assert(sizeof(ncclNet_v8_t) == 152);
static_assert(sizeof(ncclNet_v9_t) == 160);
static_assert(sizeof(ncclNet_v10_t) == 160);
static_assert(sizeof(ncclNet_v11_t) == 176);
static_assert(sizeof(ncclNet_v12_t) == 176);
MESH_OFFSET(ncclNet_v6_t, accept, 48);
MESH_OFFSET(ncclNet_v6_t, regMr, 56);
MESH_OFFSET(ncclNet_v6_t, closeListen, 128);
MESH_OFFSET(ncclNet_v7_t, getDeviceMr, 136);
MESH_OFFSET(ncclNet_v7_t, irecvConsumed, 144);
MESH_OFFSET(ncclNet_v8_t, irecvConsumed, 144);
MESH_OFFSET(ncclNet_v9_t, makeVDevice, 152);
MESH_OFFSET(ncclNet_v10_t, makeVDevice, 152);
MESH_OFFSET(ncclNet_v11_t, finalize, 160);
MESH_OFFSET(ncclNet_v11_t, setNetAttr, 168);
MESH_OFFSET(ncclNet_v12_t, finalize, 160);
MESH_OFFSET(ncclNet_v12_t, setNetAttr, 168);

// ---- properties ----
static_assert(sizeof(ncclNetProperties_v6_t) == 48);
MESH_OFFSET(ncclNetProperties_v6_t, ptrSupport, 24);
MESH_OFFSET(ncclNetProperties_v6_t, speed, 28);
MESH_OFFSET(ncclNetProperties_v6_t, latency, 36);
MESH_OFFSET(ncclNetProperties_v6_t, maxRecvs, 44);

static_assert(sizeof(ncclNetProperties_v7_t) == 56);
MESH_OFFSET(ncclNetProperties_v7_t, speed, 28);
MESH_OFFSET(ncclNetProperties_v7_t, maxRecvs, 44);
MESH_OFFSET(ncclNetProperties_v7_t, netDeviceType, 48);
MESH_OFFSET(ncclNetProperties_v7_t, netDeviceVersion, 52);

static_assert(sizeof(ncclNetProperties_v8_t) == 64);
MESH_OFFSET(ncclNetProperties_v8_t, regIsGlobal, 28);
MESH_OFFSET(ncclNetProperties_v8_t, speed, 32);
MESH_OFFSET(ncclNetProperties_v8_t, maxRecvs, 48);
MESH_OFFSET(ncclNetProperties_v8_t, netDeviceType, 52);
MESH_OFFSET(ncclNetProperties_v8_t, netDeviceVersion, 56);

static_assert(sizeof(ncclNetProperties_v9_t) == 104);
static_assert(sizeof(ncclNetProperties_v10_t) == 104);
MESH_OFFSET(ncclNetProperties_v9_t, vProps, 64);
MESH_OFFSET(ncclNetProperties_v9_t, maxP2pBytes, 88);
MESH_OFFSET(ncclNetProperties_v10_t, vProps, 64);
MESH_OFFSET(ncclNetProperties_v10_t, maxP2pBytes, 88);
MESH_OFFSET(ncclNetProperties_v10_t, maxCollBytes, 96);

static_assert(sizeof(ncclNetProperties_v11_t) == 112);
MESH_OFFSET(ncclNetProperties_v11_t, ptrSupport, 24);
MESH_OFFSET(ncclNetProperties_v11_t, forceFlush, 32);
MESH_OFFSET(ncclNetProperties_v11_t, speed, 36);
MESH_OFFSET(ncclNetProperties_v11_t, latency, 44);
MESH_OFFSET(ncclNetProperties_v11_t, maxRecvs, 52);
MESH_OFFSET(ncclNetProperties_v11_t, netDeviceType, 56);
MESH_OFFSET(ncclNetProperties_v11_t, vProps, 64);
MESH_OFFSET(ncclNetProperties_v11_t, maxP2pBytes, 88);
MESH_OFFSET(ncclNetProperties_v11_t, maxCollBytes, 96);
MESH_OFFSET(ncclNetProperties_v11_t, maxMultiRequestSize, 104);

static_assert(sizeof(ncclNetProperties_v12_t) == 128);
MESH_OFFSET(ncclNetProperties_v12_t, netDeviceType, 56);
MESH_OFFSET(ncclNetProperties_v12_t, vProps, 64);
MESH_OFFSET(ncclNetProperties_v12_t, maxP2pBytes, 104);
MESH_OFFSET(ncclNetProperties_v12_t, maxCollBytes, 112);
MESH_OFFSET(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
MESH_OFFSET(ncclNetProperties_v12_t, railId, 124);
MESH_OFFSET(ncclNetProperties_v12_t, planeId, 126);
static_assert(sizeof(ncclNetProperties_v12_t::railId) == 2);

// ---- virtual devices, comm config and attributes ----
static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20);
static_assert(sizeof(ncclNetVDeviceProps_v10_t) == 20);
static_assert(sizeof(ncclNetVDeviceProps_v11_t) == 20);
static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36);
static_assert(sizeof(ncclNetCommConfig_v10_t) == 4);
static_assert(sizeof(ncclNetCommConfig_v11_t) == 4);
static_assert(sizeof(ncclNetCommConfig_v12_t) == 4);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);
static_assert(sizeof(ncclNetAttr_v12_t) == 44);

// ---- tuner tables (NCCL 2.28.9's plugin/tuner/tuner_v3.h ... tuner_v5.h, LP64) ----
static_assert(sizeof(ncclFunc_t) == 4);
static_assert(sizeof(ncclTuner_v3_t) == 4 * 8);
static_assert(sizeof(ncclTuner_v4_t) == 4 * 8);
static_assert(sizeof(ncclTuner_v5_t) == 4 * 8);
MESH_OFFSET(ncclTuner_v5_t, init, 8);
MESH_OFFSET(ncclTuner_v5_t, getCollInfo, 16);
MESH_OFFSET(ncclTuner_v5_t, finalize, 24);
static_assert(sizeof(ncclNvlDomainInfo_v5_t) == 12);
// 7x3 + 3x7x3 + 5x(4x3) doubles
static_assert(sizeof(ncclTunerConstants_v5_t) == (21 + 63 + 60) * 8);
