// SPDX-License-Identifier: Apache-2.0
// A hostile peer against one end of a TCP connection (transport/tcp/tcp_connection.h): the input
// is a script that posts sends or receives as NCCL's proxy does, tests them, and plays the other
// end on the raw sockets (loopback TCP, so the kernel reports windows and the clear-to-sends on
// request path runs): headers with any sequence number, flags, part count and size on any
// data socket (where they belong) or on the control socket (where only asks do), asks, credit
// requests, clear-to-sends that skip or repeat, stray data on the data sockets, EOF. Whatever the
// peer writes, the connection must not crash, write outside a posted buffer (ASan), read outside
// a send buffer, report a received size beyond the buffer, or block.
#include <fuzzer/FuzzedDataProvider.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "handshake/connected_sockets.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/wire.h"
#include "util/log.h"
#include "util/socket_util.h"

namespace {

using namespace mesh;
using namespace mesh::tcp;

void quiet_logger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

// One listener for the process: every connected pair is made through it and accepted at once,
// so nothing of one input survives into the next.
int listener() {
  static int fd = [] {
    const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = make_sockaddr(0x7f000001, 0);
    if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 16) != 0)
      std::abort();
    return l;
  }();
  return fd;
}

bool tcp_pair(UniqueFd* mine, UniqueFd* raw) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getsockname(listener(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  mine->reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!mine->valid() || connect(mine->get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    return false;
  raw->reset(accept4(listener(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  return raw->valid();
}

struct Posted {
  void* req = nullptr;
  std::unique_ptr<uint8_t[]> buf;  // exactly the posted size: ASan sees any byte beyond
  size_t size = 0;
};

enum Op : uint8_t {
  kPost,
  kTestAll,
  kHeader,
  kClearToSend,
  kData,
  kRawControl,
  kDrain,
  kEof,
  kOpCount
};

void drain(int fd) {
  static uint8_t sink[256 * 1024];
  while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
}

void write_some(int fd, const uint8_t* p, size_t n) {
  if (n > 0) (void)send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_logger(quiet_logger);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool sender = in.ConsumeBool();
  const size_t streams = in.ConsumeIntegralInRange<size_t>(1, 2);
  TcpOptions o;
  o.user_timeout_ms = 0;
  o.eager_bytes = in.ConsumeBool() ? 64 * 1024 : 0;
  o.eager_window_bytes = in.ConsumeBool() ? 1024 * 1024 : 0;
  o.inline_bytes = in.ConsumeBool() ? 64 * 1024 : 4096;
  o.min_chunk = in.ConsumeBool() ? 128 * 1024 : 4096;

  handshake::ConnectedSockets s;
  UniqueFd raw_control;
  std::vector<UniqueFd> raw_data(streams);
  if (!tcp_pair(&s.control, &raw_control)) return 0;
  for (size_t i = 0; i < streams; ++i) {
    UniqueFd d;
    if (!tcp_pair(&d, &raw_data[i])) return 0;
    s.data.push_back(std::move(d));
  }
  s.peer = "fuzzed peer";
  s.local = "fuzz";
  auto conn = std::make_unique<TcpConnection>(sender, std::move(s), o);

  std::array<Posted, 8> posted{};  // NCCL keeps at most NCCL_STEPS (8) in flight per connection
  bool failed = false;
  uint32_t seq_hint = 0;
  std::vector<uint8_t> bytes;
  auto test_all = [&] {
    for (Posted& p : posted) {
      if (p.req == nullptr || failed) continue;
      int done = 0;
      int got = 0;
      if (conn->test(static_cast<RequestHeader*>(p.req), &done, &got) != ncclSuccess) {
        failed = true;  // NCCL stops using a connection after an error
        return;
      }
      if (!done) continue;
      if (!sender && (got < 0 || static_cast<size_t>(got) > p.size)) __builtin_trap();
      p.req = nullptr;
      p.buf.reset();
    }
  };

  for (int steps = 0; steps < 256 && in.remaining_bytes() > 0; ++steps) {
    const auto op = static_cast<Op>(in.ConsumeIntegralInRange<uint8_t>(0, kOpCount - 1));
    switch (op) {
      case kPost: {
        Posted* slot = nullptr;
        for (Posted& p : posted)
          if (p.req == nullptr) slot = &p;
        const size_t n = in.ConsumeIntegralInRange<size_t>(0, 300 * 1024);
        if (slot == nullptr || failed) break;
        slot->size = n;
        slot->buf.reset(new uint8_t[n == 0 ? 1 : n]());
        void* req = nullptr;
        ncclResult_t rc;
        if (sender) {
          rc = conn->isend(slot->buf.get(), n, 0, nullptr, &req);
        } else {
          void* d = slot->buf.get();
          size_t sz = n;
          int tag = 0;
          MemoryRegion* mr = nullptr;
          rc = conn->irecv(1, &d, &sz, &tag, &mr, &req);
        }
        if (rc != ncclSuccess) failed = true;
        slot->req = req;  // null: "retry later"
        if (req == nullptr) slot->buf.reset();
        break;
      }
      case kTestAll:
        test_all();
        break;
      case kHeader: {
        MessageHeader h;
        h.seq = in.ConsumeBool() ? seq_hint++ : in.ConsumeIntegral<uint32_t>();
        h.flags = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint16_t>(0, 15)
                                   : in.ConsumeIntegral<uint16_t>();
        h.nparts = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint16_t>(0, 3)
                                    : in.ConsumeIntegral<uint16_t>();
        h.size = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 320 * 1024)
                                  : in.ConsumeIntegral<uint64_t>();
        uint8_t b[kHeaderSize];
        encode_header(h, b);
        // Padding that is not zero, now and then.
        if (in.ConsumeBool()) b[kHeaderFieldsSize + in.ConsumeIntegralInRange<size_t>(0, 47)] = 1;
        // Where it goes: a data socket (a header, with payload bytes behind it) or the control
        // socket (an ask's 16 bytes, or a header where none belongs).
        const size_t i = in.ConsumeIntegralInRange<size_t>(0, streams);
        const int fd = i == streams ? raw_control.get() : raw_data[i].get();
        write_some(fd, b, i == streams ? kAskSize : sizeof(b));
        if (i < streams && in.ConsumeBool()) {
          bytes.assign(in.ConsumeIntegralInRange<size_t>(0, 70 * 1024), 0x5a);
          write_some(fd, bytes.data(), bytes.size());
        }
        break;
      }
      case kClearToSend: {
        ClearToSend c;
        c.seq = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 40)
                                 : in.ConsumeIntegral<uint32_t>();
        c.reserved = in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint32_t>();
        c.capacity = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 400 * 1024)
                                      : in.ConsumeIntegral<uint64_t>();
        uint8_t b[kCtsSize];
        encode_cts(c, b);
        write_some(raw_control.get(), b, sizeof(b));
        break;
      }
      case kData: {
        const size_t i = in.ConsumeIntegralInRange<size_t>(0, streams - 1);
        bytes.assign(in.ConsumeIntegralInRange<size_t>(1, 256 * 1024), 0xa5);
        write_some(raw_data[i].get(), bytes.data(), bytes.size());
        break;
      }
      case kRawControl: {
        bytes = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(1, 64));
        write_some(raw_control.get(), bytes.data(), bytes.size());
        break;
      }
      case kDrain:
        drain(raw_control.get());
        for (UniqueFd& d : raw_data) drain(d.get());
        break;
      case kEof: {
        const size_t i = in.ConsumeIntegralInRange<size_t>(0, streams);
        UniqueFd& fd = i == streams ? raw_control : raw_data[i];
        if (in.ConsumeBool())
          shutdown(fd.get(), SHUT_WR);
        else
          fd.reset();  // closed: a reset or EOF, and sends fail
        break;
      }
      default:
        break;
    }
  }
  // Let what is in flight finish or fail, as NCCL's proxy would keep calling test().
  for (int i = 0; i < 32 && !failed; ++i) {
    if (raw_control.valid()) drain(raw_control.get());
    for (UniqueFd& d : raw_data)
      if (d.valid()) drain(d.get());
    test_all();
  }
  conn->close();
  conn.reset();  // before the buffers it may still point at
  return 0;
}
