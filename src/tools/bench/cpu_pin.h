// SPDX-License-Identifier: Apache-2.0
// Pinning local mode's ranks to CPUs (--local-cpus). On a host with fewer cores than ranks the
// scheduler's placement decides what a waiting rank costs the others: a rank that blocks (the
// plain-TCP ring in poll()) frees its core and is woken on an idle one, a rank that polls (the
// plugin's, driven as NCCL's proxy thread drives it) keeps its core. A fixed placement, the
// same for both transports, takes that difference out of a comparison (measurements.md,
// issue 28, twenty-third pass).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::bench {

// "0,1,1": one CPU number per entry (rank r runs on entry r modulo the list's length), each
// 0..1023, at most 1024 entries. Returns nullopt and says why for anything else.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text, std::string* why = nullptr);

// The CPU of `rank` in a non-empty list.
int cpu_for_rank(const std::vector<int>& cpus, int rank);

// "0,1,1".
std::string format_cpu_list(const std::vector<int>& cpus);

// The CPUs this process may run on (sched_getaffinity), ascending; empty if it cannot be read.
std::vector<int> allowed_cpus();

// Restricts the calling thread (and what it forks and execs) to `cpu`. False, with why, when
// the kernel refuses.
bool pin_to_cpu(int cpu, std::string* why);

}  // namespace mesh::bench
