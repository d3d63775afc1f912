// SPDX-License-Identifier: Apache-2.0
#include "util/accept_errors.h"

#include <sys/resource.h>

#include <cerrno>

namespace mesh {

bool accept_error_is_per_connection(int err) {
  switch (err) {
    case EINTR:
    case ECONNABORTED:
    case EPERM:  // a firewall rule refused this connection
    case EPROTO:
    case ENOPROTOOPT:
    case ENETDOWN:
    case ENETUNREACH:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ENONET:
    case EOPNOTSUPP:
      return true;
    default:
      return false;
  }
}

std::string accept_error_advice(int err, std::string_view holders, std::string_view otherwise) {
  switch (err) {
    case EMFILE: {
      rlimit limit{};
      getrlimit(RLIMIT_NOFILE, &limit);
      const auto text = [](rlim_t v) {
        return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
      };
      // EMFILE means no descriptor number below the soft limit is free, so every one of them is
      // open (counting them through /proc/self/fd would need a descriptor too).
      return "all " + text(limit.rlim_cur) +
             " file descriptors allowed by RLIMIT_NOFILE are open in this process (hard limit " +
             text(limit.rlim_max) + "); " + std::string(holders) +
             ": raise the limit before the process starts (ulimit -n; past the hard limit "
             "ulimit -Hn as root, limits.conf or LimitNOFILE= for a systemd service), or " +
             std::string(otherwise);
    }
    case ENFILE:
      return "the system-wide limit on open files is reached (see /proc/sys/fs/file-nr): raise "
             "fs.file-max (sysctl) or find what holds so many files on this host";
    case ENOBUFS:
    case ENOMEM:
      return "the kernel is out of memory for sockets: check the host's free memory and "
             "net.ipv4.tcp_mem";
    default:
      return "an unexpected error on the listening socket";
  }
}

AcceptPause::Next AcceptPause::on_error(int err, int64_t now_ms) {
  if (err == EAGAIN || err == EWOULDBLOCK) return Next::kDrained;
  if (accept_error_is_per_connection(err)) return Next::kRetry;
  until_ms_ = now_ms + kPauseMs;
  ++pauses_;
  return Next::kPause;
}

bool AcceptPause::resume_due(int64_t now_ms) {
  if (until_ms_ == 0 || now_ms < until_ms_) return false;
  until_ms_ = 0;
  return true;
}

uint64_t AcceptPause::accepted() {
  const uint64_t before = pauses_;
  pauses_ = 0;
  return before;
}

}  // namespace mesh
