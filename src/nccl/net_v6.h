// SPDX-License-Identifier: Apache-2.0
// ncclNet_v6 (NCCL 2.13-2.18): no device handles, int sizes, at most 8 requests per comm.
// Transcribed from NCCL's src/include/plugin/net/net_v6.h (layouts checked in
// src/abi/abi_layout_checks.cc). Plain C compatible.
#ifndef NCCL_MESH_NCCL_NET_V6_H
#define NCCL_MESH_NCCL_NET_V6_H

#include "nccl/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// NCCL_NET_MAX_REQUESTS of NCCL 2.13-2.18: NCCL never has more requests than this in flight on one
// comm (NCCL_STEPS = 8), so a v6 plugin had to accept this many.
#define NCCL_NET_MAX_REQUESTS_V6 8

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;  // Mbps
  int port;
  float latency;  // microseconds
  int maxComms;
  int maxRecvs;
} ncclNetProperties_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclNet_v6_t;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_MESH_NCCL_NET_V6_H
