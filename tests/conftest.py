"""Fixtures shared by every part's tests.

Broker tests use the shared RabbitMQ on localhost:5672 (prepared by scripts/prepare-broker);
tests that break a broker start a private node. One Spark session serves the whole run.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.private_nodes import PrivateNodes

pytest_plugins = ["tests.cpu_usage"]

SHARED_URI = os.environ.get("FLOWDECK_TEST_URI", "amqp://guest:guest@127.0.0.1:5672/%2F")
SHARED_MANAGEMENT_URL = os.environ.get("FLOWDECK_TEST_MANAGEMENT_URL", "http://127.0.0.1:15672")


def xdist_group_of(item: pytest.Item) -> str | None:
    """Which tests must share a test process when the suite runs in several (scripts/test
    runs five, or three on a busy machine, with ``--dist loadgroup``): the tests on the one
    Spark session share it, and the tests of a module (or package) share what its
    module-scoped fixtures start, such as
    a private node, instead of starting one per process; the cluster modules share one
    process so their clusters never boot at once. A test that starts a Spark
    cluster of its own belongs to no group and may run beside the Spark tests."""
    if "spark" in getattr(item, "fixturenames", ()):
        return "spark"
    if item.path.name.startswith("test_cluster_"):
        # One private cluster at a time: two booting at once (six Erlang VMs on two cores)
        # crashed a node while it joined.
        return "clusters"
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    scopes = {d.scope for defs in definitions for d in defs}
    if "package" in scopes:
        return str(item.path.parent)
    if "module" in scopes:
        return str(item.path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests that share expensive fixtures (see ``xdist_group_of``). First of
    the hooks: pytest-xdist reads the group marks in its own, and a root conftest's hook
    otherwise runs after it, so no test was grouped and each test process started its own
    Spark session and split a module's tests from the run its fixture started.

    Broker tests need the shared broker prepared: without its management API the
    socket-limit check cannot refuse a run, and a test of that refusal would open thousands
    of connections to the shared broker. Stop before anything runs instead."""
    # Without pytest-xdist (`-p no:xdist`) its marker is unknown, and nothing to group.
    grouping = config.pluginmanager.hasplugin("xdist")
    groups = {item.nodeid: xdist_group_of(item) for item in items}
    # A module with Spark tests keeps its other tests on the Spark process too: their
    # module-scoped fixtures (synthetic sessions, say) would otherwise be built twice, once
    # in each process, and a test of the module that needs no Spark waits for its share.
    with_spark = {str(item.path) for item in items if groups[item.nodeid] == "spark"}
    for item in items:
        # The fast tier (scripts/test --fast: "not spark and not slow") never boots a node or
        # drives a terminal: a test that does is slow whether or not its module says so.
        if (
            any(item.get_closest_marker(m) for m in ("private_broker", "tmux"))
            or "private_broker" in getattr(item, "fixturenames", ())
            or groups[item.nodeid] in ("clusters", "spark")
        ):
            item.add_marker(pytest.mark.slow)
        group = groups[item.nodeid]
        if group == str(item.path) and group in with_spark:
            group = "spark"
        if group is not None and grouping:
            item.add_marker(pytest.mark.xdist_group(group))
    if not any(item.get_closest_marker("broker") for item in items):
        return
    import httpx

    try:
        httpx.get(f"{SHARED_MANAGEMENT_URL}/api/overview", auth=("guest", "guest"), timeout=10)
    except httpx.HTTPError as exc:
        pytest.exit(
            f"the shared broker's management API at {SHARED_MANAGEMENT_URL} does not answer "
            f"({exc}); run scripts/prepare-broker (scripts/test does) first",
            returncode=3,
        )


@pytest.fixture(scope="session", autouse=True)
def own_node_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A registry of private nodes for this test process alone: ``flowdeck broker status``
    lists every node any flowdeck process on the machine owns, so a test asserting that
    nothing runs after its stop saw the node of a test running in the other process (or of
    anyone else on the machine). A test about the registry sets its own directory."""
    from flowdeck.collectors.provisioner import REGISTRY_ENV

    before = os.environ.get(REGISTRY_ENV)
    os.environ[REGISTRY_ENV] = str(tmp_path_factory.mktemp("node-registry"))
    yield
    if before is None:
        os.environ.pop(REGISTRY_ENV, None)
    else:
        os.environ[REGISTRY_ENV] = before


@pytest.fixture
def shared_uri() -> str:
    """AMQP URI of the shared broker."""
    return SHARED_URI


@pytest.fixture
def management_url() -> str:
    """Management API base URL of the shared broker (guest/guest)."""
    return SHARED_MANAGEMENT_URL


@pytest.fixture
def unique_name() -> Iterator[str]:
    """A name no other test uses, for queues and exchanges on the shared broker.

    Queues whose names start with it are deleted after the test, so a run the test kills
    (a second Ctrl-C quits without cleaning up) leaves nothing on the shared broker."""
    name = f"flowdeck-test-{uuid.uuid4().hex[:10]}"
    yield name
    import httpx

    with httpx.Client(base_url=SHARED_MANAGEMENT_URL, auth=("guest", "guest"), timeout=10) as api:
        listed = api.get("/api/queues", params={"columns": "name,vhost"})
        if listed.status_code != 200:
            return
        for queue in listed.json():
            if queue["name"].startswith(name):
                vhost = quote(queue["vhost"], safe="")
                api.delete(f"/api/queues/{vhost}/{quote(queue['name'], safe='')}")


@pytest.fixture(scope="session")
def private_broker() -> Iterator[PrivateNodes]:
    """The run's private nodes (see PrivateNodes); any still running are killed at the end."""
    nodes = PrivateNodes()
    yield nodes
    nodes.discard_all()


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local SparkSession for the whole test run: 2 cores, few partitions, no UI, made
    as a report run makes its own (``spark_session``), so its driver listens on loopback
    only: built here with only a master, it listened on the machine's outward address too.

    Its Python tasks run this interpreter, the one flowdeck is installed in: PySpark takes
    PYSPARK_PYTHON when the context starts, else ``python3`` from PATH, which outside an
    activated venv (scripts/test, CI) has no flowdeck. A cockpit Spark run in this process
    reuses this context, and its tasks then failed at once to import flowdeck."""
    pytest.importorskip("pyspark.sql")
    from flowdeck.spark_reports.job import spark_session

    python_before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = spark_session("local[2]", "flowdeck tests")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()
    if python_before is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = python_before
