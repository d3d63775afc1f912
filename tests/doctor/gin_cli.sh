#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The `gin` check through the binary: pointed at this build's plugin, the doctor must read the
# five GIN/RMA tables from the .so itself (dlopen + dlsym, not a built-in list), report memory
# types consistent with whether libcuda.so.1 loads, and never fail the check for want of a GPU.
# usage: gin_cli.sh DOCTOR PLUGIN
set -eu
doctor=$1
plugin=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The exit code reflects the other checks on this host; only the JSON matters here.
NCCL_NET_PLUGIN=$plugin "$doctor" --json >"$out" || true
python3 - "$out" "$plugin" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
gin = doc["gin"]
want = ["ncclGinPlugin_v11", "ncclGinPlugin_v12", "ncclGinPlugin_v13",
        "ncclRmaPlugin_v14", "ncclRmaPlugin_v15"]
assert gin["exported"] == want, gin
assert os.path.realpath(gin["plugin"]) == os.path.realpath(sys.argv[2]), gin["plugin"]
assert gin["memory"][0] == "host" and ("cuda" in gin["memory"]) == gin["cuda_driver"], gin
found = [c for c in doc["checks"] if c["check"] == "gin"]
subjects = {c["subject"] for c in found}
assert {"exports", "memory", "transport", "nccl"} <= subjects, subjects
assert all(c["verdict"] != "fail" for c in found), found
nccl = next(c for c in found if c["subject"] == "nccl")
print("gin check:", gin["nccl_version"] or "NCCL version not known", "-", nccl["message"][:100])
PY
echo "gin cli check passed"
