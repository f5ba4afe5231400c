"""The seed's benchmark #3 at full scale against a private node: what this machine achieves.

bench3: 500 publishers x 30 msg/s (15,000 msg/s target), 100 quorum queues with
``x-max-in-memory-length = 0``, 500 consumers (prefetch 30, acking every message), 1 kB
persistent messages, confirms with an in-flight limit of 30 per publisher — one connection
per client, 1,000 connections. It runs as an operator would run it:

    flowdeck run --preset bench3 --duration 60s --uri <private node> --workers N --json

against a private RabbitMQ node started here with a raised file limit. While it runs, the
CPU of the broker's Erlang VM and of every flowdeck process (the controller and its worker
processes) is read with psutil once a second, so the result says who saturated. Figures are
taken over the steady part (from ``--settle`` seconds in to the end of publishing) from the
run's own per-second progress lines; the summary (JSON) gives latency and data safety.

    .venv/bin/python benchmarks/bench3_private.py [--workers 1 2] [--duration 60]

Bounded: the run lasts ``--duration`` plus its drain; the node is stopped afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from benchlib import cpu_seconds, load_average, private_node

ROOT = Path(__file__).resolve().parent.parent
FLOWDECK = ROOT / ".venv" / "bin" / "flowdeck"
TARGET = 500 * 30
TICK = re.compile(
    r"\[\s*(?P<elapsed>\d+)/\d+ s\] target\s+(?P<target>[\d,]+)/s\s+publish\s+(?P<publish>[\d,]+)/s"
    r"\s+confirm\s+(?P<confirm>[\d,]+)/s\s+consume\s+(?P<consume>[\d,]+)/s\s+pending\s+"
    r"(?P<pending>[\d,]+)\s+e2e p50\s+(?P<p50>[\d.,-]+) p99\s+(?P<p99>[\d.,-]+) ms"
)


@dataclass
class Sampler:
    """CPU per second of the broker and of the flowdeck process tree."""

    broker_pid: int | None
    root_pid: int
    samples: list[tuple[float, float, dict[int, float], float, float]] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                root = psutil.Process(self.root_pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            per: dict[int, float] = {}
            for proc in tree:
                try:
                    times = proc.cpu_times()
                    per[proc.pid] = times.user + times.system
                    if proc.pid not in self.names:
                        cmd = " ".join(proc.cmdline())
                        self.names[proc.pid] = (
                            "worker process"
                            if "spawn_main" in cmd
                            else "controller"
                            if "flowdeck" in cmd and "resource_tracker" not in cmd
                            else "other"
                        )
                except psutil.Error:
                    continue
            machine = psutil.cpu_times()
            busy = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
            self.samples.append(
                (
                    time.monotonic(),
                    cpu_seconds(self.broker_pid),
                    per,
                    busy,
                    getattr(machine, "iowait", 0.0),
                )
            )

    def stop(self) -> None:
        self._stop.set()


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("-", "") else float("nan")


def one_run(workers: int, duration: float, settle: float) -> dict[str, object]:
    with private_node() as node:
        command = [
            str(FLOWDECK),
            "run",
            "--preset",
            "bench3",
            "--duration",
            f"{duration:g}s",
            "--uri",
            node.uri,
            "--management-url",
            node.management_url,
            "--workers",
            str(workers),
            "--no-record",
            "--cleanup",
            "--json",
        ]
        print(f"$ flowdeck {' '.join(command[1:])}  ({load_average()})", flush=True)
        began = time.monotonic()
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        sampler = Sampler(node.beam_pid(), process.pid)
        thread = threading.Thread(target=sampler.run, daemon=True)
        thread.start()
        ticks: list[dict[str, float]] = []
        assert process.stderr is not None
        for line in process.stderr:
            match = TICK.search(line)
            if match:
                tick = {k: number(v) for k, v in match.groupdict().items()}
                tick["at"] = time.monotonic()
                ticks.append(tick)
                if int(tick["elapsed"]) % 5 == 0:
                    print("  " + line.rstrip(), flush=True)
            elif line.strip():  # events, announcements, errors
                print("  " + line.rstrip(), flush=True)
        stdout = process.stdout.read() if process.stdout else ""
        code = process.wait(timeout=120)
        sampler.stop()
        thread.join()
        wall = time.monotonic() - began
    if code not in (0, 1) or not stdout.strip():
        raise SystemExit(f"flowdeck run ended with exit code {code} and no summary")
    summary = json.loads(stdout)
    steady = [t for t in ticks if settle <= t["elapsed"] <= duration - 1]
    if not steady:
        raise SystemExit(f"no progress lines between {settle:g} s and {duration:g} s")
    t0, t1 = steady[0]["at"] - 1.0, steady[-1]["at"]
    window = [s for s in sampler.samples if t0 <= s[0] <= t1]
    first, last = window[0], window[-1]
    seconds = last[0] - first[0]
    broker_cores = (last[1] - first[1]) / seconds
    per_process = {
        pid: (last[2].get(pid, 0.0) - first[2].get(pid, 0.0)) / seconds for pid in last[2]
    }
    workers_cores = sorted(
        (v for pid, v in per_process.items() if sampler.names.get(pid) == "worker process"),
        reverse=True,
    )
    controller_cores = sum(
        v for pid, v in per_process.items() if sampler.names.get(pid) == "controller"
    )
    machine_busy = (last[3] - first[3]) / seconds
    others = machine_busy - broker_cores - sum(per_process.values())
    publish = [t["publish"] for t in steady]
    consume = [t["consume"] for t in steady]
    p99 = [t["p99"] for t in steady if t["p99"] == t["p99"]]
    p50 = [t["p50"] for t in steady if t["p50"] == t["p50"]]
    return {
        "workers": workers,
        "wall_s": wall,
        "outcome": summary["outcome"],
        "publish_mean": statistics.mean(publish),
        "publish_min": min(publish),
        "publish_max": max(publish),
        "consume_mean": statistics.mean(consume),
        "pending_max": max(t["pending"] for t in steady),
        "e2e_p50_ms_median": statistics.median(p50) if p50 else float("nan"),
        "e2e_p99_ms_median": statistics.median(p99) if p99 else float("nan"),
        "e2e_p99_ms_max": max(p99) if p99 else float("nan"),
        "run_latency_ms": summary["latency_ms"],
        "safety": summary["safety"],
        "broker_cores": broker_cores,
        "worker_cores": workers_cores,
        "controller_cores": controller_cores,
        "machine_busy_cores": machine_busy,
        "other_work_cores": others,
        "iowait_cores": (last[4] - first[4]) / seconds,
        "errors": summary["errors"][:3],
        "steady_seconds": len(steady),
    }


def main(args: argparse.Namespace) -> int:
    rows = []
    for workers in args.workers:
        result = one_run(workers, args.duration, args.settle)
        rows.append(result)
        print(json.dumps(result, indent=1, default=str), flush=True)
    print()
    print(
        f"## bench3 at scale 1 (target {TARGET:,} msg/s), {args.duration:g} s, steady part "
        f"from {args.settle:g} s, private node, {os.cpu_count()} cores"
    )
    print(
        "| workers | publish msg/s mean (min–max per s) | consume msg/s | of target | "
        "e2e p50 / p99 ms (median of seconds) | broker cores | worker cores | controller | "
        "other work on the machine, cores | iowait |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        workers_text = " + ".join(f"{c:.2f}" for c in r["worker_cores"])  # type: ignore[attr-defined]
        print(
            f"| {r['workers']} | {r['publish_mean']:,.0f} ({r['publish_min']:,.0f}–"
            f"{r['publish_max']:,.0f}) | {r['consume_mean']:,.0f} | "
            f"{r['publish_mean'] / TARGET:.0%} | {r['e2e_p50_ms_median']:,.1f} / "  # type: ignore[operator]
            f"{r['e2e_p99_ms_median']:,.1f} | {r['broker_cores']:.2f} | {workers_text} | "
            f"{r['controller_cores']:.2f} | {r['other_work_cores']:.2f} | "
            f"{r['iowait_cores']:.2f} |"
        )
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="one run per value")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (20–120)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before steady")
    args = parser.parse_args()
    if not 20 <= args.duration <= 120:
        parser.error(f"--duration must be 20..120 s, got {args.duration:g}")
    if not 0 <= args.settle < args.duration - 5:
        parser.error(f"--settle must be 0..duration-5 s, got {args.settle:g}")
    return args


if __name__ == "__main__":
    sys.exit(main(parse()))
