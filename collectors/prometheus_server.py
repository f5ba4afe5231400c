"""A throwaway Prometheus server (Debian's ``prometheus`` binary) scraping a broker.

Prometheus mode needs a server that scrapes the broker's ``rabbitmq_prometheus`` endpoint;
an operator who has none gets one from flowdeck, and tests use the same class. It listens on
127.0.0.1 on a free port, keeps its TSDB in a directory of its own and scrapes every second.

RabbitMQ 3.10 serves node-wide figures (memory, alarms, disk, rates) on ``/metrics`` and
per-queue figures only per object: ``/metrics/per-object`` has no ``rabbitmq_alarms_*``
gauges, so it cannot be the only endpoint scraped. The server therefore has two jobs for the
same targets: ``<job>`` on ``/metrics`` and ``<job>-queues`` on ``/metrics/detailed`` asked
only for the queue families (``rabbitmq_detailed_queue_*``), whose names never collide with
the aggregated ones, so nothing is counted twice.

A server never outlives the process that started it: beside it runs the same guard as
beside a private node (``collectors/node_guard.py``), which stops it and removes its
throwaway directory when its owner dies, SIGKILL included; the ``atexit`` hook only stops it
in order on a normal exit.

Targets are kept in a ``file_sd`` file, so they can be set after the server started
(``set_targets``), as soon as the port of what is to be scraped is known.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType

import httpx

from flowdeck.collectors.broker_uri import parse_broker_uri
from flowdeck.collectors.errors import SourceError
from flowdeck.collectors.local_broker import free_port
from flowdeck.collectors.node_guard import OwnerGuard

_INSTALL_HINT = "apt-get install prometheus (scripts/setup does it)"
#: The rabbitmq_prometheus families that carry per-queue figures on ``/metrics/detailed``.
QUEUE_FAMILIES = ("queue_coarse_metrics", "queue_consumer_count")

_live: set[PrometheusServer] = set()
_live_lock = threading.Lock()


def prometheus_target_for(amqp_uri: str) -> str:
    """The ``host:port`` of the rabbitmq_prometheus endpoint that usually goes with a URI.

    ``amqp://user:pw@host:5672/vhost`` gives ``host:15692``, the plugin's default port.
    """
    return f"{parse_broker_uri(amqp_uri).host_text}:15692"


def find_prometheus() -> Path:
    """The ``prometheus`` binary; SourceError with the install command when missing."""
    found = shutil.which("prometheus")
    if found is None:
        raise SourceError(f"the prometheus server is not installed; {_INSTALL_HINT}")
    return Path(found)


class PrometheusServer:
    """One private Prometheus server; ``start()`` it or use it as a context manager.

    ``targets`` are ``host:port`` of RabbitMQ prometheus endpoints (``127.0.0.1:15692``).
    ``job`` names the scrape job of ``metrics_path``; with ``per_queue`` (the default) a
    second job ``<job>-queues`` scrapes the per-queue families of the same targets;
    ``per_object`` adds ``<job>-per-object`` on ``/metrics/per-object`` (every figure per
    queue, channel and connection: what many set-ups scrape beside ``/metrics``, and so the
    double-counting trap the collector avoids). Any other exporter can be scraped with
    ``per_queue=False`` (the engine's ``/metrics``, say).
    ``base_dir`` holds the config, targets file, TSDB and log; when not given a temporary
    directory is made and removed by ``stop()``. A server still running when the interpreter
    exits is stopped by an ``atexit`` hook.
    """

    def __init__(
        self,
        targets: Iterable[str] = (),
        *,
        scrape_interval: float = 1.0,
        port: int | None = None,
        base_dir: Path | str | None = None,
        job: str = "rabbitmq",
        metrics_path: str = "/metrics",
        per_queue: bool = True,
        per_object: bool = False,
        labels: Mapping[str, str] | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        if scrape_interval < 0.1:
            raise SourceError(f"scrape_interval must be at least 0.1 s, got {scrape_interval:g}")
        self.scrape_interval = scrape_interval
        self.port = port or free_port()
        self._owns_base_dir = base_dir is None
        self.base_dir = (
            Path(tempfile.mkdtemp(prefix="flowdeck-prometheus-"))
            if base_dir is None
            else Path(base_dir)
        )
        self.job = job
        self.metrics_path = metrics_path
        self.per_queue = per_queue
        self.per_object = per_object
        self.start_timeout = start_timeout
        self._targets = [_check_target(t) for t in targets]
        self._labels = dict(labels or {})
        #: Seconds the last start took until ``/-/ready`` answered.
        self.started_in: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._guard: OwnerGuard | None = None

    # -- where it is ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jobs(self) -> tuple[str, ...]:
        """The scrape jobs this server runs, the broker-wide one first."""
        jobs = [self.job]
        if self.per_queue:
            jobs.append(f"{self.job}-queues")
        if self.per_object:
            jobs.append(f"{self.job}-per-object")
        return tuple(jobs)

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self._targets)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def log_file(self) -> Path:
        return self.base_dir / "prometheus.log"

    # -- life cycle ----------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> PrometheusServer:
        """Start the server and wait until it says it is ready (``/-/ready``)."""
        if self.running:
            return self
        binary = find_prometheus()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._write_targets()
        config = self.base_dir / "prometheus.yml"
        config.write_text(self._config_text(), encoding="utf-8")
        began = time.monotonic()
        with self.log_file.open("ab") as log:
            # A session of its own: Ctrl-C reaches flowdeck, which then stops it in order.
            self._process = subprocess.Popen(
                [
                    str(binary),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.base_dir / 'data'}",
                    "--storage.tsdb.retention.time=2d",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                cwd=self.base_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        with _live_lock:
            _live.add(self)
        try:
            # its own session: the server's pid is its process group
            self._guard = OwnerGuard(self._process.pid, self.base_dir, self._owns_base_dir)
            self._wait_ready(began + (self.start_timeout if timeout is None else timeout))
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def stop(self, timeout: float = 15.0, *, cleanup: bool | None = None) -> None:
        """Stop the server (SIGTERM, SIGKILL after ``timeout``); remove its directory when
        flowdeck made it (or as ``cleanup`` says)."""
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.stand_down()
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self._process = None
        with _live_lock:
            _live.discard(self)
        if cleanup if cleanup is not None else self._owns_base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"PrometheusServer({self.url}, {state}, jobs {', '.join(self.jobs)})"

    # -- what it scrapes -----------------------------------------------------------------

    def set_targets(self, targets: Iterable[str], labels: Mapping[str, str] | None = None) -> None:
        """Scrape these ``host:port`` targets from now on (Prometheus rereads within 1 s)."""
        self._targets = [_check_target(t) for t in targets]
        if labels is not None:
            self._labels = dict(labels)
        self._write_targets()

    def wait_scraped(self, timeout: float = 30.0) -> float:
        """Wait until every target of every job was scraped successfully; seconds it took.

        Raises SourceError naming the targets still down and Prometheus' own reason.
        """
        began = time.monotonic()
        down: list[str] = []
        with httpx.Client(timeout=2.0) as http:
            while True:
                down = self._targets_down(http)
                if not down:
                    return time.monotonic() - began
                if time.monotonic() - began > timeout or not self.running:
                    break
                time.sleep(0.2)
        raise SourceError(
            f"Prometheus at {self.url} could not scrape {'; '.join(down)} within "
            f"{timeout:g} s; is the broker's prometheus plugin listening there "
            "(rabbitmq-plugins enable rabbitmq_prometheus)?"
        )

    # -- internals -----------------------------------------------------------------------

    def _targets_down(self, http: httpx.Client) -> list[str]:
        try:
            answer = http.get(f"{self.url}/api/v1/targets", params={"state": "active"})
            active = answer.json()["data"]["activeTargets"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return ["(targets API not answering yet)"]
        healthy = {
            (t["labels"].get("job"), t["labels"].get("instance"))
            for t in active
            if t.get("health") == "up"
        }
        reasons = {
            (t["labels"].get("job"), t["labels"].get("instance")): t.get("lastError") or "not yet"
            for t in active
        }
        return [
            f"{target} (job {job}: {reasons.get((job, target), 'not yet scraped')})"
            for job in self.jobs
            for target in self._targets
            if (job, target) not in healthy
        ]

    def _write_targets(self) -> None:
        entry: dict[str, object] = {"targets": list(self._targets)}
        if self._labels:
            entry["labels"] = dict(self._labels)
        path = self.base_dir / "targets.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([entry] if self._targets else []), encoding="utf-8")
        tmp.replace(path)  # Prometheus never reads half a file

    def _config_text(self) -> str:
        interval = _duration(self.scrape_interval)
        # A scrape may take up to the interval; RabbitMQ answers in milliseconds normally.
        lines = [
            "global:",
            f"  scrape_interval: {interval}",
            f"  scrape_timeout: {interval}",
            "scrape_configs:",
            *self._job_lines(self.job, self.metrics_path, None),
        ]
        if self.per_queue:
            lines += self._job_lines(f"{self.job}-queues", "/metrics/detailed", QUEUE_FAMILIES)
        if self.per_object:
            lines += self._job_lines(f"{self.job}-per-object", "/metrics/per-object", None)
        return "\n".join(lines) + "\n"

    def _job_lines(self, job: str, path: str, families: tuple[str, ...] | None) -> list[str]:
        targets_file = json.dumps(str(self.base_dir / "targets.json"))
        lines = [
            f"  - job_name: {json.dumps(job)}",
            f"    metrics_path: {json.dumps(path)}",
        ]
        if families:
            lines += ["    params:", f"      family: {json.dumps(list(families))}"]
        lines += [
            "    file_sd_configs:",
            f"      - files: [{targets_file}]",
            "        refresh_interval: 1s",
        ]
        return lines

    def _wait_ready(self, deadline: float) -> None:
        with httpx.Client(timeout=2.0) as http:
            while time.monotonic() < deadline:
                if not self.running:
                    raise SourceError(
                        f"the Prometheus server exited while starting: {self._log_tail()} "
                        f"(log in {self.log_file})"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{self.url}/-/ready").status_code == 200:
                        return
                time.sleep(0.2)
        raise SourceError(
            f"the Prometheus server on {self.url} was not ready within "
            f"{self.start_timeout:g} s: {self._log_tail()} (log in {self.log_file})"
        )

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.log_file.read_text(errors="replace").splitlines()[-3:]
            return " | ".join(line.strip() for line in lines if line.strip())[-600:]
        return "no log"


def _check_target(target: str) -> str:
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or "/" in target:
        raise SourceError(
            f"a Prometheus target is host:port, such as 127.0.0.1:15692; got {target!r}"
        )
    return target


def _duration(seconds: float) -> str:
    """Prometheus' duration syntax: whole milliseconds."""
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def _stop_all_at_exit() -> None:
    with _live_lock:
        servers = list(_live)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop(timeout=5.0)


atexit.register(_stop_all_at_exit)
