// SPDX-License-Identifier: Apache-2.0
#include "harness/establish.h"

#include <cstring>
#include <thread>

#include "harness/call_timer.h"

namespace conformance {
namespace {

std::string fmt_ms(uint64_t us) {
  return std::to_string(us / 1000) + " ms";
}

// Records a call's duration and reports calls that block.
void note_call(EstablishOutcome& out, const char* what, size_t index, CallTimer& timer) {
  timer.stop();
  if (timer.wall_us() > out.max_call_us) out.max_call_us = timer.wall_us();
  const auto limit = static_cast<uint64_t>(kSetupCallLimit.count()) * 1000;
  if (timer.charged_us() > limit && out.ok) {
    out.ok = false;
    out.error = std::string(what) + " #" + std::to_string(index) + " took " +
                fmt_ms(timer.charged_us()) + " not counting CPU wait (" + fmt_ms(timer.wall_us()) +
                " wall; limit " + std::to_string(kSetupCallLimit.count()) + " ms)";
  }
}

void fail(EstablishOutcome& out, const std::string& why) {
  if (!out.ok) return;
  out.ok = false;
  out.error = why;
}

}  // namespace

bool listen_once(NetApi& net, void* ctx, int dev, HandleBytes* handle, void** listen_comm,
                 uint64_t* call_us, std::string* error) {
  // A guard zone after the 128 bytes: NCCL's handle buffer is exactly NCCL_NET_HANDLE_MAXSIZE.
  constexpr uint8_t kGuard = 0xCD;
  uint8_t buffer[kHandleBytes + 64];
  std::memset(buffer, kGuard, sizeof(buffer));
  *listen_comm = nullptr;
  CallTimer timer;
  const ncclResult_t rc = net.listen(ctx, dev, buffer, listen_comm);
  timer.stop();
  *call_us = timer.wall_us();
  if (rc != ncclSuccess) {
    *error = std::string("listen returned ") + result_name(rc);
    return false;
  }
  if (*listen_comm == nullptr) {
    *error = "listen returned ncclSuccess with a NULL listen comm";
    return false;
  }
  if (timer.charged_us() > static_cast<uint64_t>(kSetupCallLimit.count()) * 1000) {
    *error = "listen took " + fmt_ms(timer.charged_us()) + " (it must not block)";
    return false;
  }
  for (size_t i = kHandleBytes; i < sizeof(buffer); ++i) {
    if (buffer[i] != kGuard) {
      *error = "listen wrote past the " + std::to_string(kHandleBytes) + "-byte handle (offset " +
               std::to_string(i) + ")";
      return false;
    }
  }
  std::memcpy(handle->data(), buffer, kHandleBytes);
  return true;
}

EstablishOutcome establish(NetApi& net, std::vector<ConnectItem>& connects,
                           const std::vector<void*>& listen_comms, Clock::time_point deadline) {
  EstablishOutcome out;
  out.connects.resize(connects.size());
  out.accepts.resize(listen_comms.size());
  std::vector<Clock::time_point> connect_start(connects.size());
  std::vector<Clock::time_point> accept_start(listen_comms.size());
  size_t pending = connects.size() + listen_comms.size();

  while (pending > 0) {
    bool progressed = false;
    for (size_t i = 0; i < connects.size(); ++i) {
      CallOutcome& c = out.connects[i];
      if (c.done) continue;
      if (c.calls == 0) connect_start[i] = Clock::now();
      // NCCL hands a pointer to a NULL device handle; a host plugin must leave it alone.
      ncclNetDeviceHandle_v11_t* dev_handle = nullptr;
      void* comm = nullptr;
      CallTimer timer;
      const ncclResult_t rc = net.connect(connects[i].ctx, connects[i].dev,
                                          connects[i].handle.data(), &comm, &dev_handle);
      note_call(out, "connect", i, timer);
      ++c.calls;
      c.elapsed_us = elapsed_us(connect_start[i]);
      if (dev_handle != nullptr) fail(out, "connect #" + std::to_string(i) + " set *sendDevComm");
      if (rc != ncclSuccess) {
        c.rc = rc;
        c.done = true;
        --pending;
        progressed = true;
        // NCCL's rule: an error with a partially created comm is followed by closeSend.
        if (comm != nullptr) net.close_send(comm);
        if (!connects[i].expect_error) {
          fail(out, "connect #" + std::to_string(i) + " returned " + result_name(rc) + " after " +
                        std::to_string(c.calls) + " calls");
        }
      } else if (comm != nullptr) {
        c.done = true;
        --pending;
        progressed = true;
        if (connects[i].expect_error) {
          net.close_send(comm);
          fail(out, "connect #" + std::to_string(i) + " with a bad handle succeeded");
        } else {
          c.comm = comm;
        }
      }
    }
    for (size_t i = 0; i < listen_comms.size(); ++i) {
      CallOutcome& a = out.accepts[i];
      if (a.done) continue;
      if (a.calls == 0) accept_start[i] = Clock::now();
      ncclNetDeviceHandle_v11_t* dev_handle = nullptr;
      void* comm = nullptr;
      CallTimer timer;
      const ncclResult_t rc = net.accept(listen_comms[i], &comm, &dev_handle);
      note_call(out, "accept", i, timer);
      ++a.calls;
      a.elapsed_us = elapsed_us(accept_start[i]);
      if (dev_handle != nullptr) fail(out, "accept #" + std::to_string(i) + " set *recvDevComm");
      if (rc != ncclSuccess) {
        a.rc = rc;
        a.done = true;
        --pending;
        progressed = true;
        if (comm != nullptr) net.close_recv(comm);
        fail(out, "accept #" + std::to_string(i) + " returned " + result_name(rc));
      } else if (comm != nullptr) {
        a.comm = comm;
        a.done = true;
        --pending;
        progressed = true;
        // NCCL closes the listen comm right after a successful accept.
        CallTimer close_timer;
        a.close_listen_rc = net.close_listen(listen_comms[i]);
        note_call(out, "closeListen", i, close_timer);
        if (a.close_listen_rc != ncclSuccess) {
          fail(out, std::string("closeListen after accept returned ") +
                        result_name(static_cast<ncclResult_t>(a.close_listen_rc)));
        }
      }
    }
    if (pending == 0) break;
    if (Clock::now() > deadline) {
      for (size_t i = 0; i < connects.size(); ++i) {
        if (!out.connects[i].done) {
          fail(out, "connect #" + std::to_string(i) + " still pending after " +
                        std::to_string(out.connects[i].calls) + " calls (" +
                        fmt_ms(out.connects[i].elapsed_us) + ")");
        }
      }
      for (size_t i = 0; i < listen_comms.size(); ++i) {
        if (!out.accepts[i].done) {
          fail(out, "accept #" + std::to_string(i) + " still pending after " +
                        std::to_string(out.accepts[i].calls) + " calls (" +
                        fmt_ms(out.accepts[i].elapsed_us) + ")");
        }
      }
      break;
    }
    // NCCL's service thread polls in a loop; pausing briefly when nothing moved keeps the suite
    // from starving the plugin's own threads on a 2-core machine.
    if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

}  // namespace conformance
