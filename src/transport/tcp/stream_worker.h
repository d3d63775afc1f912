// One data socket of a TCP connection and the thread that moves its bytes. NCCL's thread
// queues parts (push) and later sees them complete through the request's parts counter; the
// worker blocks in send/recv so it costs no CPU while idle and moves data at memcpy speed.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "nccl/common.h"
#include "util/socket_util.h"

namespace mesh::tcp {

struct Part {
  uint8_t* ptr = nullptr;
  size_t length = 0;
  std::atomic<int>* pending = nullptr;  // decremented (release) when the part is done
};

class StreamWorker {
 public:
  // `on_error` is called at most once, from the worker thread, with the failure's description.
  using ErrorFn = std::function<void(ncclResult_t, const std::string&)>;

  StreamWorker(UniqueFd fd, bool sender, int index, ErrorFn on_error);
  ~StreamWorker();
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  // Queues a part; the queue holds NCCL_NET_MAX_REQUESTS parts (one per request in flight),
  // which the comm's request pool guarantees. Returns false if it is full.
  bool push(const Part& part);
  // Stopping is split so a connection can wake all its workers first and then join them,
  // instead of paying one thread wake-up after another.
  void request_stop();  // flags the stop and unblocks the socket (shutdown)
  void join();          // joins the thread and closes the socket
  void stop() {
    request_stop();
    join();
  }

 private:
  void run();

  UniqueFd fd_;
  const bool sender_;
  const int index_;
  ErrorFn on_error_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::array<Part, NCCL_NET_MAX_REQUESTS> ring_{};
  size_t head_ = 0;
  size_t count_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mesh::tcp
