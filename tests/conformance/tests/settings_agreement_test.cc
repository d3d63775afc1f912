// SPDX-License-Identifier: Apache-2.0
// Hosts whose tuner settings differ (NCCL_MESH_TUNER, NCCL_MESH_TUNER_MIN_BYTES) would make NCCL's
// ranks pick different algorithms and hang. The first connection between them must fail instead,
// at both ends and at once (no connect timeout), each end with one WARN that names the setting,
// both values and both hosts. Two spawned peers play the two hosts, each with its own settings;
// this process only carries the handle between them, as NCCL's bootstrap does.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/fixture.h"

namespace conformance {
namespace {

const Millis kReplyWait = scaled(30000);

size_t count_with(const std::vector<std::string>& lines, const std::string& part) {
  return static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(part) != std::string::npos;
  }));
}

bool has_line_with_all(const std::vector<std::string>& lines,
                       const std::vector<std::string>& parts) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](const std::string& p) { return l.find(p) != std::string::npos; });
  });
}

std::vector<std::string> warnings_of(PeerProcess& p) {
  WarningsReply rep;
  EXPECT_TRUE(p.start(Op::kWarnings) && p.finish(&rep, kReplyWait)) << p.error();
  return rep.lines;
}

class SettingsAgreementTest : public ::testing::TestWithParam<int> {
 protected:
  // `connector_env` and `listener_env` are the two hosts' settings; returns the outcomes.
  void connect_between(const std::vector<std::string>& connector_env,
                       const std::vector<std::string>& listener_env, EstablishReply* connected,
                       EstablishReply* accepted, Millis* took, bool expect_error = true) {
    std::string error;
    connector_ = PeerProcess::spawn(peer_path(), plugin_path(), &error, connector_env);
    ASSERT_TRUE(connector_) << error;
    listener_ = PeerProcess::spawn(peer_path(), plugin_path(), &error, listener_env);
    ASSERT_TRUE(listener_) << error;
    for (PeerProcess* p : {connector_.get(), listener_.get()}) {
      InitReply rep;
      ASSERT_TRUE(
          p->call(Op::kInit, InitRequest{static_cast<uint8_t>(GetParam()), 1}, &rep, kReplyWait))
          << p->error();
      ASSERT_EQ(rep.rc, ncclSuccess) << rep.error;
    }
    ListenReply listened;
    ASSERT_TRUE(listener_->call(Op::kListen, ListenRequest{0, 0, 1}, &listened, kReplyWait));
    ASSERT_EQ(listened.error, "");
    EstablishRequest accept;
    accept.timeout_ms = static_cast<uint32_t>(kReplyWait.count());
    accept.accepts = listened.listen_ids;
    EstablishRequest connect;
    connect.timeout_ms = static_cast<uint32_t>(kReplyWait.count());
    connect.connects = {RemoteConnect{0, 0, listened.handles[0], expect_error}};
    const auto start = Clock::now();
    ASSERT_TRUE(listener_->start(Op::kEstablish, accept));
    ASSERT_TRUE(connector_->call(Op::kEstablish, connect, connected, kReplyWait))
        << connector_->error();
    ASSERT_TRUE(listener_->finish(accepted, kReplyWait)) << listener_->error();
    *took = std::chrono::duration_cast<Millis>(Clock::now() - start);
  }

  void expect_refused_at_both_ends(const std::vector<std::string>& connector_env,
                                   const std::vector<std::string>& listener_env,
                                   const std::string& setting, const std::string& connector_value,
                                   const std::string& listener_value) {
    EstablishReply connected, accepted;
    Millis took{};
    ASSERT_NO_FATAL_FAILURE(
        connect_between(connector_env, listener_env, &connected, &accepted, &took));
    ASSERT_EQ(connected.outcome.connects.size(), 1u);
    EXPECT_TRUE(connected.outcome.connects[0].done) << connected.outcome.error;
    EXPECT_NE(connected.outcome.connects[0].rc, ncclSuccess) << "the connect must fail";
    ASSERT_EQ(accepted.outcome.accepts.size(), 1u);
    EXPECT_NE(accepted.outcome.accepts[0].rc, ncclSuccess)
        << "the accept must fail too, or NCCL's peer rank would wait forever: "
        << accepted.outcome.error;
    // The refusal is immediate: far below the suite's connect timeout (a hang would hit it).
    EXPECT_LT(took.count(), connect_timeout().count())
        << "both ends must fail at once, not at a timeout";
    const auto mine = warnings_of(*connector_);
    EXPECT_TRUE(has_line_with_all(
        mine, {setting + " is '" + connector_value + "' on this host",
               "'" + listener_value + "' on the peer's host", "connect to peer "}))
        << "connector's WARN lines:\n"
        << join_lines(mine);
    EXPECT_EQ(count_with(mine, "settings differ"), 1u) << join_lines(mine);
    const auto theirs = warnings_of(*listener_);
    EXPECT_TRUE(
        has_line_with_all(theirs, {setting + " is '" + listener_value + "' on this host (",
                                   "'" + connector_value + "' on the connecting host (", "accept"}))
        << "listener's WARN lines:\n"
        << join_lines(theirs);
    EXPECT_EQ(count_with(theirs, "settings differ"), 1u) << join_lines(theirs);
  }

  std::unique_ptr<PeerProcess> connector_, listener_;
};

TEST_P(SettingsAgreementTest, TunerModeThatDiffersFailsBothEndsWithOneWarn) {
  expect_refused_at_both_ends({"NCCL_MESH_TUNER=ring"}, {"NCCL_MESH_TUNER=auto"}, "NCCL_MESH_TUNER",
                              "ring", "auto");
}

TEST_P(SettingsAgreementTest, TunerThresholdThatDiffersFailsBothEndsWithOneWarn) {
  expect_refused_at_both_ends({}, {"NCCL_MESH_TUNER_MIN_BYTES=1M"}, "NCCL_MESH_TUNER_MIN_BYTES",
                              "131072", "1048576");
}

TEST_P(SettingsAgreementTest, EqualSettingsSpelledDifferentlyConnect) {
  // 128K and 131072 are one value: only values are compared, never the text.
  EstablishReply connected, accepted;
  Millis took{};
  ASSERT_NO_FATAL_FAILURE(connect_between({"NCCL_MESH_TUNER_MIN_BYTES=128K"},
                                          {"NCCL_MESH_TUNER_MIN_BYTES=131072"}, &connected,
                                          &accepted, &took, false));
  ASSERT_EQ(connected.outcome.connects.size(), 1u);
  EXPECT_TRUE(connected.outcome.ok) << connected.outcome.error;
  EXPECT_TRUE(accepted.outcome.ok) << accepted.outcome.error;
}

MESH_INSTANTIATE_ALL_VERSIONS(SettingsAgreementTest);

}  // namespace
}  // namespace conformance
