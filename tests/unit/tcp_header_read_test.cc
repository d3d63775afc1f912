// SPDX-License-Identifier: Apache-2.0
// How the receiver reads headers and payloads (DataStream): a payload straight into its buffer
// and what follows it into the stage in the same recvmsg(), so that the next header of a
// pipeline costs no read of its own, but never a byte into a posted buffer past its message's
// end. These tests send messages of mixed sizes that are all in the receiver's sockets before it
// reads, and check every byte, every size and the buffer past each message.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
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
    raw_ = fds[1];  // the stream's own socket, to see what it has left unread
    rx_ = std::make_unique<DataStream>(UniqueFd(fds[1]), false, 0, &failure_);
  }
  UniqueFd writer_;
  int raw_ = -1;
  FailureLatch failure_;
  std::unique_ptr<DataStream> rx_;
};

// A payload larger than the stage is read straight into its buffer, and what follows it on the
// stream (the next message's header and the start of its payload) into the stage in the same
// recvmsg(): the socket is then empty, the next header comes from the stage, and nothing lands
// in the buffer past the part, though the buffer is larger.
TEST_F(DataStreamHeaderRead, APayloadReadBringsTheNextHeaderAlongButNeverWritesPastThePart) {
  const auto first = pattern(20000, 1);
  const auto second = pattern(300, 2);
  std::vector<uint8_t> wire = framed(0, first);
  const auto next = framed(1, second);
  wire.insert(wire.end(), next.begin(), next.end());
  write_all(writer_.get(), wire);

  uint8_t header[kHeaderSize] = {};
  ASSERT_EQ(rx_->read_header(header, kHeaderSize), static_cast<ssize_t>(kHeaderSize));
  ASSERT_EQ(decode_header(header).size, first.size());
  std::vector<uint8_t> buf(64 * 1024, 0xee);
  std::atomic<int> pending{1};
  ASSERT_TRUE(rx_->push({buf.data(), first.size(), &pending}));
  rx_->pump();
  ASSERT_EQ(pending.load(), 0);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), buf.begin()));
  EXPECT_TRUE(std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(first.size()), buf.end(),
                          [](uint8_t b) { return b == 0xee; }))
      << "bytes of the next message were written past the part's end";
  uint8_t probe = 0;
  EXPECT_LT(recv(raw_, &probe, 1, MSG_DONTWAIT | MSG_PEEK), 0)
      << "the next message should have come with the payload's read";

  uint8_t header2[kHeaderSize] = {};
  ASSERT_EQ(rx_->read_header(header2, kHeaderSize), static_cast<ssize_t>(kHeaderSize));
  const MessageHeader h2 = decode_header(header2);
  EXPECT_EQ(h2.seq, 1u);
  ASSERT_EQ(h2.size, second.size());
  std::vector<uint8_t> buf2(second.size(), 0);
  std::atomic<int> pending2{1};
  ASSERT_TRUE(rx_->push({buf2.data(), second.size(), &pending2}));
  rx_->pump();
  EXPECT_EQ(pending2.load(), 0);
  EXPECT_EQ(buf2, second);
  EXPECT_FALSE(failure_.failed());
}

// End to end through TcpConnection: one data stream (every message behind the one before on the
// same socket), every message sent before the receiver reads (all eager), sizes that grow and
// shrink from one message to the next; the receives' buffers are larger than the messages, and
// what lies past each message must be untouched. With four streams and an I/O pool as well,
// where messages go in several parts. (Up to hello version 9 the receiver guessed a first part's
// length from the message before and read that much into the buffer with the header: with one
// stream a shorter message got the next one's bytes written past its end.)
class TcpHeaderReadTest : public ::testing::TestWithParam<std::pair<size_t, size_t>> {};

TEST_P(TcpHeaderReadTest, MessagesOfMixedSizesArriveIntactAndNothingPastThem) {
  const auto [streams, io_threads] = GetParam();
  TcpOptions o;
  o.user_timeout_ms = 0;
  o.eager_bytes = 8 << 20;  // everything goes before its clear-to-send
  o.eager_window_bytes = 0;
  o.min_chunk = 16 * 1024;  // several parts where there are several streams and a pool
  o.io_threads = io_threads;
  Endpoints e = connect_tcp(o, streams);
  // 70,000 and 90,000 go in several parts with the pool, each after a 64 KiB message in one.
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
    EXPECT_TRUE(std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(sizes[i]), buf.end(),
                            [](uint8_t b) { return b == 0xee; }))
        << "message " << i << ": its buffer was written past the message's end";
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
