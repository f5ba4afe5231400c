"""Event-loop lag and key response of the cockpit under the busiest preset.

Runs the cockpit headless (Textual's Pilot, same loop, same widgets, same one-second
redraws) on a run of the busiest preset, ``bench5`` (1000 publishers, 200 quorum queues,
1000 consumers at full size), scaled to what the machine can carry, against the shared
broker. The controller runs in the app's loop, as in ``flowdeck cockpit``; the workers are
processes. Meanwhile it measures:

* loop lag: a task asks to sleep 20 ms and records how late it wakes (what any key waits
  for at worst);
* key response: a thread presses ``l`` (toggle latency basis: redraws a chart) about four
  times a second through the app's driver, as Textual's input thread does, at moments that
  do not wait for the loop to be free; a key's response is from the press until its
  action starts on the loop.

Two more passes ("synthetic") feed a fake run with 1000 queues per broker sample and a
full 300 s history, to load the panels far beyond the live run: one with the event log
shown, one with the queue table shown (its 1000 rows updated every second).

With ``--private`` (issue 15's targets), on a private RabbitMQ node of its own (started
first, stopped at the end: every pass is bounded in time):

* bench3 live: key response while the seed's benchmark #3 runs at full client count
  (500 publishers + 500 consumers, 100 quorum queues; ``--bench3-rate`` lowers the
  per-publisher rate, not the client count, for a machine that cannot carry 15,000 msg/s);
* edges: the cockpit as the operator opens it, on the node already running: the launch
  screen is left ``--settle`` seconds (the operator reads the form), then Ctrl+R; launch
  -> first data is from the key until the dashboard holds its first second of figures.
  ``--launches`` launches, the run stopped and the launch screen back between them; then
  Ctrl+Q with a run going, timed until the app has ended (the node killed included).

Each figure is printed against its target (key p99 50 ms, launch -> first data 3 s,
quit 2 s) as a ratio: below 1 meets it.

Usage::

    .venv/bin/python benchmarks/tui_lag.py [--scale 0.02] [--seconds 40] [--uri URI]
        [--skip-live] [--skip-synthetic] [--private [--bench3-rate 30] [--launches 3]]
        [--blame MS]

Results and their history are in ``benchmarks/README.md`` (section "Cockpit
responsiveness"). Until 2026-11-22 09:20 the key was pressed from the loop itself once a
second, after the lag probe woke: that version could not see a key wait behind a busy
loop, and its "key handled" figures are not comparable with the ones here.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual import events

from flowdeck.collectors import Broker, Provisioner
from flowdeck.engine import WorkerPool
from flowdeck.engine.presets import preset
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens.launch import LaunchScreen
from flowdeck.tui.screens.live import LiveScreen

#: Seconds between two presses of the typist (uniformly drawn): ~4 keys a second.
PRESS_GAP = (0.15, 0.35)
#: Issue 15's targets: key -> screen p99, launch -> first data on a running node, quit.
KEY_P99_TARGET_MS = 50.0
FIRST_DATA_TARGET_S = 3.0
QUIT_TARGET_S = 2.0
#: Longest a launch may take to show data, or a quit to end, before the pass gives up.
EDGE_LIMIT_S = 60.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))
    return ordered[index]


class Typist(threading.Thread):
    """Presses ``l`` the way a terminal does: from its own thread, through the app's driver
    (what Textual's input thread calls), at times that do not wait for the loop to be free.
    A key's response is from the press to the moment its action starts on the loop.
    """

    def __init__(self, app: FlowdeckApp, screen: LiveScreen) -> None:
        super().__init__(name="typist", daemon=True)
        self.app = app
        self.responses: list[float] = []
        self.unanswered = 0
        self._handled = threading.Event()
        self._handled_at = 0.0
        self._stopping = threading.Event()
        toggle = screen.action_toggle_basis

        def timed_toggle() -> None:
            # The key's action runs now: the time is taken here, on the loop, not when the
            # typist's thread next gets the interpreter (up to a switch interval later,
            # while the action's redraw holds it).
            self._handled_at = time.monotonic()
            self._handled.set()
            toggle()

        screen.action_toggle_basis = timed_toggle  # type: ignore[method-assign]

    def run(self) -> None:
        driver = self.app._driver
        assert driver is not None
        while not self._stopping.wait(random.uniform(*PRESS_GAP)):
            self._handled.clear()
            pressed = time.monotonic()
            driver.process_message(events.Key("l", "l"))
            if self._handled.wait(5.0):
                self.responses.append((self._handled_at - pressed) * 1000)
            else:
                self.unanswered += 1

    def stop(self) -> None:
        self._stopping.set()
        self.join()


class Blame(threading.Thread):
    """What holds the loop (``--blame MS``): a thread looks at the loop's thread every
    5 ms; once the loop has been away more than ``threshold_ms`` it samples that thread's
    stack, and counts each sample against the innermost flowdeck and Textual frames (the
    caller's code, not the library's inner loops). Garbage collections are timed too.
    A sample is the stack at one moment of a late stretch, so the counts say where the
    late stretches spend their time, 5 ms a sample."""

    def __init__(self, threshold_ms: float) -> None:
        super().__init__(name="blame", daemon=True)
        self.threshold = threshold_ms / 1000
        self.loop_thread = threading.get_ident()
        self.beat = time.monotonic()
        self.samples: dict[str, int] = {}
        self.collections: list[tuple[int, float]] = []
        self._gc_began = 0.0
        self._stopping = threading.Event()

    async def heartbeat(self) -> None:
        while not self._stopping.is_set():
            self.beat = time.monotonic()
            await asyncio.sleep(0.002)

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_began = time.perf_counter()
        elif threading.get_ident() == self.loop_thread:
            self.collections.append(
                (info["generation"], (time.perf_counter() - self._gc_began) * 1000)
            )

    def run(self) -> None:
        import traceback

        while not self._stopping.wait(0.005):
            if time.monotonic() - self.beat < self.threshold:
                continue
            frame = sys._current_frames().get(self.loop_thread)
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)
            ours = [f for f in stack if "/flowdeck/" in f.filename or "/tui/" in f.filename
                    or "/engine/" in f.filename or "/collectors/" in f.filename]  # fmt: skip
            lib = [f for f in stack if "/textual/" in f.filename or "/rich/" in f.filename]
            # The outermost flowdeck frame says which handler runs, the innermost what in it.
            frames = [*ours[:1], *ours[-1:], *lib[-1:]] if ours else [*lib[-2:], stack[-1]]
            where = " > ".join(f"{Path(f.filename).name}:{f.name}" for f in frames)
            self.samples[where] = self.samples.get(where, 0) + 1

    def __enter__(self) -> Blame:
        import gc

        gc.callbacks.append(self.on_gc)
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        self._stopping.set()
        gc.callbacks.remove(self.on_gc)
        self.join()

    def report(self, top: int = 15) -> str:
        lines = [f"late-loop samples (5 ms each, loop away > {self.threshold * 1000:g} ms):"]
        for where, count in sorted(self.samples.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"  {count:5d}  {where}")
        for generation in (0, 1, 2):
            took = [ms for g, ms in self.collections if g == generation]
            if took:
                lines.append(
                    f"  gc generation {generation}: {len(took)} collections, "
                    f"p50 {percentile(took, 50):.1f} ms, max {max(took):.1f} ms, "
                    f"{sum(took):.0f} ms in all"
                )
        return "\n".join(lines)


#: Set by ``--blame MS``: what held the loop, reported after each pass.
BLAME_MS: float | None = None


async def measure(
    app: FlowdeckApp, seconds: float, feed: object = None, keys_before: str = ""
) -> dict[str, object]:
    lags: list[float] = []
    typist: Typist | None = None
    blame = Blame(BLAME_MS) if BLAME_MS is not None else None
    async with app.run_test(size=(160, 48)) as pilot:
        if blame is not None:
            beating = asyncio.create_task(blame.heartbeat())
            blame.__enter__()
        began = time.monotonic()
        while time.monotonic() - began < seconds:
            if feed is not None:
                feed()  # type: ignore[operator]
            if typist is None and isinstance(app.screen, LiveScreen):
                if keys_before:
                    await pilot.press(*keys_before)
                typist = Typist(app, app.screen)
                typist.start()
            asked = time.monotonic()
            await asyncio.sleep(0.02)
            lags.append((time.monotonic() - asked - 0.02) * 1000)
            if not isinstance(app.screen, LiveScreen):
                break
        if typist is not None:
            await asyncio.to_thread(typist.stop)
        if blame is not None:
            blame.__exit__()
            await beating
            print(blame.report(), flush=True)
        points = list(app.screen.history.throughput) if isinstance(app.screen, LiveScreen) else []
        ticks = len(points)
        # What the run carried: the median second of the latter half (past the ramp-up).
        steady = points[len(points) // 2 :]
        published = statistics.median(p.published for p in steady) if steady else 0.0
        consumed = statistics.median(p.consumed for p in steady) if steady else 0.0
        if isinstance(app.screen, LiveScreen) and not app.screen.finished:
            await app.screen.control.stop("benchmark done")
    keys = typist.responses if typist else []
    return {
        "ticks": ticks,
        "published_rate": published,
        "consumed_rate": consumed,
        "lag_p50_ms": percentile(lags, 50),
        "lag_p99_ms": percentile(lags, 99),
        "lag_max_ms": max(lags, default=float("nan")),
        "key_p50_ms": percentile(keys, 50),
        "key_p99_ms": percentile(keys, 99),
        "key_max_ms": max(keys, default=float("nan")),
        "keys": len(keys),
        "unanswered": typist.unanswered if typist else 0,
        "lag_mean_ms": statistics.fmean(lags) if lags else float("nan"),
    }


async def live_pass(uri: str, scale: float, seconds: float) -> dict[str, object]:
    from flowdeck.engine.controller import Controller
    from flowdeck.engine.run_recording import RunRecording

    name = f"flowdeck-bench-tui-{uuid.uuid4().hex[:8]}"
    spec = replace(
        preset("bench5", scale),
        uri=uri,
        queue_pattern=f"{name}-%d",
        duration=seconds + 30,
        workers=1,
    )
    with TemporaryDirectory() as sessions:
        control = Controller(
            spec, broker=Broker.parse(uri), recording=RunRecording(Path(sessions)), cleanup=True
        )
        result = await measure(FlowdeckApp(control=control), seconds)
    result["run"] = (
        f"bench5 x{scale:g}: {spec.publishers} publishers x {spec.rate:g} msg/s, "
        f"{spec.queues} queues, {spec.consumers} consumers, 1 worker process"
    )
    return result


async def synthetic_pass(seconds: float, queue_table: bool = False) -> dict[str, object]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.tui.fakes import T0, FakeControl, make_sample

    fake = FakeControl()
    app = FlowdeckApp(control=fake)
    state = {"second": 0}

    def feed() -> None:
        # One fake second per 20 ms loop turn would be 50 redraws a second; keep it to the
        # real once a second, but with 1000 queues and a window already full.
        if state["second"] == 0:
            for _ in range(300):
                fake.emit_tick()
            state["second"] = 300
            state["next"] = time.monotonic() + 1  # type: ignore[assignment]
        if time.monotonic() >= state["next"]:
            state["next"] += 1  # type: ignore[operator]
            fake.emit_tick()
            fake.emit(make_sample(T0 + fake.elapsed, queues=1000))

    # ``q`` shows the queue table: every sample then updates its 1000 rows on screen.
    result = await measure(app, seconds, feed, keys_before="q" if queue_table else "")
    shown = "the queue table shown" if queue_table else "the event log shown"
    result["run"] = f"synthetic: 1000 queues per sample, 300 s of history, 1 redraw/s, {shown}"
    return result


async def bench3_pass(
    provisioner: Provisioner, seconds: float, rate: float | None, niceness: int | None = None
) -> dict[str, object]:
    """Key response while benchmark #3 runs at full client count on the private node."""
    from flowdeck.tui.launcher import prepare_run

    name = f"flowdeck-bench-tui-{uuid.uuid4().hex[:8]}"
    spec = replace(preset("bench3", 1.0), queue_pattern=f"{name}-%d", duration=seconds + 30)
    if rate is not None:
        spec = replace(spec, rate=rate)
    with TemporaryDirectory() as sessions:
        prepared = await asyncio.to_thread(
            prepare_run, spec, Path(sessions), provisioner=provisioner, cleanup=True
        )
        control = prepared.control
        # The app's own provisioner started nothing, so the node outlives this pass.
        app = FlowdeckApp(control=control)  # type: ignore[arg-type]
        if niceness is not None:
            app.worker_pool.close()
            app.worker_pool = WorkerPool(niceness=niceness).install()
        # Its worker comes from the app's pool, as after the launch screen.
        app.worker_pool.fill(control.workers)  # type: ignore[attr-defined]
        result = await measure(app, seconds)
    result["run"] = (
        f"bench3 at full client count, private node: {spec.publishers} publishers x "
        f"{spec.rate:g} msg/s, {spec.queues} {spec.queue_type} queues, {spec.consumers} "
        f"consumers, {control.workers} worker process(es)"  # type: ignore[attr-defined]
    )
    return result


async def wait_for(condition: object, limit: float = EDGE_LIMIT_S) -> float:
    """Seconds until ``condition()`` holds, polled every 10 ms; fails past ``limit``."""
    began = time.monotonic()
    while not condition():  # type: ignore[operator]
        if time.monotonic() - began > limit:
            raise TimeoutError(f"gave up after {limit:g} s")
        await asyncio.sleep(0.01)
    return time.monotonic() - began


class _NoPool(WorkerPool):
    """A pool that boots nothing: runs boot their workers at launch (``--cold-workers``)."""

    def fill(self, size: int) -> int:
        return 0


async def edges_pass(
    provisioner: Provisioner, launches: int, settle: float, cold_workers: bool = False
) -> dict[str, object]:
    """Launch -> first data (``launches`` times) and quit on the running private node."""
    spec = replace(preset("bench1", 0.1), duration=120)
    first_data: list[float] = []
    pooled: list[str] = []
    with TemporaryDirectory() as sessions:
        app = FlowdeckApp(spec=spec, sessions_root=Path(sessions))
        app.provisioner = provisioner  # the node is up already: a warm node
        if cold_workers:
            app.worker_pool.close()
            app.worker_pool = _NoPool()
        async with app.run_test(size=(160, 48)) as pilot:
            for launch in range(launches):
                await wait_for(lambda: isinstance(app.screen, LaunchScreen))
                await asyncio.sleep(settle)
                pool = app.worker_pool
                pooled.append(f"{pool.booted} booted")
                pressed = time.monotonic()
                await pilot.press("ctrl+r")
                await wait_for(
                    lambda: (
                        isinstance(app.screen, LiveScreen) and bool(app.screen.history.throughput)
                    )
                )
                first_data.append(time.monotonic() - pressed)
                if launch < launches - 1:
                    screen = app.screen
                    assert isinstance(screen, LiveScreen)
                    await screen.control.stop("benchmark: next launch")
                    await wait_for(lambda: screen.finished)  # noqa: B023  (awaited here)
                    while not isinstance(app.screen, LaunchScreen):
                        app.pop_screen()
                        await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)  # the last run goes on: quit with a run going
            quit_pressed = time.monotonic()
            await pilot.press("ctrl+q")
        quit_took = time.monotonic() - quit_pressed
    return {
        "run": f"edges on a running private node: bench1 x0.1, {launches} launches, "
        f"the launch screen left {settle:g} s first"
        + (", workers booted at launch (no pool)" if cold_workers else ""),
        "first_data_s": first_data,
        "pool": pooled,
        "quit_s": quit_took,
    }


