// SPDX-License-Identifier: Apache-2.0
// The test process's handle on its peer process: spawns mesh_conformance_peer (posix_spawn, i.e.
// fork+exec with nothing run in between, safe while plugin threads exist), sends it requests over
// the control socketpair and reaps it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "harness/protocol.h"
#include "harness/wire.h"

namespace conformance {

// The control socket's fd number in the peer.
inline constexpr int kPeerControlFd = 3;

class PeerProcess {
 public:
  // `extra_env` ("NAME=value") is added to (or overrides) this process's environment, for tests
  // that need a plugin setting in the peers only.
  static std::unique_ptr<PeerProcess> spawn(const std::string& peer_path,
                                            const std::string& plugin_path, std::string* error,
                                            const std::vector<std::string>& extra_env = {});
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool alive() const { return pid_ > 0 && !reaped_; }
  // Why the last request or reply failed.
  const std::string& error() const { return error_; }

  // Sends a request without waiting: the peer works on it while this process drives its side.
  template <typename Req>
  bool start(Op op, const Req& req) {
    Writer w;
    w.u8(static_cast<uint8_t>(op));
    encode(w, req);
    return send_frame(w);
  }
  bool start(Op op);  // requests without a body
  // Waits for the reply to the oldest outstanding request.
  template <typename Rep>
  bool finish(Rep* rep, Millis timeout) {
    std::vector<uint8_t> payload;
    if (!receive_frame(timeout, &payload)) return false;
    Reader r(std::move(payload));
    decode(r, rep);
    if (!r.ok() || !r.at_end()) {
      error_ = "malformed reply from peer";
      return false;
    }
    return true;
  }
  template <typename Req, typename Rep>
  bool call(Op op, const Req& req, Rep* rep, Millis timeout) {
    return start(op, req) && finish(rep, timeout);
  }
  // True when the peer has started replying (used to prove it is still busy).
  bool reply_pending() const { return frame_pending(fd_); }

  // Asks the peer to close everything and exit, and reaps it. Returns "" for a clean exit (status
  // 0), otherwise how it ended: a sanitizer report or a crash in the peer fails the test.
  std::string quit(Millis timeout);
  // SIGKILL and reap (simulates a crashed rank).
  void kill_now();

 private:
  PeerProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  bool send_frame(const Writer& w);
  bool receive_frame(Millis timeout, std::vector<uint8_t>* payload);
  std::string reap(Millis timeout);

  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string error_;
};

}  // namespace conformance
