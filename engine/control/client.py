"""A client of a run's control endpoint: what ``flowdeck steer`` and ``attach`` speak.

:func:`endpoint_for` turns what the operator typed (nothing, a run id prefix, a session
directory, or a URL with its token) into an :class:`Endpoint`; :class:`ControlClient`
makes the requests and turns every refusal into one line (:class:`ControlRefused`).
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from flowdeck.collectors import (
    SMALL_FILE_LIMIT,
    UnreadableFile,
    parse_json,
    printable,
    read_file_text,
)
from flowdeck.engine.control.registry import entry_for_url, find_run
from flowdeck.engine.control.wire import DEFAULT_WAIT_SECONDS
from flowdeck.engine.errors import FlowdeckError, SpecError
from flowdeck.engine.tls import TlsOptions, ssl_context

#: Where a token may come from besides --token and --token-file.
TOKEN_ENV = "FLOWDECK_CONTROL_TOKEN"


class ControlRefused(FlowdeckError):
    """The endpoint answered with an error: its status and its one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a run's control endpoint is and the token it takes."""

    url: str
    token: str
    run_id: str = ""
    #: A CA file to trust for an https:// endpoint ("" = the system's).
    ca_file: str = ""

    def verify(self) -> ssl.SSLContext | bool:
        if not self.ca_file:
            return True
        return ssl_context(TlsOptions(ca_file=self.ca_file))


def _token_from(token: str | None, token_file: str | None) -> str | None:
    if token:
        return token.strip()
    if token_file:
        try:
            text = read_file_text(token_file, what="token file", limit=SMALL_FILE_LIMIT).strip()
        except UnreadableFile as exc:
            raise SpecError("token_file", exc.message) from None
        # A run's control.json holds the token beside the address; a plain file holds it alone.
        if text.startswith("{"):
            try:
                return str(parse_json(text, what="token file", path=token_file)["token"])
            except UnreadableFile as exc:
                raise SpecError("token_file", exc.message) from None
            except (KeyError, TypeError):
                shown = printable(token_file)
                raise SpecError("token_file", f"token file {shown} holds no token") from None
        return text.splitlines()[0].strip() if text else None
    return os.environ.get(TOKEN_ENV) or None


def endpoint_for(
    run: str | None,
    *,
    token: str | None = None,
    token_file: str | None = None,
    ca_file: str | None = None,
    folder: Path | None = None,
    sessions_root: Path | None = None,
) -> Endpoint:
    """The endpoint of the run ``run`` names (see :func:`registry.find_run`), or of the
    URL ``run`` with its token given (--token, --token-file, $FLOWDECK_CONTROL_TOKEN) or
    known from this host's list of runs. With no ``run``, the only run started from
    ``sessions_root`` (see :func:`registry.find_run`)."""
    given = _token_from(token, token_file)
    if run and run.startswith(("http://", "https://")):
        url = run.rstrip("/")
        if given is None:
            entry = entry_for_url(url, folder)
            if entry is None:
                raise SpecError(
                    "token",
                    f"{url} needs the run's token: give --token-file (the run's control.json "
                    f"or a file holding the token), --token or ${TOKEN_ENV}",
                )
            given = entry.token
        return Endpoint(url, given, ca_file=ca_file or "")
    entry = find_run(run, folder, sessions_root=sessions_root)
    return Endpoint(entry.url, given or entry.token, entry.run_id, ca_file or "")


def _refusal(response: httpx.Response) -> ControlRefused:
    try:
        message = str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        message = response.text.strip().splitlines()[0] if response.text.strip() else ""
    return ControlRefused(response.status_code, message or f"HTTP {response.status_code}")


