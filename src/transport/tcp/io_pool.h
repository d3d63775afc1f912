// SPDX-License-Identifier: Apache-2.0
// The process-wide pool of TCP I/O threads, for machines where one core cannot fill the link.
//
// Why a pool and not a thread per socket: a rank's threads must not grow with its connections
// (all-to-all over 8 ranks with 4 streams each way was 2 + 2 x 7 x 4 = 58 threads per rank),
// and a hand-off per message part (mutex, condition variable, futex wake-up) cost more CPU than
// the copy on small machines (docs/design.md). Here a data stream is attached to one thread for
// its life; the caller queues parts (DataStream::push) and kicks the thread if it sleeps, so a
// busy thread takes new parts without any wake-up. (The caller moves a one-part message itself,
// tcp_connection.cc: the pool would add a hand-off and no parallel copy.) An idle thread sleeps
// in epoll on its sockets (edge-triggered: readable for receivers, writable for senders) and an
// eventfd. A stream the caller moves is unwatched (watch()) until a several-part message is
// queued on it again: otherwise every arriving segment of a caller-moved message woke the
// thread for nothing, which on a host with fewer cores than busy threads took the core from a
// rank that had work (docs/measurements.md, issue 28). Ownership changes only when a stream
// goes from one kind of message to the other, so a steady flow of either costs no epoll_ctl.
//
// With zero threads (the default on machines with fewer than 8 usable cores, or where the
// host's other ranks take most of them, see resolve_io_threads) no pool exists and the
// connection's caller moves the bytes itself.
//
// Threads: attach/detach/notify from NCCL's threads (any); each I/O thread pumps only the
// streams attached to it, under its list mutex, so detach() returning means the thread no
// longer touches that stream.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp/data_stream.h"
#include "util/socket_util.h"

namespace mesh::tcp {

// Auto sizing for NCCL_MESH_TCP_IO_THREADS=-1: a quarter of the usable cores, at most 8, and none
// below 2 (one helper thread only moves the copies off the caller, adding a hand-off without
// adding a core).
size_t auto_io_threads(size_t usable_cpus);
// NCCL_MESH_TCP_IO_THREADS resolved: -1 is auto_io_threads, then at most what this process's
// share of the cores holds besides NCCL's proxy thread: `sharing` processes running the plugin
// may run on these cores (this one included; util/host_roster.h), so each has usable/sharing of
// them, one of which its proxy thread needs; again none below 2. Sized alone, 8 ranks on a
// 16-core host started 4 threads each, 40 threads for 16 cores. An explicit count is the
// user's: it is kept, except that one of at least the usable cores is 0, because the pool's
// threads and NCCL's proxy thread cannot then each have a core: the threads copy nothing in
// parallel and every several-part message pays a hand-off and wake-ups (measured on 2 cores:
// 1 MiB ring all-reduce 1.4x slower, docs/measurements.md).
size_t resolve_io_threads(int64_t requested, size_t usable_cpus, size_t sharing = 1);
// Cores this process may run on (sched_getaffinity), at least 1.
size_t usable_cpus();

class IoThread {
 public:
  explicit IoThread(int index);
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  bool start(std::string* why);
  void attach(DataStream* stream);
  void detach(DataStream* stream);
  void notify();  // parts were queued on one of this thread's streams
  // Watches the stream's socket (on) or stops (off: the caller moves the stream). Called by the
  // stream's connection, under its lock, never concurrently with detach() of the same stream.
  void watch(DataStream* stream, bool on);
  size_t streams() const { return count_.load(std::memory_order_relaxed); }

 private:
  void run();
  bool pump_all();

  const int index_;
  UniqueFd epoll_;
  UniqueFd wake_;
  std::mutex list_mu_;  // held by the thread while it pumps; by attach/detach to change the list
  std::vector<DataStream*> list_;
  std::atomic<size_t> count_{0};
  std::atomic<bool> work_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class IoPool {
 public:
  // The process's pool, created on first use with `threads` threads (later calls get the same
  // pool whatever they ask: the size is a process-wide decision). Null when threads == 0 or the
  // threads cannot be started (*why says why, once; the caller then moves the bytes itself).
  static IoPool* get(size_t threads, std::string* why);
  // Stops and joins the threads once no stream is attached (the last communicator is gone,
  // or the process exits), so no thread of ours outlives the library's use; the next get()
  // starts a new pool. False (pool kept) while streams are attached.
  static bool stop_if_idle();

  // The thread for a new stream: the one with the fewest streams attached.
  IoThread* pick();
  size_t size() const { return threads_.size(); }

 private:
  std::vector<std::unique_ptr<IoThread>> threads_;
};

}  // namespace mesh::tcp
