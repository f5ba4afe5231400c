"""PerfTest command lines as RunSpecs, so users bring the runs they already have.

``spec_from_perftest("-x 20 -y 20 -u q -qq -r 1000 -c 100 -q 2000 -A 200 -s 1000 -z 300")``
gives the RunSpec that runs the same load. The option names, their short and long forms and
their defaults are RabbitMQ PerfTest's (``com.rabbitmq.perf.PerfTest#getOptions``). A given
option flowdeck cannot honour is refused with one line naming every such option and why,
never dropped: a run that silently differs from the PerfTest run it claims to reproduce
would compare wrong numbers. ``docs/perftest.md`` holds the full mapping table.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from flowdeck.collectors import SMALL_FILE_LIMIT, UnreadableFile, printable, read_file_text
from flowdeck.collectors.broker_uri import URI_SEPARATOR, split_uris
from flowdeck.engine.change import Change, Setting, format_number
from flowdeck.engine.errors import SpecError
from flowdeck.engine.spec import (
    BODY_HEADER_SIZE,
    EXCHANGE_TYPES,
    RunSpec,
    ScheduleStep,
    spec_from_mapping,
)

#: Most schedule steps a ``--variable-rate`` cycle may unroll to over the run.
MAX_VARIABLE_RATE_STEPS = 10_000

#: PerfTest's own defaults for what a command line governs. A PerfTest line describes the
#: whole load, so fields it does not mention take PerfTest's value, not the base spec's:
#: ``-x 1 -y 1`` runs without confirms and with an unlimited prefetch, as PerfTest does.
PERFTEST_DEFAULTS: Mapping[str, Any] = {
    "name": "perftest",
    "queues": 1,
    "queue_type": "classic",
    "lazy": False,
    "queue_args": {},
    "durable": False,
    "exchange": "",
    "exchange_type": "direct",
    "routing_key": "",
    "publishers": 1,
    "rate": 0.0,
    "message_size": BODY_HEADER_SIZE,  # PerfTest's minimum is 12; flowdeck's body header 28
    "confirms": False,
    "inflight": 0,
    "persistent": False,
    "mandatory": False,
    "consumers": 1,
    "prefetch": 0,
    "ack_every": 1,
    "auto_ack": False,
    "work": 0.0,
    "work_distribution": "constant",
    "work_spread": 0.0,
    "reject": 0.0,
    "poison": 0.0,
    "requeue": True,  # PerfTest's --requeue default
    "interval": 1,
    "publisher_channels": 1,
    "consumer_channels": 1,
    "max_priority": 0,
    "message_priority": 0,
    "priority_distribution": "constant",
    "priority_share": 0.0,
    "consumer_priority": "",
    "connection_allocation": "random",  # PerfTest's --connection-allocation default
    "schedule": [],
}

#: Stream queues as PerfTest declares them (``--stream-queue``): capped at 20 GB in
#: 500 MB segments, so a long run does not fill the disk.
STREAM_QUEUE_ARGS: Mapping[str, int] = {
    "x-max-length-bytes": 20_000_000_000,
    "x-stream-max-segment-size-bytes": 500_000_000,
}


@dataclass(frozen=True, slots=True)
class PerfTestOption:
    """One PerfTest option: its short and long names, whether it takes a value (and
    several, like ``-f persistent -f mandatory``), and, for the options flowdeck cannot
    honour, why not.
    """

    short: str
    long: str
    takes_value: bool = True
    many: bool = False
    refusal: str = ""

    @property
    def names(self) -> str:
        return f"-{self.short}/--{self.long}" if self.short else f"--{self.long}"


def _refused(short: str, long: str, reason: str, takes_value: bool = True) -> PerfTestOption:
    return PerfTestOption(short, long, takes_value, refusal=reason)


#: Every option of PerfTest 2.x; the ones with a ``refusal`` are refused when given.
OPTIONS: tuple[PerfTestOption, ...] = (
    PerfTestOption("x", "producers"),
    PerfTestOption("y", "consumers"),
    PerfTestOption("u", "queue"),
    PerfTestOption("qp", "queue-pattern"),
    PerfTestOption("qpf", "queue-pattern-from"),
    PerfTestOption("qpt", "queue-pattern-to"),
    PerfTestOption("qq", "quorum-queue", takes_value=False),
    PerfTestOption("sq", "stream-queue", takes_value=False),
    PerfTestOption("qa", "queue-args", many=True),
    PerfTestOption("mlb", "max-length-bytes"),
    PerfTestOption("ll", "leader-locator"),
    PerfTestOption("ad", "auto-delete"),
    PerfTestOption("r", "rate"),
    PerfTestOption("vr", "variable-rate", many=True),
    PerfTestOption("c", "confirm"),
    PerfTestOption("q", "qos"),
    PerfTestOption("A", "multi-ack-every"),
    PerfTestOption("a", "autoack", takes_value=False),
    PerfTestOption("s", "size"),
    PerfTestOption("z", "time"),
    PerfTestOption("f", "flag", many=True),
    PerfTestOption("t", "type"),
    PerfTestOption("e", "exchange"),
    PerfTestOption("k", "routing-key"),
    PerfTestOption("h", "uri"),
    PerfTestOption("H", "uris"),
    PerfTestOption("d", "id"),
    PerfTestOption("i", "interval"),
    PerfTestOption("X", "producer-channel-count"),
    PerfTestOption("Y", "consumer-channel-count"),
    PerfTestOption("m", "ptxsize"),
    PerfTestOption("L", "consumer-latency"),
    PerfTestOption("vl", "variable-latency", many=True),
    PerfTestOption("vs", "variable-size", many=True),
    PerfTestOption("na", "nack", takes_value=False),
    PerfTestOption("re", "requeue"),
    PerfTestOption("b", "heartbeat"),
    PerfTestOption("M", "framemax"),
    PerfTestOption("tnd", "tcp-no-delay"),
    PerfTestOption("tsbs", "tcp-send-buffer-size"),
    PerfTestOption("trbs", "tcp-receive-buffer-size"),
    PerfTestOption("n", "ctxsize"),
    PerfTestOption("mp", "message-properties"),
    PerfTestOption("ca", "consumer-args"),
    PerfTestOption("cal", "connection-allocation"),
    _refused("C", "pmessages", "flowdeck runs stop on time, not on a message count; use -z"),
    _refused("D", "cmessages", "flowdeck runs stop on time, not on a message count; use -z"),
    _refused("R", "consumer-rate", "flowdeck consumers take what the broker delivers"),
    _refused("Q", "global-qos", "flowdeck sets prefetch per consumer (-q), not per channel"),
    _refused("K", "random-routing-key", "flowdeck publishes with one routing key", False),
    _refused("rkcs", "routing-key-cache-size", "flowdeck publishes with one routing key"),
    _refused("sb", "skip-binding-queues", "flowdeck always binds its queues", False),
    _refused("p", "predeclared", "flowdeck declares its own queues", False),
    _refused("E", "exclusive", "flowdeck queues are named and shared", False),
    _refused("qf", "queue-file", "flowdeck names queues with -u or -qp/-qpf/-qpt"),
    _refused("P", "publishing-interval", "use -r (messages per second per producer)"),
    _refused("prsd", "producer-random-start-delay", "flowdeck starts producers at once"),
    _refused("pst", "producer-scheduler-threads", "flowdeck has no publishing scheduler"),
    _refused("S", "slow-start", "flowdeck starts consumers at once", False),
    _refused("csd", "consumer-start-delay", "flowdeck starts consumers at once"),
    _refused("ct", "confirm-timeout", "flowdeck counts unconfirmed messages, it never fails them"),
    _refused("po", "polling", "flowdeck consumes with basic.consume only", False),
    _refused("pi", "polling-interval", "flowdeck consumes with basic.consume only"),
    _refused("B", "body", "flowdeck bodies carry its own sequence and timing header"),
    _refused("T", "body-content-type", "flowdeck bodies carry its own sequence header"),
    _refused("jb", "json-body", "flowdeck bodies carry its own sequence header", False),
    _refused("bfc", "body-field-count", "flowdeck bodies carry its own sequence header"),
    _refused("bc", "body-count", "flowdeck bodies carry its own sequence header"),
    _refused("sco", "stream-consumer-offset", "flowdeck stream consumers start at next"),
    _refused("smssb", "stream-max-segment-size-bytes", "set it with --queue-args instead"),
    _refused("ma", "max-age", "set x-max-age with -qa instead"),
    _refused("ew", "exit-when", "flowdeck runs stop on time; use -z"),
    _refused("o", "output-file", "flowdeck records every run as a session (flowdeck sessions)"),
    _refused("l", "legacy-metrics", "flowdeck reports its own latency percentiles", False),
    _refused("ms", "use-millis", "flowdeck measures latency in microseconds", False),
    _refused("mf", "metrics-format", "flowdeck prints its own progress lines"),
    _refused("em", "exposed-metrics", "flowdeck serves its own /metrics (--metrics-port)"),
    _refused("hst", "heartbeat-sender-threads", "a Java client setting with no flowdeck use"),
    _refused("niot", "nio-threads", "a Java client setting with no flowdeck use"),
    _refused("niotp", "nio-thread-pool", "a Java client setting with no flowdeck use"),
    _refused("nty", "netty", "a Java client setting with no flowdeck use", False),
    _refused("ntyt", "netty-threads", "a Java client setting with no flowdeck use"),
    _refused("ntyep", "netty-epoll", "a Java client setting with no flowdeck use", False),
    _refused("ntykq", "netty-kqueue", "a Java client setting with no flowdeck use", False),
    _refused("ctp", "consumers-thread-pools", "a Java client setting with no flowdeck use"),
    _refused("st", "shutdown-timeout", "flowdeck drains consumers (flowdeck run --drain)"),
    _refused("dcr", "disable-connection-recovery", "flowdeck never recovers connections", False),
    _refused("cri", "connection-recovery-interval", "flowdeck never recovers connections"),
    _refused("sst", "servers-startup-timeout", "flowdeck checks the broker before it starts"),
    _refused("sul", "servers-up-limit", "flowdeck checks the broker before it starts"),
    _refused("udsc", "use-default-ssl-context", "give an amqps:// uri with -h", False),
    _refused("se", "sasl-external", "flowdeck logs in with the uri's user and password", False),
    _refused("sni", "server-name-indication", "give an amqps:// uri with -h"),
    _refused("ei", "expected-instances", "one flowdeck controller runs all workers"),
    _refused("isn", "instance-sync-namespace", "one flowdeck controller runs all workers"),
    _refused("ist", "instance-sync-timeout", "one flowdeck controller runs all workers"),
    _refused("o2uri", "oauth2-token-endpoint", "flowdeck logs in with the uri's credentials"),
    _refused("o2id", "oauth2-client-id", "flowdeck logs in with the uri's credentials"),
    _refused("o2sec", "oauth2-client-secret", "flowdeck logs in with the uri's credentials"),
    _refused("o2gr", "oauth2-grant-type", "flowdeck logs in with the uri's credentials"),
    _refused("o2p", "oauth2-parameters", "flowdeck logs in with the uri's credentials"),
    _refused("", "verbose", "flowdeck prints per-second progress, not messages", False),
    _refused("", "verbose-full", "flowdeck prints per-second progress, not messages", False),
    _refused("?", "help", "not a run: see docs/perftest.md", False),
    _refused("v", "version", "not a run: flowdeck --version", False),
    _refused("mh", "metrics-help", "not a run: see docs/perftest.md", False),
    _refused("env", "environment-variables", "not a run: see docs/perftest.md", False),
    _refused("mpx", "metrics-prefix", "flowdeck's /metrics names are fixed (perftest_*)"),
    _refused("mpr", "metrics-prometheus", "use flowdeck run --metrics-port 8080", False),
    _refused("mpe", "metrics-prometheus-endpoint", "flowdeck serves /metrics"),
    _refused("mpp", "metrics-prometheus-port", "use flowdeck run --metrics-port"),
    _refused("mt", "metrics-tags", "flowdeck's /metrics has no extra labels"),
)

_BY_SHORT = {o.short: o for o in OPTIONS if o.short}
_BY_LONG = {o.long: o for o in OPTIONS}


@dataclass(frozen=True, slots=True)
class _Given:
    option: PerfTestOption
    written: str  # as the user wrote it, for messages
    values: tuple[str, ...]


def perftest_line_from_file(path: str) -> str:
    """The PerfTest command line saved in the file at ``path`` (a shell script or a note:
    lines starting with ``#`` are left out, a line ending in ``\\`` goes on on the next),
    read within bounds: a FIFO, a device or a file over 64 KiB is refused in one line."""
    try:
        text = read_file_text(path, what="PerfTest file", limit=SMALL_FILE_LIMIT)
    except UnreadableFile as exc:
        raise SpecError("perftest", exc.message) from None
    kept = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    line = "\n".join(kept).replace("\\\n", " ").replace("\n", " ").strip()
    if not line:
        raise SpecError("perftest", f"PerfTest file {printable(path)} holds no command line")
    return line


def perftest_words(args: str | Sequence[str]) -> str | Sequence[str]:
    """``args`` as given, or the line of the file it names as ``@FILE``."""
    if isinstance(args, str) and args.startswith("@"):
        return perftest_line_from_file(args[1:])
    if not isinstance(args, str) and len(args) == 1 and args[0].startswith("@"):
        return perftest_line_from_file(args[0][1:])
    return args


def split_command_line(args: str | Sequence[str]) -> list[str]:
    """The words of a PerfTest command line; a leading ``perf-test``/``java -jar ...``
    launcher, if pasted along, is dropped.
    """
    if isinstance(args, str):
        try:
            words = shlex.split(args)
        except ValueError as exc:
            raise SpecError("perftest", f"cannot split the PerfTest command line: {exc}") from None
    else:
        words = list(args)
    for index, word in enumerate(words):
        if word == "-jar" and index > 0:
            continue  # java -jar perf-test.jar
        if word.startswith("-"):
            return words[index:]
        if not _is_launcher_word(word):
            break
    return words


def _is_launcher_word(word: str) -> bool:
    base = word.rsplit("/", 1)[-1]
    return base in ("java", "perf-test", "runjava", "com.rabbitmq.perf.PerfTest") or (
        base.startswith("perf-test") and base.endswith(".jar")
    )


def _looks_like_option(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _is_number(word)


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _parse(words: Sequence[str]) -> tuple[list[_Given], list[str]]:
    """The options given, in order, and the words that are no PerfTest option at all."""
    given: list[_Given] = []
    unknown: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not _looks_like_option(word):
            unknown.append(word)
            continue
        attached: str | None = None
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            option = _BY_LONG.get(name)
            attached = value if eq else None
        else:
            name = word[1:]
            option = _BY_SHORT.get(name)
            if option is None and name[:1] in _BY_SHORT and _BY_SHORT[name[:1]].takes_value:
                option, attached = _BY_SHORT[name[:1]], name[1:]  # -x20, as commons-cli reads
        if option is None:
            unknown.append(word)
            continue
        values: list[str] = []
        if option.takes_value:
            if attached is not None:
                values.append(attached)
            elif i < len(words) and not _looks_like_option(words[i]):
                values.append(words[i])
                i += 1
            elif option.long != "exchange":  # -e alone means the default exchange
                raise SpecError("perftest", f"PerfTest option {word} needs a value")
            if option.many:
                while i < len(words) and not _looks_like_option(words[i]):
                    values.append(words[i])
                    i += 1
        elif attached is not None:
            raise SpecError("perftest", f"PerfTest option {word} takes no value")
        given.append(_Given(option, word.partition("=")[0], tuple(values)))
    return given, unknown


def spec_from_perftest(args: str | Sequence[str], base: RunSpec | None = None) -> RunSpec:
    """The RunSpec equivalent to a PerfTest command line.

    ``base`` supplies what PerfTest does not describe (broker uri when no ``-h``, workers,
    duration when no ``-z``, management and Prometheus URLs); everything a PerfTest line
    governs takes PerfTest's default when the line does not set it (``PERFTEST_DEFAULTS``).
    ``args`` may be ``@FILE``: the command line saved in that file. Raises SpecError
    naming every option flowdeck cannot honour, or a bad value.
    """
    words = split_command_line(perftest_words(args))
    given, unknown = _parse(words)
    problems = [f"{word} (not a PerfTest option)" for word in unknown]
    problems += [f"{g.written} ({g.option.refusal})" for g in given if g.option.refusal]
    problems += _unsupported_values(given)
    if problems:
        raise SpecError(
            "perftest",
            f"cannot run {len(problems)} of the given PerfTest options: "
            + "; ".join(problems)
            + ". Remove them (docs/perftest.md maps every option)",
        )
    values = _mapping(given)
    start = base if base is not None else RunSpec()
    defaults = dict(PERFTEST_DEFAULTS)
    merged = {**defaults, **values}
    duration = float(merged.pop("duration", start.duration))
    schedule = merged.pop("schedule")
    rates = _all_values(given, "variable-rate")
    if rates:
        merged["rate"], schedule = _variable_rate(rates, duration)
    latencies = _all_values(given, "variable-latency")
    if latencies:
        merged["work"], steps = _variable_latency(latencies, duration)
        schedule = sorted([*schedule, *steps], key=lambda step: step.at)
    sizes = _all_values(given, "variable-size")
    if sizes:
        size, steps = _variable_size(sizes, duration)
        merged["message_size"] = int(size)
        schedule = sorted([*schedule, *steps], key=lambda step: step.at)
    spec = spec_from_mapping(merged, replace(start, schedule=(), duration=duration))
    if schedule:
        spec = spec_from_mapping({"schedule": schedule}, spec)
    return spec


def _last(given: Sequence[_Given], long: str) -> _Given | None:
    found = [g for g in given if g.option.long == long]
    return found[-1] if found else None


def _all_values(given: Sequence[_Given], long: str) -> list[str]:
    return [v for g in given if g.option.long == long for v in g.values]


def _unsupported_values(given: Sequence[_Given]) -> list[str]:
    """Values of accepted options that flowdeck cannot honour (e.g. ``-X 2``)."""
    problems: list[str] = []
    only: dict[str, tuple[str, str]] = {
        "ptxsize": ("0", "flowdeck publishes without transactions"),
        "ctxsize": ("0", "flowdeck acks without transactions"),
    }
    for long, (allowed, reason) in only.items():
        g = _last(given, long)
        if g is not None and g.values and _int(g, g.values[0]) != int(allowed):
            problems.append(f"{g.written} {g.values[0]} ({reason}; only {allowed} is possible)")
    g = _last(given, "auto-delete")
    if g is not None and g.values and g.values[0].lower() != "false":
        problems.append(
            f"{g.written} {g.values[0]} (flowdeck keeps its queues; "
            "flowdeck run --cleanup deletes them at the end)"
        )
    g = _last(given, "queue")
    if g is not None and g.values and "," in g.values[0]:
        problems.append(
            f"{g.written} {g.values[0]} (a list of queue names; "
            "use -qp 'name-%d' -qpf 1 -qpt N for several queues)"
        )
    for flag in _all_values(given, "flag"):
        if flag not in ("persistent", "mandatory"):
            problems.append(f"-f {flag} (flowdeck knows the flags persistent and mandatory)")
    problems += _unsupported_properties(given)
    g = _last(given, "rate")
    if g is not None and g.values and _is_number(g.values[0]) and float(g.values[0]) == 0:
        problems.append(
            "-r 0 (in PerfTest producers then do not publish, in flowdeck rate 0 means as "
            "fast as possible; use -x 0 for no publishing, or leave -r out)"
        )
    return problems


def _unsupported_properties(given: Sequence[_Given]) -> list[str]:
    """-mp keys other than priority, -ca keys other than x-priority, -cal values other
    than PerfTest's two."""
    problems: list[str] = []
    for long, known, reason in (
        ("message-properties", "priority", "flowdeck sets only the priority property"),
        ("consumer-args", "x-priority", "flowdeck sets only the x-priority consumer argument"),
    ):
        g = _last(given, long)
        if g is None:
            continue
        others = sorted(set(parse_queue_args(_value(g))) - {known})
        if others:
            problems.append(f"{g.written} {', '.join(others)} ({reason})")
    g = _last(given, "connection-allocation")
    if g is not None and _value(g) not in ("random", "round-robin"):
        problems.append(f"{g.written} {_value(g)} (PerfTest's values are random and round-robin)")
    return problems


def _int(g: _Given, text: str, low: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SpecError(
            "perftest", f"PerfTest option {g.written} needs a whole number, got {text!r}"
        ) from None
    if low is not None and value < low:
        raise SpecError("perftest", f"PerfTest option {g.written} must be >= {low}, got {value}")
    return value


def _number(g: _Given, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SpecError(
            "perftest", f"PerfTest option {g.written} needs a number, got {text!r}"
        ) from None


def _value(g: _Given) -> str:
    return g.values[0] if g.values else ""


def _mapping(given: Sequence[_Given]) -> dict[str, Any]:
    """RunSpec field values for the accepted options (PerfTest's last-one-wins rule)."""
    out: dict[str, Any] = {}

    def opt(long: str) -> _Given | None:
        return _last(given, long)

    if (g := opt("producers")) is not None:
        out["publishers"] = _int(g, _value(g), 0)
    if (g := opt("consumers")) is not None:
        out["consumers"] = _int(g, _value(g), 0)
    # -X/-Y: channels per connection, each a producer or consumer of its own (PerfTest's
    # -x 2 -X 10 publishes on 20 channels over 2 connections)
    if (g := opt("producer-channel-count")) is not None:
        channels = _int(g, _value(g), 1)
        out["publishers"] = out.get("publishers", PERFTEST_DEFAULTS["publishers"]) * channels
        out["publisher_channels"] = channels
    if (g := opt("consumer-channel-count")) is not None:
        channels = _int(g, _value(g), 1)
        out["consumers"] = out.get("consumers", PERFTEST_DEFAULTS["consumers"]) * channels
        out["consumer_channels"] = channels
    if (g := opt("id")) is not None:
        out["name"] = _value(g)
    if (g := opt("uri")) is not None:
        out["uri"] = _value(g)
    if uris := [u for v in _all_values(given, "uris") for u in split_uris(v)]:
        out["uri"] = URI_SEPARATOR.join(uris)  # clients spread over them, as PerfTest does
    _map_queues(given, out)
    if (g := opt("rate")) is not None:
        out["rate"] = _number(g, _value(g))
    if (g := opt("confirm")) is not None:
        inflight = _int(g, _value(g))
        if inflight >= 0:  # PerfTest: -1 = no confirms, 0 = confirms without a limit
            out["confirms"] = True
            out["inflight"] = inflight
    if (g := opt("qos")) is not None:
        out["prefetch"] = _int(g, _value(g), 0)
    if (g := opt("multi-ack-every")) is not None:
        out["ack_every"] = max(1, _int(g, _value(g), 0))
    if opt("autoack") is not None:
        out["auto_ack"] = True
    if (g := opt("size")) is not None:
        size = _int(g, _value(g), 0)
        if size < BODY_HEADER_SIZE:
            raise SpecError(
                "perftest",
                f"PerfTest option {g.written} {size}: flowdeck bodies need at least "
                f"{BODY_HEADER_SIZE} bytes (publisher id, sequence and send times); "
                f"use -s {BODY_HEADER_SIZE} or more",
            )
        out["message_size"] = size
    if (g := opt("time")) is not None:
        out["duration"] = float(_int(g, _value(g), 1))
    if (g := opt("interval")) is not None:
        out["interval"] = _int(g, _value(g), 1)
    _map_consumer_behaviour(given, out)
    _map_connection_tuning(given, out)
    _map_priorities(given, out)
    flags = _all_values(given, "flag")
    if "persistent" in flags:
        out["persistent"] = True
    if "mandatory" in flags:
        out["mandatory"] = True
    _map_exchange(given, out)
    if out.get("queue_type") in ("quorum", "stream"):
        out["persistent"] = True  # as PerfTest: quorum and stream queues get persistent
    out["durable"] = bool(out.get("persistent", False))  # PerfTest: durable = persistent
    if out.get("queue_type") == "stream" and not out.get("prefetch"):
        out["prefetch"] = 200  # PerfTest's stream default
    return out


def _bool(g: _Given) -> bool:
    text = _value(g).lower()
    if text not in ("true", "false"):
        raise SpecError(
            "perftest", f"PerfTest option {g.written} needs true or false, got {text!r}"
        )
    return text == "true"


def _map_consumer_behaviour(given: Sequence[_Given], out: dict[str, Any]) -> None:
    """-L (consumer latency, µs) as work time in ms; --nack as every delivery rejected,
    requeued unless --requeue false (PerfTest's default is true)."""
    if (g := _last(given, "consumer-latency")) is not None:
        out["work"] = _int(g, _value(g), 0) / 1000
    if _last(given, "nack") is not None:
        out["reject"] = 100.0
    if (g := _last(given, "requeue")) is not None:
        out["requeue"] = _bool(g)


def _map_priorities(given: Sequence[_Given], out: dict[str, Any]) -> None:
    """-mp priority=N as every message's priority, -ca x-priority=N as every consumer's,
    -cal as the connection allocation (-qa x-max-priority=N is read with the queues)."""
    if (g := _last(given, "message-properties")) is not None:
        priority = parse_queue_args(_value(g)).get("priority")
        if priority is not None:
            out["message_priority"] = _int(g, str(priority), 0)
    if (g := _last(given, "consumer-args")) is not None:
        priority = parse_queue_args(_value(g)).get("x-priority")
        if priority is not None:
            out["consumer_priority"] = str(_int(g, str(priority)))
    if (g := _last(given, "connection-allocation")) is not None:
        out["connection_allocation"] = _value(g)


def _map_connection_tuning(given: Sequence[_Given], out: dict[str, Any]) -> None:
    """-b, -M, -tnd, -tsbs, -trbs as the run's connection settings (PerfTest's 0 for -b
    and -M leaves them to the broker, as flowdeck's defaults do)."""
    if (g := _last(given, "heartbeat")) is not None:
        out["heartbeat"] = _int(g, _value(g), 0)
    if (g := _last(given, "framemax")) is not None:
        out["frame_max"] = _int(g, _value(g), 0)
    if (g := _last(given, "tcp-no-delay")) is not None:
        out["tcp_nodelay"] = _bool(g)
    if (g := _last(given, "tcp-send-buffer-size")) is not None:
        out["tcp_send_buffer"] = _int(g, _value(g), 0)
    if (g := _last(given, "tcp-receive-buffer-size")) is not None:
        out["tcp_receive_buffer"] = _int(g, _value(g), 0)


def _map_queues(given: Sequence[_Given], out: dict[str, Any]) -> None:
    pattern = _last(given, "queue-pattern")
    start = _last(given, "queue-pattern-from")
    end = _last(given, "queue-pattern-to")
    queue = _last(given, "queue")
    if pattern or start or end:
        if not (pattern and start and end):
            raise SpecError(
                "perftest",
                "PerfTest options -qp/--queue-pattern, -qpf/--queue-pattern-from and "
                "-qpt/--queue-pattern-to go together: give all three or none",
            )
        first, last = _int(start, _value(start), 0), _int(end, _value(end), 0)
        if first > last:
            raise SpecError(
                "perftest", f"-qpt/--queue-pattern-to ({last}) must be >= -qpf ({first})"
            )
        text = _value(pattern)
        if re.search(r"%(?!d)", text.replace("%%", "")) or "%d" not in text:
            raise SpecError(
                "perftest",
                f"-qp/--queue-pattern must contain %d (and no other % format), got {text!r}",
            )
        if queue is not None:
            raise SpecError("perftest", "give -u/--queue or -qp/--queue-pattern, not both")
        out["queue_pattern"] = text.replace("%%", "%")
        out["queue_pattern_from"] = first
        out["queues"] = last - first + 1
    elif queue is not None:
        name = _value(queue)
        if not name or "%d" in name:
            raise SpecError("perftest", f"-u/--queue needs a queue name, got {name!r}")
        out["queue_pattern"] = name
        out["queues"] = 1
    else:
        out["queue_pattern"] = "perftest-%d"  # PerfTest names its queue itself
        out["queues"] = 1
    quorum = _last(given, "quorum-queue") is not None
    stream = _last(given, "stream-queue") is not None
    if quorum and stream:
        raise SpecError("perftest", "use -qq/--quorum-queue or -sq/--stream-queue, not both")
    args: dict[str, Any] = {}
    if stream:
        out["queue_type"] = "stream"
        args.update(STREAM_QUEUE_ARGS)
    elif quorum:
        out["queue_type"] = "quorum"
    for text in _all_values(given, "queue-args"):
        args.update(parse_queue_args(text))
    queue_type = args.pop("x-queue-type", None)
    if queue_type is not None:
        if queue_type not in ("classic", "quorum", "stream"):
            raise SpecError(
                "perftest",
                f"-qa x-queue-type must be classic, quorum or stream, got {queue_type!r}",
            )
        out["queue_type"] = queue_type
    max_priority = args.pop("x-max-priority", None)
    if isinstance(max_priority, int) and not isinstance(max_priority, bool):
        out["max_priority"] = max_priority
    elif max_priority is not None:
        raise SpecError(
            "perftest", f"-qa x-max-priority must be a whole number, got {max_priority!r}"
        )
    mode = args.pop("x-queue-mode", None)
    if mode == "lazy":
        out["lazy"] = True
    elif mode is not None:
        args["x-queue-mode"] = mode
    if (g := _last(given, "max-length-bytes")) is not None:
        size = parse_byte_capacity(_value(g))
        if size == 0:
            args.pop("x-max-length-bytes", None)
        else:
            args["x-max-length-bytes"] = size
    if (g := _last(given, "leader-locator")) is not None:
        if _value(g) not in ("client-local", "balanced"):
            raise SpecError(
                "perftest",
                f"-ll/--leader-locator must be client-local or balanced, got {_value(g)!r}",
            )
        args["x-queue-leader-locator"] = _value(g)
    out["queue_args"] = args


def _map_exchange(given: Sequence[_Given], out: dict[str, Any]) -> None:
    """-t, -e and -k as PerfTest takes them: its exchange is named after its type (-t,
    ``direct`` by default) unless -e names it, and its queues are bound there with the
    routing key; without -k, flowdeck publishes on the default exchange by queue name,
    which reaches the same queue."""
    kind = _last(given, "type")
    exchange = _last(given, "exchange")
    if kind is not None:
        if _value(kind) not in EXCHANGE_TYPES:
            raise SpecError(
                "perftest",
                f"-t/--type must be one of {', '.join(EXCHANGE_TYPES)}, got {_value(kind)!r}",
            )
        out["exchange_type"] = _value(kind)
        out["exchange"] = _value(kind)  # PerfTest names the exchange after its type
    if exchange is not None:
        name = _value(exchange)
        out["exchange"] = "" if name in ("", "amq.default") else name
    key = _last(given, "routing-key")
    if key is None:
        return
    out["routing_key"] = _value(key)
    if exchange is None and kind is None:
        # PerfTest binds its queues with -k on its own exchange, named after its type
        # ("direct"), and publishes there; the default exchange would route the key to a
        # queue of that name, and with none every message would go nowhere.
        out["exchange"] = out["exchange_type"] = "direct"


def parse_queue_args(text: str) -> dict[str, Any]:
    """``x-max-length=10,x-overflow=reject-publish`` as PerfTest reads it: whole numbers
    become numbers, true/false booleans, the rest text; ``x-dead-letter-exchange=amq.default``
    is the default exchange.
    """
    args: dict[str, Any] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        key, _, raw = entry.partition("=")
        key = key.strip()
        value: Any
        if raw == "true" or raw == "false":
            value = raw == "true"
        else:
            try:
                value = int(raw)
            except ValueError:
                value = raw
        if key == "x-dead-letter-exchange" and value == "amq.default":
            value = ""
        if key == "x-single-active-consumer":
            value = str(value).lower() == "true"
        args[key] = value
    return args


_CAPACITY = re.compile(r"^\s*(\d+)\s*(b|kb|mb|gb|tb)?\s*$", re.IGNORECASE)
_CAPACITY_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_byte_capacity(text: str) -> int:
    """``20gb``, ``500mb``, ``1000`` in bytes (PerfTest's units are powers of 1000)."""
    match = _CAPACITY.match(text)
    if not match:
        raise SpecError(
            "perftest",
            f"-mlb/--max-length-bytes must be a size like 1000, 500mb or 20gb, got {text!r}",
        )
    return int(match.group(1)) * _CAPACITY_UNITS[(match.group(2) or "b").lower()]


def _variable_rate(rates: Sequence[str], duration: float) -> tuple[float, list[ScheduleStep]]:
    """``-vr RATE:SECONDS`` repeated: the first rate and the changes that follow it.

    PerfTest cycles through the rates until the run ends, so the cycle is unrolled up to
    the run's duration. Rate 0 means no publishing for
    that period: flowdeck pauses the publishers and resumes them afterwards.
    """
    segments: list[tuple[float, float]] = []
    for text in rates:
        rate_text, sep, seconds_text = text.partition(":")
        try:
            rate_value, period = int(rate_text), int(seconds_text)
        except ValueError:
            rate_value, period = -1, -1
        if not sep or rate_value < 0 or period <= 0:
            raise SpecError(
                "perftest",
                f"-vr/--variable-rate must be RATE:DURATION with RATE >= 0 and DURATION > 0 "
                f"(whole numbers), got {text!r}",
            )
        segments.append((float(rate_value), float(period)))
    end = duration
    steps: list[ScheduleStep] = []
    at, paused = 0.0, False
    first_rate = segments[0][0]
    for index, (rate, seconds) in enumerate(_cycled(segments)):
        if at >= end:
            break
        if rate == 0 and not paused:
            steps.append(ScheduleStep(at, Change(Setting.PAUSE)))
            paused = True
        elif rate > 0:
            if index > 0:
                steps.append(ScheduleStep(at, Change(Setting.RATE, rate)))
            if paused:  # after the rate change, so publishing resumes at the new rate
                steps.append(ScheduleStep(at, Change(Setting.RESUME)))
                paused = False
        at += seconds
        if len(steps) > MAX_VARIABLE_RATE_STEPS:
            raise SpecError(
                "perftest",
                f"-vr/--variable-rate over {format_number(end)} s makes more than "
                f"{MAX_VARIABLE_RATE_STEPS} rate changes; use longer periods or a shorter -z",
            )
    if first_rate == 0:
        first_rate = next((rate for rate, _ in segments if rate > 0), 0.0)
    return first_rate, _squash(steps, first_rate)


def _variable_latency(
    latencies: Sequence[str], duration: float
) -> tuple[float, list[ScheduleStep]]:
    """``-vl MICROSECONDS:SECONDS`` repeated: the first work time (ms) and the work changes
    that follow it, the cycle repeated until the run ends, as PerfTest does."""
    segments = _segments(latencies, "-vl/--variable-latency", "MICROSECONDS", 0)
    return _cycled_changes(
        [(micros / 1000, seconds) for micros, seconds in segments],
        duration,
        Setting.WORK,
        "-vl/--variable-latency",
    )


def _variable_size(sizes: Sequence[str], duration: float) -> tuple[float, list[ScheduleStep]]:
    """``-vs SIZE:SECONDS`` repeated: the first message size and the size changes that
    follow it, cycled until the run ends, as PerfTest does."""
    segments = _segments(sizes, "-vs/--variable-size", "SIZE", BODY_HEADER_SIZE)
    return _cycled_changes(segments, duration, Setting.MESSAGE_SIZE, "-vs/--variable-size")


def _segments(texts: Sequence[str], option: str, what: str, low: int) -> list[tuple[float, float]]:
    """``VALUE:SECONDS`` values of a repeated option, each checked."""
    segments: list[tuple[float, float]] = []
    for text in texts:
        value_text, sep, seconds_text = text.partition(":")
        try:
            value, period = int(value_text), int(seconds_text)
        except ValueError:
            value, period = -1, -1
        if not sep or value < low or period <= 0:
            raise SpecError(
                "perftest",
                f"{option} must be {what}:DURATION with {what} >= {low} and DURATION > 0 "
                f"(whole numbers), got {text!r}",
            )
        segments.append((float(value), float(period)))
    return segments


def _cycled_changes(
    segments: Sequence[tuple[float, float]], duration: float, setting: Setting, option: str
) -> tuple[float, list[ScheduleStep]]:
    """The first value and the changes of ``setting`` that follow it, the cycle repeated
    until ``duration``."""
    steps: list[ScheduleStep] = []
    at = 0.0
    for index, (value, seconds) in enumerate(_cycled(segments)):
        if at >= duration:
            break
        if index > 0:
            steps.append(ScheduleStep(at, Change(setting, value)))
        at += seconds
        if len(steps) > MAX_VARIABLE_RATE_STEPS:
            raise SpecError(
                "perftest",
                f"{option} over {format_number(duration)} s makes more than "
                f"{MAX_VARIABLE_RATE_STEPS} changes; use longer periods or a shorter -z",
            )
    return segments[0][0], _squash(steps, segments[0][0], setting)


def _cycled(segments: Sequence[tuple[float, float]]) -> Iterator[tuple[float, float]]:
    while True:
        yield from segments


def _squash(
    steps: list[ScheduleStep], first_rate: float, setting: Setting = Setting.RATE
) -> list[ScheduleStep]:
    """Drop changes of ``setting`` that set the value already in force (``first_rate`` at
    the start)."""
    out: list[ScheduleStep] = []
    rate: float | None = first_rate
    for step in steps:
        if step.change.setting is setting:
            if step.change.value == rate:
                continue
            rate = step.change.value
        out.append(step)
    return out
