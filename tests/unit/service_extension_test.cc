// SPDX-License-Identifier: Apache-2.0
// The handshake's transport extension (hello.h version 2): a control hello followed by setup
// bytes (RDMA: the connector's QPs), which the listener's extension handler turns into its own
// side of the transport and a reply. The handler runs on the service thread without the
// service mutex (RDMA QP setup takes milliseconds, more on a loaded host), so NCCL's calls go on
// meanwhile; the listen may close while it runs; it may refuse. Drives handshake::Service
// directly over loopback with a handler the test holds until it lets it go.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "handshake/service.h"
#include "util/socket_util.h"
#include "warn_capture.h"

namespace mesh::handshake {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kLoopback = 0x7F000001;

// An extension handler that records what it got and waits until release() says what to do.
class HeldHandler {
 public:
  ExtensionHandler handler() {
    return [this](const std::vector<uint8_t>& ext, std::vector<uint8_t>* reply,
                  std::shared_ptr<void>* state, std::string* why) {
      std::unique_lock<std::mutex> lock(mu_);
      got_ = ext;
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
      *reply = reply_;
      *state = std::move(state_);  // the service holds the only reference from here
      *why = why_;
      return accept_;
    };
  }
  // Waits until the service thread is inside the handler.
  bool wait_entered(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return entered_; });
  }
  void release(bool accept, std::vector<uint8_t> reply, std::shared_ptr<void> state,
               std::string why = "") {
    std::lock_guard<std::mutex> lock(mu_);
    accept_ = accept;
    reply_ = std::move(reply);
    state_ = std::move(state);
    why_ = std::move(why);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<uint8_t> got() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool released_ = false;
  bool accept_ = false;
  std::vector<uint8_t> got_, reply_;
  std::shared_ptr<void> state_;
  std::string why_;
};

class ServiceExtensionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_.set_extension_handler(held_.handler());
    std::string why;
    ASSERT_TRUE(service_.start({Ipv4Prefix{kLoopback, 8}}, 0, /*timeout_ms=*/20000,
                               /*max_pending=*/256, &why))
        << why;
  }
  void TearDown() override {
    held_.release(false, {}, nullptr, "test over");  // never leave the service thread waiting
    service_.stop();
  }
  // A connect as the RDMA transport makes it: the control socket only, with setup bytes.
  ConnectRequest request(const std::shared_ptr<ListenEndpoint>& ep) {
    ConnectRequest req;
    req.nonce = ep->nonce;
    req.port = service_.port();
    req.rails = {topology::Rail{0, Ipv4Prefix{kLoopback, 8}, kLoopback}};
    req.ndata = 0;
    req.extension = {7, 8, 9};
    req.timeout_ms = 20000;
    return req;
  }
  static ConnectStatus wait_for(const OutgoingConnect& c, std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (c.status.load() == ConnectStatus::kPending && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return c.status.load();
  }

  test::WarnCapture warns_;
  HeldHandler held_;
  Service service_;
};

