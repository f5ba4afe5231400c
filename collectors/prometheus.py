"""The broker's side of a run from a Prometheus server scraping ``rabbitmq_prometheus``.

The second source beside the management API, producing the same BrokerSample. One
``sample()`` makes six PromQL instant queries (prometheus-api-client, blocking, one after
the other on a thread): each target's node identity and scrape time, node gauges summed per
target, broker-wide rates, the build, and the run's queues.

Two scrape jobs often read the same broker (``/metrics`` and ``/metrics/per-object``, or two
Prometheus set-ups merged): every broker-wide figure is read from ONE job, the one given or,
when none is, the job that has the node gauges (preferring one with the alarm gauges, which
``/metrics/per-object`` lacks), and from one scrape target per RabbitMQ node. Queue figures
are keyed by vhost and name, so they are read from any job scraping the same targets
(``rabbitmq_queue_*`` per object or ``rabbitmq_detailed_queue_*``) and kept once each.

A Prometheus server in trouble never raises out of ``sample()``: the sample is stale, keeps
the last good figures and says why. ``check()`` and ``range_query()`` raise SourceError.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from flowdeck.collectors.errors import SourceError, short_error
from flowdeck.collectors.model import BrokerSample, NodeSample, QueueSample

log = logging.getLogger(__name__)

#: Assumed until the server's targets say how often they are scraped.
DEFAULT_SCRAPE_INTERVAL = 5.0
#: Prometheus refuses a range query of more than 11,000 points per series.
_MAX_POINTS = 10_000

#: Node gauges: name in rabbitmq_prometheus -> what it is in NodeSample / BrokerSample.
NODE_GAUGES = {
    "rabbitmq_process_resident_memory_bytes": "mem_used",
    "rabbitmq_resident_memory_limit_bytes": "mem_limit",
    "rabbitmq_alarms_memory_used_watermark": "mem_alarm",
    "rabbitmq_disk_space_available_bytes": "disk_free",
    "rabbitmq_disk_space_available_limit_bytes": "disk_free_limit",
    "rabbitmq_alarms_free_disk_space_watermark": "disk_alarm",
    "rabbitmq_process_open_fds": "fd_used",
    "rabbitmq_process_max_fds": "fd_total",
    "rabbitmq_process_open_tcp_sockets": "sockets_used",
    "rabbitmq_process_max_tcp_sockets": "sockets_total",
    "rabbitmq_channel_messages_unconfirmed": "unconfirmed",
    "rabbitmq_channel_messages_unacked": "unacked",
    "rabbitmq_connections": "connections",
}
#: Quorum queues' Raft gauges per node (NodeSample). ``/metrics`` sums the term and averages
#: the latency over the node's quorum queue members; ``/metrics/per-object`` has one series
#: per queue, so the term is summed and the latency averaged here too.
RAFT_SUMMED = "rabbitmq_raft_term_total"
RAFT_AVERAGED = "rabbitmq_raft_entry_commit_latency_seconds"
#: Broker-wide counters whose rate is a BrokerSample rate.
RATE_COUNTERS = {
    "publish_rate": "rabbitmq_global_messages_received_total",
    "confirm_rate": "rabbitmq_global_messages_confirmed_total",
    "deliver_rate": "rabbitmq_global_messages_delivered_total",
    "ack_rate": "rabbitmq_global_messages_acknowledged_total",
    "redeliver_rate": "rabbitmq_global_messages_redelivered_total",
}
#: Per-queue gauges, per object (``/metrics/per-object``) or detailed (``/metrics/detailed``).
_QUEUE_METRIC = re.compile(
    r"rabbitmq_(?:detailed_)?queue_(messages_ready|messages_unacked|consumers)"
)
_QUEUE_SELECTOR = "rabbitmq_(detailed_)?queue_(messages_ready|messages_unacked|consumers)"
#: The gauge every broker job has, per-object or aggregated.
_PRESENCE_METRIC = "rabbitmq_process_resident_memory_bytes"

T = TypeVar("T")


class PrometheusAnswerError(Exception):
    """One query got an answer that cannot be used; the message is the stale reason."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Target:
    """One scrape target of the broker job: where, which node, when scraped."""

    instance: str
    node: str
    scraped_at: float | None


