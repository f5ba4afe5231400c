"""Changes per second through a run's control endpoint (issue 29): one request per change,
as ``flowdeck steer`` sent them before, against one request for all of them, as it does now.

A headless ``flowdeck run`` on the shared broker (1 publisher, 1 consumer at 100 msg/s, one
worker process, not recorded, its queue deleted at the end) serves its control endpoint;
then, each waiting for every change to be in force in the worker:

* ``one request per change``: ``ControlClient.change`` in a loop (what ``steer a=1 b=2 ...``
  did), for ``--changes`` changes or ``--seconds`` seconds, whichever comes first;
* ``one request``: ``ControlClient.changes`` with all ``--changes`` at once;
* ``flowdeck steer``: the command line itself with all of them, interpreter start included.

    .venv/bin/python benchmarks/steer_rate.py [--changes 1000] [--seconds 60]

Bounded: the run lasts at most 10 minutes and is stopped through its endpoint at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchlib import load_average

from flowdeck.engine.control import ControlClient, Endpoint, running_runs

SHARED = os.environ.get("FLOWDECK_TEST_URI", "amqp://guest:guest@127.0.0.1:5672/%2F")
FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]


def changes(count: int, first: int) -> list[str]:
    """Alternating in-flight limits, each different from the one before (so each is a
    change the worker applies)."""
    return [f"inflight={first + index % 2}" for index in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        env = {**os.environ, "FLOWDECK_RUNS_DIR": str(runs), "FLOWDECK_URI": ""}
        queue = f"flowdeck-bench-steer-{uuid.uuid4().hex[:8]}-%d"
        command = [
            *FLOWDECK, "run", "--uri", SHARED, "--queues", "1", "--publishers", "1",
            "--consumers", "1", "--rate", "100", "--workers", "1", "--duration", "600",
            "--queue-pattern", queue, "--cleanup", "--no-record",
        ]  # fmt: skip
        run = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            deadline = time.monotonic() + 90
            while not (listed := running_runs(runs)) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not listed:
                raise SystemExit("the run did not list its endpoint within 90 s")
            entry = listed[0]
            client = ControlClient(Endpoint(entry.url, entry.token, entry.run_id), timeout=60)
            time.sleep(2.0)  # the worker connected and publishing
            print(f"load average before: {load_average()}")

            asked = changes(options.changes, 100)
            began = time.monotonic()
            done = 0
            for text in asked:
                if time.monotonic() - began > options.seconds:
                    break
                client.change(text, wait=30)
                done += 1
            took = time.monotonic() - began
            print(
                f"one request per change: {done} changes in {took:.1f} s = "
                f"{done / took:,.0f} changes/s ({1000 * took / done:.1f} ms each)"
            )

            asked = changes(options.changes, 300)
            began = time.monotonic()
            answers = client.changes(asked, wait=30)
            took = time.monotonic() - began
            in_force = sum(1 for answer in answers if answer.get("in_force"))
            print(
                f"one request: {len(asked)} changes in {took:.2f} s = "
                f"{len(asked) / took:,.0f} changes/s ({in_force} in force)"
            )

            asked = changes(options.changes, 500)
            began = time.monotonic()
            steer = subprocess.run(
                [*FLOWDECK, "steer", entry.run_id, *asked, "--wait", "30"],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            took = time.monotonic() - began
            lines = steer.stdout.count("in force after")
            print(
                f"flowdeck steer with {len(asked)} changes: exit {steer.returncode} in "
                f"{took:.2f} s (interpreter start included) = {len(asked) / took:,.0f} "
                f"changes/s ({lines} in force)"
            )
            print(f"load average after: {load_average()}")
            client.stop()
            run.wait(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()


if __name__ == "__main__":
    main()
