// SPDX-License-Identifier: Apache-2.0
#include "harness/transfer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "harness/call_timer.h"
#include "harness/pattern.h"

namespace conformance {
namespace {

// Buffer memory per stream; large messages get fewer slots (a 64 MiB message gets one).
constexpr size_t kArenaBudget = size_t{80} << 20;
constexpr size_t kSlotAlign = 64;
// NCCL hands test() a single int for sends: a plugin that writes sizes[1] smashes NCCL's stack.
constexpr int kSizeCanary = 0x5A5A5A5A;
// How long a stream filling its window keeps retrying a NULL *request without testing anything.
const Millis kWindowFillPatience = scaled(2000);

// Buffers of a stream that ended with requests still in flight: the plugin may still write into
// them (NCCL keeps its buffers until the comm is closed), so they live until the process exits.
void retain_until_exit(std::unique_ptr<uint8_t[]> arena) {
  static std::mutex mu;
  static auto* parked = new std::vector<std::unique_ptr<uint8_t[]>>;
  std::lock_guard<std::mutex> lock(mu);
  parked->push_back(std::move(arena));
}

struct Inflight {
  size_t index;
  void* request;
};

struct Stream {
  const StreamSpec* spec = nullptr;
  void* comm = nullptr;
  StreamResult* result = nullptr;
  size_t slots = 1;
  size_t max_inflight = 1;
  size_t slot_bytes = 0;
  std::unique_ptr<uint8_t[]> arena;
  uint8_t* base = nullptr;   // arena.get(), or the stand-in mapping
  size_t standin_bytes = 0;  // gpu_standin: the mmap'd length (0 otherwise)
  void* arena_mh = nullptr;
  std::vector<void*> slot_mh;
  size_t next_post = 0;
  size_t prepared = SIZE_MAX;  // message whose buffer is filled (send) or poisoned (recv)
  size_t hooked = SIZE_MAX;    // message whose before_post hook ran
  std::deque<Inflight> inflight;
  bool finished = false;
  bool filling_window = false;
  Clock::time_point null_since{};
  // Errors are timed from here: the start of the run, or the last hook that returned true.
  const Clock::time_point* mark = nullptr;
  Clock::time_point first_post_at{};

