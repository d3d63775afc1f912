#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Keeps a host's relay agent alive for a namespace test: loads the plugin, calls its
ncclNetPlugin_v11 init (which starts the handshake service and the relay agent), waits until
stdin closes or SIGTERM arrives, then calls finalize (which stops both threads before the
process's static destructors run). A relay host of a test pair runs no bench rank, so the agent
that carries the pair's sockets lives in this process (docs/relay.md: a host relays while any
plugin process runs on it).

With --listen it also opens one listen comm on device 0 (registered with the host's relay agent
like any listener) and prints its 128-byte handle in hex ("handle HEX"), for tests that send
relay requests by hand (cases.py relay-auth).

Usage: relay_holder.py PLUGIN.so [--listen]   (prints "ready" once init returned 0)"""

import ctypes
import signal
import sys


class CommConfig(ctypes.Structure):
    _fields_ = [("trafficClass", ctypes.c_int)]


class NetV11(ctypes.Structure):
    # The members up to finalize (src/nccl/net_v11.h); the ones not called are plain pointers.
    _fields_ = ([("name", ctypes.c_char_p),
                 ("init", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                           ctypes.c_uint64, ctypes.POINTER(CommConfig),
                                           ctypes.c_void_p, ctypes.c_void_p)),
                 ("devices", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))),
                 ("getProperties", ctypes.c_void_p),
                 ("listen", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                             ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)))]
                + [(f"unused{i}", ctypes.c_void_p) for i in range(15)]
                + [("finalize", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p))])


def say(line: str) -> None:
    """One write(2) per line: print() writes the text and its newline apart, and a log line that
    a plugin thread writes to the same file in between would end up inside this line (the test
    then never found "handle HEX" at a line's end)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    lib = ctypes.CDLL(sys.argv[1])
    net = NetV11.in_dll(lib, "ncclNetPlugin_v11")
    ctx = ctypes.c_void_p()
    config = CommConfig(-1)
    rc = net.init(ctypes.byref(ctx), 0, ctypes.byref(config), None, None)
    n = ctypes.c_int(0)
    if rc != 0 or net.devices(ctypes.byref(n)) != 0:
        say(f"init failed: rc {rc}")
        return 1
    if "--listen" in sys.argv[2:]:
        handle = ctypes.create_string_buffer(128)
        comm = ctypes.c_void_p()
        rc = net.listen(ctx, 0, handle, ctypes.byref(comm))
        if rc != 0:
            say(f"listen failed: rc {rc}")
            return 1
        say(f"handle {handle.raw.hex()}")
    say(f"ready: {n.value} device(s)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        sys.stdin.read()
    finally:
        net.finalize(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
