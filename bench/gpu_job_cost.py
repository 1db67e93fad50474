#!/usr/bin/env python3
"""What the agent costs a real GPU job (issue 40 point 5): the throughput
of real CUDA work (bench/gpu_workloads.py: `train`, a training-like step;
`launch`, small kernels and uncached allocations, whose driver ioctls the
agent's sensor sees) with and without the agent running, alternated in
one run (without/with, then with/without, ...: drift cancels), printing
both, their ratio, and the agent's CPU and event rate over the runs with
it. Goal: at most 1 % slower.

  gpu_job_cost.py --agent PATH [--rounds 3] [--seconds 20] [--workloads train,launch]

Runs as root on a machine with an NVIDIA GPU and PyTorch; the agent is the
real binary on its embedded defaults plus a configuration of the
bench's own (journal in a temporary directory, /metrics on 127.0.0.1).
CI never runs it (no GPU there).
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
METRICS_PORT = 19842


def run_workload(name, seconds):
    done = subprocess.run([sys.executable, os.path.join(HERE, "gpu_workloads.py"), name,
                           str(seconds)], capture_output=True, text=True, timeout=seconds + 300)
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "{}"
    result = json.loads(line)
    if done.returncode != 0 or "error" in result:
        sys.exit(f"workload {name}: {result.get('error', done.stderr.strip())}")
    return result["per_second"]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def events_total():
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as page:
        text = page.read().decode()
    values = [float(m.group(1)) for m in
              re.finditer(r"^gpuguard_events_total(?:\{[^}]*\})? (\S+)$", text, re.M)]
    if not values:
        sys.exit("the agent's /metrics has no gpuguard_events_total")
    return sum(values)


class Agent:
    """The real agent, started and waited for ('[agent] ready'), stopped by SIGTERM."""

    def __init__(self, binary, scratch):
        self.config = os.path.join(scratch, "gpuguard.yaml")
        with open(self.config, "w") as out:
            out.write(f"journal:\n  dir: {scratch}/journal\n"
                      f"metrics:\n  enabled: true\n  listen: 127.0.0.1\n  port: {METRICS_PORT}\n"
                      f"control:\n  socket: {scratch}/control.sock\n")
        self.log = open(os.path.join(scratch, "agent.log"), "w")
        self.process = subprocess.Popen([binary, "run", "--config", self.config],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        deadline = time.time() + 120
        for line in self.process.stderr:
            self.log.write(line)
            if "[agent] ready" in line:
                break
            if time.time() > deadline:
                break
        else:
            sys.exit(f"the agent stopped before it was ready: see {self.log.name}")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        rest, _ = self.process.communicate(timeout=60)
        self.log.write(rest or "")
        self.log.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workloads", default="train,launch")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the agent loads BPF programs")
    scratch = tempfile.mkdtemp(prefix="gg-gpu-cost-")
    print(f"{'workload':8} {'round':5} {'without/s':>11} {'with/s':>11} {'ratio':>7} "
          f"{'agent CPU %':>11} {'events/s':>9}")
    for workload in args.workloads.split(","):
        ratios = []
        for round_index in range(args.rounds):
            order = ("without", "with") if round_index % 2 == 0 else ("with", "without")
            rate, cpu, events = {}, 0.0, 0.0
            for mode in order:
                if mode == "without":
                    rate[mode] = run_workload(workload, args.seconds)
                    continue
                agent = Agent(args.agent, scratch)
                cpu_before, events_before, started = (cpu_seconds(agent.process.pid),
                                                      events_total(), time.time())
                rate[mode] = run_workload(workload, args.seconds)
                elapsed = time.time() - started
                cpu = 100.0 * (cpu_seconds(agent.process.pid) - cpu_before) / elapsed
                events = (events_total() - events_before) / elapsed
                agent.stop()
            ratio = rate["with"] / rate["without"]
            ratios.append(ratio)
            print(f"{workload:8} {round_index + 1:5} {rate['without']:11.2f} {rate['with']:11.2f} "
                  f"{ratio:7.4f} {cpu:11.2f} {events:9.1f}", flush=True)
        median = statistics.median(ratios)
        print(f"{workload:8} median with/without {median:.4f} "
              f"({(1 - median) * 100:+.2f} % slower; goal at most 1 %)", flush=True)


if __name__ == "__main__":
    main()
