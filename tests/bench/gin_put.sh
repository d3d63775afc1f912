#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# nccl-mesh-bench --pattern gin-put and gin-put-signal on 2 local ranks over loopback, small
# sizes: the run must exit 0 (every put's bytes verified after its signal), and every row must
# carry the GIN number, both references measured in the same run (net = the plugin's
# isend/irecv, tcp = plain TCP) and the ratios, which must equal GIN / reference.
# usage: gin_put.sh BENCH
set -eu
bench=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pattern in gin-put gin-put-signal; do
  "$bench" --pattern "$pattern" --sizes 8,4K,64K --iters 8 --warmup 1 --quiet --timeout 30 >"$out"
  grep -q "^# data verified: every received byte matched" "$out"
  grep -q "^# no RDMA device: no ib_write_bw reference\|^# RDMA device(s) " "$out"
  # Header: pair size iters win <pattern> GB/s net GB/s bw ratio tcp GB/s bw ratio ...
  head=$(grep "^#   pair " "$out")
  echo "$head" | grep -q "$pattern GB/s \+net GB/s \+bw ratio \+tcp GB/s \+bw ratio" || {
    echo "$pattern: header lacks the GIN, net and tcp columns:"; cat "$out"; exit 1; }
  rows=$(grep -c "^ *[0-9]->[0-9] " "$out" || true)
  [ "$rows" -eq 6 ] || { echo "$pattern: expected 6 rows (2 directions x 3 sizes), got $rows"; cat "$out"; exit 1; }
  # Columns after the pair label and size (2 words): iters win gin net ratio tcp ratio.
  grep "^ *[0-9]->[0-9] " "$out" | awk -v p="$pattern" '
  function within(r, a, b, h,    lo, hi) {
    lo = (a - h > 0 ? a - h : 0) / (b + h)
    if (r < lo * 0.95 - 0.006) return 0
    if (b - h <= 0) return 1
    hi = (a + h) / (b - h)
    return r <= hi * 1.05 + 0.006
  }
  {
    gin = $6; net = $7; rn = $8; tcp = $9; rt = $10
    if (gin !~ /^[0-9.]+$/ || net !~ /^[0-9.]+$/ || tcp !~ /^[0-9.]+$/ || rn !~ /^[0-9.]+$/ ||
        rt !~ /^[0-9.]+$/) { print p ": a number is missing: " $0; bad = 1; next }
    # 8 B rows under load (ctest -j) can be under 0.000005 GB/s, printed as 0.00000: only the
    # KiB rows must show a rate (the run itself fails when a put is lost or wrong).
    if ($3 != "B" && (gin <= 0 || net <= 0 || tcp <= 0)) {
      print p ": zero bandwidth: " $0; bad = 1; next }
    # The printed ratios are GIN / reference of the unrounded numbers, rounded to 2 decimals;
    # the printed GB/s are rounded to 5 decimals (h), which at the 8 B rates of a loaded host
    # (0.00001 GB/s) is most of the number. So each unrounded number lies within h of the
    # printed one, and the ratio must lie in the interval that spans (plus its own rounding
    # and 5%); a reference printed as h or less leaves the ratio unbounded above.
    h = 0.000005
    if (!within(rn, gin, net, h) || !within(rt, gin, tcp, h)) {
      print p ": ratio is not gin / reference: " $0; bad = 1 }
  } END { exit bad }'
  echo "$pattern: ok"
done
