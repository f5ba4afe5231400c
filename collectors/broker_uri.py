"""A broker URI, parsed once: host, port, vhost, user, password, TLS query, redacted form.

Every part of flowdeck that connects to, names or prints a broker goes through
:func:`parse_broker_uri` and the :class:`BrokerUri` it returns; nothing re-parses the
string with ``urlsplit`` (which ends the host part at the first ``/`` and so reads a
password holding a raw ``/`` as host and vhost, then prints the rest of the password).

The parse rule, for ``amqp[s]://[user[:password]@]host[:port][/vhost][?query]``:

* the user part runs to the **last** ``@`` of the URI, so a raw ``@``, ``/``, ``:``,
  ``?``, ``#`` or ``%`` in the password is part of the password. An ``@`` after the host
  (in the vhost or a query value) must therefore be written ``%40``;
* the user ends at the first ``:`` of the user part, the password is the rest;
* user and password are percent-decoded when every ``%`` in them starts a ``%XX`` escape,
  else taken as written (a raw password ``50%off`` works; a raw ``%41`` reads as ``A``:
  write ``%`` as ``%25``, or give the password with ``--password-file``);
* the host is a name, an IPv4 address or an IPv6 address in brackets; the port is
  1..65535 (5672, or 5671 for amqps, when left out); the vhost is the path, ``%2F`` is
  ``/``, and no path at all is ``/``.

A URI that breaks a rule raises :class:`BrokerUriError`, whose one-line message never
holds the password. :func:`mask_text` masks the password of every URI in a text by the
same "last ``@``" rule, so it masks at least as much as any reading of the URI would.

This module lives in ``collectors`` because the engine, the collectors and the TUI all
need it and collectors may not import the engine.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

#: What stands for a password in everything flowdeck shows or records.
MASK = "***"
AMQP_SCHEMES = ("amqp", "amqps")
DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
DEFAULT_USER = "guest"
DEFAULT_PASSWORD = "guest"
#: What separates node URIs in one ``--uri`` value (and PerfTest's ``-H``).
URI_SEPARATOR = ","

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", re.DOTALL)
_PERCENT_ENCODED = re.compile(r"(?:[^%]|%[0-9A-Fa-f]{2})*", re.DOTALL)
_HOST_NAME = re.compile(r"[A-Za-z0-9._~-]+")
#: A URI inside a text: its scheme, then everything up to whitespace or the next URI.
_URI_IN_TEXT = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<body>(?:(?![A-Za-z][A-Za-z0-9+.-]*://)\S)*)"
)


class BrokerUriError(ValueError):
    """A broker URI that cannot be used; the message says why and never holds a password."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class BrokerUri:
    """One parsed broker URI. ``str()`` of it is the connect form (every part
    percent-encoded, safe to hand to any RFC 3986 parser such as aio-pika's);
    :attr:`redacted` is the form to show and record.
    """

    scheme: str
    host: str
    #: The port written in the URI; None when left out (see :attr:`effective_port`).
    port: int | None = None
    #: The path as written (percent-encoded), e.g. ``/%2F``; empty when there is none.
    path: str = ""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: The query as written (percent-encoded), without the ``?``.
    query: str = ""

    @property
    def tls(self) -> bool:
        return self.scheme == "amqps"

    @property
    def effective_port(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORTS.get(self.scheme, 5672)

    @property
    def vhost(self) -> str:
        segment = self.path[1:] if self.path.startswith("/") else self.path
        return unquote(segment) if segment else "/"

    @property
    def login(self) -> str:
        """The user to log in as: the URI's, or RabbitMQ's default ``guest``."""
        return self.username if self.username else DEFAULT_USER

    @property
    def secret(self) -> str:
        """The password to log in with: the URI's, or RabbitMQ's default ``guest``."""
        return self.password if self.password is not None else DEFAULT_PASSWORD

    @property
    def host_text(self) -> str:
        """The host as a URI writes it (an IPv6 address in brackets)."""
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def address(self) -> str:
        """``host:port vhost '/'``, for messages."""
        return f"{self.host_text}:{self.effective_port} vhost {self.vhost!r}"

    @property
    def query_params(self) -> dict[str, str]:
        """The query's parameters (the last value of a repeated one)."""
        return dict(parse_qsl(self.query, keep_blank_values=True))

    def _render(self, password: str | None) -> str:
        userinfo = ""
        if self.username is not None or password is not None:
            userinfo = quote(self.username or "", safe="")
            if password is not None:
                userinfo += ":" + password
            userinfo += "@"
        port = f":{self.port}" if self.port is not None else ""
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{userinfo}{self.host_text}{port}{self.path}{query}"

    def __str__(self) -> str:
        password = None if self.password is None else quote(self.password, safe="")
        return self._render(password)

    @property
    def connect_form(self) -> str:
        return str(self)

    @property
    def redacted(self) -> str:
        """The URI with its password replaced by ``***``: what may be shown or recorded."""
        return self._render(None if self.password is None else MASK)

    def with_password(self, password: str) -> BrokerUri:
        """This URI with ``password``; the user stays, or is ``guest`` when there is none."""
        return replace(self, username=self.username or DEFAULT_USER, password=password)

    def with_query(self, query: str) -> BrokerUri:
        return replace(self, query=query)


def _decode(text: str) -> str:
    if not _PERCENT_ENCODED.fullmatch(text):
        return text
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        return text


def _shown(scheme: str, rest: str) -> str:
    """The URI as an error message may show it: everything up to the last ``@`` masked."""
    at = rest.rfind("@")
    if at < 0:
        return f"{scheme}://{rest}"
    return f"{scheme}://{MASK}@{rest[at + 1 :]}"


def _host_and_port(hostport: str, shown: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise BrokerUriError(
                f"uri has an IPv6 host without its closing ']' in {shown!r}; "
                "write it like amqp://[::1]:5672/%2F"
            )
        host, after = hostport[1:end], hostport[end + 1 :]
        address = unquote(host)  # a zone id is written %25eth0
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise BrokerUriError(
                f"uri host [{host}] is not an IPv6 address in {shown!r}; "
                "give a host name, an IPv4 address or an IPv6 address in brackets"
            ) from None
        host = address
        if after and not after.startswith(":"):
            raise BrokerUriError(f"uri has {after!r} after its IPv6 host in {shown!r}")
        port_text = after[1:] if after else None
    else:
        host, colon, port_text_raw = hostport.partition(":")
        port_text = port_text_raw if colon else None
        if port_text is not None and ":" in port_text:
            raise BrokerUriError(
                f"uri host has more than one ':' in {shown!r}; "
                "an IPv6 address goes in brackets, like amqp://[::1]:5672/%2F"
            )
        if not host:
            raise BrokerUriError(
                f"uri needs a host, got {shown!r}; e.g. amqp://guest:guest@localhost:5672/%2F"
            )
        if not _HOST_NAME.fullmatch(host):
            raise BrokerUriError(
                f"uri host {host!r} is not a host name or address in {shown!r}; "
                "a password holding '@' or '/' must come before the host's last '@'"
            )
    if port_text is None or port_text == "":
        return host, None
    if not port_text.isascii() or not port_text.isdigit():
        raise BrokerUriError(
            f"uri port must be a number 1..65535 in {shown!r}; "
            "give the broker's AMQP port or leave it out (5672, 5671 for amqps)"
        )
    port = int(port_text)
    if not 1 <= port <= 65_535:
        raise BrokerUriError(
            f"uri port must be 1..65535, got {port} in {shown!r}; "
            "give the broker's AMQP port or leave it out (5672, 5671 for amqps)"
        )
    return host, port


def parse_broker_uri(text: str, *, schemes: tuple[str, ...] = AMQP_SCHEMES) -> BrokerUri:
    """The parsed URI (see the module doc for the rule), or BrokerUriError saying why not."""
    match = _SCHEME.match(text.strip())
    if match is None or match.group("scheme").lower() not in schemes:
        starts = " or ".join(f"{s}://" for s in schemes)
        shown = _shown(match.group("scheme"), match.group("rest")) if match else text
        if match is None and "@" in text:
            shown = f"{MASK}@{text[text.rfind('@') + 1 :]}"
        raise BrokerUriError(f"uri must start with {starts}, got {shown!r}")
    scheme = match.group("scheme").lower()
    rest = match.group("rest")
    shown = _shown(scheme, rest)
    if any(c.isspace() for c in rest):
        raise BrokerUriError(f"uri has a space or line break in it: {shown!r}")
    username: str | None = None
    password: str | None = None
    at = rest.rfind("@")
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
        user_text, colon, password_text = userinfo.partition(":")
        username = _decode(user_text)
        password = _decode(password_text) if colon else None
    end = len(rest)
    for delimiter in "/?#":
        found = rest.find(delimiter)
        if 0 <= found < end:
            end = found
    hostport, tail = rest[:end], rest[end:]
    host, port = _host_and_port(hostport, shown)
    tail = tail.partition("#")[0]
    path, _, query = tail.partition("?")
    return BrokerUri(scheme, host, port, path, username, password, query)


def split_uris(text: str) -> list[str]:
    """The node URIs of one value (a cluster's, comma-separated): split at a comma that
    starts another ``scheme://``, so a comma inside a password or a query stays put."""
    parts: list[str] = []
    for piece in text.split(URI_SEPARATOR):
        if parts and "://" not in piece:
            parts[-1] += URI_SEPARATOR + piece
        else:
            parts.append(piece)
    return [part.strip() for part in parts if part.strip()]


def redact(text: str) -> str:
    """A URI's redacted form (each node's, for a comma-separated list); any other text (or
    one that does not parse) through :func:`mask_text`. Empty stays empty."""
    if not text:
        return text
    try:
        return URI_SEPARATOR.join(parse_broker_uri(uri).redacted for uri in split_uris(text))
    except BrokerUriError:
        return mask_text(text)


def _mask_one(match: re.Match[str]) -> str:
    body = match.group("body")
    at = body.rfind("@")
    if at < 0:
        return match.group(0)
    user, colon, _ = body[:at].partition(":")
    if not colon:
        return match.group(0)
    return f"{match.group('scheme')}{user}:{MASK}@{body[at + 1 :]}"


def mask_text(text: str) -> str:
    """``text`` with the password of every URI in it (any scheme) replaced by ``***``."""
    if "://" not in text:
        return text
    return _URI_IN_TEXT.sub(_mask_one, text)


def mask_value(value: Any) -> Any:
    """A JSON-able value with URI passwords masked in every string it holds."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, Mapping):
        return {str(k): mask_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_value(v) for v in value]
    return value
