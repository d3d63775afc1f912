// SPDX-License-Identifier: Apache-2.0
// Requests the test process sends its peer, and the peer's replies. Each request is answered by
// exactly one reply, in order. Long requests (establish, transfer) run while the test process
// drives its own side, so both sides progress at once just as two NCCL ranks do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/establish.h"
#include "harness/transfer.h"
#include "harness/wire.h"

namespace conformance {

enum class Op : uint8_t {
  kInit = 1,   // load the plugin version, create contexts
  kListen,     // listen N times
  kEstablish,  // connect to handles and accept on listen comms, interleaved
  kTransfer,   // run streams
  kClose,      // closeSend/closeRecv/closeListen one comm
  kFinalize,   // v11 finalize of one context
  kWarnings,   // WARN lines logged so far
  kQuit,       // close everything, finalize, exit 0
};

enum class CommKind : uint8_t { kSend = 0, kRecv = 1, kListen = 2 };

// Every request starts with its Op byte; requests are plain structs with encode/decode.
struct InitRequest {
  uint8_t version = 11;
  uint8_t contexts = 1;
};
struct InitReply {
  int32_t rc = 0;  // worst init result
  int32_t ndev = 0;
  uint32_t inherited_fds = 0;  // fds other than stdio and the control channel at peer start-up
  std::string error;
};

struct ListenRequest {
  uint32_t ctx = 0;
  int32_t dev = 0;
  uint32_t count = 1;
};
struct ListenReply {
  std::string error;  // empty on success
  std::vector<uint32_t> listen_ids;
  std::vector<HandleBytes> handles;
};

struct RemoteConnect {
  uint32_t ctx = 0;
  int32_t dev = 0;
  HandleBytes handle{};
  bool expect_error = false;
};
struct EstablishRequest {
  uint32_t timeout_ms = 10000;
  std::vector<RemoteConnect> connects;
  std::vector<uint32_t> accepts;  // listen ids
};
struct EstablishReply {
  EstablishOutcome outcome;        // comm pointers are not sent
  std::vector<uint32_t> send_ids;  // per connect (kNoId when none)
  std::vector<uint32_t> recv_ids;  // per accept
};
inline constexpr uint32_t kNoId = UINT32_MAX;

struct TransferRequest {
  uint32_t timeout_ms = 60000;
  std::vector<StreamSpec> streams;  // comm_id: the peer's send or recv id
};
struct TransferReply {
  std::vector<StreamResult> results;
};

struct CloseRequest {
  CommKind kind = CommKind::kSend;
  uint32_t id = 0;
};
struct StatusReply {  // close, finalize
  int32_t rc = 0;
  uint64_t call_us = 0;  // time charged to the call (see CallTimer)
  std::string error;
};

struct FinalizeRequest {
  uint32_t ctx = 0;
};

struct WarningsReply {
  std::vector<std::string> lines;  // all WARN lines of the peer so far
};

void encode(Writer& w, const InitRequest& m);
void encode(Writer& w, const InitReply& m);
void encode(Writer& w, const ListenRequest& m);
void encode(Writer& w, const ListenReply& m);
void encode(Writer& w, const EstablishRequest& m);
void encode(Writer& w, const EstablishReply& m);
void encode(Writer& w, const TransferRequest& m);
void encode(Writer& w, const TransferReply& m);
void encode(Writer& w, const CloseRequest& m);
void encode(Writer& w, const StatusReply& m);
void encode(Writer& w, const FinalizeRequest& m);
void encode(Writer& w, const WarningsReply& m);

void decode(Reader& r, InitRequest* m);
void decode(Reader& r, InitReply* m);
void decode(Reader& r, ListenRequest* m);
void decode(Reader& r, ListenReply* m);
void decode(Reader& r, EstablishRequest* m);
void decode(Reader& r, EstablishReply* m);
void decode(Reader& r, TransferRequest* m);
void decode(Reader& r, TransferReply* m);
void decode(Reader& r, CloseRequest* m);
void decode(Reader& r, StatusReply* m);
void decode(Reader& r, FinalizeRequest* m);
void decode(Reader& r, WarningsReply* m);

}  // namespace conformance
