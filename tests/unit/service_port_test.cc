// SPDX-License-Identifier: Apache-2.0
// The handshake service's port (Service::start): a free one when none is fixed, and a fixed
// NCCL_MESH_HANDSHAKE_PORT that another rank on the host already holds fails with a reason that
// says so and what to do (issue 14: several ranks per host with a fixed port).
#include <gtest/gtest.h>

#include <string>

#include "handshake/service.h"

namespace mesh::handshake {
namespace {

constexpr uint32_t kLoopback = 0x7F000001;

TEST(ServicePortTest, AFixedPortHeldByAnotherRankFailsNamingTheSettingAndTheFix) {
  Service first;
  std::string why;
  ASSERT_TRUE(first.start({Ipv4Prefix{kLoopback, 8}}, 0, 5000, 256, &why)) << why;
  ASSERT_NE(first.port(), 0);

  Service second;  // the second rank on this host, with the same fixed port
  EXPECT_FALSE(second.start({Ipv4Prefix{kLoopback, 8}}, first.port(), 5000, 256, &why));
  EXPECT_FALSE(second.running());
  const std::string port = std::to_string(first.port());
  EXPECT_NE(why.find("NCCL_MESH_HANDSHAKE_PORT=" + port + " is in use"), std::string::npos) << why;
  EXPECT_NE(why.find("another rank"), std::string::npos) << why;
  EXPECT_NE(why.find("leave NCCL_MESH_HANDSHAKE_PORT unset"), std::string::npos) << why;
  EXPECT_NE(why.find("127.0.0.1:" + port), std::string::npos) << why;

  // Without a fixed port both ranks get one each.
  why.clear();
  ASSERT_TRUE(second.start({Ipv4Prefix{kLoopback, 8}}, 0, 5000, 256, &why)) << why;
  EXPECT_NE(second.port(), first.port());
  second.stop();
  first.stop();
}

}  // namespace
}  // namespace mesh::handshake
