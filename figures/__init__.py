"""The one home of flowdeck's answer: phases, per-phase figures, verdicts, sweeps, trends.

Pure Python over plain rows; it imports no other part of flowdeck, so the engine, the
cockpit, the command line and the Spark report all compute a run's figures with the same
code (:func:`run_figures`) and give the same answer to the same precision.
"""

from flowdeck.figures.latency import QUANTILE_NAMES, QUANTILES, Percentiles, percentiles_of
from flowdeck.figures.phases import Phase, split_phases
from flowdeck.figures.run import (
    SETTINGS,
    SWEEP_LATENCY,
    SWEEP_SETTINGS,
    PhaseFigures,
    RunFigures,
    RunInputs,
    Sweep,
    load_phases,
    phase_load,
    run_figures,
    sweep_point,
)
from flowdeck.figures.sweep import (
    P99_FACTOR,
    P99_SLACK_MS,
    THROUGHPUT_TOLERANCE,
    Capacity,
    RatePoint,
    Recommendation,
    SweepPoint,
    capacity,
    ranked_throughput,
    recommend,
)
from flowdeck.figures.trend import Trend, recent, slope, trend_of, variation
from flowdeck.figures.verdict import PhaseLoad, Verdict, judge, rules

__all__ = [
    "P99_FACTOR",
    "P99_SLACK_MS",
    "QUANTILES",
    "QUANTILE_NAMES",
    "SETTINGS",
    "SWEEP_LATENCY",
    "SWEEP_SETTINGS",
    "THROUGHPUT_TOLERANCE",
    "Capacity",
    "Percentiles",
    "Phase",
    "PhaseFigures",
    "PhaseLoad",
    "RatePoint",
    "Recommendation",
    "RunFigures",
    "RunInputs",
    "Sweep",
    "SweepPoint",
    "Trend",
    "Verdict",
    "capacity",
    "judge",
    "load_phases",
    "percentiles_of",
    "phase_load",
    "ranked_throughput",
    "recent",
    "recommend",
    "rules",
    "run_figures",
    "slope",
    "split_phases",
    "sweep_point",
    "trend_of",
    "variation",
]
