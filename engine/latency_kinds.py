"""What a latency is measured as: its kind and its send-time basis (see ``latency.py``).

Value types only, apart from the histograms: specs, thresholds, snapshots and ticks name
latencies without loading numpy and the HDR library (``flowdeck --help`` stays quick).
"""

from __future__ import annotations

from enum import StrEnum


class LatencyKind(StrEnum):
    END_TO_END = "e2e"
    CONFIRM = "confirm"


class SendBasis(StrEnum):
    ACTUAL = "actual"
    INTENDED = "intended"


LatencyKey = tuple[LatencyKind, SendBasis]
LATENCY_KEYS: tuple[LatencyKey, ...] = tuple(
    (kind, basis) for kind in LatencyKind for basis in SendBasis
)
