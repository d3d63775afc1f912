#!/usr/bin/env python3
"""Keeps a host's relay agent alive for a namespace test: loads the plugin, calls its
ncclNetPlugin_v8 init (which starts the handshake service and the relay agent), then waits until
stdin closes or SIGTERM arrives. A relay host of a test pair runs no bench rank, so the agent
that carries the pair's sockets lives in this process (docs/relay.md: a host relays while any
plugin process runs on it).

Usage: relay_holder.py PLUGIN.so   (prints "ready" once init returned 0)"""

import ctypes
import signal
import sys


class NetV8(ctypes.Structure):
    # Only the leading members this script calls (src/nccl/net_v8.h).
    _fields_ = [("name", ctypes.c_char_p),
                ("init", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)),
                ("devices", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int)))]


def main() -> int:
    lib = ctypes.CDLL(sys.argv[1])
    net = NetV8.in_dll(lib, "ncclNetPlugin_v8")
    rc = net.init(None)
    n = ctypes.c_int(0)
    if rc != 0 or net.devices(ctypes.byref(n)) != 0:
        print(f"init failed: rc {rc}", flush=True)
        return 1
    print(f"ready: {n.value} device(s)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