class PrometheusCollector:
    """Reads one RabbitMQ broker's figures from a Prometheus server.

    ``job`` and ``instance`` pick the scrape job and target of the broker (``None``: found
    by looking; several candidate jobs are resolved as the module docstring says and
    ``check()`` names the one chosen). ``queue_names`` limits the queue figures to the
    run's queues (``None``: every queue of ``vhost``). RabbitMQ 3.10's metrics do not say a
    queue's type: ``queue_type`` is what QueueSample.type reports.
    """

    source = "prometheus"

    def __init__(
        self,
        url: str,
        *,
        job: str | None = None,
        instance: str | None = None,
        queue_names: Sequence[str] | None = None,
        vhost: str = "/",
        queue_type: str = "unknown",
        timeout: float = 5.0,
        session: requests.Session | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.job = job
        self.instance = instance
        self.queue_names: tuple[str, ...] | None = (
            tuple(queue_names) if queue_names is not None else None
        )
        self.vhost = vhost
        self.queue_type = queue_type
        self.timeout = timeout
        self._job_given = job is not None
        self._other_jobs: tuple[str, ...] = ()
        self._scrape_interval: float | None = None
        self._last: BrokerSample | None = None
        # No retries: BrokerWatch backs off by itself, and a retry would only make a stale
        # sample later. POST, since the run's queue names can make a long query.
        self._prometheus = PrometheusConnect(
            url=self.url,
            retry=Retry(total=0, raise_on_status=False),
            session=session,
            timeout=timeout,
            method="POST",
        )

    @property
    def statistics_interval(self) -> float:
        """How often the figures change in Prometheus: the broker job's scrape interval."""
        return self._scrape_interval or DEFAULT_SCRAPE_INTERVAL

    @property
    def last_sample(self) -> BrokerSample | None:
        return self._last

    def set_queue_names(self, queue_names: Sequence[str] | None) -> None:
        """The run's queues changed (declared late, a pattern grew)."""
        self.queue_names = tuple(queue_names) if queue_names is not None else None

    async def aclose(self) -> None:
        self._prometheus.close()

    async def __aenter__(self) -> PrometheusCollector:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- before a run --------------------------------------------------------------------

    async def check(self) -> str:
        """Make sure the server answers and scrapes a RabbitMQ broker; one line for the
        operator (version, job, targets, scrape interval). Raises SourceError."""
        try:
            await self._call(self._find_job)
            targets = await self._call(self._read_targets)
        except PrometheusAnswerError as exc:
            raise SourceError(str(exc)) from None
        nodes = ", ".join(f"{t.node} ({t.instance})" for t in targets)
        chosen = (
            f"job {self.job!r}"
            if self._job_given or not self._other_jobs
            else f"job {self.job!r} (also scraped by {', '.join(map(repr, self._other_jobs))}; "
            "give --job to choose)"
        )
        return (
            f"Prometheus at {self.url}: {chosen}, nodes {nodes}, scraped every "
            f"{self.statistics_interval:g} s"
        )

    # -- live polls ----------------------------------------------------------------------

    async def sample(self) -> BrokerSample:
        """One poll. Never raises for Prometheus trouble: a stale sample says why."""
        try:
            sample = await self._call(self._read_sample)
        except PrometheusAnswerError as exc:
            return self._stale(str(exc))
        self._last = sample
        return sample

    async def range_query(
        self, start: float, end: float, step: float = 1.0
    ) -> list[tuple[float, str, str, float]]:
        """The broker's series over ``start``..``end`` (unix seconds), for the session.

        Rows are ``(unix time, metric, labels JSON, value)``: the node gauges and each run
        queue's gauges by their names, the broker-wide rates by their PromQL expression.
        ``step`` grows when needed to stay within Prometheus' points per series. Raises
        SourceError when the server cannot answer.
        """
        if end <= start:
            raise SourceError(f"range_query needs end after start, got {start:f}..{end:f}")
        step = max(step, (end - start) / _MAX_POINTS)
        try:
            return await self._call(lambda: self._read_range(start, end, step))
        except PrometheusAnswerError as exc:
            raise SourceError(str(exc)) from None

    def _stale(self, reason: str) -> BrokerSample:
        return BrokerSample.stale_since(
            self._last,
            source="prometheus",
            statistics_interval=self.statistics_interval,
            reason=reason,
            now=time.time(),
        )

    # -- queries (blocking; run on a thread) ---------------------------------------------

    async def _call(self, read: Callable[[], T]) -> T:
        """Run blocking reads on a thread, bounded by a few request timeouts in all."""
        try:
            async with asyncio.timeout(self.timeout * 4):
                return await asyncio.to_thread(read)
        except TimeoutError:
            raise PrometheusAnswerError(
                f"Prometheus: no answer within {self.timeout * 4:g} s from {self.url}"
            ) from None

    def _query(self, promql: str) -> list[Mapping[str, Any]]:
        try:
            result = self._prometheus.custom_query(promql)
        except PrometheusApiClientException as exc:
            raise PrometheusAnswerError(_refusal(self.url, "/api/v1/query", exc)) from None
        except (ValueError, KeyError, TypeError):  # requests' JSONDecodeError included
            raise PrometheusAnswerError(
                f"Prometheus: the answer from {self.url}/api/v1/query is not a Prometheus "
                "query result (is the URL a Prometheus server?)"
            ) from None
        except requests.RequestException as exc:
            raise PrometheusAnswerError(self._unreachable(exc)) from None
        return _vector(result, self.url)

    def _query_range(
        self, promql: str, start: float, end: float, step: float
    ) -> list[Mapping[str, Any]]:
        try:
            result = self._prometheus.custom_query_range(
                promql,
                start_time=datetime.fromtimestamp(math.floor(start), UTC),
                end_time=datetime.fromtimestamp(math.ceil(end), UTC),
                step=f"{step:g}",
            )
        except PrometheusApiClientException as exc:
            raise PrometheusAnswerError(_refusal(self.url, "/api/v1/query_range", exc)) from None
        except (ValueError, KeyError, TypeError):  # requests' JSONDecodeError included
            raise PrometheusAnswerError(
                f"Prometheus: the answer from {self.url}/api/v1/query_range is not a "
                "Prometheus query result"
            ) from None
        except requests.RequestException as exc:
            raise PrometheusAnswerError(self._unreachable(exc)) from None
        if not isinstance(result, list) or not all(isinstance(r, Mapping) for r in result):
            raise PrometheusAnswerError(
                f"Prometheus: the answer from {self.url}/api/v1/query_range is not a matrix"
            )
        return result

    def _unreachable(self, exc: requests.RequestException) -> str:
        if isinstance(exc, requests.Timeout):
            return f"Prometheus: no answer within {self.timeout:g} s from {self.url}"
        if isinstance(exc, requests.ConnectionError):
            return f"Prometheus: cannot connect to {self.url} ({_connect_reason(exc)})"
        return f"Prometheus: {type(exc).__name__} from {self.url} ({short_error(exc)})"

    def _selector(self, *, job: bool = True) -> str:
        matchers = []
        if job and self.job is not None:
            matchers.append(f"job={_quote(self.job)}")
        if self.instance is not None:
            matchers.append(f"instance={_quote(self.instance)}")
        return ", ".join(matchers)

    def _find_job(self) -> None:
        """Pick the broker job when none was given, or make sure the given one has series."""
        if self._job_given:
            found = self._query(f"count({_PRESENCE_METRIC}{{{self._selector()}}})")
            if not found:
                raise PrometheusAnswerError(self._no_series_reason())
            return
        sel = self._selector(job=False)
        with_gauges = {
            str(r["metric"].get("job", ""))
            for r in self._query(f"count by (job) ({_PRESENCE_METRIC}{{{sel}}})")
        }
        with_alarms = {
            str(r["metric"].get("job", ""))
            for r in self._query(f"count by (job) (rabbitmq_alarms_memory_used_watermark{{{sel}}})")
        }
        if not with_gauges:
            raise PrometheusAnswerError(self._no_series_reason())
        # The aggregated endpoint has the alarms; per-object alone does not.
        candidates = sorted(with_gauges & with_alarms) or sorted(with_gauges)
        chosen = candidates[0]
        if chosen != self.job:
            others = tuple(sorted(with_gauges - {chosen}))
            if others:
                log.info(
                    "Prometheus at %s: reading job %r; also there: %s", self.url, chosen, others
                )
            self.job, self._other_jobs = chosen, others
            self._scrape_interval = None

    def _no_series_reason(self) -> str:
        """Why there are no rabbitmq_* series: with the targets' own errors when known."""
        where = f"job {self.job!r}" if self.job is not None else "any job"
        if self.instance is not None:
            where += f" and instance {self.instance!r}"
        reason = (
            f"Prometheus at {self.url} has no rabbitmq_* series for {where}: is it scraping "
            "the broker's :15692?"
        )
        try:
            active = self._prometheus.get_targets(state="active")["activeTargets"]
            down = [
                f"{t['labels'].get('instance')} ({t.get('lastError') or t.get('health')})"
                for t in active
                if t.get("health") != "up"
                and (self.job is None or t["labels"].get("job") == self.job)
            ]
        except (PrometheusApiClientException, requests.RequestException, ValueError, KeyError):
            return reason
        except TypeError:
            return reason
        if down:
            reason += f" Targets down: {'; '.join(down[:3])}"
        return reason

    def _read_targets(self) -> list[_Target]:
        """The broker job's targets: one per RabbitMQ node, with when it was scraped."""
        sel = self._selector()
        identity = self._query(f"rabbitmq_identity_info{{{sel}}}")
        scraped = {
            str(r["metric"].get("instance", "")): _value(r)
            for r in self._query(f"timestamp(rabbitmq_identity_info{{{sel}}})")
        }
        targets: dict[str, _Target] = {}
        for series in sorted(identity, key=lambda r: str(r["metric"].get("instance", ""))):
            instance = str(series["metric"].get("instance", ""))
            node = str(series["metric"].get("rabbitmq_node", instance))
            # One node scraped at two addresses would count twice: keep the first.
            targets.setdefault(node, _Target(instance, node, scraped.get(instance)))
        if self._scrape_interval is None:
            self._scrape_interval = self._read_scrape_interval()
        return list(targets.values())

    def _read_scrape_interval(self) -> float | None:
        try:
            active = self._prometheus.get_targets(state="active")["activeTargets"]
        except (PrometheusApiClientException, requests.RequestException, ValueError, KeyError):
            return None
        except TypeError:
            return None
        for target in active:
            if isinstance(target, Mapping) and target.get("labels", {}).get("job") == self.job:
                seconds = _parse_duration(str(target.get("scrapeInterval", "")))
                if seconds:
                    return seconds
        return None

    def _read_sample(self) -> BrokerSample:
        if self.job is None or (not self._job_given and self._last is None):
            self._find_job()
        targets = self._read_targets()
        if not targets:
            raise PrometheusAnswerError(self._no_series_reason())
        instances = "|".join(re.escape(t.instance) for t in targets)
        sel = f"{self._selector()}, instance=~{_quote(instances)}"
        gauges: dict[tuple[str, str], float] = {}
        for series in self._query(_node_gauges_query(sel, "__name__, instance")):
            metric = series["metric"]
            gauges[(str(metric.get("instance", "")), str(metric.get("__name__", "")))] = _value(
                series
            )
        window = _duration(max(5.0, 4 * self.statistics_interval))
        rate_query = " or ".join(
            f'label_replace(sum(rate({counter}{{{sel}}}[{window}])), "figure", "{figure}", "", "")'
            for figure, counter in RATE_COUNTERS.items()
        )
        rates = {str(r["metric"].get("figure", "")): _value(r) for r in self._query(rate_query)}
        build = self._query(f"rabbitmq_build_info{{{sel}}}")
        queues = self._read_queues(instances)
        now = time.time()
        scraped = [t.scraped_at for t in targets if t.scraped_at is not None]
        figures_at = min(min(scraped), now) if scraped else now

        def gauge(instance: str, name: str) -> float | None:
            return gauges.get((instance, name))

        nodes = tuple(
            NodeSample(
                name=t.node,
                mem_used=_int(gauge(t.instance, "rabbitmq_process_resident_memory_bytes")),
                mem_limit=_int(gauge(t.instance, "rabbitmq_resident_memory_limit_bytes")),
                mem_alarm=bool(gauge(t.instance, "rabbitmq_alarms_memory_used_watermark")),
                disk_free=_int(gauge(t.instance, "rabbitmq_disk_space_available_bytes")),
                disk_free_limit=_int(
                    gauge(t.instance, "rabbitmq_disk_space_available_limit_bytes")
                ),
                disk_alarm=bool(gauge(t.instance, "rabbitmq_alarms_free_disk_space_watermark")),
                fd_used=_int(gauge(t.instance, "rabbitmq_process_open_fds")),
                fd_total=_int(gauge(t.instance, "rabbitmq_process_max_fds")),
                sockets_used=_int(gauge(t.instance, "rabbitmq_process_open_tcp_sockets")),
                sockets_total=_int(gauge(t.instance, "rabbitmq_process_max_tcp_sockets")),
                figures_at=t.scraped_at,
                raft_term_total=_int(gauge(t.instance, RAFT_SUMMED)),
                raft_commit_latency=gauge(t.instance, RAFT_AVERAGED),
            )
            for t in targets
        )

        def total(name: str) -> int | None:
            values = [gauges[(t.instance, name)] for t in targets if (t.instance, name) in gauges]
            return _int(sum(values)) if values else None

        labels = build[0]["metric"] if build else {}
        return BrokerSample(
            source="prometheus",
            taken_at=now,
            figures_at=figures_at,
            statistics_interval=self.statistics_interval,
            nodes=nodes,
            queues=queues,
            publish_rate=rates.get("publish_rate"),
            confirm_rate=rates.get("confirm_rate"),
            deliver_rate=rates.get("deliver_rate"),
            ack_rate=rates.get("ack_rate"),
            redeliver_rate=rates.get("redeliver_rate"),
            unconfirmed=total("rabbitmq_channel_messages_unconfirmed"),
            unacked=total("rabbitmq_channel_messages_unacked"),
            connections=total("rabbitmq_connections"),
            broker_version=str(labels.get("rabbitmq_version", "")),
            erlang_version=str(labels.get("erlang_version", "")),
        )

    def _queue_matchers(self, instances: str) -> str:
        names = self.queue_names
        pattern = ".+" if names is None else "|".join(re.escape(n) for n in names)
        matchers = [
            f'__name__=~"{_QUEUE_SELECTOR}"',
            f"vhost={_quote(self.vhost)}",
            f"queue=~{_quote(pattern)}",
            f"instance=~{_quote(instances)}",
        ]
        return ", ".join(matchers)

    def _read_queues(self, instances: str) -> tuple[QueueSample, ...]:
        if self.queue_names is not None and not self.queue_names:
            return ()
        figures: dict[str, dict[str, float]] = {}
        for series in self._query(f"{{{self._queue_matchers(instances)}}}"):
            metric = series["metric"]
            found = _QUEUE_METRIC.fullmatch(str(metric.get("__name__", "")))
            if found is None:
                continue
            # The same queue from a per-object and a detailed job: keep one value each.
            figures.setdefault(str(metric.get("queue", "")), {}).setdefault(
                found.group(1), _value(series)
            )
        order = self.queue_names or tuple(sorted(figures))
        return tuple(
            QueueSample(
                name=name,
                vhost=self.vhost,
                type=self.queue_type,
                ready=_int(figures[name].get("messages_ready")) or 0,
                unacked=_int(figures[name].get("messages_unacked")) or 0,
                consumers=_int(figures[name].get("consumers")) or 0,
            )
            for name in order
            if name in figures
        )

    def _read_range(
        self, start: float, end: float, step: float
    ) -> list[tuple[float, str, str, float]]:
        if self.job is None:
            self._find_job()
        targets = self._read_targets()
        if not targets:
            raise PrometheusAnswerError(self._no_series_reason())
        instances = "|".join(re.escape(t.instance) for t in targets)
        sel = f"{self._selector()}, instance=~{_quote(instances)}"
        window = _duration(max(5.0, 4 * self.statistics_interval))
        queries: list[tuple[str | None, str]] = [
            (None, _node_gauges_query(sel, "__name__, job, instance")),
            *(
                (
                    f"rate({counter}[{window}])",
                    f"sum by (job, instance) (rate({counter}{{{sel}}}[{window}]))",
                )
                for counter in RATE_COUNTERS.values()
            ),
        ]
        if self.queue_names is None or self.queue_names:
            queries.append((None, f"{{{self._queue_matchers(instances)}}}"))
        rows: list[tuple[float, str, str, float]] = []
        queue_series_seen: dict[tuple[str, str], str] = {}
        for name, promql in queries:
            for series in sorted(
                self._query_range(promql, start, end, step),
                key=lambda s: json.dumps(s.get("metric"), sort_keys=True),
            ):
                labels = dict(series.get("metric") or {})
                metric = name or str(labels.pop("__name__", ""))
                kind = _QUEUE_METRIC.fullmatch(metric)
                if kind is not None:
                    # One queue scraped by a per-object and a detailed job: keep one job's.
                    key = (str(labels.get("queue", "")), kind.group(1))
                    job = str(labels.get("job", ""))
                    if queue_series_seen.setdefault(key, job) != job:
                        continue
                labels_json = json.dumps(labels, sort_keys=True)
                for point in series.get("values") or []:
                    at, value = float(point[0]), float(point[1])
                    if start - step <= at <= end + step and math.isfinite(value):
                        rows.append((at, metric, labels_json, value))
        rows.sort(key=lambda row: (row[0], row[1], row[2]))
        return rows


def _node_gauges_query(selector: str, by: str) -> str:
    """One query for every node gauge per target: NODE_GAUGES and the Raft term summed,
    the Raft commit latency averaged (a sum of latencies means nothing). ``or`` matches
    series on their labels without the metric name, so the averaged one carries a label
    of its own (``aggregation="avg"``) or the summed gauges of its target would hide it."""
    names = "|".join(n.removeprefix("rabbitmq_") for n in [*NODE_GAUGES, RAFT_SUMMED])
    averaged = f"avg by ({by}) ({{__name__={_quote(RAFT_AVERAGED)}, {selector}}})"
    return (
        f'sum by ({by}) ({{__name__=~"rabbitmq_({names})", {selector}}}) '
        f'or label_replace({averaged}, "aggregation", "avg", "", "")'
    )


def _vector(result: Any, url: str) -> list[Mapping[str, Any]]:
    if not isinstance(result, list) or not all(
        isinstance(r, Mapping) and isinstance(r.get("metric"), Mapping) and "value" in r
        for r in result
    ):
        raise PrometheusAnswerError(
            f"Prometheus: the answer from {url}/api/v1/query is not an instant vector"
        )
    return result


def _value(series: Mapping[str, Any]) -> float:
    try:
        value = float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        raise PrometheusAnswerError(
            f"Prometheus: a series value is not a number: {str(series)[:120]}"
        ) from None
    return value


def _int(value: float | None) -> int | None:
    if value is None or not math.isfinite(value):
        return None
    return int(value)


def _quote(text: str) -> str:
    """A PromQL string literal."""
    return json.dumps(text)


def _duration(seconds: float) -> str:
    millis = max(1, round(seconds * 1000))
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def _parse_duration(text: str) -> float | None:
    """Seconds in a Prometheus duration (``1s``, ``1m30s``, ``500ms``); None if not one."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _refusal(url: str, path: str, exc: PrometheusApiClientException) -> str:
    """A non-200 answer, with Prometheus' own error text when it gave one."""
    text = str(exc)
    status = re.match(r"HTTP Status Code (\d+)", text)
    code = status.group(1) if status else "error"
    detail = re.search(r'"error":"((?:[^"\\]|\\.)*)"', text)
    said = f": {detail.group(1)}" if detail else ""
    if code in ("404", "405"):
        said += " (is the URL a Prometheus server? give its base URL, such as http://host:9090)"
    return f"Prometheus: {code} from {url}{path}{said}"


def _connect_reason(exc: BaseException) -> str:
    text = str(exc)
    for marker, reason in (
        ("refused", "connection refused"),
        ("Name or service not known", "host not found"),
        ("No route to host", "no route to host"),
        ("timed out", "connect timed out"),
    ):
        if marker in text:
            return reason
    return short_error(exc)
