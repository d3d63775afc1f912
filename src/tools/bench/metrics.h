// SPDX-License-Identifier: Apache-2.0
// Bandwidth arithmetic shared by the patterns and the report. GB/s means 1e9 bytes per second
// (like nccl-tests' algbw and busbw columns), not GiB/s.
#pragma once

#include <cstdint>

namespace mesh::bench {

// bytes / seconds in GB/s; NaN when seconds <= 0.
double gbps(uint64_t bytes, double seconds);

// nccl-tests' bus bandwidth: the per-link rate a ring algorithm needs to reach `algbw`.
// all-reduce moves 2(n-1)/n of the data over each link (reduce-scatter + all-gather);
// all-gather and reduce-scatter move (n-1)/n.
double allreduce_busbw(double algbw, int nranks);
double allgather_busbw(double algbw, int nranks);

// a / b, NaN when either is NaN or b <= 0 (a missing baseline prints as "-", not as inf).
double ratio(double a, double b);

// Mean half round trip of a ping-pong in microseconds.
double half_rtt_us(double total_seconds, int round_trips);

// Payload bytes one pairs row moves over one transport, everything the CPU sample around it
// pays for: warm-up and timed messages (both directions with --bidir) and, for sizes that get a
// latency measurement, every ping and pong (warm-up included).
uint64_t pair_payload_bytes(uint64_t bytes, int iters, int warmup, bool bidir, bool latency);

// `amount` (CPU seconds, context switches) per 1e9 payload bytes; NaN when bytes == 0 or
// amount is NaN.
double per_gb(double amount, uint64_t bytes);

}  // namespace mesh::bench
