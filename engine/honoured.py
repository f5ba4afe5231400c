"""What the connected broker honours of a spec: settings its version ignores or rejects.

The seed's benchmarks ran on RabbitMQ 3.8; some of their settings act no more, or are
refused, on the versions flowdeck runs against today. At launch the controller reads the
broker's version (the AMQP server properties) and asks :func:`unhonoured` what of the spec
the broker will not honour:

* a setting the broker **rejects** would fail the declaration (or the mirroring policy)
  with the broker's own, vaguer words: the run is refused before anything is declared,
  one line per setting, saying what to change;
* a setting the broker **ignores** is said in one line each, recorded in the session as an
  ``info`` event with the run's start, and printed by ``flowdeck run``, so a result is not
  read as the effect of a setting that had none.

The rules (RabbitMQ's release notes): quorum queues' ``x-max-in-memory-length`` and
``-bytes`` are ignored from 3.10 (quorum queues keep every message body on disk); classic
queues' lazy mode (``x-queue-mode``) is ignored from 3.12 (classic queues version 2 page to
disk by themselves) and refused from 4.3 with ``x-queue-version = 1`` (version 1 is gone);
classic queue mirroring is gone from 4.0 (its policy is refused); from 4.3 transient
non-exclusive queues and ``x-queue-master-locator`` are refused by default (deprecated
features ``transient_nonexcl_queues`` and ``queue_master_locator``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from flowdeck.engine.spec import RunSpec
from flowdeck.engine.topology import queue_arguments

__all__ = ["Unhonoured", "broker_version_tuple", "unhonoured"]

Verdict = Literal["ignores", "rejects"]

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, slots=True)
class Unhonoured:
    """One setting of the spec the broker ignores or rejects, and why."""

    setting: str
    verdict: Verdict
    since: str
    why: str

    def describe(self, version: str) -> str:
        """One line: ``RabbitMQ 3.10.8 ignores x-max-in-memory-length = 0 (since 3.10):
        ...``."""
        return f"RabbitMQ {version} {self.verdict} {self.setting} (since {self.since}): {self.why}"

    def detail(self, version: str) -> dict[str, Any]:
        """What the event carries, for readers that sort them."""
        return {
            "honoured": False,
            "verdict": self.verdict,
            "setting": self.setting,
            "since": self.since,
            "broker_version": version,
        }


def broker_version_tuple(version: str) -> tuple[int, int, int] | None:
    """``"3.10.8"`` as ``(3, 10, 8)``; None for a version that does not read."""
    found = _VERSION.match(version.strip())
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)


def unhonoured(spec: RunSpec, version: str) -> list[Unhonoured]:
    """What of ``spec`` the broker at ``version`` ignores or rejects (none for a version
    that does not read: nothing is said rather than guessed)."""
    at = broker_version_tuple(version)
    if at is None:
        return []
    found: list[Unhonoured] = []
    arguments = queue_arguments(spec)
    if spec.queue_type == "quorum" and at >= (3, 10, 0):
        for name in ("x-max-in-memory-length", "x-max-in-memory-bytes"):
            if name in arguments:
                found.append(
                    Unhonoured(
                        f"{name} = {arguments[name]}",
                        "ignores",
                        "3.10",
                        "quorum queues keep every message body on disk; the seed's 3.8 "
                        "setting is kept in the spec for the record and changes nothing here",
                    )
                )
    mode = arguments.get("x-queue-mode")
    if mode is not None and at >= (4, 3, 0):
        found.append(
            Unhonoured(
                f"x-queue-mode = {mode}",
                "rejects",
                "4.3",
                "the argument is refused whatever its value (classic queues version 1 are "
                "gone); set lazy = false and drop x-queue-mode",
            )
        )
    elif mode == "lazy" and at >= (3, 12, 0):
        found.append(
            Unhonoured(
                "lazy mode (x-queue-mode = lazy)",
                "ignores",
                "3.12",
                "classic queues (version 2) move messages to disk by themselves; the spec's "
                "lazy = true changes nothing here",
            )
        )
    if str(arguments.get("x-queue-version")) == "1" and at >= (4, 3, 0):
        found.append(
            Unhonoured(
                "x-queue-version = 1",
                "rejects",
                "4.3",
                "classic queues version 1 are gone; drop the argument",
            )
        )
    if spec.mirroring and at >= (4, 0, 0):
        found.append(
            Unhonoured(
                f"classic queue mirroring (mirroring = {spec.mirroring})",
                "rejects",
                "4.0",
                "mirroring was removed and its ha-mode policy is refused; replicate with "
                "quorum queues instead (queue_type = quorum, quorum_size)",
            )
        )
    if spec.queue_type == "classic" and not spec.durable and at >= (4, 3, 0):
        found.append(
            Unhonoured(
                "transient non-exclusive queues (durable = false)",
                "rejects",
                "4.3",
                "refused by default (deprecated feature transient_nonexcl_queues); set "
                "durable = true, or permit it in the broker's rabbitmq.conf",
            )
        )
    if "x-queue-master-locator" in arguments and at >= (4, 3, 0):
        found.append(
            Unhonoured(
                f"x-queue-master-locator = {arguments['x-queue-master-locator']}",
                "rejects",
                "4.3",
                "refused by default (deprecated feature queue_master_locator); drop "
                "leader_locator for classic queues",
            )
        )
    return found
