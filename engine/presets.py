"""Built-in presets: the seed benchmarks, ready to run and to scale down.

``bench1``..``bench5`` reproduce "Quorum Queues and Flow Control - Stress Tests": quorum
queues with ``x-max-in-memory-length = 0``, 1 kB messages, confirms with an in-flight
limit of 100% of the per-publisher target rate and a prefetch equal to that rate (as the
write-up used throughout). ``-sweep`` variants step the in-flight limit through the
write-up's percentages, one phase each; ``-multi-sweep`` variants add the multiple-flag
acks (ack interval 10% of prefetch) where the write-up tested them. ``low-latency`` is the
single-queue PerfTest set-up of the low-latency write-up.

Every figure of the write-up has a preset (``FIGURES``): ``benchN-mirrored-*`` run on
classic queues mirrored to two nodes (the write-up's mirrored set-up, which needs a
cluster: ``flowdeck broker start --nodes 3``), ``benchN-quorum-noconfirms`` and the sweeps
on quorum queues; :func:`matrix` lists one benchmark's figures for ``flowdeck run --matrix``.

A TOML spec file may start from a preset (``preset = "bench2"``): :func:`load_spec_file`
reads one, here above both the spec and the presets.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from flowdeck.collectors import SPEC_FILE_LIMIT, UnreadableFile, read_file_text
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.errors import SpecError, did_you_mean
from flowdeck.engine.spec import RunSpec, ScheduleStep, schedule_step, spec_from_mapping

#: Seconds each in-flight limit is held in a sweep preset.
SWEEP_PHASE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class _Benchmark:
    number: int
    publishers: int
    rate: int
    queues: int
    consumers: int
    sweep_percent: tuple[float, ...]
    sweep_limits: tuple[int, ...]  # the limits the write-up used (its rounding, kept)
    multi_ack: bool  # the write-up also ran it with multiple-flag acks


_BENCHMARKS = (
    _Benchmark(1, 20, 1000, 10, 20, (1, 2, 5, 10, 20, 100), (10, 20, 50, 100, 200, 1000), False),
    _Benchmark(2, 20, 2000, 10, 20, (1, 2, 5, 10, 20, 100), (20, 40, 100, 200, 400, 2000), True),
    _Benchmark(3, 500, 30, 100, 500, (6, 10, 20, 50, 100, 200), (2, 3, 6, 12, 30, 60), False),
    _Benchmark(4, 500, 60, 100, 500, (5, 10, 20, 50, 100, 200), (3, 6, 12, 24, 60, 120), True),
    _Benchmark(5, 1000, 100, 200, 1000, (2, 5, 10, 20, 50, 100), (2, 5, 10, 20, 50, 100), True),
)


def _bench(b: _Benchmark) -> RunSpec:
    return RunSpec(
        name=f"bench{b.number}",
        description=(
            f"seed benchmark #{b.number}: {b.publishers} publishers x {b.rate} msg/s, "
            f"{b.queues} quorum queues, {b.consumers} consumers, 1 kB messages, "
            f"in-flight {b.rate} (100%), prefetch {b.rate}; x-max-in-memory-length 0 is the "
            "seed's 3.8 setting, kept for the record (RabbitMQ 3.10+ ignores it)"
        ),
        queues=b.queues,
        queue_type="quorum",
        # The seed's RabbitMQ 3.8 setting: it acts no more from 3.10 (quorum queues keep
        # every body on disk), and a run there says so at its start (engine/honoured.py).
        queue_args={"x-max-in-memory-length": 0},
        queue_pattern=f"flowdeck-bench{b.number}-%d",
        publishers=b.publishers,
        rate=float(b.rate),
        message_size=1000,
        confirms=True,
        inflight=b.rate,
        persistent=True,
        consumers=b.consumers,
        prefetch=b.rate,
        ack_every=1,
        duration=300.0,
    )


def _sweep(b: _Benchmark, multi: bool) -> RunSpec:
    base = _bench(b)
    limits = b.sweep_limits
    steps = tuple(
        ScheduleStep(i * SWEEP_PHASE_SECONDS, Change(Setting.INFLIGHT, float(limit)))
        for i, limit in enumerate(limits)
    )
    percents = ", ".join(
        f"{p:g}% ({limit})" for p, limit in zip(b.sweep_percent, limits, strict=True)
    )
    ack_every = max(1, b.rate // 10) if multi else 1
    acks = f", multiple-flag acks every {ack_every}" if multi else ""
    return replace(
        base,
        name=f"bench{b.number}-{'multi-' if multi else ''}sweep",
        description=(
            f"seed benchmark #{b.number} in-flight sweep: {b.publishers} publishers x "
            f"{b.rate} msg/s, {b.queues} quorum queues, {b.consumers} consumers; "
            f"in-flight {percents} of the target rate, {SWEEP_PHASE_SECONDS:g} s each{acks}"
        ),
        inflight=limits[0],
        ack_every=ack_every,
        duration=SWEEP_PHASE_SECONDS * len(limits),
        schedule=steps,
    )


def _mirrored(spec: RunSpec, b: _Benchmark) -> RunSpec:
    """``spec`` on the seed's mirrored classic queues (one master + one mirror)."""
    return replace(
        spec,
        name=spec.name.replace("-quorum", "").replace(
            f"bench{b.number}", f"bench{b.number}-mirrored", 1
        ),
        description=spec.description.replace("quorum queues", "classic queues mirrored to 2 nodes"),
        queue_type="classic",
        queue_args={},
        mirroring=2,
    )