  uint8_t* slot_ptr(size_t index) { return base + (index % slots) * slot_bytes; }
  // gpu_standin: open a slot's pages to the CPU (PROT_READ|PROT_WRITE, PROT_READ) or close them
  // again (PROT_NONE). No-op for ordinary buffers.
  bool protect(size_t index, int prot) {
    if (standin_bytes == 0) return true;
    return mprotect(slot_ptr(index), slot_bytes, prot) == 0;
  }
  // Even slots use the whole-arena registration and odd slots their own overlapping one, so both
  // an enclosing and an exact registration are exercised.
  void* mhandle(size_t index) {
    const size_t slot = index % slots;
    return slot % 2 == 0 ? arena_mh : slot_mh[slot];
  }
  uint64_t bytes_of(const MessageSpec& m) const {
    return spec->dir == Direction::kSend ? m.size : m.capacity;
  }
};

std::string msg_name(const StreamSpec& spec, size_t index) {
  return "message " + std::to_string(index) + " (" + std::to_string(spec.messages[index].size) +
         " bytes" +
         (spec.dir == Direction::kRecv ? ", buffer " + std::to_string(spec.messages[index].capacity)
                                       : std::string()) +
         ")";
}

void finish_ok(Stream& s) {
  s.finished = true;
  s.result->ok = true;
}

void finish_fail(Stream& s, const std::string& why) {
  s.finished = true;
  s.result->ok = false;
  s.result->error = why;
}

// An error return from isend/irecv/test: expected, tolerated or a failure.
void on_error(Stream& s, size_t index, ncclResult_t rc, const char* call) {
  const StreamSpec& spec = *s.spec;
  s.result->failed_at = static_cast<int32_t>(index);
  s.result->rc = rc;
  s.result->error_after_us = elapsed_us(*s.mark);
  const std::string what =
      std::string(call) + " of " + msg_name(spec, index) + " returned " + result_name(rc);
  if (spec.expect_error_at == static_cast<int32_t>(index) ||
      (spec.tolerate_error_from >= 0 && static_cast<int32_t>(index) >= spec.tolerate_error_from)) {
    finish_ok(s);
    s.result->error = "as allowed: " + what;
  } else {
    finish_fail(s, what);
  }
}

bool check_call_time(Stream& s, const char* call, size_t index, CallTimer& timer) {
  timer.stop();
  s.result->max_call_us = std::max(s.result->max_call_us, timer.wall_us());
  if (timer.charged_us() > static_cast<uint64_t>(kDataCallLimit.count()) * 1000) {
    finish_fail(s, std::string(call) + " of " + msg_name(*s.spec, index) + " took " +
                       std::to_string(timer.charged_us() / 1000) + " ms not counting CPU wait (" +
                       std::to_string(timer.wall_us() / 1000) + " ms wall)");
    return false;
  }
  return true;
}

bool setup(NetApi& net, Stream& s) {
  const StreamSpec& spec = *s.spec;
  uint64_t largest = 1;
  for (const MessageSpec& m : spec.messages) largest = std::max(largest, s.bytes_of(m));
  const size_t align = spec.gpu_standin ? static_cast<size_t>(sysconf(_SC_PAGESIZE)) : kSlotAlign;
  s.slot_bytes = (largest + align - 1) / align * align;
  const size_t by_memory = std::max<size_t>(1, kArenaBudget / s.slot_bytes);
  s.slots = std::clamp<size_t>(spec.window, 1, std::max<size_t>(1, spec.messages.size()));
  s.slots = std::min(s.slots, by_memory);
  s.max_inflight = s.slots;
  if (spec.test_out_of_order) {
    // The held message 0 keeps its buffer while `window` later ones are posted.
    s.slots = std::min<size_t>(std::max<size_t>(1, spec.messages.size()), 2 * spec.window);
    if (s.slots * s.slot_bytes > kArenaBudget) {
      finish_fail(s, "suite bug: out-of-order window does not fit the buffer budget");
      return false;
    }
  }
  if (spec.post_window_first && s.slots < std::min<size_t>(spec.window, spec.messages.size())) {
    finish_fail(s, "suite bug: window does not fit the buffer budget");
    return false;
  }
  const size_t total = s.slots * s.slot_bytes;
  if (spec.gpu_standin) {
    void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      finish_fail(s, "mmap of " + std::to_string(total) + " bytes for the GPU stand-in failed");
      return false;
    }
    s.base = static_cast<uint8_t*>(m);
    s.standin_bytes = total;
  } else {
    s.arena.reset(new uint8_t[total]);
    s.base = s.arena.get();
  }
  const int type = spec.flush_as_gpu || spec.gpu_standin ? NCCL_PTR_CUDA : NCCL_PTR_HOST;
  ncclResult_t rc = net.reg_mr(s.comm, s.base, total, type, &s.arena_mh);
  if (rc != ncclSuccess) {
    finish_fail(s, std::string("regMr of the buffer arena returned ") + result_name(rc));
    return false;
  }
  s.slot_mh.assign(s.slots, nullptr);
  for (size_t i = 1; i < s.slots; i += 2) {
    rc = net.reg_mr(s.comm, s.base + i * s.slot_bytes, s.slot_bytes, type, &s.slot_mh[i]);
    if (rc != ncclSuccess) {
      finish_fail(s, std::string("overlapping regMr of slot ") + std::to_string(i) + " returned " +
                         result_name(rc));
      return false;
    }
  }
  // From here on the CPU must not touch the stand-in: the NIC reaches the pinned pages.
  if (s.standin_bytes != 0 && mprotect(s.base, total, PROT_NONE) != 0) {
    finish_fail(s, "mprotect(PROT_NONE) of the GPU stand-in failed");
    return false;
  }
  s.filling_window = spec.post_window_first;
  return true;
}

void teardown(NetApi& net, Stream& s) {
  if (s.base == nullptr) return;
  ncclResult_t worst = ncclSuccess;
  for (void*& mh : s.slot_mh) {
    if (mh == nullptr) continue;
    const ncclResult_t rc = net.dereg_mr(s.comm, mh);
    if (rc != ncclSuccess) worst = rc;
  }
  if (s.arena_mh != nullptr) {
    const ncclResult_t rc = net.dereg_mr(s.comm, s.arena_mh);
    if (rc != ncclSuccess) worst = rc;
  }
  if (worst != ncclSuccess && s.result->ok && s.result->failed_at < 0) {
    s.result->ok = false;
    s.result->error = std::string("deregMr returned ") + result_name(worst);
  }
  // An error return can leave requests owned by the plugin (NCCL tests a failed request never
  // again, and frees its buffers only after closing the comm).
  const bool plugin_may_write = !s.inflight.empty() || s.result->failed_at >= 0;
  if (s.standin_bytes != 0) {
    if (!plugin_may_write) munmap(s.base, s.standin_bytes);  // else mapped until exit
    return;
  }
  if (plugin_may_write) retain_until_exit(std::move(s.arena));
}

// Posts as many messages as the window and the plugin allow. Returns true if anything moved.
bool post_some(NetApi& net, Stream& s, size_t stream_index, const RunHooks& hooks,
               Clock::time_point* mark) {
  const StreamSpec& spec = *s.spec;
  if (s.next_post == 0 && Clock::now() < s.first_post_at) return false;
  bool progressed = false;
  while (!s.finished && s.next_post < spec.messages.size() && s.inflight.size() < s.max_inflight) {
    const size_t index = s.next_post;
    const MessageSpec& m = spec.messages[index];
    if (s.hooked != index) {
      s.hooked = index;
      if (hooks.before_post && hooks.before_post(stream_index, index)) *mark = Clock::now();
    }
    uint8_t* buf = s.slot_ptr(index);
    if (s.prepared != index) {
      s.prepared = index;
      if (!s.protect(index, PROT_READ | PROT_WRITE)) {
        finish_fail(s, "mprotect of a GPU stand-in slot failed");
        return true;
      }
      if (spec.dir == Direction::kSend) {
        fill_pattern(buf, m.size, message_key(spec.seed, index));
      } else {
        std::memset(buf, kCanaryByte, m.capacity);
      }
      s.protect(index, PROT_NONE);
    }
    void* request = nullptr;
    CallTimer timer;
    ncclResult_t rc;
    const char* call;
    if (spec.dir == Direction::kSend) {
      call = "isend";
      rc = net.isend(s.comm, buf, m.size, spec.tag, s.mhandle(index), &request);
    } else {
      call = "irecv";
      if (spec.preset_optional_completion) request = kOptionalRecvCompletion;
      rc = net.irecv(s.comm, buf, m.capacity, spec.tag, s.mhandle(index), &request);
    }
    if (!check_call_time(s, call, index, timer)) return true;
    if (rc != ncclSuccess) {
      on_error(s, index, rc, call);
      return true;
    }
    if (spec.dir == Direction::kRecv && request == kOptionalRecvCompletion) {
      finish_fail(s, "irecv of " + msg_name(spec, index) +
                         " left NCCL_NET_OPTIONAL_RECV_COMPLETION (0x1) in *request; NCCL would "
                         "call test((void*)0x1)");
      return true;
    }
    if (request == nullptr) {  // "cannot post now, retry later"
      if (s.filling_window) {
        if (s.null_since == Clock::time_point{}) s.null_since = Clock::now();
        if (Clock::now() - s.null_since > kWindowFillPatience) {
          finish_fail(s, std::string(call) + " kept returning *request == NULL for request " +
                             std::to_string(s.inflight.size() + 1) + " of a window of " +
                             std::to_string(spec.window) +
                             " posted before any test(): the plugin does not take that many "
                             "requests in flight");
        }
      }
      return progressed;
    }
    s.null_since = Clock::time_point{};
    s.inflight.push_back({index, request});
    ++s.next_post;
    progressed = true;
  }
  if (s.filling_window &&
      (s.inflight.size() >= s.max_inflight || s.next_post >= spec.messages.size())) {
    s.filling_window = false;
  }
  return progressed;
}

// NCCL's flush of a GPU receive: iflush, then test the flush request (if any) until done.
bool flush(NetApi& net, Stream& s, size_t index, int size) {
  void* request = nullptr;
  CallTimer timer;
  ncclResult_t rc = net.iflush(s.comm, s.slot_ptr(index), size, s.mhandle(index), &request);
  if (!check_call_time(s, "iflush", index, timer)) return false;
  if (rc != ncclSuccess) {
    on_error(s, index, rc, "iflush");
    return false;
  }
  if (size > 0) ++s.result->flushes;
  const Clock::time_point limit = Clock::now() + kDataCallLimit;
  while (request != nullptr) {
    int done = 0;
    rc = net.test(request, &done, nullptr);
    if (rc != ncclSuccess) {
      on_error(s, index, rc, "test of a flush");
      return false;
    }
    if (done) break;
    if (Clock::now() > limit) {
      finish_fail(s, "flush of " + msg_name(*s.spec, index) + " did not complete");
      return false;
    }
  }
  if (request != nullptr && size > 0) ++s.result->flush_requests;
  return true;
}

// A request test() reported done: checks what NCCL would check. False when the stream ended.
bool complete(NetApi& net, Stream& s, const Inflight& req, const int* recv_sizes,
              const int* send_size) {
  const StreamSpec& spec = *s.spec;
  const MessageSpec& m = spec.messages[req.index];
  std::string why;
  if (spec.dir == Direction::kSend) {
    if (send_size[1] != kSizeCanary) {
      finish_fail(s, "test of a send wrote sizes[1]; NCCL passes a single int for sends");
      return false;
    }
  } else {
    const uint8_t* buf = s.slot_ptr(req.index);
    if ((spec.flush_as_gpu || spec.gpu_standin) && !flush(net, s, req.index, recv_sizes[0]))
      return false;
    if (recv_sizes[0] < 0 || static_cast<uint64_t>(recv_sizes[0]) != m.size) {
      finish_fail(s, "test of " + msg_name(spec, req.index) + " reported " +
                         std::to_string(recv_sizes[0]) + " bytes received");
      return false;
    }
    // The stand-in is readable only now: the plugin holds no request on this slot any more.
    if (!s.protect(req.index, PROT_READ)) {
      finish_fail(s, "mprotect of a GPU stand-in slot failed");
      return false;
    }
    bool ok = verify_pattern(buf, m.size, message_key(spec.seed, req.index), &why);
    if (!ok) {
      finish_fail(s, msg_name(spec, req.index) + " arrived corrupted: " + why);
    } else if (m.capacity > m.size && !verify_canary(buf + m.size, m.capacity - m.size, &why)) {
      finish_fail(s, msg_name(spec, req.index) + ": " + why);
      ok = false;
    }
    s.protect(req.index, PROT_NONE);
    if (!ok) return false;
  }
  if (spec.expect_error_at == static_cast<int32_t>(req.index)) {
    finish_fail(s, msg_name(spec, req.index) + " completed, but it must fail");
    return false;
  }
  ++s.result->completed;
  return true;
}

// Tests the oldest request (NCCL never tests out of order), repeatedly while they complete.
// test_out_of_order: message 0 is skipped until message `window` is posted; the others are
// tested in posting order and removed as they complete.
bool test_some(NetApi& net, Stream& s) {
  const StreamSpec& spec = *s.spec;
  bool progressed = false;
  size_t pos = 0;
  while (!s.finished && !s.filling_window && pos < s.inflight.size()) {
    const Inflight req = s.inflight[pos];
    if (spec.test_out_of_order && req.index == 0 && s.next_post <= spec.window &&
        s.next_post < spec.messages.size()) {
      ++pos;  // held: the later ones complete around it
      continue;
    }
    int done = 0;
    int recv_sizes[NCCL_PROXY_MAX_SUBS] = {};  // NCCL's pre-zeroed array for receives
    int send_size[2] = {-1, kSizeCanary};
    int* sizes = spec.dir == Direction::kRecv ? recv_sizes : send_size;
    CallTimer timer;
    const ncclResult_t rc = net.test(req.request, &done, sizes);
    if (!check_call_time(s, "test", req.index, timer)) return true;
    if (rc != ncclSuccess) {
      s.inflight.erase(s.inflight.begin() + static_cast<std::ptrdiff_t>(pos));  // never again
      on_error(s, req.index, rc, "test");
      return true;
    }
    if (!done) break;
    progressed = true;
    s.inflight.erase(s.inflight.begin() + static_cast<std::ptrdiff_t>(pos));
    if (!complete(net, s, req, recv_sizes, send_size)) return true;
  }
  if (!s.finished && s.next_post >= spec.messages.size() && s.inflight.empty()) {
    if (spec.expect_error_at >= 0) {
      finish_fail(s, "all messages completed, but message " + std::to_string(spec.expect_error_at) +
                         " must fail");
    } else {
      finish_ok(s);
    }
  }
  return progressed;
}

}  // namespace

