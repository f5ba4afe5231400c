"""The seed's conclusions as data, each judged from runs' figures (pure, no broker)."""

from __future__ import annotations

from dataclasses import replace

from flowdeck.engine.presets import PRESETS
from flowdeck.figures import Verdict
from flowdeck.figures.seed import CLAIMS, Agreement, claims_of, preset_benchmark
from tests.figures.factories import phase, run


def whole(p99_ms: float) -> dict[tuple[str, str], dict[str, int]]:
    return {("e2e", "actual"): {"count": 1000, "p99": round(p99_ms * 1000)}}


def test_every_claim_names_presets_the_matrix_runs() -> None:
    for claim in CLAIMS:
        for name in claim.presets:
            assert name in PRESETS, (claim.says, name)
            assert preset_benchmark(name) == claim.benchmark
    assert len(claims_of([2])) == 7


def test_mirrored_without_confirms_falling_apart_is_checked_by_the_verdict() -> None:
    (claim,) = [c for c in claims_of([2]) if c.says.startswith("mirrored without confirms")]
    fell = phase(0, "start", consume=6548.0, verdict=Verdict.OVERLOADED, publish_rate_mean=7974.0)
    overloaded = replace(run(fell), whole_latency=whole(6200.0))
    finding = claim.judge({"bench2-mirrored-noconfirms": overloaded})
    assert finding.agreement is Agreement.AGREES
    assert "publish 7,974, consume 6,548 msg/s" in finding.deciding
    assert "whole-run e2e p99 6,200.0 ms" in finding.deciding
    kept = replace(run(phase(0, "start")), whole_latency=whole(12.0))
    assert claim.judge({"bench2-mirrored-noconfirms": kept}).agreement is Agreement.DISAGREES
    assert claim.judge({}).agreement is Agreement.NOT_RUN


def test_latency_rising_with_the_limit_and_the_multiple_flag() -> None:
    sweep = run(
        phase(0, "inflight=20", p99=20.0, inflight=20),
        phase(1, "inflight=400", p99=80.0, inflight=400),
    )
    rises = next(c for c in claims_of([2]) if c.says.endswith("latency shoots up"))
    finding = rises.judge({"bench2-mirrored-sweep": sweep})
    assert finding.agreement is Agreement.AGREES
    assert finding.deciding == "p99 at in-flight 20: 20.0 ms, at 400: 80.0 ms"
    multi = run(
        phase(0, "inflight=20", p99=20.0, inflight=20, consume_rate_mean=1100.0),
        phase(1, "inflight=400", p99=60.0, inflight=400),
    )
    helps = next(c for c in claims_of([2]) if c.says.startswith("mirrored: the multiple flag"))
    runs = {"bench2-mirrored-sweep": sweep, "bench2-mirrored-multi-sweep": multi}
    found = helps.judge(runs)
    assert found.agreement is Agreement.AGREES, found
    assert "best msg/s 1,000 → 1,100 (+10%)" in found.deciding


def test_the_multiple_flag_is_judged_on_steps_that_speak_of_their_setting() -> None:
    """The seed redo's quorum sweep: the steps after in-flight 20 and 40 (held to 2,750
    and 3,104 of 4,000 msg/s) sent what those held back, 5,299 msg/s at in-flight 100,
    judged as catching up; that is no step's throughput to compare the multiple flag on."""
    plain = run(
        phase(0, "inflight=20", inflight=20, consume=2750.0, verdict=Verdict.BACK_PRESSURED),
        phase(1, "inflight=100", inflight=100, consume=5299.0, verdict=Verdict.CATCHING_UP),
        phase(2, "inflight=400", inflight=400, consume=4000.0),
    )
    multi = run(
        phase(0, "inflight=20", inflight=20, consume=3000.0, verdict=Verdict.BACK_PRESSURED),
        phase(1, "inflight=100", inflight=100, consume=4100.0),
        phase(2, "inflight=400", inflight=400, consume=4000.0),
    )
    helps = next(c for c in claims_of([2]) if c.says.startswith("quorum: a mild benefit"))
    found = helps.judge({"bench2-sweep": plain, "bench2-multi-sweep": multi})
    assert "best msg/s 4,000 → 4,100 (+2%)" in found.deciding, found
    assert found.agreement is Agreement.PARTLY
