// SPDX-License-Identifier: Apache-2.0
// The opaque objects the GIN/RMA tables hand to NCCL. Each starts with a GinTag so a pointer
// NCCL passes back is checked before use: NCCL 2.28.9 passes its own net context to connect and
// may pass the collComm where the table says ginCtx (queryLastError, ginProgress), so entry
// points accept whichever of our objects is meaningful and refuse anything else.
#pragma once

#include <cstdint>
#include <memory>
#include <set>

namespace mesh {
class Plugin;
struct Context;
}  // namespace mesh

namespace mesh::gin {

enum class GinTag : uint64_t {
  kInstance = 0x67696e2d696e7374,  // "gin-inst"
  kListen = 0x67696e2d6c73746e,    // "gin-lstn"
  kComm = 0x67696e2d636f6c6c,      // "gin-coll"
  kContext = 0x67696e2d63747820,   // "gin-ctx "
  kRegion = 0x67696e2d7265676e,    // "gin-regn"
  kRequest = 0x67696e2d72657120,   // "gin-req "
  kDead = 0x67696e2d64656164,      // "gin-dead"
};

class Comm;

// init(): one per NCCL communicator; owns a net context of the plugin (plugin/plugin.h).
struct Instance {
  GinTag tag = GinTag::kInstance;
  uint64_t comm_id = 0;
  Context* net = nullptr;
  std::set<Comm*> comms;  // open collective comms (core.cc's mutex): finalize closes leftovers
};

// listen(): a net listen comm whose handle NCCL allgathers.
struct Listen {
  GinTag tag = GinTag::kListen;
  Instance* instance = nullptr;
  int dev = 0;
  void* net_listen = nullptr;
};

// createContext(): n contexts of one comm (v12+; v11 uses context 0 of the comm).
struct GinContext {
  GinTag tag = GinTag::kContext;
  Comm* comm = nullptr;
  int contexts = 1;
};

}  // namespace mesh::gin
