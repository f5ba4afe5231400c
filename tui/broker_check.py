"""Before launch: is the broker there, which version, do the management API and
Prometheus answer? One line per source, for the launch screen.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import httpx

from flowdeck.collectors import Broker, ManagementCollector, SourceError, find_tool, redact
from flowdeck.engine import FlowdeckError, http_context


@dataclass(frozen=True, slots=True)
class CheckLine:
    """One source's answer: ``ok`` false means the operator should fix something first."""

    source: str
    ok: bool
    message: str


async def check_amqp(uri: str) -> CheckLine:
    from flowdeck.engine import connect

    try:
        connection = await connect(uri, "flowdeck launch check")
    except FlowdeckError as exc:
        return CheckLine("broker", False, str(exc))
    properties = connection.server_properties
    await connection.close("flowdeck launch check done")

    def text(key: str) -> str:
        value = properties.get(key, "")
        return value.decode() if isinstance(value, bytes) else str(value)

    return CheckLine(
        "broker",
        True,
        f"{text('product') or 'broker'} {text('version')} answers at {redact(uri)}",
    )


async def check_management(
    uri: str, management_url: str, verify: ssl.SSLContext | bool = True
) -> CheckLine:
    if not management_url:
        from flowdeck.engine import started_node_for

        node = started_node_for(uri)
        management_url = node.management_url if node is not None else ""
    broker = Broker.parse(uri, management_url=management_url)
    user, password = broker.management_login
    collector = ManagementCollector(
        broker.usual_management_url,
        username=user,
        password=password,
        vhost=broker.vhost,
        verify=verify,
    )
    try:
        return CheckLine("management", True, await collector.check())
    except SourceError as exc:
        return CheckLine("management", False, str(exc))
    finally:
        await collector.aclose()


async def check_prometheus(prometheus_url: str, verify: ssl.SSLContext | bool = True) -> CheckLine:
    url = prometheus_url.rstrip("/")
    try:
        async with httpx.AsyncClient(timeout=5.0, verify=verify) as client:
            answer = await client.get(f"{url}/api/v1/status/buildinfo")
            answer.raise_for_status()
            version = answer.json().get("data", {}).get("version", "?")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return CheckLine(
            "prometheus",
            False,
            f"no Prometheus server answers at {url}: {exc}; fix the URL or leave it empty",
        )
    return CheckLine("prometheus", True, f"Prometheus {version} at {url}")


async def check_sources(uri: str, management_url: str, prometheus_url: str) -> list[CheckLine]:
    """Check every configured source at once; an empty uri means a private local node."""
    if not uri:
        try:
            server = find_tool("rabbitmq-server")
        except SourceError as exc:
            return [CheckLine("broker", False, str(exc))]
        return [
            CheckLine(
                "broker",
                True,
                f"no uri: flowdeck starts a private RabbitMQ node ({server}) on the first "
                "launch, reuses it for the next and stops it when you quit",
            )
        ]
    # SSL contexts read a CA bundle (~75 ms each): built in threads, not on the app's loop.
    try:
        management_verify: ssl.SSLContext | bool = await asyncio.to_thread(http_context, uri)
    except FlowdeckError:
        management_verify = True  # a bad TLS file: check_amqp names it
    checks = [check_amqp(uri), check_management(uri, management_url, management_verify)]
    if prometheus_url:
        default_verify = await asyncio.to_thread(httpx.create_ssl_context)
        checks.append(check_prometheus(prometheus_url, default_verify))
    return list(await asyncio.gather(*checks))
