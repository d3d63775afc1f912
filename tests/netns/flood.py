#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Floods nccl-mesh handshake ports, for the namespace test fault-flood (run inside a host with
`ip netns exec`). Standard library only.

  flood.py --target ADDR:PORT [--target ...] [--half-open N] [--garbage-per-s R] [--seconds S]
           [--stats FILE]

Per target it keeps N half-open connections: connected, a few bytes of a hello sent, then
silence (the service holds such a socket until NCCL_MESH_CONNECT_TIMEOUT_MS, then closes it; the
flood opens a new one at once, also after a refused connect, at most --open-per-s a second per
target). Alongside, R connections a second (over all targets) each send --garbage-bytes random
bytes (>= the 48-byte hello, so the service answers "malformed" and closes). Runs until
--seconds pass or SIGTERM/SIGINT, then writes its counters as JSON to --stats (or stdout):
connections opened, refused, closed by the service (half-open and garbage apart), the replies
it saw (by name), the most half-open connections held at once."""

from __future__ import annotations

import argparse
import errno
import json
import os
import selectors
import signal
import socket
import sys
import time

REPLIES = {1: "accepted", 2: "wrong-nonce", 3: "malformed", 4: "busy", 5: "setup-failed"}


class Conn:
    def __init__(self, target: tuple, kind: str):
        self.target, self.kind = target, kind
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.connected = False
        self.buf = b""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", required=True, help="ADDR:PORT")
    ap.add_argument("--half-open", type=int, default=50, help="held per target")
    ap.add_argument("--partial-bytes", type=int, default=7, help="hello bytes a half-open sends")
    ap.add_argument("--garbage-per-s", type=float, default=20.0)
    ap.add_argument("--garbage-bytes", type=int, default=64)
    ap.add_argument("--open-per-s", type=float, default=200.0, help="new half-opens per target")
    ap.add_argument("--seconds", type=float, default=3600.0)
    ap.add_argument("--stats")
    a = ap.parse_args()
    targets = []
    for t in a.target:
        host, port = t.rsplit(":", 1)
        targets.append((host, int(port)))

    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    sel = selectors.DefaultSelector()
    st = {"targets": a.target, "half_open_opened": 0, "garbage_sent": 0, "connect_refused": 0,
          "connect_errors": 0, "half_open_closed_by_service": 0, "garbage_closed_by_service": 0,
          "replies": {}, "max_half_open_held": 0,
          "half_open_held_at_end": 0, "seconds": 0.0}
    held = {t: set() for t in targets}         # half-open connections, connected or connecting
    budget = {t: 0.0 for t in targets}         # token buckets for new half-opens
    garbage_budget = 0.0
    rr = 0

    def open_conn(t, kind):
        c = Conn(t, kind)
        rc = c.sock.connect_ex(t)
        if rc not in (0, errno.EINPROGRESS):
            c.sock.close()
            st["connect_refused" if rc == errno.ECONNREFUSED else "connect_errors"] += 1
            return None
        sel.register(c.sock, selectors.EVENT_WRITE, c)
        return c

    def drop(c):
        unregister_close(sel, c)
        if c.kind == "half":
            held[c.target].discard(c)

    t0 = last = time.monotonic()
    while not stop and time.monotonic() - t0 < a.seconds:
        now = time.monotonic()
        dt, last = now - last, now
        for t in targets:
            budget[t] = min(budget[t] + dt * a.open_per_s, a.open_per_s)
            while len(held[t]) < a.half_open and budget[t] >= 1:
                budget[t] -= 1
                c = open_conn(t, "half")
                if c is not None:
                    held[t].add(c)
                    st["half_open_opened"] += 1
        garbage_budget = min(garbage_budget + dt * a.garbage_per_s, max(a.garbage_per_s, 1.0))
        while garbage_budget >= 1:
            garbage_budget -= 1
            open_conn(targets[rr % len(targets)], "garbage")
            rr += 1
        st["max_half_open_held"] = max(st["max_half_open_held"],
                                       sum(len(h) for h in held.values()))
        for key, ev in sel.select(timeout=0.01):
            c = key.data
            if not c.connected:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    st["connect_refused" if err == errno.ECONNREFUSED else "connect_errors"] += 1
                    drop(c)
                    continue
                c.connected = True
                n = a.partial_bytes if c.kind == "half" else a.garbage_bytes
                try:
                    c.sock.send(os.urandom(n))
                except OSError:
                    drop(c)
                    continue
                if c.kind == "garbage":
                    st["garbage_sent"] += 1
                sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            try:
                data = c.sock.recv(4096)
            except OSError:
                data = b""
            if data:
                c.buf += data
                if len(c.buf) >= 4 and c.buf[:3] == b"MSR":
                    name = REPLIES.get(c.buf[3], f"code-{c.buf[3]}")
                    st["replies"][name] = st["replies"].get(name, 0) + 1
                    c.buf = c.buf[4:]
                continue
            st["half_open_closed_by_service" if c.kind == "half" else
               "garbage_closed_by_service"] += 1
            drop(c)
    st["half_open_held_at_end"] = sum(len(h) for h in held.values())
    st["seconds"] = round(time.monotonic() - t0, 2)
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    out = json.dumps(st, sort_keys=True)
    if a.stats:
        with open(a.stats, "w") as f:
            f.write(out + "\n")
    else:
        print(out)
    return 0


def unregister_close(sel, c):
    try:
        sel.unregister(c.sock)
    except (KeyError, ValueError):
        pass
    c.sock.close()


if __name__ == "__main__":
    sys.exit(main())
