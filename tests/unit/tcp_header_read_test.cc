// SPDX-License-Identifier: Apache-2.0
// The receiver reads a message's header and its first part's payload in one recvmsg(), guessing
// the part's length from the message before (DataStream::read_header_and_payload). A wrong
// guess must cost nothing but a copy: bytes read past a shorter part belong to the stream's next
// message and go back to the stream (DataStream::carry), a longer part reads its rest as before.
// These tests send messages whose sizes the guess gets wrong, with the next message already in
// the socket when a shorter one is read, and check every byte and size.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "tcp_test_requests.h"
#include "tcp_test_sockets.h"
#include "transport/failure_latch.h"
#include "transport/tcp/data_stream.h"
#include "transport/tcp/wire.h"

namespace mesh::tcp {
namespace {

using namespace mesh::tcp::tcp_test;

std::vector<uint8_t> framed(uint32_t seq, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(kHeaderSize);
  encode_header({seq, 0, 1, payload.size()}, out.data());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
}

// A receiving DataStream and the raw socket that feeds it.
class DataStreamHeaderRead : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    writer_.reset(fds[0]);
    rx_ = std::make_unique<DataStream>(UniqueFd(fds[1]), false, 0, &failure_);
  }
  UniqueFd writer_;
  FailureLatch failure_;
  std::unique_ptr<DataStream> rx_;
};

// Both messages are in the socket before the first is read: the guess (8,000 bytes, a message
// before of that size) reads the whole of a 100-byte message, the next one's header and most of
// its payload; those go back to the stream, which serves them to the next header and part in
// order, and the rest comes from the socket.
TEST_F(DataStreamHeaderRead, BytesReadPastAShorterPartAreTheNextMessagesAndComeBackInOrder) {
  const auto first = pattern(100, 1);
  const auto second = pattern(20000, 2);
  std::vector<uint8_t> wire = framed(0, first);
  const auto next = framed(1, second);
  wire.insert(wire.end(), next.begin(), next.end());
  write_all(writer_.get(), wire);

  uint8_t header[kHeaderSize] = {};
  std::vector<uint8_t> buf(8000, 0);
  size_t payload = 0;
  ASSERT_EQ(rx_->read_header_and_payload(header, buf.data(), buf.size(), &payload),
            static_cast<ssize_t>(kHeaderSize));
  EXPECT_EQ(decode_header(header).size, first.size());
  ASSERT_EQ(payload, buf.size());  // past the part: 7,900 bytes of the next message
  EXPECT_TRUE(std::equal(first.begin(), first.end(), buf.begin()));
  rx_->carry(buf.data() + first.size(), payload - first.size());

  // The next header comes from the bytes given back, then the part from them and the socket.
  uint8_t header2[kHeaderSize] = {};
  std::vector<uint8_t> buf2(30000, 0);
  ASSERT_EQ(rx_->read_header_and_payload(header2, buf2.data(), buf2.size(), &payload),
            static_cast<ssize_t>(kHeaderSize));
  EXPECT_EQ(payload, 0u) << "staged bytes are read the stage way, none past the header";
  const MessageHeader h2 = decode_header(header2);
  EXPECT_EQ(h2.seq, 1u);
  ASSERT_EQ(h2.size, second.size());
  std::atomic<int> pending{1};
  ASSERT_TRUE(rx_->push({buf2.data(), second.size(), &pending}));
  rx_->pump();
  EXPECT_EQ(pending.load(), 0);
  EXPECT_TRUE(std::equal(second.begin(), second.end(), buf2.begin()));
  EXPECT_FALSE(failure_.failed());
}

// A part longer than the guess: the header, the guessed bytes and what the stage takes come in
// one read, the part's rest from the stage and the socket.
TEST_F(DataStreamHeaderRead, APartLongerThanTheGuessReadsItsRestAfterward) {
  const auto msg = pattern(50000, 3);
  write_all(writer_.get(), framed(0, msg));
  uint8_t header[kHeaderSize] = {};
  std::vector<uint8_t> buf(msg.size(), 0);
  size_t payload = 0;
  ASSERT_EQ(rx_->read_header_and_payload(header, buf.data(), 10000, &payload),
            static_cast<ssize_t>(kHeaderSize));
  ASSERT_EQ(payload, 10000u);
  std::atomic<int> pending{1};
  ASSERT_TRUE(rx_->push({buf.data() + payload, msg.size() - payload, &pending}));
  rx_->pump();
  EXPECT_EQ(pending.load(), 0);
  EXPECT_EQ(buf, msg);
  EXPECT_FALSE(failure_.failed());
}

// End to end through TcpConnection: one data stream (every message behind the one before on the
// same socket), every message sent before the receiver reads (all eager), sizes that make the
// guess too long, too short, empty and exact; the receives' buffers are larger than the messages.
// With four streams and an I/O pool as well, where messages go in several parts: bytes read past
// a first part then lie where a later part of the same message lands.
class TcpHeaderReadTest : public ::testing::TestWithParam<std::pair<size_t, size_t>> {};

TEST_P(TcpHeaderReadTest, MessagesTheGuessGetsWrongArriveIntact) {
  const auto [streams, io_threads] = GetParam();
  TcpOptions o;
  o.user_timeout_ms = 0;
  o.eager_bytes = 8 << 20;  // everything goes before its clear-to-send
  o.eager_window_bytes = 0;
  o.min_chunk = 16 * 1024;  // several parts where there are several streams and a pool
  o.io_threads = io_threads;
  Endpoints e = connect_tcp(o, streams);
  // 70,000 and 90,000 go in several parts with the pool, each after a 64 KiB message in one:
  // a guess longer than their first part.
  const std::vector<size_t> sizes = {65536, 65536, 5000, 65536, 300,   0,    65536, 70000,
                                     20000, 20000, 1,    65536, 90000, 4096, 65536};
  std::vector<std::vector<uint8_t>> sent;
  std::vector<void*> sreq;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(pattern(sizes[i], static_cast<uint8_t>(i + 10)));
    void* r = post_send(*e.send, sent.back());
    ASSERT_NE(r, nullptr) << "message " << i << " did not go eagerly";
    sreq.push_back(r);
  }
  // Let the sends reach the receiver's sockets first, so that the next message is there when a
  // shorter one is read.
  for (void* r : sreq) ASSERT_EQ(wait_done(*e.send, r), ncclSuccess);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<uint8_t> buf(128 * 1024, 0xee);
    void* r = post_recv(*e.recv, buf);
    int size = -1;
    ASSERT_EQ(wait_done(*e.recv, r, &size), ncclSuccess) << "message " << i;
    ASSERT_EQ(static_cast<size_t>(size), sizes[i]) << "message " << i;
    EXPECT_TRUE(std::equal(sent[i].begin(), sent[i].end(), buf.begin())) << "message " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(StreamsAndPool, TcpHeaderReadTest,
                         ::testing::Values(std::pair<size_t, size_t>{1, 0},
                                           std::pair<size_t, size_t>{4, 0},
                                           std::pair<size_t, size_t>{4, 2}),
                         [](const auto& p) {
                           return std::to_string(p.param.first) + "streams_" +
                                  std::to_string(p.param.second) + "threads";
                         });

}  // namespace
}  // namespace mesh::tcp
