"""The report job over synthetic sessions whose every figure is known in advance."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pytest

from flowdeck.spark_reports.build import Report, build_report
from tests.spark_reports import expected as exp
from tests.spark_reports.synthetic import PhasePlan, SyntheticSession, write_session

pytestmark = pytest.mark.spark

SWEEP = [
    PhasePlan(seconds=20, inflight=10),  # sustainable
    PhasePlan(seconds=20, inflight=20, publish_share=0.8, blocked_seconds=3),  # held
    PhasePlan(seconds=20, inflight=40, consume_share=0.9, depth_growth=25, mem_alarm_polls=4),
]
#: A 1.2 session: a phase catching up on a backlog above its target, a last load phase
#: with 2 s paused, then 6 s of drain after publishing stopped.
DRAINED = [
    PhasePlan(seconds=12, inflight=10),
    PhasePlan(seconds=12, inflight=20, consume_share=1.25),
    PhasePlan(seconds=12, inflight=40, paused_seconds=2),
]
CLASSIC = [
    PhasePlan(seconds=15, inflight=10, latency_us=1_000),
    PhasePlan(seconds=15, inflight=20, latency_us=1_500),
    PhasePlan(seconds=15, inflight=40, latency_us=3_000, pending_share=0.95),
]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticSession]:
    root = tmp_path_factory.mktemp("sessions")
    return {
        "quorum": write_session(root, "quorum-sweep", SWEEP, seed=7, interval=5),
        "classic": write_session(root, "classic-sweep", CLASSIC, seed=8, queue_type="classic"),
        "drained": write_session(
            root, "drained-sweep", DRAINED, seed=9, drain_seconds=6, exact_histograms=False
        ),
    }


@pytest.fixture(scope="module")
def single(spark: Any, sessions: dict[str, SyntheticSession], tmp_path_factory: Any) -> Report:
    out = tmp_path_factory.mktemp("report-one")
    return build_report(spark, [str(sessions["quorum"].path)], out)


@pytest.fixture(scope="module")
def compared(spark: Any, sessions: dict[str, SyntheticSession], tmp_path_factory: Any) -> Report:
    out = tmp_path_factory.mktemp("report-two")
    paths = [str(sessions["quorum"].path), f"file://{sessions['classic'].path}"]
    return build_report(spark, paths, out, title="quorum vs classic")


@pytest.fixture(scope="module")
def drained(spark: Any, sessions: dict[str, SyntheticSession], tmp_path_factory: Any) -> Report:
    out = tmp_path_factory.mktemp("report-drained")
    return build_report(spark, [str(sessions["drained"].path)], out)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def num(text: str) -> float:
    return float(text)


def test_throughput_per_phase_equals_the_independent_figures(
    single: Report, sessions: dict[str, SyntheticSession]
) -> None:
    session = sessions["quorum"]
    rows = read_csv(single.out_dir / "quorum-sweep-throughput.csv")
    assert [r["label"] for r in rows] == ["inflight=10", "inflight=20", "inflight=40"]
    # the synthetic session kept no active times: the run's bounds stand in
    active, _ = exp.active_rates(
        session.path, session.start, session.boundaries, exp.bounds_spans(session, None)
    )
    for row, bounds, want in zip(rows, exp.phase_bounds(session), active, strict=True):
        client = exp.rows_in(session.client, bounds)
        assert num(row["duration s"]) == 20
        assert num(row["target msg/s"]) == 200  # 2 workers × 100 msg/s
        assert int(row["publishers"]) == 2
        for column, name in (("published", "publish"), ("confirmed", "confirm"),
                             ("consumed", "consume")):  # fmt: skip
            _, sd, low = exp.rate_stats(client, column)
            assert num(row[f"{name} mean"]) == round(want[f"{name} mean"], 3)
            assert num(row[f"{name} active s"]) == round(want[f"{name} active s"], 3) == 20
            assert int(row[f"{name} messages"]) == want[f"{name} messages"]
            assert num(row[f"{name} per-second sd"]) == round(sd, 3)
            assert num(row[f"{name} per-second min"]) == round(low, 3)


def test_latency_percentiles_are_exactly_the_hdr_merge(
    single: Report, sessions: dict[str, SyntheticSession]
) -> None:
    session = sessions["quorum"]
    rows = read_csv(single.out_dir / "quorum-sweep-latency.csv")
    assert len(rows) == 3 * 4
    bounds = exp.phase_bounds(session)
    for row in rows:
        kind, basis = row["latency"].split()
        latency = exp.rows_in(session.latency, bounds[int(row["phase"])])
        want = exp.percentiles_us(latency, kind, basis)
        merged = exp.hdr_merged(latency, kind, basis)
        assert int(row["count"]) == want["count"] == merged.get_total_count()
        for q in (50, 75, 95, 99):
            assert num(row[f"p{q}"]) == want[f"p{q}"] / 1000
            assert want[f"p{q}"] == merged.get_value_at_percentile(q)
        assert num(row["max"]) == want["max"] / 1000 == merged.get_max_value() / 1000


def test_the_most_of_each_phases_intervals_is_each_intervals_own_percentiles(
    single: Report, sessions: dict[str, SyntheticSession]
) -> None:
    """The run's interval is 5 s: each 20 s phase is four intervals, each with the
    percentiles of its own latencies (merged over workers and its seconds), and the
    table gives the largest of them per phase (the low-latency write-up's max p99/p95/p75)."""
    session = sessions["quorum"]
    rows = read_csv(single.out_dir / "quorum-sweep-intervals.csv")
    assert [int(r["phase"]) for r in rows] == [0, 1, 2]
    for row, bounds in zip(rows, exp.phase_bounds(session), strict=True):
        latency = exp.rows_in(session.latency, bounds)
        seconds = sorted({exp.unix(r) for r in latency})
        intervals = [set(seconds[i : i + 5]) for i in range(0, len(seconds), 5)]
        assert int(row["intervals"]) == len(intervals) == 4
        each = [
            exp.percentiles_us([r for r in latency if exp.unix(r) in i], "e2e", "actual")
            for i in intervals
        ]
        for q in (75, 95, 99):
            assert num(row[f"max p{q}"]) == max(e[f"p{q}"] for e in each) / 1000
        whole = exp.percentiles_us(latency, "e2e", "actual")
        assert num(row["whole-phase p99"]) == whole["p99"] / 1000


def test_flow_broker_figures_and_verdicts(
    single: Report, sessions: dict[str, SyntheticSession]
) -> None:
    session = sessions["quorum"]
    rows = read_csv(single.out_dir / "quorum-sweep-flow.csv")
    assert [r["verdict"] for r in rows] == ["sustainable", "back-pressured", "overloaded"]
    for row, bounds in zip(rows, exp.phase_bounds(session), strict=True):
        client = exp.rows_in(session.client, bounds)
        for column, name in (("pending_confirms", "pending confirms"), ("unacked", "unacked")):
            mean, peak = exp.gauge_stats(client, column)
            assert num(row[f"{name} mean"]) == round(mean, 3)
            assert num(row[f"{name} max"]) == peak
        polls = sorted(exp.rows_in(session.broker, bounds), key=exp.unix)
        assert num(row["depth start"]) == polls[0]["queue_ready"]
        assert num(row["depth end"]) == polls[-1]["queue_ready"]
        slope = exp.least_squares_slope(
            [(exp.unix(p) - session.start, p["queue_ready"]) for p in polls]
        )
        assert num(row["depth slope msg/s"]) == pytest.approx(round(slope, 3), abs=1e-3)
        assert num(row["memory peak MiB"]) == round(max(p["mem_used"] for p in polls) / 2**20, 1)
        assert num(row["memory alarm s"]) == exp.alarm_seconds(session, bounds)
    assert num(rows[1]["blocked s"]) == 3
    assert num(rows[2]["memory alarm s"]) == 2.5  # 57.5→58.5→59.5→ run end at 60
    assert "blocked by flow control for 3 s" in rows[1]["why"]
    assert "queue depth growing 25.0 msg/s" in rows[2]["why"]


def test_sweep_table_and_recommendation(single: Report) -> None:
    table = next(t for t in single.tables if t.name == "quorum-sweep-sweep-inflight")
    assert table.columns[:7] == (
        "In-flight limit",
        "% of rate",
        "publish msg/s",
        "msg/s",
        "p99 ms",
        "p95 ms",
        "p75 ms",
    )
    assert [row[0] for row in table.rows] == [10, 20, 40]
    assert [row[1] for row in table.rows] == ["10%", "20%", "40%"]
    assert table.reasoning[-1].startswith("recommended inflight=10")
    markdown = (single.out_dir / "quorum-sweep-sweep-inflight.md").read_text()
    assert "| In-flight limit | % of rate |" in markdown
    assert "recommended inflight=10" in markdown


def test_html_is_one_self_contained_file(single: Report) -> None:
    page = single.html_path.read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 3  # timeline, broker, sweep
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "<script" not in page
    assert "overloaded" in page and "recommended inflight=10" in page
    for table in single.tables:
        assert (single.out_dir / f"{table.name}.csv").exists()
        assert (single.out_dir / f"{table.name}.md").exists()


def test_every_chart_is_a_png_and_an_svg_beside_the_report(
    single: Report, compared: Report
) -> None:
    """Named by run and chart, listed in report.md (the PNG as an image) and under each
    chart in report.html; the comparison chart of a report of two runs too."""
    stems = ["quorum-sweep-timeline", "quorum-sweep-broker", "quorum-sweep-sweep-inflight"]
    want = [single.out_dir / f"{stem}.{kind}" for stem in stems for kind in ("png", "svg")]
    assert list(single.charts) == want
    markdown = (single.out_dir / "report.md").read_text(encoding="utf-8")
    page = single.html_path.read_text(encoding="utf-8")
    for stem in stems:
        png, svg = single.out_dir / f"{stem}.png", single.out_dir / f"{stem}.svg"
        assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        assert b"<svg" in svg.read_bytes()[:1000]
        assert f"]({stem}.png)" in markdown and f"({stem}.svg)" in markdown
        assert f"<code>{stem}.png</code>" in page and f"<code>{stem}.svg</code>" in page
    assert (compared.out_dir / "comparison-inflight.png").is_file()
    assert (compared.out_dir / "comparison-inflight.svg").is_file()
    assert (compared.out_dir / "classic-sweep-timeline.svg").is_file()


def test_sessions_side_by_side(
    compared: Report, single: Report, sessions: dict[str, SyntheticSession]
) -> None:
    names = [t.name for t in compared.tables]
    assert names[:3] == ["runs", "sessions", "comparison-inflight"]
    # runs are named by what sets them apart, and their columns by a short name in a legend
    quorum, classic_name = "quorum-sweep (queue quorum)", "classic-sweep (queue classic)"
    legend = read_csv(compared.out_dir / "runs.csv")
    assert [(r["run"], r["name"]) for r in legend] == [("R1", quorum), ("R2", classic_name)]
    side = read_csv(compared.out_dir / "sessions.csv")
    assert list(side[0].keys()) == ["", "R1", "R2"]
    by_metric = {row[""]: row for row in side}
    assert by_metric["sets it apart"]["R2"] == "queue classic"
    assert by_metric["queue type"]["R2"] == "classic"
    assert num(by_metric["duration s"]["R2"]) == 45
    table_md = (compared.out_dir / "comparison-inflight.md").read_text(encoding="utf-8")
    header = table_md.splitlines()[4]
    assert "| In-flight limit | msg/s · R1 | p99 ms · R1 |" in header
    assert f"- R2: {classic_name} (session " in table_md
    # whole-run e2e p99 of the classic session, merged over all its phases
    classic = sessions["classic"]
    want = exp.percentiles_us(classic.latency, "e2e", "actual")
    assert num(by_metric["e2e p99 ms"]["R2"]) == want["p99"] / 1000

    comparison = read_csv(compared.out_dir / "comparison-inflight.csv")
    assert [int(r["In-flight limit"]) for r in comparison] == [10, 20, 40]
    quorum_sweep = read_csv(single.out_dir / "quorum-sweep-sweep-inflight.csv")
    for row, alone in zip(comparison, quorum_sweep, strict=True):
        assert row["msg/s · R1"] == alone["msg/s"]
        assert row["p99 ms · R1"] == alone["p99 ms"]
    bounds = exp.phase_bounds(classic)
    for row, phase_bounds in zip(comparison, bounds, strict=True):
        latency = exp.rows_in(classic.latency, phase_bounds)
        want = exp.percentiles_us(latency, "e2e", "actual")
        assert num(row["p75 ms · R2"]) == want["p75"] / 1000
    page = compared.html_path.read_text(encoding="utf-8")
    assert "<h1>quorum vs classic</h1>" in page
    assert "Runs compared" in page
    # one comparison chart for the benchmark, then each session's three
    assert page.count("data:image/png;base64,") == 1 + 2 * 3


def test_the_drain_is_a_phase_of_its_own_without_a_target(
    drained: Report, sessions: dict[str, SyntheticSession]
) -> None:
    session = sessions["drained"]
    bounds = exp.phase_bounds(session)
    rows = read_csv(drained.out_dir / "drained-sweep-throughput.csv")
    assert [r["label"] for r in rows] == ["inflight=10", "inflight=20", "inflight=40", "drain"]
    assert [num(r["duration s"]) for r in rows] == [12, 12, 12, 6]
    # The last load phase keeps its target although 2 of its seconds were paused.
    assert [num(r["target msg/s"]) for r in rows[:3]] == [200, 200, 200]
    assert rows[3]["target msg/s"] == ""
    # Every figure of a phase is over its own seconds: the last load phase's publish mean
    # has no drain second in it (its paused seconds are, at 0 msg/s, as they happened).
    drain_at = session.boundaries[-1]
    active, _ = exp.active_rates(
        session.path, session.start, session.boundaries, exp.bounds_spans(session, drain_at)
    )
    for row, phase_bounds, want in zip(rows, bounds, active, strict=True):
        client = exp.rows_in(session.client, phase_bounds)
        for column, name in (("published", "publish"), ("consumed", "consume")):
            _, sd, low = exp.rate_stats(client, column)
            assert num(row[f"{name} mean"]) == round(want[f"{name} mean"], 3)
            assert num(row[f"{name} per-second sd"]) == round(sd, 3)
            assert num(row[f"{name} per-second min"]) == round(low, 3)
    # publishing stopped at the drain: no publish time in it, the consumers' 6 s
    assert (num(rows[3]["publish active s"]), num(rows[3]["publish mean"])) == (0, 0)
    assert num(rows[3]["consume active s"]) == 6
    flow = read_csv(drained.out_dir / "drained-sweep-flow.csv")
    # inflight=20's consumers took 125% of what was published: a backlog being taken
    assert [r["verdict"] for r in flow] == [
        "sustainable", "draining a backlog", "sustainable", "drain",
    ]  # fmt: skip
    # 2 s paused and the second that resumed: 3 s with publishing paused in them
    assert "3 s paused (for all or part of the second), left out of the target" in (flow[2]["why"])
    assert flow[3]["why"].startswith("the drain: publishing stopped at 36.0 s")
    assert "back-pressured" not in flow[3]["why"] and "target (<" not in flow[3]["why"]
    page = drained.html_path.read_text(encoding="utf-8")
    assert '<tr class="v-drain">' in page


def test_the_drain_is_no_sweep_row_and_catch_up_is_capped_at_the_target(
    drained: Report, sessions: dict[str, SyntheticSession]
) -> None:
    table = next(t for t in drained.tables if t.name == "drained-sweep-sweep-inflight")
    assert [row[0] for row in table.rows] == [10, 20, 40]
    assert [row[-1] for row in table.rows] == ["inflight=10", "inflight=20", "inflight=40"]
    session = sessions["drained"]
    catch_up, _, _ = exp.rate_stats(exp.rows_in(session.client, exp.phase_bounds(session)[1]),
                                    "consumed")  # fmt: skip
    assert catch_up > 240  # consumed above the 200 msg/s target
    assert (
        "throughput capped at the phase's target where the consume mean exceeded it (catch-up "
        f"on a backlog, not capacity): inflight=20 {catch_up:.1f} → 200.0 msg/s"
    ) in table.reasoning
    # Uncapped, the catch-up phase was the only one within 95% of the best.
    assert table.reasoning[-1].startswith("recommended inflight=10")


def test_cli_writes_the_report(
    spark: Any,
    sessions: dict[str, SyntheticSession],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flowdeck.cli import main

    # One session by id prefix under --sessions-dir (as `flowdeck sessions show` takes
    # it), one by path.
    root = sessions["classic"].path.parent
    code = main(["report", "classic", str(sessions["quorum"].path), "--sessions-dir", str(root),
                 "--out", str(tmp_path / "r"), "--max-p99-ms", "1000"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "report.html" in printed and "recommended inflight=" in printed
    assert (tmp_path / "r" / "classic-sweep-sweep-inflight.csv").exists()
    assert (tmp_path / "r" / "quorum-sweep-sweep-inflight.csv").exists()
    assert f"from {sessions['classic'].path}, {sessions['quorum'].path}" in (
        tmp_path / "r" / "report.md"
    ).read_text(encoding="utf-8")


def test_session_ids_resolve_like_sessions_show(
    sessions: dict[str, SyntheticSession], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowdeck.cli import build_parser
    from flowdeck.cli.report import resolve_sessions
    from flowdeck.spark_reports.inputs import InputError

    root = sessions["classic"].path.parent
    monkeypatch.setenv("FLOWDECK_SESSIONS_DIR", str(root))
    monkeypatch.chdir(tmp_path)
    words = ["report", "drained-sweep", "quorum", "hdfs://nn/flowdeck/s1", "--out", "r"]
    args = build_parser().parse_args(words)
    assert resolve_sessions(args) == [
        str(sessions["drained"].path),
        str(sessions["quorum"].path),
        "hdfs://nn/flowdeck/s1",
    ]
    args = build_parser().parse_args(["report", "c", "--out", "r"])  # classic, not only
    assert resolve_sessions(args) == [str(sessions["classic"].path)]
    args = build_parser().parse_args(["report", "-", "--out", "r", "--sessions-dir", "/x"])
    with pytest.raises(InputError, match=r"session '-': no such directory, and no session"):
        resolve_sessions(args)


def no_spark(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("Spark was started for arguments that were already known bad")


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("missing-id", "session 'missing-id': no such directory, and no session 'missing-id' in"),
        ("s", "session id 's' matches 2 sessions in"),  # several ids start with s
        ("./s1", "session './s1': no such directory; give the directory of a recorded session"),
        ("not-a-session", "not a session (no manifest.json in it); give the directory of a"),
        ("newer-major", "newer than this flowdeck reads"),
    ],
)
def test_a_bad_session_fails_before_spark_starts(
    argument: str,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from flowdeck.cli import main
    from flowdeck.engine.recording.format import MANIFEST

    monkeypatch.setattr("flowdeck.spark_reports.job.spark_session", no_spark)
    root = tmp_path / "sessions"
    for name in ("s1", "s2"):
        (root / name).mkdir(parents=True)
        (root / name / MANIFEST).write_text("{}", encoding="utf-8")
    (tmp_path / "not-a-session").mkdir()
    newer = tmp_path / "newer-major"
    newer.mkdir()
    (newer / MANIFEST).write_text(json.dumps({"schema_version": "2.0"}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r"
    code = main(["report", argument, "--sessions-dir", str(root), "--out", str(out)])
    assert code == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()  # a bad session leaves no new output directory behind


def test_an_unwritable_out_fails_before_spark_starts(
    sessions: dict[str, SyntheticSession],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flowdeck.cli import main
    from flowdeck.spark_reports.job import main as job_main

    monkeypatch.setattr("flowdeck.spark_reports.job.spark_session", no_spark)
    session = str(sessions["classic"].path)
    a_file = tmp_path / "a-file"
    a_file.write_text("", encoding="utf-8")
    assert main(["report", session, "--out", str(a_file / "report")]) == 2
    assert "--out " + str(a_file / "report") + ": cannot create the directory" in (
        capsys.readouterr().err
    )
    assert job_main([session, "--out", str(a_file)]) == 2  # spark-submit's entry point too
    assert f"--out {a_file}: is a file, not a directory" in capsys.readouterr().err


def test_cli_names_a_path_that_is_not_a_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flowdeck.cli import main

    code = main(["report", str(tmp_path), "--out", str(tmp_path / "r")])
    assert code == 2
    assert "not a session (no manifest.json" in capsys.readouterr().err


def test_report_skips_a_garbage_part_and_an_unreadable_session(
    spark: Any,
    single: Report,
    sessions: dict[str, SyntheticSession],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One broken file or session leaves only itself out, with one line saying so."""
    import json
    import shutil

    from flowdeck.cli import main
    from flowdeck.engine.recording.format import MANIFEST

    broken = tmp_path / "quorum-with-garbage"
    shutil.copytree(sessions["quorum"].path, broken)
    garbage = broken / "client" / "part-00099.parquet"
    garbage.write_bytes(b"not parquet at all " * 20)
    far = tmp_path / "far-future"
    shutil.copytree(sessions["classic"].path, far)
    manifest = json.loads((far / MANIFEST).read_text(encoding="utf-8"))
    manifest["start"] = 1e300
    (far / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")

    out = tmp_path / "r"
    assert main(["report", str(broken), str(far), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Py4J" not in err
    warnings = [line for line in err.splitlines() if line.startswith("flowdeck report: ")]
    assert len(warnings) == 2, err
    (part_line,) = (line for line in warnings if garbage.name in line)
    assert f"flowdeck report: {garbage}: unreadable part, left out: " in part_line
    (session_line,) = (line for line in warnings if "far-future" in line)
    assert f"skipped session '{far}'" in session_line
    assert "'start' must be a Unix time in seconds" in session_line
    # The rest is reported as if the broken file were not there.
    name = "quorum-sweep-throughput.csv"
    assert read_csv(out / name) == read_csv(single.out_dir / name)
    assert not list(out.glob("classic-sweep-*"))


def test_phase_target_is_over_the_seconds_not_paused() -> None:
    from flowdeck.figures.stats import phase_client_stats

    def second(phase: int, sec: int, target: float | None, paused: int) -> dict[str, Any]:
        publish = 0.0 if paused or target is None else 200.0
        return {"session": "s", "phase": phase, "sec": sec, "publish_rate": publish,
                "confirm_rate": publish, "consume_rate": 200.0, "nack_rate": 0.0,
                "return_rate": 0.0, "pending_confirms": 1, "unacked": 1,
                "blocked_connections": 0, "target_rate": target, "inflight": 10,
                "prefetch": 10, "ack_every": 1, "rate": 100.0, "publishers": 2,
                "consumers": 2, "paused": paused}  # fmt: skip

    rows = [
        *(second(0, s, None if s < 2 else 200.0, int(s < 2)) for s in range(10)),  # 2 s paused
        # a 1.1 session's last phase: its drain seconds publish without a target
        *(second(1, s, 200.0 if s < 15 else None, 0) for s in range(10, 20)),
        *(second(2, s, None, 1) for s in range(20, 25)),  # paused throughout
    ]
    stats = {r["phase"]: r for r in phase_client_stats(rows, {})}
    assert stats[0]["target_rate"] == 200.0
    assert stats[1]["target_rate"] is None  # as before the drain event existed
    assert stats[2]["target_rate"] is None
    assert (stats[0]["paused_s"], stats[2]["paused_s"], stats[0]["publishers"]) == (2, 5, 2)