std::vector<StreamResult> run_streams(NetApi& net, const std::vector<StreamSpec>& specs,
                                      const std::vector<void*>& comms, Clock::time_point deadline,
                                      const RunHooks& hooks) {
  std::vector<StreamResult> results(specs.size());
  std::vector<Stream> streams(specs.size());
  Clock::time_point mark = Clock::now();
  for (size_t i = 0; i < specs.size(); ++i) {
    Stream& s = streams[i];
    s.spec = &specs[i];
    s.comm = i < comms.size() ? comms[i] : nullptr;
    s.result = &results[i];
    s.mark = &mark;
    s.first_post_at = mark + Millis(specs[i].first_post_delay_ms);
    if (s.comm == nullptr) {
      finish_fail(s, "suite bug: no comm for stream " + std::to_string(i));
      continue;
    }
    setup(net, s);
  }
  for (;;) {
    bool progressed = false;
    bool all_finished = true;
    for (size_t i = 0; i < streams.size(); ++i) {
      Stream& s = streams[i];
      if (s.finished) continue;
      progressed |= post_some(net, s, i, hooks, &mark);
      progressed |= test_some(net, s);
      all_finished &= s.finished;
    }
    if (all_finished) break;
    if (Clock::now() > deadline) {
      for (Stream& s : streams) {
        if (s.finished) continue;
        const size_t stuck = s.inflight.empty() ? s.next_post : s.inflight.front().index;
        const std::string why = "timed out: " + msg_name(*s.spec, stuck) + " not complete; " +
                                std::to_string(s.next_post) + " posted, " +
                                std::to_string(s.result->completed) + " completed";
        if (s.spec->tolerate_timeout) {
          finish_ok(s);
          s.result->error = "as allowed: " + why;
        } else {
          finish_fail(s, why);
        }
      }
      break;
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  for (Stream& s : streams) teardown(net, s);
  return results;
}

std::string describe(const StreamSpec& spec, const StreamResult& result) {
  std::string text = spec.dir == Direction::kSend ? "send stream" : "recv stream";
  text += " (comm " + std::to_string(spec.comm_id) + ", " + std::to_string(spec.messages.size()) +
          " messages, seed " + std::to_string(spec.seed) + "): ";
  text += result.ok ? "ok" : result.error;
  text += " [" + std::to_string(result.completed) + " completed, slowest call " +
          std::to_string(result.max_call_us / 1000) + " ms]";
  return text;
}

}  // namespace conformance
