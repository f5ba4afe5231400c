"""The control API's wire types: what the server sends reads back as what it was, and the
OpenAPI document describes exactly the types the server validates and answers with."""

from __future__ import annotations

import json

import msgspec
import pytest

from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample
from flowdeck.engine.change import parse_change
from flowdeck.engine.control.openapi import openapi_description
from flowdeck.engine.control.wire import (
    MAX_CHANGES,
    ChangeRequest,
    Status,
    broker_sample_from_json,
    decode_change_request,
    encode,
    summary_from_json,
    summary_wire,
    tick_from_json,
    tick_wire,
)
from flowdeck.engine.latency import LatencyKind, SendBasis
from flowdeck.engine.progress import DataSafety, PendingChange, Percentiles, RunSummary, Tick
from flowdeck.engine.snapshot import ActiveTimes, Counters, Settings

SETTINGS = Settings.of(inflight=200, prefetch=60, ack_every=6, rate=30.0, publishers=2, consumers=2)
P = Percentiles(count=100, p50=1.5, p75=2.0, p95=3.0, p99=4.5, p999=6.0, max=9.0)


def test_a_tick_crosses_the_wire_and_reads_back_the_same() -> None:
    tick = Tick(
        at=1_700_000_010.5, elapsed=10.5, duration=60.0, target_rate=60.0,
        publish_rate=59.5, confirm_rate=59.0, consume_rate=58.5, nack_rate=0.0,
        return_rate=0.0, totals=Counters(published=600, confirmed=590, consumed=580),
        pending_confirms=10, unacked=3, connections=4, blocked=0, settings=SETTINGS,
        pending=(PendingChange(7, parse_change("prefetch=50"), 1_700_000_010.0, "api", 1, 2),),
        latency={(LatencyKind.END_TO_END, SendBasis.ACTUAL): P},
        phase="inflight=200", phase_index=2, next_step_at=30.0,
        next_step=parse_change("inflight=400"), workers=2,
    )  # fmt: skip
    assert tick_from_json(json.loads(encode(tick_wire(tick)))) == tick


def test_a_summary_and_a_broker_sample_read_back_the_same() -> None:
    summary = RunSummary(
        name="bench2", started=1.0, ended=61.0, outcome="completed", stop_reason="duration",
        safety=DataSafety(100, 100, 0, 0, 100, 0, 0, 0, 0), publish_rate=1.7,
        confirm_rate=1.7, consume_rate=1.7,
        latency={(LatencyKind.CONFIRM, SendBasis.INTENDED): P}, phases=3,
        session_dir="/s/x", errors=("one",), active=ActiveTimes(first_publish=1.5),
        target_rate=2.0,
    )  # fmt: skip
    assert summary_from_json(json.loads(encode(summary_wire(summary)))) == summary
    sample = BrokerSample(
        source="management", taken_at=5.0, figures_at=4.0, statistics_interval=1.0,
        nodes=(NodeSample(name="rabbit@a", mem_used=10, partitions=("rabbit@b",)),),
        queues=(QueueSample("q-1", "/", "quorum", 5, 1, 1, members=("rabbit@a",)),),
    )  # fmt: skip
    assert broker_sample_from_json(json.loads(encode(sample))) == sample
    newer = {**json.loads(encode(sample)), "a_field_of_a_newer_flowdeck": 1}
    assert broker_sample_from_json(newer) == sample


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "truncated"),
        (b"{}", 'the body needs a change, e.g. {"change": "inflight=200"}'),
        (b'{"change": ""}', "Expected `str` of length >= 1 - at `$.change`"),
        (b'{"change": 200}', "Expected `str`, got `int` - at `$.change`"),
        (b'{"change": "a", "changes": ["b"]}', "the body needs a change"),
        (b'{"changes": []}', "Expected `array` of length >= 1 - at `$.changes`"),
        (b'{"chnage": "inflight=1"}', "Object contains unknown field `chnage`"),
        (b"[" * 50_000, "Expected `object`, got `array`"),
        (b'{"change": "' + b"x" * 501 + b'"}', "Expected `str` of length <= 500"),
    ],
)
def test_bad_change_requests_are_refused_in_one_line(body: bytes, says: str) -> None:
    with pytest.raises(msgspec.MsgspecError) as caught:
        decode_change_request(body)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_openapi_document_is_generated_from_the_wire_types() -> None:
    document = openapi_description("test")
    schemas = document["components"]["schemas"]
    _, generated = msgspec.json.schema_components(
        (Status, ChangeRequest), ref_template="#/components/schemas/{name}"
    )
    assert schemas["Status"] == generated["Status"]
    assert schemas["ChangeRequest"]["properties"] == generated["ChangeRequest"]["properties"]
    assert schemas["ChangeRequest"]["properties"]["changes"]["maxItems"] == MAX_CHANGES
    assert schemas["ChangeRequest"]["additionalProperties"] is False
    # Every field of a tick, a summary and a broker sample is described, not "an object".
    for name in ("TickWire", "SummaryWire", "BrokerSample", "Settings", "Percentiles"):
        assert schemas[name]["properties"], name
    assert set(schemas["Status"]["properties"]["state"]["enum"]) == {
        "starting", "running", "stopping", "ended"
    }  # fmt: skip
    assert {op["operationId"] for path in document["paths"].values() for op in path.values()} == {
        "status", "change", "change_state", "stream", "stop", "skip_step", "resume_schedule",
        "autotune", "autotune_state", "autotune_stop", "openapi",
    }  # fmt: skip
    # The settings travel flat, one property per registry row and paused.
    from flowdeck.engine.settings import STEERABLE

    assert set(schemas["Settings"]["properties"]) == {r.field for r in STEERABLE} | {"paused"}
    assert schemas["AutotuneRequest"]["additionalProperties"] is False