TEST_F(ServiceExtensionTest, NcclsCallsGoOnWhileTheHandlerRunsAndItsStateReachesAccept) {
  std::shared_ptr<ListenEndpoint> ep = service_.open_listen();
  std::shared_ptr<OutgoingConnect> c = service_.start_connect(request(ep));
  ASSERT_TRUE(held_.wait_entered(std::chrono::seconds(10))) << "the handler never ran";
  EXPECT_EQ(held_.got(), (std::vector<uint8_t>{7, 8, 9}));

  // The handler holds the service thread; each call NCCL makes must still return at once. A
  // handler run under the service mutex would hold every one of them until the release below
  // (they run on another thread, so that this one can still release it then).
  auto calls = std::async(std::launch::async, [&] {
    ConnectedSockets none;
    service_.close_listen(service_.open_listen());
    service_.cancel_connect(service_.start_connect(request(ep)));
    return service_.take_ready(ep, &none);
  });
  const bool returned = calls.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "NCCL's calls waited more than 2 s for the extension handler";
  EXPECT_EQ(c->status.load(), ConnectStatus::kPending);

  auto state = std::make_shared<int>(42);
  held_.release(true, {1, 2, 3, 4}, state);
  EXPECT_FALSE(calls.get()) << "a connection was ready before its transport setup finished";
  ASSERT_EQ(wait_for(*c, std::chrono::seconds(10)), ConnectStatus::kDone) << c->error;
  EXPECT_EQ(c->result.peer_extension, (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_TRUE(c->result.data.empty());

  ConnectedSockets accepted;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!service_.take_ready(ep, &accepted) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(accepted.control.valid()) << "the connection never became ready";
  EXPECT_EQ(accepted.transport_state, state) << "accept did not get the handler's state";
  service_.close_listen(ep);
  EXPECT_TRUE(test::WarnCapture::take().empty());
}

// A plain TCP connection (no extension): the connector's TCP eager window travels in its hellos
// and reaches accept, whose receive side sends clear-to-sends unasked by it (transport/tcp/
// wire.h): a receiver that used its own host's setting instead could leave a sender that
// counts on a record waiting for it.
TEST_F(ServiceExtensionTest, APlainConnectionCarriesTheConnectorsTcpWindowToAccept) {
  std::shared_ptr<ListenEndpoint> ep = service_.open_listen();
  ConnectRequest req = request(ep);
  req.ndata = 2;
  req.extension.clear();
  req.tcp_window = 3u << 18;
  std::shared_ptr<OutgoingConnect> c = service_.start_connect(req);
  ASSERT_EQ(wait_for(*c, std::chrono::seconds(10)), ConnectStatus::kDone) << c->error;
  ConnectedSockets accepted;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!service_.take_ready(ep, &accepted) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(accepted.control.valid()) << "the connection never became ready";
  EXPECT_EQ(accepted.data.size(), 2u);
  EXPECT_EQ(accepted.peer_tcp_window, 3u << 18);
  service_.close_listen(ep);
  EXPECT_TRUE(test::WarnCapture::take().empty());
}

TEST_F(ServiceExtensionTest, AListenClosedDuringTheSetupRefusesTheConnectorAndDropsTheState) {
  std::shared_ptr<ListenEndpoint> ep = service_.open_listen();
  std::shared_ptr<OutgoingConnect> c = service_.start_connect(request(ep));
  ASSERT_TRUE(held_.wait_entered(std::chrono::seconds(10))) << "the handler never ran";
  service_.close_listen(ep);  // NCCL closes the listen comm while the QPs are being set up

  auto state = std::make_shared<int>(7);
  std::weak_ptr<int> watch = state;
  held_.release(true, {1}, std::move(state));
  ASSERT_EQ(wait_for(*c, std::chrono::seconds(10)), ConnectStatus::kFailed);
  EXPECT_NE(c->error.find("nonce matches no open listen"), std::string::npos) << c->error;
  // The listener's side of the transport (its QPs) is not kept for a connection nobody takes.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!watch.expired() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(watch.expired()) << "the handler's state outlived the refused connection";
  const auto refused =
      test::WarnCapture::containing("its listen closed during the transport setup");
  EXPECT_EQ(refused.size(), 1u);
}

TEST_F(ServiceExtensionTest, ARefusedSetupFailsTheConnectorAndTheListenerSaysWhy) {
  std::shared_ptr<ListenEndpoint> ep = service_.open_listen();
  std::shared_ptr<OutgoingConnect> c = service_.start_connect(request(ep));
  ASSERT_TRUE(held_.wait_entered(std::chrono::seconds(10))) << "the handler never ran";
  held_.release(false, {}, nullptr, "no RDMA port on the cable to that peer");
  ASSERT_EQ(wait_for(*c, std::chrono::seconds(10)), ConnectStatus::kFailed);
  EXPECT_NE(c->error.find("could not set up the transport"), std::string::npos) << c->error;
  const auto said = test::WarnCapture::containing("no RDMA port on the cable to that peer");
  ASSERT_EQ(said.size(), 1u) << "the listener did not say why it refused";
  EXPECT_NE(said[0].find("check the transport on both hosts"), std::string::npos) << said[0];
  // The listen stays usable: nothing was queued for it.
  ConnectedSockets none;
  EXPECT_FALSE(service_.take_ready(ep, &none));
  service_.close_listen(ep);
}

}  // namespace
}  // namespace mesh::handshake