def private_passes(
    args: argparse.Namespace,
) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    provisioner = Provisioner(name="flowdeck-bench")
    try:
        began = time.monotonic()
        provisioner.node()
        print(f"private node up in {time.monotonic() - began:.1f} s", flush=True)
        load = (
            None
            if args.skip_bench3
            else asyncio.run(
                bench3_pass(provisioner, args.seconds, args.bench3_rate, args.worker_niceness)
            )
        )
        edges = (
            None
            if args.skip_edges
            else asyncio.run(edges_pass(provisioner, args.launches, args.settle, args.cold_workers))
        )
    finally:
        provisioner.close()
    return load, edges


def print_bench3(load: dict[str, Any]) -> None:
    key_p99 = float(load["key_p99_ms"])
    print(
        f"{load['run']}\n  ticks shown {load['ticks']}, carried "
        f"{load['published_rate']:,.0f} msg/s published, {load['consumed_rate']:,.0f} "
        f"consumed (median second of the latter half); loop lag p99 {load['lag_p99_ms']:.1f} "
        f"ms; key -> screen p50 {load['key_p50_ms']:.1f} ms, p99 {key_p99:.1f} ms = "
        f"{ratio(key_p99, KEY_P99_TARGET_MS)}, max {load['key_max_ms']:.1f} ms over "
        f"{load['keys']} presses"
    )


