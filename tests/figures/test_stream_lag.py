"""Stream runs are judged by the consumers' lag, not by the broker's count of the stream
(the log it retains), and the protocols matrix runs the same load over each protocol."""

from __future__ import annotations

from flowdeck.engine.presets import PRESETS, matrix
from flowdeck.figures.phases import Phase
from flowdeck.figures.run import consumer_lag

START = 1_000_000_000


def _rows(seconds: int, published: int, consumed: int) -> list[dict[str, int]]:
    return [
        {"t_us": START + (s + 1) * 1_000_000, "published": published, "consumed": consumed}
        for s in range(seconds)
    ]


def test_two_readers_keeping_up_lag_nothing_and_a_slow_one_falls_behind() -> None:
    phases = [
        Phase(0, "start", START, START + 10_000_000, START, START + 10_000_000, False),
        Phase(1, "more", START + 10_000_000, START + 20_000_000, START + 10_000_000,
              START + 20_000_000, False),
    ]  # fmt: skip
    # Phase 0: two consumers each read all 500 msg/s (1,000 consumed a second: fan-out 2);
    # phase 1: they read 800 a second of 1,000 published, 2 x 800 consumed.
    rows = _rows(10, 500, 1000) + [
        {**row, "t_us": row["t_us"] + 10_000_000} for row in _rows(10, 1000, 1600)
    ]
    lag = consumer_lag(rows, START, phases, fan_out=2)
    assert lag[0]["depth_start"] == lag[0]["depth_end"] == 0
    assert lag[0]["depth_slope"] == 0
    # the last row in the phase ends its 19th second: 9 seconds 200 a second behind
    assert lag[1]["depth_end"] == 1800
    assert round(lag[1]["depth_slope"]) == 200


def test_the_protocols_matrix_is_one_load_over_four_protocol_and_queue_pairs() -> None:
    specs = [PRESETS[name] for name in matrix("protocols")]
    assert [(s.protocol, s.queue_type) for s in specs] == [
        ("amqp0.9.1", "quorum"),
        ("amqp1.0", "quorum"),
        ("amqp0.9.1", "stream"),
        ("stream", "stream"),
    ]
    load = {
        (s.publishers, s.consumers, s.queues, s.rate, s.message_size, s.schedule) for s in specs
    }
    assert len(load) == 1
