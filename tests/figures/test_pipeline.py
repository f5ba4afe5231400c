"""Where the messages wait: the overloaded mirrored run of the issue on flow control (the
clients sent 7,974 msg/s, the broker took in 6,300, queue depth 0) read as the pipeline
the flow tab shows."""

from __future__ import annotations

from flowdeck.figures.pipeline import AT_CONSUMERS, BEFORE_QUEUES, IN_QUEUES, pipeline_of

POLL = {
    "t_us": 1_700_000_010_000_000, "age_s": 1.0, "before_queues": 8460.0,
    "run_accept_rate": 6300.0, "queue_ready": 0, "run_deliver_rate": 6548.0,
    "run_unacked": 400, "run_ack_rate": 6548.0, "run_unconfirmed": None,
    "run_publishers": 4, "run_publishers_flow": 3, "connections_flow": 3, "channels_flow": 3,
}  # fmt: skip


def test_the_latency_of_an_overload_held_before_the_queues_is_found_there() -> None:
    pipeline = pipeline_of(POLL, pending_confirms=None)
    assert pipeline.at == 1_700_000_009.0  # the poll's figures, not its arrival
    before = pipeline.place(BEFORE_QUEUES)
    assert before.messages == 8460 and round(before.wait_s or 0, 2) == 1.34
    assert pipeline.place(IN_QUEUES).wait_s == 0
    assert round(pipeline.place(AT_CONSUMERS).wait_s or 0, 3) == 0.061
    assert pipeline.where() == (
        "most messages wait before the queues: 8,460 ≈ 1.3 s at 6,300 msg/s "
        "(3 of 4 publishers in credit flow)"
    )


def test_a_backlog_in_the_queues_is_named_as_such_and_nothing_waiting_says_so() -> None:
    backlog = pipeline_of({**POLL, "before_queues": 20.0, "queue_ready": 160_000,
                           "run_publishers_flow": 0})  # fmt: skip
    assert backlog.where() == (
        "most messages wait in the queues (ready): 160,000 ≈ 24.4 s at 6,548 msg/s"
    )
    calm = pipeline_of({**POLL, "before_queues": 3.0, "run_unacked": 12})
    assert calm.where().startswith("nothing waits")
    # a source that does not say what the broker took in (Prometheus) leaves it unknown
    unknown = pipeline_of({k: v for k, v in POLL.items() if k != "before_queues"})
    assert unknown.place(BEFORE_QUEUES).messages is None
