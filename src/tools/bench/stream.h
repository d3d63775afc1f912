// SPDX-License-Identifier: Apache-2.0
// --duration: every rank streams messages of one size to every other rank and receives theirs,
// all at once, for a fixed time - the load for fault-injection runs (pull a cable, expect
// "ERROR rank R peer P: <call> returned <code> after <seconds> s" and exit code 3, never a hang).
//
// Ending a time-based stream without a count agreed in advance: when its time is up a sender
// posts `window` zero-byte messages. The receiver keeps at most `window` receives posted, so when
// it sees the first zero-byte message at index t it has posted at most up to t + window - 1; it
// posts exactly up to there and every request on both sides completes.
#pragma once

#include <vector>

#include "context.h"
#include "report.h"

namespace mesh::bench {

std::vector<Row> run_stream(Context& ctx);

}  // namespace mesh::bench
