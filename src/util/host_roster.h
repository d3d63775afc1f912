// SPDX-License-Identifier: Apache-2.0
// Which processes of this user run the plugin on this host, and on which cores: so that a
// process can size what it starts (the TCP I/O threads, transport/tcp/io_pool.h) by its share
// of the cores instead of by the whole machine. A host commonly runs one rank per GPU (8 on a
// DGX-class box), each process seeing every core: sized alone, 8 ranks x (4-8 I/O threads +
// NCCL's proxy thread) oversubscribe a 16-32 core workstation, and then every hand-off to an I/O
// thread waits for a core (measured on 2 cores: a 1 MiB ring all-reduce 1.6-2.5x slower with a
// pool than without; docs/measurements.md, issue 28).
//
// The roster is a directory private to the user (default_dir: /dev/shm/nccl-mesh-<uid>, 0700,
// owned by the user, never followed through a symlink). Each process adds one entry for its
// life: a file holding its CPU list, with a POSIX record lock (fcntl F_SETLK) on a descriptor it
// keeps open. The lock is the liveness: the kernel drops it when the process dies, however it
// dies, so an entry nobody holds a lock on is a dead process's and is removed by whoever finds
// it. POSIX locks, not flock: a child forked without exec (data loader workers) does not inherit
// them, so it neither keeps a dead parent's entry alive nor counts twice. An entry is written
// and locked under a name nobody counts, then renamed into place, so no reader sees it
// unlocked. Processes in other mount namespaces (containers with their own /dev/shm) do not
// see each other: each then sizes as if alone, as before the roster existed.
//
// Trust (docs/design.md, "Threat model"): other users cannot create, read or remove entries (the
// directory is refused unless it is this user's own, mode 0700); a process of the same user can
// make this one count more sharers, which only makes it start fewer threads. Everything read is
// bounded: at most kMaxEntries entries looked at, kMaxEntryBytes read from each.
//
// One HostRoster per directory per process: POSIX locks do not conflict within a process, so a
// second one would read the first's entry as a dead process's (and closing it drops the lock).
//
// Threads: join(), sharing() and leave() take the roster's own mutex; callers are NCCL's init and
// proxy service threads, once per process each (plugin.cc), never the data path.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "util/socket_util.h"

namespace mesh {

// The CPUs the calling thread may run on (sched_getaffinity); false if the kernel's set does not
// fit a cpu_set_t (over CPU_SETSIZE CPUs).
bool allowed_cpus(cpu_set_t* cpus);
// "0-3,8,10-11": the kernel's cpulist format (/sys/devices/system/cpu/online).
std::string format_cpu_list(const cpu_set_t& cpus);
// False on anything else (or a CPU beyond CPU_SETSIZE); an empty list is an empty set.
bool parse_cpu_list(std::string_view text, cpu_set_t* cpus);

class HostRoster {
 public:
  static constexpr size_t kMaxEntries = 1024;
  static constexpr size_t kMaxEntryBytes = 4096;

  explicit HostRoster(std::string dir);
  ~HostRoster();  // leave()
  HostRoster(const HostRoster&) = delete;
  HostRoster& operator=(const HostRoster&) = delete;

  // /dev/shm/nccl-mesh-<uid> (tmpfs, shared by the host's processes of one mount namespace), or
  // under /tmp where /dev/shm is missing.
  static std::string default_dir();

  // Adds this process with the CPUs it may run on (`cpus`, e.g. sched_getaffinity's). Once: a
  // second call only answers. False, with the reason, when the directory cannot be used.
  bool join(const cpu_set_t& cpus, std::string* why);
  // How many processes on the roster may run on any of `cpus`, this one included (it counts as
  // one whether or not it joined). Entries of dead processes are removed on the way. 1 with the
  // reason when the roster cannot be read.
  size_t sharing(const cpu_set_t& cpus, std::string* why);

  // Removes this process's entry (at the last finalize, at exit); a forked child's call removes
  // nothing of its parent's. join() adds it again.
  void leave();

  const std::string& dir() const { return dir_; }

 private:
  // The directory, created if missing and checked each time (not kept open: a process that
  // finalized its last communicator holds no descriptor of ours but its entry's while joined).
  UniqueFd open_dir(std::string* why) const;

  const std::string dir_;
  std::mutex mu_;
  UniqueFd entry_fd_;  // holds the lock: this process's liveness
  std::string entry_name_;
  pid_t joined_pid_ = 0;
};

}  // namespace mesh
