"""RunSpec validation: every bad value is a SpecError naming its field, never another error."""

from __future__ import annotations

import argparse
import math
import pickle
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowdeck.cli.common import add_spec_arguments, spec_from_args
from flowdeck.engine.change import Change, Setting
from flowdeck.engine.errors import SpecError
from flowdeck.engine.presets import load_spec_file
from flowdeck.engine.spec import FIELDS, RunSpec, ScheduleStep, spec_from_mapping


def test_defaults_are_valid() -> None:
    spec = RunSpec()
    assert spec.queue_names == ("flowdeck-1",)
    assert spec.target_rate == 0


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"prefetch": 70000}, "prefetch", "prefetch must be 0..65535, got 70000"),
        ({"queues": 0}, "queues", "queues must be 1..10000, got 0"),
        ({"rate": -1}, "rate", "rate must be 0..10000000 msg/s, got -1"),
        ({"message_size": 10}, "message_size", "message_size must be 28..67108864 bytes, got 10"),
        ({"queue_type": "fifo"}, "queue_type", "queue_type must be one of classic, quorum, stream"),
        ({"confirms": "yes"}, "confirms", "confirms must be true or false"),
        ({"publishers": 1.5}, "publishers", "publishers must be a whole number"),
        ({"uri": "http://x"}, "uri", "uri must start with amqp:// or amqps://"),
        ({"queues": 2, "queue_pattern": "q"}, "queue_pattern", "must contain %d"),
        ({"prefetch": 5, "ack_every": 10}, "ack_every", "must not exceed prefetch"),
        ({"queue_type": "quorum", "lazy": True}, "lazy", "lazy mode applies to classic"),
        ({"queue_type": "stream", "auto_ack": True}, "auto_ack", "stream queues need manual"),
        ({"queue_type": "quorum", "durable": False}, "durable", "quorum queues must be durable"),
        ({"colour": "red"}, "colour", "unknown field 'colour'"),
        ({"queue_args": {"x-max-length": [1]}}, "queue_args.x-max-length", "must be a number"),
        (
            {"duration": 10, "schedule": [{"at": 20, "change": "inflight=5"}]},
            "schedule[0].at",
            "within duration",
        ),
        ({"schedule": [{"at": 1, "change": "prefetch=x"}]}, "schedule[0].change", "needs a number"),
        ({"schedule": [{"at": 1}]}, "schedule[0]", "must be {at = SECONDS"),
        # Names RabbitMQ refuses: at most 255 bytes of UTF-8, for the highest queue number.
        ({"queue_pattern": "q" * 300}, "queue_pattern", "is 300 bytes of UTF-8, over"),
        (
            {"queue_pattern": "q" * 252 + "%d", "queues": 1000},
            "queue_pattern",
            "queue name 'qqq",  # q...1000 is 256 bytes; q...999 would fit
        ),
        ({"queue_pattern": "é" * 128}, "queue_pattern", "is 256 bytes of UTF-8"),
        ({"exchange": "x" * 256}, "exchange", "over RabbitMQ's limit of 255; shorten exchange"),
        ({"routing_key": "k" * 256}, "routing_key", "shorten routing_key"),
        ({"queue_pattern": "amq.q-%d"}, "queue_pattern", "'amq.' are reserved by RabbitMQ"),
        ({"exchange": "amq.foo"}, "exchange", "reserved by RabbitMQ, got 'amq.foo'"),
        ({"exchange": "amq.topic"}, "exchange_type", "amq.topic is a topic exchange"),
        ({"uri": "amqp://h/?verify=maybe"}, "uri", "verify must be verify_peer or verify_none"),
    ],
)
def test_bad_values_name_field_value_and_range(
    values: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping(values)
    assert caught.value.field == field
    assert message in caught.value.message


def test_spec_file_with_preset_and_scale(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        'preset = "bench2"\nscale = 0.1\nprefetch = 500\n'
        'schedule = [{at = 10, change = "inflight=40"}]\n'
        "[queue_args]\nx-max-length = 1000\n"
    )
    spec = load_spec_file(path)
    assert (spec.publishers, spec.consumers, spec.queues) == (2, 2, 1)
    assert spec.prefetch == 500
    assert spec.schedule[0].at == 10 and spec.schedule[0].change.value == 40
    assert dict(spec.queue_args) == {"x-max-length": 1000}


def test_spec_file_errors_are_spec_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("prefetch = \n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec_file(path)
    with pytest.raises(SpecError, match=r"spec file .*missing\.toml does not exist"):
        load_spec_file(tmp_path / "missing.toml")


def test_names_up_to_the_limit_and_predeclared_exchanges_are_valid() -> None:
    spec = RunSpec(queue_pattern="q" * 252 + "%d", queues=999)
    assert len(spec.queue_names[-1]) == 255
    assert RunSpec(exchange="amq.topic", exchange_type="topic").exchange == "amq.topic"
    assert RunSpec(exchange="amq.match", exchange_type="headers").exchange == "amq.match"


def test_a_spec_file_that_is_not_utf8_is_a_spec_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(SpecError) as caught:
        load_spec_file(path)
    assert caught.value.message == (
        f"spec file {path} is not UTF-8 text (byte 0xe9 at offset 11); save it as UTF-8"
    )


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_random_bytes_as_a_spec_file_are_a_spec_or_a_spec_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "random.toml"
        path.write_bytes(content)
        try:
            spec = load_spec_file(path)
        except SpecError as exc:
            assert exc.field
            assert exc.message and "\n" not in exc.message
        else:
            assert isinstance(spec, RunSpec)


_toml_values = st.sampled_from(
    ["1", "-5", "1e400", "nan", '"amq.x"', '"q-%d"', "true", "[1, 2]", "{a = 1}", '"\\u00e9"',
     "1979-05-27", '"' + "q" * 300 + '"', '"bench2"', "0", "0.05"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([*FIELDS, "preset", "scale", "colour"]), _toml_values),
        max_size=5,
    )
)
def test_random_spec_files_are_a_spec_or_a_spec_error(lines: list[tuple[str, str]]) -> None:
    """TOML that parses, with any field given any kind of value."""
    text = "".join(f"{key} = {value}\n" for key, value in dict(lines).items())
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "random.toml"
        path.write_text(text, encoding="utf-8")
        try:
            spec = load_spec_file(path)
        except SpecError as exc:
            assert exc.field
            assert exc.message and "\n" not in exc.message
        else:
            assert isinstance(spec, RunSpec)


def test_scaled_shrinks_counts_and_keeps_per_client_limits() -> None:
    spec = RunSpec(
        publishers=20,
        consumers=20,
        queues=10,
        rate=1000,
        inflight=100,
        prefetch=1000,
        queue_pattern="q-%d",
        queue_type="quorum",
        schedule=(ScheduleStep(5, Change(Setting.PUBLISHERS, 10, relative=True)),),
    )
    small = spec.scaled(0.1)
    assert (small.publishers, small.consumers, small.queues) == (2, 2, 1)
    assert (small.rate, small.inflight, small.prefetch) == (1000, 100, 1000)
    assert small.schedule[0].change.value == 1
    with pytest.raises(SpecError, match="scale must be in"):
        spec.scaled(0)


def test_with_duration_keeps_each_step_at_the_same_fraction() -> None:
    from flowdeck.engine.presets import preset

    sweep = preset("bench1-sweep")
    short = sweep.with_duration(30)
    assert short.duration == 30
    assert [s.at for s in short.schedule] == [0, 5, 10, 15, 20, 25]
    assert [s.change for s in short.schedule] == [s.change for s in sweep.schedule]


def test_with_step_holds_each_phase_that_long_and_the_duration_follows() -> None:
    from flowdeck.engine.presets import preset

    sweep = preset("bench2-sweep")
    stepped = sweep.with_step(10)
    assert stepped.duration == 60
    assert [s.at for s in stepped.schedule] == [0, 10, 20, 30, 40, 50]
    assert [s.change for s in stepped.schedule] == [s.change for s in sweep.schedule]
    # uneven steps are re-spaced; two at one time stay together; a first step after 0 s
    # leaves a phase before it
    uneven = spec_from_mapping(
        {
            "duration": 100,
            "schedule": [
                {"at": 5, "change": "inflight=10"},
                {"at": 5, "change": "prefetch=20"},
                {"at": 70, "change": "inflight=40"},
            ],
        }
    )
    respaced = uneven.with_step(3)
    assert [(s.at, s.describe()) for s in respaced.schedule] == [
        (3, "inflight=10"), (3, "prefetch=20"), (6, "inflight=40"),
    ]  # fmt: skip
    assert respaced.duration == 9
    with pytest.raises(SpecError, match="bench2 has no schedule: give its length with duration"):
        preset("bench2").with_step(10)
    with pytest.raises(SpecError, match="over the longest run"):
        sweep.with_step(7 * 24 * 3600)
    with pytest.raises(SpecError, match="step must be more than 0 s, got 0"):
        sweep.with_step(0)


def test_a_spec_with_queue_args_pickles_for_worker_processes() -> None:
    spec = RunSpec(queue_args={"x-max-length": 10, "x-overflow": "reject-publish"})
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and dict(copy.queue_args) == {
        "x-max-length": 10,
        "x-overflow": "reject-publish",
    }
    with pytest.raises(TypeError, match="cannot be changed"):
        copy.queue_args["x-max-length"] = 5  # type: ignore[index]


def test_redacted_masks_passwords() -> None:
    spec = RunSpec(uri="amqp://bob:s3cret@broker:5672/%2F")
    assert spec.redacted()["uri"] == "amqp://bob:***@broker:5672/%2F"
    assert "s3cret" not in str(spec.redacted())


# -- property: random bad input never escapes as anything but a SpecError -----------------

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
_names = st.one_of(st.sampled_from(sorted(FIELDS)), st.text(min_size=1, max_size=12))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_names, _junk, min_size=1, max_size=4))
def test_random_specs_are_valid_or_a_spec_error_with_a_field(values: dict[str, Any]) -> None:
    try:
        spec = spec_from_mapping(values)
    except SpecError as exc:
        assert exc.field
        assert exc.message and "\n" not in exc.message
    else:
        assert isinstance(spec, RunSpec)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_spec_arguments(parser)
    return parser


