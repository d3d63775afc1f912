// SPDX-License-Identifier: Apache-2.0
// Posting and completing one TcpConnection's requests from a test, as NCCL's proxy does, and
// the byte pattern the TCP tests send. Shared by the TCP protocol tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "transport/tcp/tcp_connection.h"

namespace mesh::tcp::tcp_test {

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 10));
  return v;
}

// isend's request, or null ("retry later").
inline void* post_send(TcpConnection& c, std::vector<uint8_t>& data) {
  void* req = nullptr;
  EXPECT_EQ(c.isend(data.data(), data.size(), 0, nullptr, &req), ncclSuccess);
  return req;
}

inline void* post_recv(TcpConnection& c, std::vector<uint8_t>& buf) {
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 0;
  MemoryRegion* mr = nullptr;
  void* req = nullptr;
  EXPECT_EQ(c.irecv(1, &data, &size, &tag, &mr, &req), ncclSuccess);
  EXPECT_NE(req, nullptr);
  return req;
}

// One test() call: whether the request is done (*size gets the reported size then).
inline bool test_once(TcpConnection& c, void* req, int* size = nullptr) {
  int done = 0;
  int sz = 0;
  EXPECT_EQ(c.test(static_cast<RequestHeader*>(req), &done, &sz), ncclSuccess);
  if (done && size != nullptr) *size = sz;
  return done != 0;
}

// test() until done (or an error, returned), at most 10 s. *size gets the reported size.
inline ncclResult_t wait_done(TcpConnection& c, void* req, int* size = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    int done = 0;
    int sz = 0;
    const ncclResult_t rc = c.test(static_cast<RequestHeader*>(req), &done, &sz);
    if (rc != ncclSuccess) return rc;
    if (done) {
      if (size != nullptr) *size = sz;
      return ncclSuccess;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "request not done after 10 s";
      return ncclInternalError;
    }
    std::this_thread::yield();
  }
}

}  // namespace mesh::tcp::tcp_test
