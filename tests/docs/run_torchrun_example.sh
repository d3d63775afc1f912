#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs examples/torchrun_mesh_check.py as docs/deploy.md shows it for one CPU-only machine:
# torchrun, 2 ranks, gloo backend; passes when the script's last line is PASS. Without PyTorch
# (Debian: python3-torch, not a build dependency) the test is skipped with that reason.
#   run_torchrun_example.sh SOURCE_DIR
set -uo pipefail
src=$1
# The first Python with PyTorch: $MESH_TORCH_PYTHON, the one on PATH, Debian's own.
py=
for c in ${MESH_TORCH_PYTHON:-} python3 /usr/bin/python3; do
  if "$c" -c 'import torch.distributed' 2>/dev/null; then py=$c; break; fi
done
if [ -z "$py" ]; then
  echo "SKIP: PyTorch is not installed (apt install python3-torch to run this example)"
  exit 77
fi
port=$((29400 + RANDOM % 500))
# --redirects/--tee: Debian 12's torch 1.13 launcher fails in to_map() on Python 3.11 without them.
# Underscore spellings: PyTorch 1.13 knows only these, later versions accept both.
out=$(timeout 300 "$py" -m torch.distributed.run --nnodes=1 --nproc_per_node=2 \
        --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$port" --redirects 1 --tee 1 \
        "$src/examples/torchrun_mesh_check.py" --sizes 4K,1M --iters 3 --backend gloo 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] && grep -q 'PASS: every check matched on 2 ranks' <<<"$out" || {
  echo "FAIL: torchrun example exited $rc"
  exit 1
}