_flag_fields = [name for name, info in FIELDS.items() if info.kind in (int, float, str)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_flag_fields),
            st.text(max_size=12).filter(lambda t: not t.startswith("-")),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_random_flag_values_are_valid_or_a_spec_error_with_a_field(
    flags: list[tuple[str, str]],
) -> None:
    argv: list[str] = []
    for name, value in flags:
        argv += ["--" + name.replace("_", "-"), value]
    args = _parser().parse_args(argv)
    try:
        spec = spec_from_args(args)
    except SpecError as exc:
        assert exc.field
        assert "\n" not in exc.message
    else:
        assert isinstance(spec, RunSpec)
        last = dict(flags)
        for name, value in last.items():
            if FIELDS[name].kind is str:
                assert getattr(spec, name) == value


def test_flag_numbers_convert_and_report_the_field() -> None:
    args = _parser().parse_args(["--prefetch", "60", "--rate", "2.5", "--publishers", "3"])
    spec = spec_from_args(args)
    assert (spec.prefetch, spec.rate, spec.publishers) == (60, 2.5, 3)
    with pytest.raises(SpecError) as caught:
        spec_from_args(_parser().parse_args(["--prefetch", "lots"]))
    assert caught.value.field == "prefetch"
    assert caught.value.message == "prefetch must be a number, got 'lots'"
    assert math.isclose(spec.target_rate, 7.5)
