// SPDX-License-Identifier: Apache-2.0
// Real TCP connections over loopback for the TCP protocol tests (the window is the kernel's, as
// on a cable): a connected pair, a sender and a receiver TcpConnection over such pairs, and
// whether this host's kernel reports TCP send windows at all.
#pragma once

#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tcp_test_requests.h"
#include "transport/tcp/peer_window.h"
#include "transport/tcp/tcp_connection.h"
#include "util/socket_util.h"

namespace mesh::tcp::tcp_test {

// A connected TCP pair over 127.0.0.1 (blocking setup; the connection makes them non-blocking).
// `from` (host order, 127/8), when not 0, is the source address of `a`: another "cable".
// `rcvbuf`, when not 0, is b's SO_RCVBUF (set on the listener, so that the handshake already
// offers that window): the kernel then never grows b's window past it.
inline void tcp_pair(UniqueFd* a, UniqueFd* b, uint32_t from = 0, int rcvbuf = 0) {
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid());
  if (rcvbuf != 0) {
    ASSERT_EQ(setsockopt(listener.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
  }
  sockaddr_in addr = make_sockaddr(0x7f000001, 0);  // 127.0.0.1, any free port
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener.get(), 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  a->reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (from != 0) {
    sockaddr_in source = make_sockaddr(from, 0);
    ASSERT_EQ(bind(a->get(), reinterpret_cast<sockaddr*>(&source), sizeof(source)), 0);
  }
  ASSERT_EQ(connect(a->get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  b->reset(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(b->valid());
}

struct Endpoints {
  std::unique_ptr<TcpConnection> send;
  std::unique_ptr<TcpConnection> recv;
  std::vector<int> send_fds;  // the sender's sockets (owned by the connection), to inspect
};

// `rcvbuf`: the receiver's data sockets' SO_RCVBUF (tcp_pair), 0 for the kernel's autotuning.
inline Endpoints connect_tcp(const TcpOptions& options, size_t streams = 2, int rcvbuf = 0) {
  handshake::ConnectedSockets s, r;
  Endpoints e;
  tcp_pair(&s.control, &r.control);
  e.send_fds.push_back(s.control.get());
  for (size_t i = 0; i < streams; ++i) {
    UniqueFd a, b;
    tcp_pair(&a, &b, 0, rcvbuf);
    e.send_fds.push_back(a.get());
    s.data.push_back(std::move(a));
    r.data.push_back(std::move(b));
  }
  s.peer = r.local = "receiver";
  r.peer = s.local = "sender";
  e.send = std::make_unique<TcpConnection>(true, std::move(s), options);
  e.recv = std::make_unique<TcpConnection>(false, std::move(r), options);
  return e;
}

// Options for the window tests: no TCP_USER_TIMEOUT, the given blind budget and window bound,
// and messages above 4 KiB on the data streams.
inline TcpOptions window_test_options(size_t eager_bytes, size_t window_bytes) {
  TcpOptions o;
  o.user_timeout_ms = 0;
  o.eager_bytes = eager_bytes;
  o.eager_window_bytes = window_bytes;
  o.inline_bytes = 4096;
  return o;
}

// The kernel's TCP_INFO of a socket (a failed call is a test failure, and reads as zeros).
inline struct tcp_info tcp_info_of(int fd) {
  struct tcp_info info = {};
  socklen_t len = sizeof(info);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len), 0);
  return info;
}

// test() until done or `ms` milliseconds passed (then false: the request waits).
inline bool done_within(TcpConnection& c, void* req, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (test_once(c, req)) return true;
    std::this_thread::yield();
  }
  return false;
}

// Whether this kernel tells a TCP socket's send window (what peer_window_room reads); if not,
// `why` names the call that failed. qemu-user (the arm64 lane) translates neither TCP_INFO nor
// SIOCOUTQ: there the plugin sends nothing early on window room, which
// TcpEagerWindow.OffOrWithoutAnAnswerTheSendWaits covers, and these tests skip saying why.
inline bool kernel_reports_windows(std::string* why) {
  UniqueFd a, b;
  tcp_pair(&a, &b);
  uint64_t room = 0;
  if (!a.valid() || peer_window_room(a.get(), &room)) return true;  // no pair: the test fails
  int queued = 0;
  struct tcp_info info = {};
  socklen_t len = sizeof(info);
  if (ioctl(a.get(), SIOCOUTQ, &queued) != 0) {
    *why = std::string("ioctl(SIOCOUTQ): ") + std::strerror(errno);
  } else if (getsockopt(a.get(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) {
    *why = std::string("getsockopt(TCP_INFO): ") + std::strerror(errno);
  } else {
    *why = "TCP_INFO of " + std::to_string(len) + " bytes, without tcpi_snd_wnd";
  }
  return false;
}

#define SKIP_WITHOUT_WINDOWS()                                                                    \
  do {                                                                                            \
    std::string why;                                                                              \
    if (!::mesh::tcp::tcp_test::kernel_reports_windows(&why)) {                                   \
      GTEST_SKIP() << "this host (kernel or qemu-user) does not report TCP send windows (" << why \
                   << "): the plugin sends nothing early on window room here";                    \
    }                                                                                             \
  } while (0)

}  // namespace mesh::tcp::tcp_test
