"""TLS against a private node with a TLS listener and certificates made here (openssl CLI).

The node asks every AMQPS client for a certificate signed by the test CA
(``fail_if_no_peer_cert``), so a run that works proves the client certificate was sent.
Mismatches (no CA, no client certificate, amqps:// to a plain port, amqp:// to the TLS
port) end within the connect timeout with one line saying what to do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flowdeck.collectors import LocalBroker, ManagementCollector, TlsFiles
from flowdeck.engine.amqp.connection import connect
from flowdeck.engine.errors import BrokerUnavailable
from flowdeck.engine.tls import (
    INSECURE_WARNING,
    TlsError,
    TlsOptions,
    http_verify,
    ssl_context,
    tls_options,
    with_tls_options,
)
from tests.private_nodes import PrivateNodes

ROOT = Path(__file__).resolve().parents[2]
FLOWDECK = [sys.executable, "-m", "flowdeck.cli"]


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(where: Path) -> Certificates:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=flowdeck test CA",
        cwd=where,
    )  # fmt: skip
    (where / "server.ext").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    (where / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        common_name = "localhost" if name == "server" else "flowdeck"
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={common_name}",
            cwd=where,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
            cwd=where,
        )  # fmt: skip
    for key in where.glob("*.key"):
        key.chmod(0o644)  # the node runs as this user; readable is enough
    return Certificates(
        where / "ca.pem",
        where / "server.pem",
        where / "server.key",
        where / "client.pem",
        where / "client.key",
    )


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_node(private_broker: PrivateNodes, certificates: Certificates) -> Iterator[LocalBroker]:
    files = TlsFiles(
        ca_file=certificates.ca,
        cert_file=certificates.server_cert,
        key_file=certificates.server_key,
        verify_peer=True,
        fail_if_no_peer_cert=True,
    )
    node = private_broker(tls=files)
    yield node
    private_broker.discard(node)


def trusted_uri(node: LocalBroker, certs: Certificates) -> str:
    options = TlsOptions(str(certs.ca), str(certs.client_cert), str(certs.client_key))
    return with_tls_options(node.amqps_uri, options)


# -- options, without a broker ------------------------------------------------------------


def test_tls_options_round_trip_through_the_uri(tmp_path: Path) -> None:
    options = TlsOptions("ca.pem", "c.pem", "c.key", insecure=True)
    uri = with_tls_options("amqps://u:p@h:5671/%2F?heartbeat=10", options)
    read = tls_options(uri)
    assert read.insecure
    assert read.ca_file == str(Path("ca.pem").absolute())
    assert "heartbeat=10" in uri and "verify=verify_none" in uri


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (TlsOptions(ca_file="/nope/ca.pem"), "CA file /nope/ca.pem does not exist"),
        (TlsOptions(key_file="/k.pem"), "needs its certificate too: add --cert-file"),
        (TlsOptions(cert_file="/nope/c.pem"), "client certificate /nope/c.pem does not exist"),
    ],
)
def test_bad_tls_files_are_named(options: TlsOptions, message: str) -> None:
    with pytest.raises(TlsError, match=message):
        ssl_context(options)


def test_a_file_that_is_no_certificate_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(TlsError, match="holds no usable certificate"):
        ssl_context(TlsOptions(ca_file=str(junk)))


def test_verify_parameter_must_be_known() -> None:
    with pytest.raises(TlsError, match="verify must be verify_peer or verify_none"):
        tls_options("amqps://h/?verify=maybe")


# -- against the TLS node --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.private_broker
@pytest.mark.timeout(300)
async def test_amqps_with_ca_and_client_certificate_connects(
    tls_node: LocalBroker, certificates: Certificates
) -> None:
    connection = await connect(trusted_uri(tls_node, certificates), "flowdeck tls test")
    try:
        channel = await connection.channel()
        await channel.confirm_select()
        assert connection.is_open
    finally:
        await connection.close()


@pytest.mark.private_broker
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("options", "says"),
    [
        (TlsOptions(), "certificate is not trusted"),
        (TlsOptions(ca_file="CA"), "client certificate"),
    ],
    ids=["no CA", "no client certificate"],
)
async def test_tls_trouble_is_one_clear_message_within_the_timeout(
    tls_node: LocalBroker, certificates: Certificates, options: TlsOptions, says: str
) -> None:
    if options.ca_file:
        options = TlsOptions(ca_file=str(certificates.ca))
    uri = with_tls_options(tls_node.amqps_uri, options) + (
        "&connection_timeout=5000" if options.configured else "?connection_timeout=5000"
    )
    began = time.monotonic()
    with pytest.raises(BrokerUnavailable) as caught:
        await connect(uri, "flowdeck tls test")
    assert time.monotonic() - began < 8
    assert says in str(caught.value)
    assert "guest" not in str(caught.value).replace("user 'guest'", "")


@pytest.mark.private_broker
@pytest.mark.timeout(300)
async def test_https_management_with_the_same_trust(
    tls_node: LocalBroker, certificates: Certificates
) -> None:
    uri = trusted_uri(tls_node, certificates)
    collector = ManagementCollector(
        tls_node.management_tls_url, username="guest", password="guest", verify=http_verify(uri)
    )
    async with collector:
        sample = await collector.sample()
    assert not sample.stale, sample.stale_reason
    untrusted = ManagementCollector(tls_node.management_tls_url, username="guest", password="guest")
    async with untrusted:
        refused = await untrusted.sample()
    assert refused.stale and "certificate" in refused.stale_reason.lower()


def flowdeck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWDECK, *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, "FLOWDECK_URI": "", **(env or {})},
    )


RUN = ["run", "--duration", "3", "--rate", "50", "--workers", "0", "--no-record", "--drain", "1"]


@pytest.mark.slow
@pytest.mark.private_broker
@pytest.mark.timeout(300)
def test_flowdeck_run_over_amqps_and_https_with_client_certificate(
    tls_node: LocalBroker, certificates: Certificates
) -> None:
    result = flowdeck(
        *RUN,
        "--queue-pattern", "tls-run-%d",
        "--uri", tls_node.amqps_uri,
        "--management-url", tls_node.management_tls_url,
        "--ca-file", str(certificates.ca),
        "--cert-file", str(certificates.client_cert),
        "--key-file", str(certificates.client_key),
        "--cleanup",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "run custom completed" in result.stdout
    assert "lost (confirmed, never consumed)" in result.stdout
    assert "management API" not in result.stdout, result.stdout  # watched without trouble
    assert "warning" not in result.stderr


@pytest.mark.slow
@pytest.mark.private_broker
@pytest.mark.timeout(300)
def test_insecure_runs_and_is_loud_about_it(
    tls_node: LocalBroker, certificates: Certificates
) -> None:
    result = flowdeck(
        *RUN,
        "--queue-pattern", "tls-insecure-%d",
        "--uri", tls_node.amqps_uri,
        "--management-url", tls_node.management_tls_url,
        "--cert-file", str(certificates.client_cert),
        "--key-file", str(certificates.client_key),
        "--insecure",
        "--cleanup",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"warning: {INSECURE_WARNING}" in result.stderr
    assert INSECURE_WARNING in result.stdout  # the run's event log says it too


@pytest.mark.private_broker
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", ["amqps to plain port", "amqp to TLS port"])
def test_tls_mismatch_through_flowdeck_run(
    tls_node: LocalBroker, certificates: Certificates, case: str
) -> None:
    if case == "amqps to plain port":
        uri = f"amqps://guest:guest@localhost:{tls_node.amqp_port}/%2F?connection_timeout=8000"
        extra = ["--ca-file", str(certificates.ca)]
        says = "does not speak TLS"
    else:
        uri = f"amqp://guest:guest@localhost:{tls_node.amqps_port}/%2F?connection_timeout=8000"
        extra = []
        says = "amqps://"
    began = time.monotonic()
    result = flowdeck(*RUN, "--uri", uri, "--management-url", tls_node.management_url, *extra)
    took = time.monotonic() - began
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert took < 40
