#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sends one hand-made relay request to a relay agent and prints what comes back, as JSON:
{"code": N or null, "extra": "bytes after the status (hex)", "error": "..."}. For the threat
model tests of cases.py (relay-auth): an attacker on a mesh host (or a neighbour) asking a relay
agent to connect to some port of another host.

Usage: relay_probe.py RELAY_ADDR RELAY_PORT DEST_ADDR/PREFIX DEST_PORT MODE [NONCE_HEX]
  MODE: v1      the unauthenticated request format of before (64 bytes, no proof)
        random  v2 with a proof from a random nonce (an attacker who never saw the handle)
        badkey  v2 naming the listener of NONCE_HEX (its tag) but proved with another key
        good    v2 proved with NONCE_HEX (a rank that holds the listener's handle)
The request layouts are src/relay/request.h (v2) and its v1 predecessor."""

import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time


def fnv1a(data: bytes) -> int:
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def addr_bytes(dest: str) -> bytes:
    a, p = dest.split("/")
    return socket.inet_aton(a) + bytes([int(p)])


def request_v1(dest: str, port: int) -> bytes:
    b = struct.pack(">IBBHHBBI", 0x4D534852, 1, 8, 0, port, 1, 0, 0) + addr_bytes(dest)
    b = b.ljust(60, b"\0")
    return b + struct.pack(">I", fnv1a(b))


def request_v2(dest: str, port: int, tag_nonce: bytes, key_nonce: bytes) -> bytes:
    key = hmac.new(key_nonce, b"nccl-mesh relay request key v1", hashlib.sha256).digest()
    tag = hmac.new(tag_nonce, b"nccl-mesh relay listener tag v1", hashlib.sha256).digest()[:8]
    b = struct.pack(">IBBHHBBI", 0x4D534852, 2, 8, 0, port, 1, 0, 0) + addr_bytes(dest)
    b = b.ljust(56, b"\0")
    b += struct.pack(">QQ", int(time.time() * 1000), int.from_bytes(os.urandom(8), "big") | 1)
    b += tag
    covered = bytearray(b)
    covered[5] = 0  # the hop limit is outside the proof
    return b + hmac.new(key, bytes(covered), hashlib.sha256).digest()[:16]


def main() -> int:
    relay, rport, dest, dport, mode = sys.argv[1:6]
    nonce = bytes.fromhex(sys.argv[6]) if len(sys.argv) > 6 else os.urandom(16)
    if mode == "v1":
        req = request_v1(dest, int(dport))
    elif mode == "random":
        req = request_v2(dest, int(dport), os.urandom(16), os.urandom(16))
    elif mode == "badkey":
        req = request_v2(dest, int(dport), nonce, os.urandom(16))
    else:
        req = request_v2(dest, int(dport), nonce, nonce)
    out = {"code": None, "extra": "", "error": ""}
    try:
        s = socket.create_connection((relay, int(rport)), timeout=5)
        s.sendall(req)
        got = b""
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(256)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
            if len(got) >= 4 and mode == "good":
                break  # the listener now waits for a hello: nothing more will come
        if len(got) >= 4 and got[:3] == b"MRP":
            out["code"] = got[3]
            out["extra"] = got[4:].hex()
        else:
            out["extra"] = got.hex()
    except OSError as e:
        out["error"] = str(e)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
