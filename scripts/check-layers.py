#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a file under src/ includes a header of a higher layer.

The layers, lowest first (docs/design.md explains each):

    nccl -> util -> topology -> relay -> handshake -> transport -> plugin -> gin -> abi -> tools

A file may include headers of its own layer and of lower ones. Inside `transport`, the
`tcp/` and `rdma/` folders are siblings: neither includes the other (both may include the
shared `transport/*.h`). `tools/` sits above everything (the bench and the doctor use any
layer). An include of a project folder that is not a layer is an error too, so a new folder
cannot slip past the check.

Usage: check-layers.py SRC_DIR [--stamp FILE]
Exit 0 when clean (and touch FILE), 1 with one line per violation otherwise.
"""
import argparse
import pathlib
import re
import sys

LAYERS = ["nccl", "util", "topology", "relay", "handshake", "transport", "plugin", "gin", "abi",
          "tools"]
RANK = {name: i for i, name in enumerate(LAYERS)}
SIBLINGS = {"transport": {"tcp", "rdma"}}  # sub-folders that must not include each other
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCE_SUFFIXES = {".h", ".hh", ".hpp", ".c", ".cc", ".cpp"}


def sublayer(parts):
    """('transport', 'tcp', 'x.h') -> 'tcp'; None where the layer has no sibling rule."""
    if len(parts) > 2 and parts[1] in SIBLINGS.get(parts[0], ()):
        return parts[1]
    return None


def check(src: pathlib.Path):
    problems = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(src).parts
        if rel[0] not in RANK:
            problems.append(f"{path}: folder src/{rel[0]}/ is not a layer ({' -> '.join(LAYERS)})")
            continue
        here, here_sub = rel[0], sublayer(rel)
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            target = pathlib.PurePosixPath(m.group(1)).parts
            line = text.count("\n", 0, m.start()) + 1
            if len(target) < 2:
                continue  # same-folder include ("x.h"): same layer by construction
            if target[0] not in RANK:
                if (src / m.group(1)).exists() or (path.parent / m.group(1)).exists():
                    problems.append(f"{path}:{line}: includes {m.group(1)} from a folder that "
                                    "is not a layer")
                continue  # a system or third-party header written with quotes
            if RANK[target[0]] > RANK[here]:
                problems.append(f"{path}:{line}: layer '{here}' includes {m.group(1)} of the "
                                f"higher layer '{target[0]}'")
            elif target[0] == here and here_sub is not None:
                there_sub = sublayer(target)
                if there_sub is not None and there_sub != here_sub:
                    problems.append(f"{path}:{line}: {here}/{here_sub} includes {m.group(1)} of "
                                    f"its sibling {here}/{there_sub}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("--stamp")
    args = ap.parse_args()
    problems = check(pathlib.Path(args.src))
    for p in problems:
        print(f"layer check: {p}", file=sys.stderr)
    if problems:
        print(f"layer check: {len(problems)} upward include(s); see docs/design.md 'Layers'",
              file=sys.stderr)
        return 1
    if args.stamp:
        pathlib.Path(args.stamp).touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
