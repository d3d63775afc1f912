#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The order in which a ring pattern times its two transports at each size (issue 28: the one
# timed second runs slower on a small machine, so a comparison takes both orders):
#   - by default every row was timed plugin first, with --tcp-first TCP first, as each row's
#     JSON "order" (recorded as the runs happen) and the header line say;
#   - scripts/bench-interleaved.py --alternate-order times odd rounds plugin first and even
#     rounds TCP first, and its summary gives the median of each order.
# usage: ring_order.sh BENCH PLUGIN INTERLEAVED_SCRIPT
set -eu
bench=$1
plugin=$2
script=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
check_order() {  # FILE FIRST SECOND
  python3 - "$@" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
want = [sys.argv[2], sys.argv[3]]
bad = [(r["bytes"], r.get("order")) for r in rows if r.get("order") != want]
if len(rows) != 2 or bad:
    sys.exit(f"{sys.argv[1]}: expected 2 rows timed {want}, got {len(rows)} rows, wrong: {bad}")
PY
}
"$bench" --plugin "$plugin" --pattern ring-allreduce --nranks 3 --sizes 4,64K --iters 4 \
  --warmup 1 --timeout 30 --json "$dir/default.json" >"$dir/default.txt"
check_order "$dir/default.json" plugin tcp
grep -q "^# pattern ring-allreduce, .*timed at each size: plugin first" "$dir/default.txt" || {
  echo "default: the header does not say plugin first:"; cat "$dir/default.txt"; exit 1; }
"$bench" --plugin "$plugin" --pattern ring-allreduce --nranks 3 --sizes 4,64K --iters 4 \
  --warmup 1 --timeout 30 --tcp-first --json "$dir/tcp.json" >"$dir/tcp.txt"
check_order "$dir/tcp.json" tcp plugin
grep -q "^# pattern ring-allreduce, .*timed at each size: tcp first" "$dir/tcp.txt" || {
  echo "--tcp-first: the header does not say tcp first:"; cat "$dir/tcp.txt"; exit 1; }
grep -q "^# data verified: every received byte matched" "$dir/tcp.txt"

python3 "$script" --bench "$bench" --plugin "a=$plugin" --rounds 2 --alternate-order -- \
  --nranks 3 --pattern ring-allreduce --sizes 64K --iters 4 --warmup 1 --timeout 30 -q \
  >"$dir/interleaved.txt" 2>"$dir/interleaved.err" || {
  echo "bench-interleaved.py failed:"; cat "$dir/interleaved.err"; exit 1; }
for want in "| 1 | a | 3 | 64 KiB | plugin |" "| 2 | a | 3 | 64 KiB | tcp |"; do
  grep -qF "$want" "$dir/interleaved.txt" || {
    echo "bench-interleaved.py: no row '$want':"; cat "$dir/interleaved.txt"; exit 1; }
done
grep -q "median ratio, plugin first / TCP first |$" "$dir/interleaved.txt" &&
  grep -q "^| a | 3 | 64 KiB | .* [0-9.]* (1) / [0-9.]* (1) |$" "$dir/interleaved.txt" || {
  echo "bench-interleaved.py: no median per order:"; cat "$dir/interleaved.txt"; exit 1; }
echo "ring order: plugin first by default, tcp first with --tcp-first, alternated by round"