def print_edges(edges: dict[str, Any]) -> None:
    print(edges["run"])
    for index, (took, pool) in enumerate(zip(edges["first_data_s"], edges["pool"], strict=True)):
        print(
            f"  launch {index + 1} ({pool} workers waiting): launch -> first data "
            f"{took:.2f} s = {ratio(took, FIRST_DATA_TARGET_S)}"
        )
    quit_took = float(edges["quit_s"])
    print(f"  quit with a run going: {quit_took:.2f} s = {ratio(quit_took, QUIT_TARGET_S)}")


def ratio(value: float, target: float) -> str:
    return f"{value / target:.2f}x target ({'met' if value <= target else 'MISSED'})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uri", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--skip-live", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--private", action="store_true", help="issue 15's passes")
    parser.add_argument("--bench3-rate", type=float, default=None)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--cold-workers", action="store_true", help="edges without the pool")
    parser.add_argument("--skip-bench3", action="store_true", help="--private: edges only")
    parser.add_argument("--skip-edges", action="store_true", help="--private: bench3 only")
    parser.add_argument(
        "--worker-niceness", type=int, default=None, help="bench3: the pool's (default: the app's)"
    )
    parser.add_argument(
        "--blame", type=float, default=None, metavar="MS",
        help="sample what holds the loop once it is MS late, and time garbage collections",
    )  # fmt: skip
    args = parser.parse_args()
    global BLAME_MS
    BLAME_MS = args.blame
    if args.private:
        load, edges = private_passes(args)
        if load is not None:
            print_bench3(load)
        if edges is not None:
            print_edges(edges)
    results = []
    if not args.skip_live:
        results.append(asyncio.run(live_pass(args.uri, args.scale, args.seconds)))
    if not args.skip_synthetic:
        results.append(asyncio.run(synthetic_pass(args.seconds)))
        results.append(asyncio.run(synthetic_pass(args.seconds, queue_table=True)))
    for result in results:
        print(
            f"{result['run']}\n"
            f"  ticks shown {result['ticks']}, loop lag p50 {result['lag_p50_ms']:.1f} ms, "
            f"p99 {result['lag_p99_ms']:.1f} ms, max {result['lag_max_ms']:.1f} ms; "
            f"key response p50 {result['key_p50_ms']:.1f} ms, p99 {result['key_p99_ms']:.1f} "
            f"ms, max {result['key_max_ms']:.1f} ms over {result['keys']} presses"
            + (f" ({result['unanswered']} unanswered within 5 s)" if result["unanswered"] else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
