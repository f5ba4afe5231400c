"""PerfTest command lines: every supported option maps to the right spec field, every
unsupported one is refused by name, and the printed TOML loads back to the same spec."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flowdeck.cli import main
from flowdeck.cli.import_perftest import spec_toml
from flowdeck.engine.change import Setting
from flowdeck.engine.errors import SpecError
from flowdeck.engine.perftest import OPTIONS, STREAM_QUEUE_ARGS, spec_from_perftest
from flowdeck.engine.presets import load_spec_file
from flowdeck.engine.spec import RunSpec

ISSUE_LINE = "-x 20 -y 20 -u q -qq -r 1000 -c 100 -q 2000 -A 200 -s 1000 -z 300"


def test_the_issue_line_maps_field_by_field() -> None:
    spec = spec_from_perftest(ISSUE_LINE)
    assert (spec.publishers, spec.consumers) == (20, 20)
    assert (spec.queues, spec.queue_pattern, spec.queue_type) == (1, "q", "quorum")
    assert spec.rate == 1000
    assert (spec.confirms, spec.inflight) == (True, 100)
    assert (spec.prefetch, spec.ack_every) == (2000, 200)
    assert spec.message_size == 1000
    assert spec.duration == 300
    # PerfTest makes quorum queues persistent and durable
    assert spec.persistent and spec.durable


@pytest.mark.parametrize(
    ("short", "long"),
    [
        ("-x 3 -y 4", "--producers 3 --consumers 4"),
        ("-u orders", "--queue orders"),
        ("-r 250", "--rate 250"),
        ("-c 50", "--confirm 50"),
        ("-q 300 -A 30", "--qos 300 --multi-ack-every 30"),
        ("-s 512", "--size 512"),
        ("-z 45", "--time 45"),
        ("-a", "--autoack"),
        ("-f persistent -f mandatory", "--flag persistent --flag mandatory"),
        ("-t fanout", "--type fanout"),
        ("-e orders-x -t topic", "--exchange orders-x --type topic"),
        ("-k key.1", "--routing-key key.1"),
        ("-h amqp://u:p@host:5673/v", "--uri amqp://u:p@host:5673/v"),
        ("-d nightly", "--id nightly"),
        ("-qq", "--quorum-queue"),
        ("-sq", "--stream-queue"),
        ("-qa x-max-length=10", "--queue-args x-max-length=10"),
        (
            "-qp p-%d -qpf 3 -qpt 7",
            "--queue-pattern p-%d --queue-pattern-from 3 --queue-pattern-to 7",
        ),
        ("-vr 10:5 -vr 20:5 -z 20", "--variable-rate 10:5 --variable-rate 20:5 --time 20"),
        ("-mlb 5mb", "--max-length-bytes 5mb"),
        ("-ll balanced -qq", "--leader-locator balanced --quorum-queue"),
    ],
)
def test_short_and_long_forms_give_the_same_spec(short: str, long: str) -> None:
    assert spec_from_perftest(short) == spec_from_perftest(long)
    assert spec_from_perftest(short) != spec_from_perftest("")  # the option did something


def test_options_flowdeck_already_follows_are_accepted_at_the_value_it_follows() -> None:
    short = "-X 1 -Y 1 -m 0 -n 0 -i 1 -ad false"
    long = (
        "--producer-channel-count 1 --consumer-channel-count 1 --ptxsize 0 --ctxsize 0 "
        "--interval 1 --auto-delete false"
    )
    assert spec_from_perftest(short) == spec_from_perftest(long) == spec_from_perftest("")


def test_each_supported_option_sets_its_field() -> None:
    default = spec_from_perftest("")
    assert (default.publishers, default.consumers, default.confirms, default.prefetch) == (
        1,
        1,
        False,
        0,
    )  # PerfTest's defaults, not flowdeck's
    cases: dict[str, dict[str, object]] = {
        "-x 3": {"publishers": 3},
        "-y 0": {"consumers": 0},
        "-u orders": {"queue_pattern": "orders", "queues": 1},
        "-r 250.5": {"rate": 250.5},
        "-c 0": {"confirms": True, "inflight": 0},
        "-c -1": {"confirms": False},
        "-q 300": {"prefetch": 300},
        "-q 300 -A 30": {"prefetch": 300, "ack_every": 30},
        "-A 0": {"ack_every": 1},
        "-s 4096": {"message_size": 4096},
        "-z 45": {"duration": 45.0},
        "-a": {"auto_ack": True},
        "-f persistent": {"persistent": True, "durable": True},
        "-f mandatory": {"mandatory": True, "persistent": False},
        "-t fanout": {"exchange": "fanout", "exchange_type": "fanout"},
        "-e orders-x": {"exchange": "orders-x", "exchange_type": "direct"},
        "-e amq.default": {"exchange": ""},
        "-k key.1": {"routing_key": "key.1", "exchange": "direct", "exchange_type": "direct"},
        "-k key.1 -e amq.default": {"routing_key": "key.1", "exchange": ""},
        "-k key.1 -t topic": {"routing_key": "key.1", "exchange": "topic"},
        "-h amqp://u:p@host:5673/v": {"uri": "amqp://u:p@host:5673/v"},
        "-H amqp://one:5672": {"uri": "amqp://one:5672"},
        "-H amqp://u:p@one:5672,amqp://u:p@two:5673": {
            "uri": "amqp://u:p@one:5672,amqp://u:p@two:5673"
        },
        "-d nightly": {"name": "nightly"},
        "-qq": {"queue_type": "quorum", "persistent": True, "durable": True},
        "-sq": {
            "queue_type": "stream",
            "prefetch": 200,
            "queue_args": dict(STREAM_QUEUE_ARGS),
        },
        "-sq -q 50": {"prefetch": 50},
        "-qa x-max-length=10,x-overflow=reject-publish": {
            "queue_args": {"x-max-length": 10, "x-overflow": "reject-publish"}
        },
        "-qa x-max-in-memory-length=0 -qa x-single-active-consumer=true -qq": {
            "queue_args": {"x-max-in-memory-length": 0, "x-single-active-consumer": True}
        },
        "-qa x-queue-mode=lazy": {"lazy": True, "queue_args": {}},
        "-qa x-queue-type=quorum": {"queue_type": "quorum", "queue_args": {}},
        "-qa x-dead-letter-exchange=amq.default": {"queue_args": {"x-dead-letter-exchange": ""}},
        "-qp p-%d -qpf 3 -qpt 7": {"queue_pattern": "p-%d", "queue_pattern_from": 3, "queues": 5},
        "-mlb 5mb": {"queue_args": {"x-max-length-bytes": 5_000_000}},
        "-sq -mlb 0": {"queue_args": {"x-stream-max-segment-size-bytes": 500_000_000}},
        "-qq -ll client-local": {"queue_args": {"x-queue-leader-locator": "client-local"}},
        "-x20": {"publishers": 20},
        "--producers=20": {"publishers": 20},
    }
    for line, expected in cases.items():
        spec = spec_from_perftest(line)
        for field, value in expected.items():
            actual = getattr(spec, field)
            actual = dict(actual) if field == "queue_args" else actual
            assert actual == value, f"{line}: {field} = {actual!r}, expected {value!r}"


def test_variable_rate_becomes_a_schedule_cycled_to_the_duration() -> None:
    spec = spec_from_perftest("-x 2 -vr 100:10 -vr 0:5 -vr 300:5 -z 45")
    assert spec.rate == 100
    steps = [(s.at, s.change.describe()) for s in spec.schedule]
    assert steps == [
        (10.0, "pause"),
        (15.0, "rate=300"),
        (15.0, "resume"),
        (20.0, "rate=100"),
        (30.0, "pause"),
        (35.0, "rate=300"),
        (35.0, "resume"),
        (40.0, "rate=100"),
    ]
    assert all(
        s.change.setting in (Setting.RATE, Setting.PAUSE, Setting.RESUME) for s in spec.schedule
    )


def test_base_spec_supplies_only_what_perftest_does_not_describe() -> None:
    base = RunSpec(
        uri="amqp://guest:guest@localhost:5672/%2F",
        workers=0,
        duration=30.0,
        prefetch=999,
        confirms=True,
        name="base",
    )
    spec = spec_from_perftest("-x 2 -y 3", base)
    assert (spec.uri, spec.workers, spec.duration) == (base.uri, 0, 30.0)
    assert (spec.prefetch, spec.confirms, spec.name) == (0, False, "perftest")


UNSUPPORTED = [
    ("-C 1000", "-C (flowdeck runs stop on time"),
    ("--pmessages 1000", "--pmessages"),
    ("-D 1000", "-D (flowdeck runs stop on time"),
    ("--cmessages 5", "--cmessages"),
    ("-R 100", "-R (flowdeck consumers take"),
    ("-Q 10", "-Q (flowdeck sets prefetch per consumer"),
    ("-K", "-K (flowdeck publishes with one routing key"),
    ("-P 5", "-P (use -r"),
    ("-m 10", "-m 10 (flowdeck publishes without transactions"),
    ("-ad true", "-ad true (flowdeck keeps its queues"),
    ("-u a,b", "a list of queue names"),
    ("-f immediate", "-f immediate"),
    ("-r 0", "-r 0 (in PerfTest producers then do not publish"),
    ("--metrics-prometheus", "--metrics-prometheus (use flowdeck run --metrics-port"),
    ("--no-such-option", "--no-such-option (not a PerfTest option)"),
    ("stray", "stray (not a PerfTest option)"),
]


@pytest.mark.parametrize(("line", "named"), UNSUPPORTED)
def test_unsupported_options_are_refused_by_name(line: str, named: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_perftest(f"-x 1 {line} -y 1")
    assert named in caught.value.message
    assert caught.value.message.startswith("cannot run 1 of the given PerfTest options")


def test_every_refused_option_of_perftest_is_refused() -> None:
    for option in OPTIONS:
        if not option.refusal:
            continue
        word = f"--{option.long}" + (" 1" if option.takes_value else "")
        with pytest.raises(SpecError, match="cannot run"):
            spec_from_perftest(word)


def test_all_refusals_are_listed_in_one_line() -> None:
    seed = (
        "--autoack --interval 15 --size 1000 --queue-args 'x-max-length=10000' "
        "--routing-key perf-test --uri 'amqp://admin:pass@10.99.244.3:5672/%2F' "
        "--metrics-prometheus --metrics-tags 'type=publisher,type=consumer' "
        "--queue-pattern 'perf-test-%d' --queue-pattern-from 0 --queue-pattern-to 0 "
        "--consumers 1 --producers 1 --rate 100"
    )
    with pytest.raises(SpecError) as caught:
        spec_from_perftest("bin/runjava com.rabbitmq.perf.PerfTest " + seed)
    message = caught.value.message
    assert "2 of the given PerfTest options" in message and "\n" not in message
    for named in ("--metrics-prometheus", "--metrics-tags"):
        assert named in message
    # the seed's low-latency line without what flowdeck cannot do runs as written
    kept = seed.replace("--metrics-prometheus ", "")
    kept = kept.replace("--metrics-tags 'type=publisher,type=consumer' ", "")
    spec = spec_from_perftest(kept)
    assert (spec.queue_pattern, spec.queue_pattern_from, spec.queues) == ("perf-test-%d", 0, 1)
    assert spec.queue_name(0) == "perf-test-0"
    assert (spec.auto_ack, spec.rate, spec.routing_key) == (True, 100, "perf-test")
    assert dict(spec.queue_args) == {"x-max-length": 10000}
    assert spec.interval == 15  # the report's max of per-interval percentiles, as the seed's


def test_interval_sets_the_reports_latency_intervals() -> None:
    assert spec_from_perftest("-i 15").interval == spec_from_perftest("--interval 15").interval
    assert spec_from_perftest("--interval 15").interval == 15
    assert spec_from_perftest("").interval == 1  # PerfTest's default, whatever the base
    with pytest.raises(SpecError, match="--interval must be >= 1, got 0"):
        spec_from_perftest("--interval 0")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("-x many", "-x needs a whole number, got 'many'"),
        ("-x -3", "-x must be >= 0, got -3"),
        ("-s 12", "flowdeck bodies need at least 28 bytes"),
        ("-qp q-%d -qpf 1", "go together"),
        ("-qp q-%d -qpf 5 -qpt 1", "must be >= -qpf (5)"),
        ("-qp q -qpf 1 -qpt 2", "must contain %d"),
        ("-qq -sq", "not both"),
        ("-vr 100", "RATE:DURATION"),
        ("-vr 100:0", "RATE:DURATION"),
        ("-t nope", "-t/--type must be one of direct, fanout, topic, headers"),
        ("-q 10 -A 20", "ack_every (20) must not exceed prefetch (10)"),
        ("-x", "needs a value"),
        ("-a yes", "yes (not a PerfTest option)"),
        ("'-x 1", "cannot split"),
    ],
)
def test_bad_values_say_what_is_wrong(line: str, says: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_perftest(line)
    assert says in caught.value.message


def test_toml_round_trip(tmp_path: Path) -> None:
    lines = [
        ISSUE_LINE,
        "-x 2 -y 2 -sq -qa x-max-age=1h -z 30",
        "-x 2 -y 2 -qp 'p-%d' -qpf 0 -qpt 9 -t topic -e ex -k rk -f persistent -f mandatory",
        "-x 1 -y 1 -vr 10:5 -vr 0:5 -vr 30:5 -z 60 -h amqp://guest:guest@localhost:5672/%2F",
        "",
    ]
    for index, line in enumerate(lines):
        spec = spec_from_perftest(line)
        path = tmp_path / f"spec{index}.toml"
        path.write_text(spec_toml(spec), encoding="utf-8")
        assert load_spec_file(path) == spec, line


def test_import_perftest_command_prints_a_spec_file_that_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["import-perftest", ISSUE_LINE]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# flowdeck spec from PerfTest: " + ISSUE_LINE)
    path = tmp_path / "issue.toml"
    path.write_text(out, encoding="utf-8")
    assert load_spec_file(path) == spec_from_perftest(ISSUE_LINE)
    # the unquoted form after --
    assert main(["import-perftest", "--", *ISSUE_LINE.split()]) == 0
    assert capsys.readouterr().out.split("\n", 1)[1] == out.split("\n", 1)[1]


def test_import_perftest_refuses_in_one_line_with_exit_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "flowdeck.cli", "import-perftest", "-x 2 -C 100 -R 5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "2 of the given PerfTest options: -C" in lines[0] and "-R" in lines[0]


def test_run_perftest_flag_builds_the_spec_flags_refine_it() -> None:
    from flowdeck.cli import build_parser
    from flowdeck.cli.import_perftest import spec_from_run_args

    args = build_parser().parse_args(
        [
            "run",
            "--perftest",
            ISSUE_LINE,
            "--duration",
            "20",
            "--inflight",
            "50",
            "--change",
            "10s:inflight=80",
            "--workers",
            "0",
        ]
    )
    spec = spec_from_run_args(args)
    assert (spec.publishers, spec.queue_type, spec.rate) == (20, "quorum", 1000)
    assert (spec.inflight, spec.duration, spec.workers) == (50, 20.0, 0)
    assert [(s.at, s.change.describe()) for s in spec.schedule] == [(10.0, "inflight=80")]
    args = build_parser().parse_args(["run", "--preset", "bench2", "--perftest", "-x 2 -y 2"])
    from_preset = spec_from_run_args(args)
    assert (from_preset.publishers, from_preset.duration) == (2, 300.0)  # preset's duration
    args = build_parser().parse_args(["run", "--perftest", "-x 2 -C 10"])
    with pytest.raises(SpecError, match="-C"):
        spec_from_run_args(args)


def test_a_perftest_line_kept_in_a_file_is_read_as_given(tmp_path: Path) -> None:
    script = tmp_path / "bench.sh"
    script.write_text(
        "#!/bin/sh\n# the seed's run\njava -jar perf-test.jar -x 2 -y 3 \\\n  -r 100\n"
    )
    assert spec_from_perftest(f"@{script}") == spec_from_perftest("-x 2 -y 3 -r 100")
    assert spec_from_perftest([f"@{script}"]) == spec_from_perftest("-x 2 -y 3 -r 100")
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(SpecError, match="holds no command line"):
        spec_from_perftest(f"@{tmp_path / 'empty'}")
    with pytest.raises(SpecError, match=r"is not a regular file \(a character device\)"):
        spec_from_perftest("@/dev/zero")


def test_consumer_and_connection_options_map_onto_flowdeck_settings() -> None:
    spec = spec_from_perftest(
        "-x 1 -y 2 -q 50 -L 5000 --nack --requeue false -b 10 -M 8192 -tnd false "
        "-tsbs 65536 -trbs 131072 -z 30"
    )
    assert (spec.work, spec.reject, spec.requeue) == (5.0, 100.0, False)
    assert (spec.heartbeat, spec.frame_max, spec.tcp_nodelay) == (10, 8192, False)
    assert (spec.tcp_send_buffer, spec.tcp_receive_buffer) == (65536, 131072)
    # PerfTest's defaults: no work, nothing rejected, a nack requeues
    plain = spec_from_perftest("-x 1 -y 1 --nack", RunSpec(work=3.0, reject=5.0))
    assert (plain.work, plain.reject, plain.requeue) == (0.0, 100.0, True)
    with pytest.raises(SpecError, match="needs true or false"):
        spec_from_perftest("--requeue maybe")


def test_variable_latency_becomes_work_changes_cycled_to_the_duration() -> None:
    spec = spec_from_perftest("-vl 1000:10 -vl 5000:5 -vr 100:15 -vr 200:15 -z 40")
    assert spec.work == 1.0 and spec.rate == 100
    # -vl: 1 ms for 10 s, 5 ms for 5 s, again; -vr: 100/s for 15 s, 200/s for 15 s, again
    assert [(step.at, step.describe()) for step in spec.schedule] == [
        (10, "work=5"), (15, "rate=200"), (15, "work=1"), (25, "work=5"), (30, "rate=100"),
        (30, "work=1"),
    ]  # fmt: skip
    with pytest.raises(SpecError, match="MICROSECONDS:DURATION"):
        spec_from_perftest("-vl 1000")


def test_variable_size_becomes_size_changes() -> None:
    spec = spec_from_perftest("-vs 1000:10 -vs 4000:10 -z 30")
    assert spec.message_size == 1000
    assert [(step.at, step.describe()) for step in spec.schedule] == [
        (10, "message_size=4000"), (20, "message_size=1000"),
    ]  # fmt: skip
    with pytest.raises(SpecError, match="SIZE >= 28"):
        spec_from_perftest("-vs 12:10")
