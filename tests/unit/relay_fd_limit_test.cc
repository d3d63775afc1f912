// SPDX-License-Identifier: Apache-2.0
// The relay agent when its process runs out of file descriptors: accept4 on the relay port and
// on the local socket then fails with EMFILE while connections wait in their backlogs. Both
// listeners are level-triggered, so an agent that only returned would be woken again at once and
// spin at 100% of a core for as long as the shortage lasts (in nccl-mesh-relayd, or in a rank's
// process that is its host's agent, beside NCCL's threads). It must stay near idle, say once what
// limit was hit and what to do, and serve the waiting request once descriptors are free again.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fd_exhaustion.h"
#include "relay/agent.h"
#include "relay/request.h"
#include "topology/emulated_mesh.h"
#include "util/socket_util.h"
#include "warn_capture.h"

namespace mesh::relay {
namespace {

// Not relay_agent_test's port (ctest runs the two binaries side by side).
uint16_t test_port() {
  return static_cast<uint16_t>(21000 + (getpid() + 7919) % 20000);
}

TEST(RelayAgentFdLimit, ExhaustedFdLimitKeepsTheAgentIdleAndServesTheWaitingRequestLater) {
#ifdef MESH_FD_LIMIT_TEST_UNDER_ASAN
  GTEST_SKIP() << "not under ASan+UBSan: its runtime needs free descriptors (UBSan's vptr check "
                  "opens a pipe), which this test exhausts on purpose; release and TSan run it";
#endif
  test::WarnCapture warns;
  // Rank 0 of an emulated line of two: the relay port on 127.77.0.1, its neighbour 127.77.0.2.
  AgentConfig config;
  config.port = test_port();
  config.interfaces = topology::emulated_interfaces({topology::EmulatedShape::kLine, 2, 0});
  config.bind_interface_addresses = true;
  Agent agent;
  std::string why;
  ASSERT_TRUE(agent.start(config, &why)) << why;
  if (!agent.is_agent()) GTEST_SKIP() << "relay port " << config.port << " is taken on loopback";

  // Clients made while descriptors are available; connect() needs none.
  UniqueFd request(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  UniqueFd local(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(request.valid() && local.valid());
  const sockaddr_in from = make_sockaddr(*parse_ipv4("127.77.0.2"), 0);
  ASSERT_EQ(bind(request.get(), reinterpret_cast<const sockaddr*>(&from), sizeof(from)), 0);

  test::FdExhaustion exhaustion(512);
  ASSERT_TRUE(exhaustion.lowered()) << "cannot lower RLIMIT_NOFILE";
  ASSERT_EQ(exhaustion.errno_at_end(), EMFILE) << "descriptors not exhausted";

  // Both wait in a backlog: a relay request on the relay port, a plugin process on the local
  // socket. Each listener alone would keep the agent's loop awake.
  const sockaddr_in to = make_sockaddr(*parse_ipv4("127.77.0.1"), config.port);
  ASSERT_EQ(connect(request.get(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)), 0)
      << errno_text(errno);
  const std::string name = agent_socket_name(config);
  sockaddr_un un{};
  const socklen_t len = make_unix_address(name, &un);
  ASSERT_EQ(connect(local.get(), reinterpret_cast<const sockaddr*>(&un), len), 0)
      << errno_text(errno);

  // Let the agent meet EMFILE, then measure over 1 s of wall time. This thread only sleeps, so
  // the process's CPU time is the agent thread's.
  using Clock = std::chrono::steady_clock;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double cpu0 = test::process_cpu_seconds();
  const auto wall0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu = test::process_cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();
  exhaustion.release();

  const double share = cpu / wall;
  std::printf(
      "relay agent CPU while accept4 fails with EMFILE: %.1f%% of one core (%.3f s in "
      "%.3f s)\n",
      100.0 * share, cpu, wall);
  EXPECT_LT(share, 0.20) << "the relay agent spins while the fd limit is exhausted";
  // One WARN naming the limit and the fix, however many times accept4 failed in that second.
  const std::vector<std::string> limit_warns = test::WarnCapture::containing("RLIMIT_NOFILE");
  ASSERT_EQ(limit_warns.size(), 1u) << "expected one rate-limited WARN about the fd limit";
  std::printf("%s\n", limit_warns[0].c_str());
  EXPECT_NE(limit_warns[0].find("ulimit -n"), std::string::npos) << limit_warns[0];
  EXPECT_NE(limit_warns[0].find("512"), std::string::npos) << limit_warns[0];
  EXPECT_NE(limit_warns[0].find(std::to_string(config.port)), std::string::npos) << limit_warns[0];

  // Descriptors are free again: the request that waited in the backlog is accepted and read
  // (garbage: answered "malformed"), well within its connect timeout.
  timeval tv{5, 0};
  setsockopt(request.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  uint8_t junk[kRequestSize];
  std::memset(junk, 0x5a, sizeof(junk));
  ASSERT_TRUE(send_all(request.get(), junk, sizeof(junk)));
  uint8_t reply[kRelayReplySize];
  ASSERT_TRUE(recv_all(request.get(), reply, sizeof(reply)))
      << "the waiting relay request got no answer once descriptors were free";
  ReplyCode code{};
  ASSERT_TRUE(decode_relay_reply(reply, &code));
  EXPECT_EQ(code, ReplyCode::kMalformed);
  agent.stop();
}

}  // namespace
}  // namespace mesh::relay
