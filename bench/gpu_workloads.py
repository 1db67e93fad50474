#!/usr/bin/env python3
"""Real CUDA work for the GPU checks of issue 40 (points 5 and 6), run on a
machine with an NVIDIA GPU and PyTorch (CuPy for the hash kernel): each
workload runs alone for SECONDS and prints one JSON line with how many
iterations it made.

  tensor  bf16 matrix products (the tensor pipes busy, as training is)
  hash    a ChaCha-style integer mixing kernel (add, xor, rotate in
          registers: the integer pipe busy, tensor and FP idle, as a
          hash kernel's; CuPy's RawKernel through NVRTC)
  train   a training-like step: a bf16 MLP forward, backward, AdamW
  launch  many small kernels and uncached allocations (each a cudaMalloc
          and cudaFree: driver ioctls), synchronised each iteration

No GPU, PyTorch or CuPy: a clear error and exit status 2 (CI never runs
this; bench/gpu_job_cost.py and tests/gpu/device_check.sh call it).
"""
import json
import os
import sys
import time

HASH_KERNEL = r"""
extern "C" __global__ void mix(unsigned int* out, unsigned int rounds) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int a = i, b = i ^ 0x9e3779b9u, c = 0x85ebca6bu, d = 0xc2b2ae35u;
    for (unsigned int r = 0; r < rounds; ++r) {
        a += b; d ^= a; d = (d << 16) | (d >> 16);
        c += d; b ^= c; b = (b << 12) | (b >> 20);
        a += b; d ^= a; d = (d << 8) | (d >> 24);
        c += d; b ^= c; b = (b << 7) | (b >> 25);
    }
    out[i] = a ^ b ^ c ^ d;
}
"""


def fail(message):
    print(json.dumps({"error": message}), flush=True)
    sys.exit(2)


def run_for(seconds, step, sync):
    """Calls step() until `seconds` have passed; iterations and seconds."""
    step()
    sync()  # warm-up: compilation, allocator, clocks
    iterations, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        iterations += 1
        if iterations % 16 == 0:
            sync()
    sync()
    return iterations, time.perf_counter() - start


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("tensor", "hash", "train", "launch"):
        fail("usage: gpu_workloads.py tensor|hash|train|launch SECONDS")
    workload, seconds = sys.argv[1], float(sys.argv[2])
    if workload == "launch":
        # Before CUDA starts: every allocation is the driver's (ioctls).
        os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed")
    if not torch.cuda.is_available():
        fail("no CUDA GPU visible to PyTorch")
    sync = torch.cuda.synchronize
    if workload == "tensor":
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

        def step():
            torch.matmul(a, b)

    elif workload == "hash":
        try:
            import cupy
        except ImportError:
            fail("CuPy is not installed")
        kernel = cupy.RawKernel(HASH_KERNEL, "mix")
        threads = 1 << 21
        out = cupy.zeros(threads, dtype=cupy.uint32)
        sync = cupy.cuda.Device().synchronize

        def step():
            kernel((threads // 256,), (256,), (out, cupy.uint32(4096)))

    elif workload == "train":
        model = torch.nn.Sequential(
            torch.nn.Linear(4096, 16384), torch.nn.GELU(), torch.nn.Linear(16384, 4096)
        ).to(device="cuda", dtype=torch.bfloat16)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)

        def step():
            optimizer.zero_grad(set_to_none=True)
            model(x).float().square().mean().backward()
            optimizer.step()

    else:  # launch

        def step():
            for _ in range(8):
                t = torch.empty(1 << 16, device="cuda")
                t.fill_(1.0)
                t.add_(1.0)
                del t
            torch.cuda.synchronize()

    iterations, elapsed = run_for(seconds, step, sync)
    print(json.dumps({"workload": workload, "iterations": iterations, "seconds": elapsed,
                      "per_second": iterations / elapsed, "pid": os.getpid()}), flush=True)


if __name__ == "__main__":
    main()
