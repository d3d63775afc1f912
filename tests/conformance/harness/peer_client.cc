// SPDX-License-Identifier: Apache-2.0
#include "harness/peer_client.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace conformance {

std::unique_ptr<PeerProcess> PeerProcess::spawn(const std::string& peer_path,
                                                const std::string& plugin_path, std::string* error,
                                                const std::vector<std::string>& extra_env) {
  int sv[2];
  // CLOEXEC on both ends; the child's end is dup2'ed onto kPeerControlFd, which clears the flag.
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    *error = std::string("socketpair: ") + std::strerror(errno);
    return nullptr;
  }
  int child_end = sv[1];
  if (child_end == kPeerControlFd) {  // dup2 onto itself would keep FD_CLOEXEC
    child_end = fcntl(sv[1], F_DUPFD_CLOEXEC, kPeerControlFd + 1);
    close(sv[1]);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_end, kPeerControlFd);
  std::string control = std::to_string(kPeerControlFd);
  char* argv[] = {const_cast<char*>(peer_path.c_str()), const_cast<char*>(plugin_path.c_str()),
                  control.data(), nullptr};
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    const bool overridden = std::any_of(extra_env.begin(), extra_env.end(), [&](const auto& x) {
      return x.compare(0, name.size() + 1, name + "=") == 0;
    });
    if (!overridden) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, peer_path.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(child_end);
  if (rc != 0) {
    close(sv[0]);
    *error = "posix_spawn(" + peer_path + "): " + std::strerror(rc);
    return nullptr;
  }
  return std::unique_ptr<PeerProcess>(new PeerProcess(pid, sv[0]));
}

PeerProcess::~PeerProcess() {
  if (alive()) kill_now();
  if (fd_ >= 0) close(fd_);
}

bool PeerProcess::start(Op op) {
  Writer w;
  w.u8(static_cast<uint8_t>(op));
  return send_frame(w);
}

bool PeerProcess::send_frame(const Writer& w) {
  if (!alive()) {
    error_ = "peer is not running";
    return false;
  }
  return write_frame(fd_, w.data(), &error_);
}

bool PeerProcess::receive_frame(Millis timeout, std::vector<uint8_t>* payload) {
  switch (read_frame(fd_, timeout, payload, &error_)) {
    case FrameStatus::kOk:
      return true;
    case FrameStatus::kTimeout:
      error_ = "no reply from peer within " + std::to_string(timeout.count()) + " ms";
      return false;
    case FrameStatus::kClosed:
      error_ = "peer closed the control channel (" + reap(Millis(2000)) + ")";
      return false;
    case FrameStatus::kError:
      return false;
  }
  return false;
}

std::string PeerProcess::reap(Millis timeout) {
  if (pid_ <= 0 || reaped_) return "already reaped";
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) return std::string("waitpid: ") + std::strerror(errno);
    if (Clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      reaped_ = true;
      return "did not exit within " + std::to_string(timeout.count()) + " ms; killed";
    }
    std::this_thread::sleep_for(Millis(5));
  }
  reaped_ = true;
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 0) return "";
    return "exited with status " + std::to_string(WEXITSTATUS(status)) +
           " (sanitizer report or failed check in the peer? see its stderr)";
  }
  if (WIFSIGNALED(status)) {
    return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  }
  return "ended with wait status " + std::to_string(status);
}

std::string PeerProcess::quit(Millis timeout) {
  if (!alive()) return "peer was not running";
  StatusReply reply;
  if (!start(Op::kQuit) || !finish(&reply, timeout)) {
    const std::string why = error_;
    kill_now();
    return "quit failed: " + why;
  }
  std::string how = reap(timeout);
  if (how.empty() && reply.rc != ncclSuccess) how = "clean-up in the peer failed: " + reply.error;
  return how;
}

void PeerProcess::kill_now() {
  if (!alive()) return;
  kill(pid_, SIGKILL);
  reap(Millis(5000));
}

}  // namespace conformance
