#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The order in which a ring pattern times its two transports at each size (issue 28: the one
# timed second runs slower on a small machine, so a comparison takes both orders):
#   - by default every row was timed plugin first, with --tcp-first TCP first, as each row's
#     JSON "order" (recorded as the runs happen) and the header line say;
#   - scripts/bench-interleaved.py --alternate-order times odd rounds plugin first and even
#     rounds TCP first, and its summary gives the median of each order;
#   - its --versus NAME compares the plugins' times with NAME's of the same round directly (how
#     Mesh is set against NCCL's own Socket, scripts/build-nccl-socket.sh), and refuses a NAME
#     that is not one of the plugins.
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
python3 "$script" --bench "$bench" --plugin "a=$plugin" --plugin "b=$plugin" --versus b \
  --rounds 2 -- --nranks 3 --pattern ring-allreduce --sizes 64K --iters 4 --warmup 1 \
  --timeout 30 -q >"$dir/versus.txt" 2>"$dir/versus.err" || {
  echo "bench-interleaved.py --versus failed:"; cat "$dir/versus.err"; exit 1; }
python3 - "$dir/versus.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
times = {}
for m in re.finditer(r"^\| (\d) \| (a|b) \| 3 \| 64 KiB \| plugin \| ([0-9.]+) \|", text, re.M):
    times[(m.group(1), m.group(2))] = float(m.group(3))
want = sorted(times[(r, "a")] / times[(r, "b")] for r in "12")
m = re.search(r"^\| plugin \| ranks \| size \| median time / b's \(range\) \| runs <= 1.0 \|\n"
              r"\|---\|---\|---\|---\|---\|\n"
              r"\| a \| 3 \| 64 KiB \| ([0-9.]+) \(([0-9.]+)-([0-9.]+)\) \| (\d)/2 \|$", text, re.M)
if not m:
    sys.exit("--versus b: no table of a's time over b's:\n" + text)
med, lo, hi, ok = float(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4))
if abs(lo - want[0]) > 0.006 or abs(hi - want[1]) > 0.006 or \
        abs(med - sum(want) / 2) > 0.006 or ok != sum(1 for x in want if x <= 1.0):
    sys.exit(f"--versus b: a/b per round should be {want}, the table says {m.group(0)}")
if "| b | 3 | 64 KiB |" in text.split("median time / b's")[1]:
    sys.exit("--versus b: b is compared with itself:\n" + text)
PY
if python3 "$script" --bench "$bench" --plugin "a=$plugin" --versus zz --rounds 1 -- \
     --nranks 3 --pattern ring-allreduce --sizes 64K -q >"$dir/zz.txt" 2>&1; then
  echo "bench-interleaved.py --versus zz (not a plugin name) was accepted"; exit 1
fi
grep -q "versus zz: not one of the --plugin names" "$dir/zz.txt" || {
  echo "--versus zz: no message:"; cat "$dir/zz.txt"; exit 1; }
echo "ring order: plugin first by default, tcp first with --tcp-first, alternated by round"
