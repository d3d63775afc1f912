// SPDX-License-Identifier: Apache-2.0
// The process's open descriptors, for the suite's leak checks. A plugin process that stands by
// for the host's relay agent retries binding the relay port every second (relay/agent.h): for a
// moment it holds a TCP and a UDP socket it then closes. A snapshot taken in that moment shows
// two sockets that are not leaks, so a check compares against a snapshot that has settled: a leak
// stays, a bind retry goes within microseconds.
#pragma once

#include <chrono>
#include <set>
#include <string>

namespace conformance {

// Each open descriptor as "fd -> what it is" (socket:[inode], a path, ...).
std::set<std::string> open_fds();

// The entries of `after` that `before` lacks, one per line (for failure messages).
std::string fds_missing_from(const std::set<std::string>& before,
                             const std::set<std::string>& after);

// open_fds(), taken again every 20 ms while it holds more descriptors than `baseline`, for at most
// `timeout`: the first snapshot with no more than the baseline's count, else the last one.
std::set<std::string> open_fds_settled(const std::set<std::string>& baseline,
                                       std::chrono::milliseconds timeout);

// open_fds() once the count has stayed the same for 100 ms (at most `timeout`): a baseline that
// leaves out what closes a moment later (a closed send comm's control socket lingers until its
// receiver's FIN reaches the plugin's lingering-close thread: util/lingering_close.h).
std::set<std::string> open_fds_quiet(std::chrono::milliseconds timeout);

}  // namespace conformance
