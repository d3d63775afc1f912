// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/io_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "util/host_roster.h"

namespace mesh::tcp {

namespace {

// The epoll events of a stream's socket: edge-triggered readiness when watched, none otherwise.
uint32_t watched_events(const DataStream& stream, bool on) {
  const uint32_t ready = stream.sender() ? EPOLLOUT : EPOLLIN;
  return EPOLLET | (on ? ready : 0u);
}

}  // namespace

size_t auto_io_threads(size_t cpus) {
  const size_t quarter = cpus / 4;
  return quarter < 2 ? 0 : std::min<size_t>(quarter, 8);
}

size_t resolve_io_threads(int64_t requested, size_t cpus, size_t sharing) {
  if (requested >= 0) {
    const auto n = static_cast<size_t>(requested);
    return n >= cpus ? 0 : n;
  }
  const size_t share = cpus / std::max<size_t>(sharing, 1);
  const size_t fits = share > 0 ? share - 1 : 0;  // one core of the share is the proxy thread's
  const size_t n = std::min(auto_io_threads(cpus), fits);
  return n < 2 ? 0 : n;
}

size_t usable_cpus() {
  cpu_set_t set;
  if (!allowed_cpus(&set)) return 1;
  return std::max(1, CPU_COUNT(&set));
}

IoThread::IoThread(int index) : index_(index) {}

IoThread::~IoThread() {
  stop_.store(true);
  notify();
  if (thread_.joinable()) thread_.join();
}

bool IoThread::start(std::string* why) {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_.valid() || !wake_.valid()) {
    *why = "epoll/eventfd: " + errno_text(errno);
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
    *why = "epoll_ctl(eventfd): " + errno_text(errno);
    return false;
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::exception& e) {
    *why = std::string("cannot start an I/O thread: ") + e.what();
    return false;
  }
  return true;
}

void IoThread::attach(DataStream* stream) {
  stream->mark_shared();  // before this thread can pump it (the list below)
  std::lock_guard<std::mutex> lock(list_mu_);
  // Edge-triggered: the thread is woken when the socket becomes readable (receiver) or gains
  // send space (sender) after a pump stopped at EAGAIN; queued parts wake it through notify().
  epoll_event ev{};
  ev.events = watched_events(*stream, true);
  ev.data.ptr = stream;
  // A stream whose socket cannot be watched still works: notify() and the next pass pump it;
  // only an EAGAIN with no later push would wait, so this is reported by the caller's timeout.
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stream->fd(), &ev);
  list_.push_back(stream);
  count_.store(list_.size(), std::memory_order_relaxed);
}

// Changing the events of a registered socket re-checks its readiness: if it is ready now an
// event is queued at once, so a stream handed back to the thread with bytes waiting wakes it.
void IoThread::watch(DataStream* stream, bool on) {
  epoll_event ev{};
  ev.events = watched_events(*stream, on);
  ev.data.ptr = stream;
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, stream->fd(), &ev);
}

void IoThread::detach(DataStream* stream) {
  std::lock_guard<std::mutex> lock(list_mu_);
  if (stream->fd() >= 0) (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, stream->fd(), nullptr);
  list_.erase(std::remove(list_.begin(), list_.end(), stream), list_.end());
  count_.store(list_.size(), std::memory_order_relaxed);
}

void IoThread::notify() {
  work_.store(true, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));
  }
}

bool IoThread::pump_all() {
  std::lock_guard<std::mutex> lock(list_mu_);
  bool moved = false;
  for (DataStream* s : list_) {
    // A stream the caller moves is not ours until a several-part message is queued on it
    // again (TcpConnection::start_parts).
    if (s->has_work() && !s->caller_moves()) moved |= s->try_pump();
  }
  return moved;
}

void IoThread::run() {
  char name[16];
  snprintf(name, sizeof(name), "mesh-io%d", index_);
  pthread_setname_np(pthread_self(), name);
  epoll_event events[64];
  while (!stop_.load(std::memory_order_relaxed)) {
    // An exchange, not a store: when a notify()'s work_ = true is the value cleared here, this
    // read-modify-write synchronizes with it, so pump_all() below sees every part pushed before
    // that notify(). A plain store gives no such edge in C++'s model (x86 and ARMv8 hardware
    // happen to order it; other weak architectures and the compiler need not).
    (void)work_.exchange(false, std::memory_order_seq_cst);
    if (pump_all()) continue;  // something moved: go round again before sleeping
    // Announce the sleep, then look for work queued since the pass (Dekker with notify()): a
    // push after this point sees sleeping_ and writes the eventfd.
    sleeping_.store(true, std::memory_order_seq_cst);
    if (!work_.load(std::memory_order_seq_cst) && !stop_.load()) {
      const int n = epoll_wait(epoll_.get(), events, 64, -1);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.ptr == nullptr) {
          uint64_t count;
          (void)!read(wake_.get(), &count, sizeof(count));
        }
      }
    }
    sleeping_.store(false, std::memory_order_seq_cst);
  }
}

namespace {

struct PoolSlot {
  std::mutex mu;
  std::unique_ptr<IoPool> pool;
  bool tried = false;  // a start failed: do not retry (and re-warn) on every connection
};

PoolSlot& slot() {
  static PoolSlot* s = new PoolSlot();  // never destroyed: used from static destructors
  return *s;
}

}  // namespace

IoPool* IoPool::get(size_t threads, std::string* why) {
  PoolSlot& s = slot();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.pool || s.tried || threads == 0) return s.pool.get();
  s.tried = true;
  auto pool = std::make_unique<IoPool>();
  for (size_t i = 0; i < threads; ++i) {
    auto t = std::make_unique<IoThread>(static_cast<int>(i));
    if (!t->start(why)) return nullptr;  // the started ones are joined by the destructors
    pool->threads_.push_back(std::move(t));
  }
  s.pool = std::move(pool);
  return s.pool.get();
}

bool IoPool::stop_if_idle() {
  PoolSlot& s = slot();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.pool) return true;
  for (auto& t : s.pool->threads_) {
    if (t->streams() != 0) return false;
  }
  s.pool.reset();  // joins every thread
  s.tried = false;
  return true;
}

IoThread* IoPool::pick() {
  IoThread* best = threads_.front().get();
  for (auto& t : threads_) {
    if (t->streams() < best->streams()) best = t.get();
  }
  return best;
}

}  // namespace mesh::tcp
