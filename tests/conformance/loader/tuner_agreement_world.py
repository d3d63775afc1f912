#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every member rank of a communicator decides alike, as separate processes in the emulated world.

One process per rank (mesh_tuner_probe), each with its own NCCL_MESH_EMULATE position on an
emulated line or ring of 3..8 hosts, so each sees only its own host's cables, exactly as ranks on
real hosts do. Communicators: every run of consecutive ranks and split-like subsets (every other
rank, reversed, drop-first, drop-last). Every member's decisions (the algorithm NCCL would run
for every collective and size) must be identical. Also: a malformed tuner setting fails init.
Usage: tuner_agreement_world.py PROBE PLUGIN.so
"""
import os
import subprocess
import sys


def decisions(probe, plugin, shape, hosts, position, n, env_extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("NCCL_MESH_"):
            del env[k]
    env["NCCL_MESH_EMULATE"] = f"{shape}:{hosts}:{position}"
    env.update(env_extra)
    out = subprocess.run([probe, plugin, str(n), str(n)], env=env, capture_output=True,
                         text=True, timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"probe failed ({out.returncode}): {out.stderr}")
    return out.stdout.strip(), out.stderr


def communicators(hosts):
    comms = []
    for first in range(hosts):
        for last in range(first + 1, hosts):
            comms.append((f"ranks {first}..{last}", list(range(first, last + 1))))
    comms.append(("every other rank", list(range(0, hosts, 2))))
    comms.append(("reversed", list(reversed(range(hosts)))))
    comms.append(("drop first", list(range(1, hosts))))
    comms.append(("drop last", list(range(hosts - 1))))
    return comms


def main():
    probe, plugin = sys.argv[1], sys.argv[2]
    checked = steered = processes = 0
    settings = [{}, {"NCCL_MESH_TUNER_MIN_BYTES": "0"}, {"NCCL_MESH_TUNER": "ring"}]
    for env_extra in settings:
        for shape in ("line", "ring"):
            for hosts in (3, 4, 5, 8):
                for name, members in communicators(hosts):
                    if len(members) < 2:
                        continue
                    seen = {}
                    for m in members:
                        d, _ = decisions(probe, plugin, shape, hosts, m, len(members), env_extra)
                        processes += 1
                        seen.setdefault(d, []).append(m)
                    if len(seen) != 1:
                        print(f"FAIL {shape}{hosts} {name} {env_extra}: members decide unlike:")
                        for d, who in seen.items():
                            print(f"  hosts {who}: {d}")
                        return 1
                    d = next(iter(seen))
                    if not d.startswith("decisions "):
                        print(f"FAIL {shape}{hosts} {name}: {d}")
                        return 1
                    checked += 1
                    steered += "1" in d.split()[1]  # NCCL_ALGO_RING == 1
    if steered == 0:
        print("FAIL: no communicator was steered; the property was never exercised")
        return 1
    # A malformed tuner setting fails init (a default nobody asked for could differ from the
    # other hosts' value), with a WARN naming it.
    for bad in ({"NCCL_MESH_TUNER": "rnig"}, {"NCCL_MESH_TUNER_MIN_BYTES": "12 MB"}):
        d, err = decisions(probe, plugin, "line", 3, 0, 3, bad)
        name = next(iter(bad))
        if not d.startswith("init-failed") or name not in err:
            print(f"FAIL: malformed {bad} gave '{d}', stderr: {err}")
            return 1
    print(f"ok: {checked} communicators, {processes} rank processes, {steered} steered; "
          f"malformed tuner settings fail init")
    return 0


if __name__ == "__main__":
    sys.exit(main())
