"""Every run figure of the seed write-up has a preset, and --matrix runs a benchmark's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flowdeck.engine.errors import SpecError
from flowdeck.engine.presets import FIGURES, PRESETS, matrix


def test_each_run_figure_of_the_seed_has_its_preset() -> None:
    assert sorted(FIGURES) == [n for n in range(1, 28) if n != 24]  # 24: a dashboard view
    for figure in FIGURES.values():
        spec = PRESETS[figure.preset]
        assert spec.name == figure.preset
        if figure.queues == "mirrored":
            assert (spec.queue_type, spec.mirroring) == ("classic", 2)
            assert "mirrored to 2 nodes" in spec.description
        else:
            assert spec.queue_type == "quorum"
            assert spec.queue_args == {"x-max-in-memory-length": 0}
        assert spec.confirms == (figure.confirms != "none")
        assert bool(spec.schedule) == figure.confirms.startswith("sweep")
        assert (spec.ack_every > 1) == figure.confirms.endswith("multiple-flag acks")


def test_figures_follow_the_write_up() -> None:
    fig = {n: (f.benchmark, f.queues, f.confirms) for n, f in FIGURES.items()}
    assert fig[1] == (1, "mirrored", "none")
    assert fig[7] == (2, "mirrored", "sweep, multiple-flag acks")
    assert fig[10] == (2, "quorum", "sweep, multiple-flag acks")
    assert fig[25] == (5, "quorum", "none")
    assert FIGURES[9].preset == "bench2-sweep"  # the quorum sweeps are the sweep presets


def test_a_matrix_is_one_benchmarks_figures_in_order() -> None:
    assert (
        matrix("bench2")
        == matrix("2")
        == [
            "bench2-mirrored-noconfirms",
            "bench2-mirrored-sweep",
            "bench2-mirrored-multi-sweep",
            "bench2-quorum-noconfirms",
            "bench2-sweep",
            "bench2-multi-sweep",
        ]
    )
    with pytest.raises(SpecError, match="unknown benchmark 'bench9'; the seed has bench1"):
        matrix("bench9")


@pytest.mark.broker
def test_a_matrix_stops_at_a_refused_run_and_says_where(shared_uri: str) -> None:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "flowdeck.cli", "run", "--matrix", "bench1"),
            *("--scale", "0.02", "--duration", "3", "--uri", shared_uri, "--no-record"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "matrix bench1: run 1 of 4: bench1-mirrored-noconfirms (fig 1 of the seed)" in (
        result.stdout
    )
    assert "mirroring needs a cluster" in result.stderr
    assert result.stdout.rstrip().endswith("matrix bench1: bench1-mirrored-noconfirms exit 2")