def _no_confirms(b: _Benchmark) -> RunSpec:
    return replace(
        _bench(b),
        name=f"bench{b.number}-quorum-noconfirms",
        description=(
            f"seed benchmark #{b.number} without publisher confirms: {b.publishers} "
            f"publishers x {b.rate} msg/s, {b.queues} quorum queues, {b.consumers} consumers, "
            f"prefetch {b.rate}"
        ),
        confirms=False,
        inflight=0,
        duration=SWEEP_PHASE_SECONDS * 2,
    )


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure of the seed write-up and the preset that reproduces it."""

    number: int
    benchmark: int
    preset: str
    queues: str  # "mirrored" or "quorum"
    confirms: str  # "none", "sweep" or "sweep, multiple-flag acks"


def _figures() -> tuple[list[RunSpec], list[Figure]]:
    """The presets of every figure of the seed, in the write-up's order: per benchmark,
    mirrored then quorum queues, each without confirms, with an in-flight sweep and (where
    the write-up ran it) the sweep with multiple-flag acks. Quorum sweeps are the
    ``benchN-sweep`` presets; Fig. 24 is a dashboard view, not a run."""
    specs: list[RunSpec] = []
    figures: list[Figure] = []
    number = 0
    for b in _BENCHMARKS:
        quorum = [
            (_no_confirms(b), "none"),
            (_sweep(b, multi=False), "sweep"),
            *([(_sweep(b, multi=True), "sweep, multiple-flag acks")] if b.multi_ack else []),
        ]
        for kind in ("mirrored", "quorum"):
            if b.number == 5 and kind == "quorum":
                number += 1  # Fig. 24: RabbitMQ's overview dashboard of the mirrored runs
            for spec, confirms in quorum:
                number += 1
                run = _mirrored(spec, b) if kind == "mirrored" else spec
                if kind == "mirrored" or confirms == "none":
                    specs.append(run)
                figures.append(Figure(number, b.number, run.name, kind, confirms))
    return specs, figures


def _low_latency() -> RunSpec:
    return RunSpec(
        name="low-latency",
        description=(
            "low-latency PerfTest set-up: one non-durable queue (x-max-length 10000), "
            "1 publisher at 100 msg/s without confirms, 1 auto-ack consumer, 1000-byte bodies"
        ),
        queues=1,
        queue_type="classic",
        queue_args={"x-max-length": 10000},
        queue_pattern="perf-test-%d",
        queue_pattern_from=0,
        durable=False,
        publishers=1,
        rate=100.0,
        message_size=1000,
        confirms=False,
        inflight=0,
        persistent=False,
        consumers=1,
        prefetch=0,
        ack_every=1,
        auto_ack=True,
        duration=60.0,
    )


#: The protocols matrix: the same load over AMQP 0.9.1 to a quorum queue, AMQP 1.0 to a
#: quorum queue, AMQP 0.9.1 to a stream queue and the stream protocol to a stream queue
#: (name, protocol, queue type), compared per phase by ``flowdeck report``.
PROTOCOL_RUNS: tuple[tuple[str, str, str], ...] = (
    ("protocols-amqp091-quorum", "amqp0.9.1", "quorum"),
    ("protocols-amqp10-quorum", "amqp1.0", "quorum"),
    ("protocols-amqp091-stream", "amqp0.9.1", "stream"),
    ("protocols-stream", "stream", "stream"),
)
#: The name ``flowdeck run --matrix`` knows the protocols matrix by.
PROTOCOLS_MATRIX = "protocols"


def _protocols() -> list[RunSpec]:
    """The protocols matrix's runs: 4 publishers at 250 msg/s each, then 500, into 2
    queues with 4 consumers, in-flight 100 and prefetch 100, 1000-byte bodies."""
    return [
        RunSpec(
            name=name,
            description=(
                f"the protocols matrix: {protocol} to {queue_type} queues, 4 publishers at 250 "
                "then 500 msg/s each into 2 queues, 4 consumers, in-flight 100, prefetch 100"
            ),
            protocol=protocol,  # type: ignore[arg-type]
            queue_type=queue_type,  # type: ignore[arg-type]
            queues=2,
            publishers=4,
            consumers=4,
            rate=250.0,
            inflight=100,
            prefetch=100,
            message_size=1000,
            duration=2 * SWEEP_PHASE_SECONDS,
            schedule=(schedule_step(SWEEP_PHASE_SECONDS, "rate=500"),),
        )
        for name, protocol, queue_type in PROTOCOL_RUNS
    ]


def _build() -> dict[str, RunSpec]:
    specs: list[RunSpec] = []
    for b in _BENCHMARKS:
        specs.append(_bench(b))
        specs.append(_sweep(b, multi=False))
        if b.multi_ack:
            specs.append(_sweep(b, multi=True))
    specs.extend(_figures()[0])
    specs.append(_low_latency())
    specs.extend(_protocols())
    return {s.name: s for s in specs}


PRESETS: dict[str, RunSpec] = _build()
#: The seed's figures by number, each with the preset that reproduces it.
FIGURES: dict[int, Figure] = {f.number: f for f in _figures()[1]}


def matrix(benchmark: str) -> list[str]:
    """The presets of one benchmark's figures (``bench2`` or ``2``), in the write-up's
    order: what ``flowdeck run --matrix`` runs one after the other."""
    if benchmark == PROTOCOLS_MATRIX:
        return [name for name, _, _ in PROTOCOL_RUNS]
    number = benchmark.removeprefix("bench")
    names = [f.preset for f in FIGURES.values() if str(f.benchmark) == number]
    if not names:
        known = ", ".join(f"bench{b.number}" for b in _BENCHMARKS)
        raise SpecError("matrix", f"unknown benchmark {benchmark!r}; the seed has {known}")
    return names


DEFAULT_PRESET = "bench1-sweep"


def preset(name: str, scale: float = 1.0) -> RunSpec:
    """The preset called ``name``, scaled by ``scale``."""
    try:
        spec = PRESETS[name]
    except KeyError:
        raise SpecError(
            "preset",
            f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; `flowdeck presets` lists "
            f"all {len(PRESETS)}",
        ) from None
    return spec.scaled(scale)


def load_spec_file(path: Path, scale: float | None = None) -> RunSpec:
    """Read a TOML spec file. A file may start from a preset (``preset = "bench2"``) and
    set ``scale``; the other keys are RunSpec fields.
    """
    try:
        text = read_file_text(path, what="spec file", limit=SPEC_FILE_LIMIT)
    except UnreadableFile as exc:
        raise SpecError("spec", exc.message) from None
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError("spec", f"spec file {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise SpecError("spec", f"spec file {path} is nested too deeply") from None
    base = None
    if "preset" in values:
        name = values.pop("preset")
        if not isinstance(name, str):
            raise SpecError("preset", f"preset must be a preset name, got {name!r}")
        base = preset(name)
    file_scale = values.pop("scale", None)
    if file_scale is not None and (
        isinstance(file_scale, bool) or not isinstance(file_scale, int | float)
    ):
        raise SpecError("scale", f"scale must be a number, got {file_scale!r}")
    spec = spec_from_mapping(values, base)
    factor = scale if scale is not None else file_scale
    return spec.scaled(float(factor)) if factor is not None else spec
