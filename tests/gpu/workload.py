#!/usr/bin/env python3
"""CUDA workloads for real_gpu_check.sh (needs PyTorch with CUDA).

  workload.py compute SECONDS GIB [-o stratum+tcp://HOST:PORT ...]
      holds GIB of GPU memory and keeps the SMs busy for SECONDS; with -o in
      its argv it looks like a miner by its command line
  workload.py netminer SECONDS HOST:PORT
      the same with an innocent command line, but connects to HOST:PORT and
      sends an XMRig-style stratum login, then a share every 5 s
  workload.py hoard GIB SECONDS
      takes 2 GiB a second up to GIB, computes nothing, holds it for SECONDS
"""
import json
import socket
import sys
import time

import torch


def compute(seconds, gib, pool=None):
    held = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")  # noqa: F841
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    sock = None
    if pool:
        host, port = pool.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=5)
        login = {"id": 1, "jsonrpc": "2.0", "method": "login",
                 "params": {"login": "48edfHu7V9Z84YzzMa6fUueoELZ9ZRXq9VetWzYGzKt52XU5xvqgzYnDK9URnRoJMk1j8nLwEVsaSWJ4fhdUyZijBGUicoD",
                            "pass": "x", "agent": "XMRig/6.21.0 (Linux x86_64) libuv/1.44.2 gcc/12.2.0",
                            "algo": ["rx/0"]}}
        sock.sendall((json.dumps(login) + "\n").encode())
    start, shares = time.time(), 0
    while time.time() < start + seconds:
        for _ in range(50):
            a @ a
        torch.cuda.synchronize()
        if sock and time.time() > start + 5 * (shares + 1):
            shares += 1
            submit = {"id": 2 + shares, "jsonrpc": "2.0", "method": "submit",
                      "params": {"id": "1", "job_id": "j1", "nonce": "%08x" % shares, "result": "ab" * 32}}
            sock.sendall((json.dumps(submit) + "\n").encode())


def hoard(gib, seconds):
    blocks = []
    for _ in range(gib // 2):
        blocks.append(torch.empty(2 << 30, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        time.sleep(1.0)
    time.sleep(seconds)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "compute":
        compute(float(sys.argv[2]), float(sys.argv[3]))
    elif mode == "netminer":
        compute(float(sys.argv[2]), 1.0, pool=sys.argv[3])
    elif mode == "hoard":
        hoard(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit("unknown mode " + mode)
