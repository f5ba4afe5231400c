"""Broker credentials from the environment or a file instead of the command line.

A password on a command line is in the shell's history and in every ``ps`` listing on the
machine. flowdeck takes the AMQP password from, in this order:

1. ``--password-file FILE``: the file's first line (a secrets mount, ``chmod 600``);
2. ``FLOWDECK_PASSWORD`` in the environment;
3. the broker URI itself (``amqp://user:password@host``; the URI may come from
   ``FLOWDECK_URI`` rather than ``--uri``).

The management API password comes, in the same way, from ``--management-password-file``,
then ``FLOWDECK_MANAGEMENT_PASSWORD``, then ``--management-password``, else it is the AMQP
password.

Whichever it is, the password goes into the URI the engine connects with and nowhere else:
specs, sessions, events, summaries and messages show URIs masked (``user:***@host``). How
a URI is read (a raw ``@`` or ``/`` in the password included) is
``collectors.broker_uri``'s one rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from flowdeck.collectors import SMALL_FILE_LIMIT, UnreadableFile, printable, read_file_text
from flowdeck.collectors.broker import Broker
from flowdeck.collectors.broker_uri import (
    URI_SEPARATOR,
    BrokerUri,
    BrokerUriError,
    parse_broker_uri,
)
from flowdeck.engine.errors import SpecError

PASSWORD_ENV = "FLOWDECK_PASSWORD"
MANAGEMENT_PASSWORD_ENV = "FLOWDECK_MANAGEMENT_PASSWORD"
URI_ENV = "FLOWDECK_URI"


def broker_uri(text: str, field: str = "uri") -> BrokerUri:
    """``text`` parsed as an AMQP URI, or a SpecError (one line, no password) naming
    ``field``."""
    try:
        return parse_broker_uri(text)
    except BrokerUriError as exc:
        raise SpecError(field, exc.message) from None


def broker_of(text: str, field: str = "uri") -> Broker:
    """``text`` (one AMQP URI, or a cluster's comma-separated) as a :class:`Broker`, or a
    SpecError (one line, no password) naming ``field``."""
    try:
        return Broker.parse(text)
    except BrokerUriError as exc:
        raise SpecError(field, exc.message) from None


def read_password_file(path: Path | str, field: str = "password_file") -> str:
    """The password in ``path``: its first line without the line end.

    Read within bounds (``collectors.untrusted``): a device such as ``/dev/zero``, a pipe
    or a file over 64 KiB is refused instead of read for ever.
    """
    try:
        text = read_file_text(path, what="password file", limit=SMALL_FILE_LIMIT)
    except UnreadableFile as exc:
        raise SpecError(field, exc.message) from None
    lines = text.splitlines()
    password = lines[0] if lines else ""
    if not password:
        shown = printable(str(path))
        raise SpecError(field, f"password file {shown} is empty; put the password on line 1")
    return password


def with_password(uri: str, password: str) -> str:
    """``uri`` with ``password`` (percent-encoded) as its password; the user stays, or is
    ``guest`` when the URI has none.
    """
    return str(broker_uri(uri).with_password(password))


def resolve_uri(
    uri: str,
    *,
    password_file: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The URI to connect with, in its connect form (every part percent-encoded): its
    password replaced by the password file's or ``FLOWDECK_PASSWORD``'s when one is given
    (see the module doc). Empty stays empty.
    """
    if not uri:
        return uri
    nodes = broker_of(uri).nodes
    env = os.environ if environ is None else environ
    password = read_password_file(password_file) if password_file else env.get(PASSWORD_ENV, "")
    if password:
        nodes = tuple(node.with_password(password) for node in nodes)
    return URI_SEPARATOR.join(str(node) for node in nodes)


def management_password(
    given: str | None,
    *,
    password_file: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The management API password: ``--management-password-file``'s first line, else
    ``FLOWDECK_MANAGEMENT_PASSWORD``, else ``given`` (``--management-password``); None
    means "the AMQP password".
    """
    if password_file:
        return read_password_file(password_file, "management_password_file")
    env = os.environ if environ is None else environ
    return env.get(MANAGEMENT_PASSWORD_ENV, "") or given or None
