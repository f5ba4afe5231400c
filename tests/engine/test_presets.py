"""Presets reproduce the seed benchmarks and scale down to a small machine."""

from __future__ import annotations

import pytest

from flowdeck.engine.change import Setting
from flowdeck.engine.errors import SpecError
from flowdeck.engine.presets import PRESETS, preset

SEED = {  # publishers, msg/s each, queues, consumers, sweep limits
    1: (20, 1000, 10, 20, [10, 20, 50, 100, 200, 1000]),
    2: (20, 2000, 10, 20, [20, 40, 100, 200, 400, 2000]),
    3: (500, 30, 100, 500, [2, 3, 6, 12, 30, 60]),
    4: (500, 60, 100, 500, [3, 6, 12, 24, 60, 120]),
    5: (1000, 100, 200, 1000, [2, 5, 10, 20, 50, 100]),
}


@pytest.mark.parametrize("number", sorted(SEED))
def test_bench_presets_match_the_seed(number: int) -> None:
    publishers, rate, queues, consumers, limits = SEED[number]
    spec = preset(f"bench{number}")
    assert (spec.publishers, spec.rate, spec.queues, spec.consumers) == (
        publishers,
        rate,
        queues,
        consumers,
    )
    assert spec.queue_type == "quorum" and spec.message_size == 1000 and spec.confirms
    sweep = preset(f"bench{number}-sweep")
    assert [s.change.value for s in sweep.schedule] == limits
    assert all(s.change.setting is Setting.INFLIGHT for s in sweep.schedule)
    assert sweep.inflight == limits[0]


def test_low_latency_preset() -> None:
    spec = preset("low-latency")
    assert (spec.publishers, spec.consumers, spec.queues) == (1, 1, 1)
    assert spec.auto_ack and not spec.confirms and not spec.durable


def test_every_preset_scales_to_a_small_machine() -> None:
    for name in PRESETS:
        small = preset(name, 0.01)
        assert small.publishers <= 10 and small.consumers <= 10 and small.queues <= 2
        assert small.target_rate <= 2000
        assert len(small.schedule) == len(PRESETS[name].schedule)


def test_unknown_preset_names_the_closest_and_where_all_are_listed() -> None:
    with pytest.raises(SpecError) as caught:
        preset("bench2sweep")
    assert caught.value.message == (
        f"unknown preset 'bench2sweep' (did you mean 'bench2-sweep'?); `flowdeck presets` "
        f"lists all {len(PRESETS)}"
    )
    with pytest.raises(SpecError, match=r"^unknown preset 'zzz'; `flowdeck presets` lists"):
        preset("zzz")