class ControlClient:
    """Requests to one endpoint, each answered as parsed JSON or a ControlRefused."""

    def __init__(self, endpoint: Endpoint, *, timeout: float = 10.0) -> None:
        self.endpoint = endpoint
        self._timeout = timeout
        self._headers = {"Authorization": f"Bearer {endpoint.token}"}

    def _unreachable(self, exc: httpx.HTTPError) -> FlowdeckError:
        return FlowdeckError(
            f"cannot reach the run's control endpoint at {self.endpoint.url}: {exc}; "
            "is the run still going? (flowdeck runs lists them)"
        )

    def _call(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> Any:
        try:
            with httpx.Client(
                base_url=self.endpoint.url,
                headers=self._headers,
                timeout=timeout or self._timeout,
                verify=self.endpoint.verify(),
            ) as http:
                response = http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if response.status_code >= 400:
            raise _refusal(response)
        return response.json()

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/status")
        return result

    def change(self, text: str, *, wait: float = DEFAULT_WAIT_SECONDS) -> dict[str, Any]:
        """Ask for one change; the answer says whether it is in force (``in_force``) and,
        if so, after how long (``in_force_after_ms``)."""
        result: dict[str, Any] = self._call(
            "POST",
            "/changes",
            params={"wait": f"{wait:g}"},
            json={"change": text},
            timeout=wait + self._timeout,
        )
        return result

    def changes(self, texts: list[str], *, wait: float = DEFAULT_WAIT_SECONDS) -> list[Any]:
        """Ask for several changes in one request (all checked by the run before the
        first is asked); each answer as :meth:`change` gives it."""
        result: dict[str, Any] = self._call(
            "POST",
            "/changes",
            params={"wait": f"{wait:g}"},
            json={"changes": texts},
            timeout=wait + self._timeout,
        )
        states: list[Any] = result["changes"]
        return states

    def change_state(self, change_id: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/changes/{change_id}")
        return result

    def stop(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/stop")
        return result

    def skip_step(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/schedule/skip")
        return result

    def resume_schedule(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/schedule/resume")
        return result

    def autotune(self, setting: str, **options: Any) -> dict[str, Any]:
        """Start the autopilot on ``setting`` (``max_p99_ms``, ``max_backlog``, ``hold_s``,
        ``then`` as POST /autotune takes them; None ones left out); its state."""
        body = {"setting": setting, **{k: v for k, v in options.items() if v is not None}}
        result: dict[str, Any] = self._call("POST", "/autotune", json=body)
        return result

    def autotune_state(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/autotune")
        return result

    def stop_autotune(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/autotune/stop")
        return result

    async def acall(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """A request without blocking the caller's loop (a remote cockpit's autopilot)."""
        try:
            async with httpx.AsyncClient(
                base_url=self.endpoint.url,
                headers=self._headers,
                timeout=self._timeout,
                verify=self.endpoint.verify(),
            ) as http:
                response = await http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if response.status_code >= 400:
            raise _refusal(response)
        result: dict[str, Any] = response.json()
        return result

    async def achange(self, text: str, *, wait: float = 0.0) -> dict[str, Any]:
        """:meth:`change` without blocking the caller's loop (a remote cockpit)."""
        try:
            async with httpx.AsyncClient(
                base_url=self.endpoint.url,
                headers=self._headers,
                timeout=wait + self._timeout,
                verify=self.endpoint.verify(),
            ) as http:
                response = await http.post(
                    "/changes", params={"wait": f"{wait:g}"}, json={"change": text}
                )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if response.status_code >= 400:
            raise _refusal(response)
        result: dict[str, Any] = response.json()
        return result

    async def stream(self) -> AsyncIterator[tuple[str, Any]]:
        """The run's server-sent events as (kind, JSON value), until the run ends."""
        timeout = httpx.Timeout(self._timeout, read=None)
        try:
            async with (
                httpx.AsyncClient(
                    base_url=self.endpoint.url,
                    headers=self._headers,
                    timeout=timeout,
                    verify=self.endpoint.verify(),
                ) as http,
                http.stream("GET", "/stream") as response,
            ):
                if response.status_code >= 400:
                    await response.aread()
                    raise _refusal(response)
                kind, data = "message", list[str]()
                async for line in response.aiter_lines():
                    if not line:
                        if data:
                            yield kind, json.loads("\n".join(data))
                        kind, data = "message", list[str]()
                    elif line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip())
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
