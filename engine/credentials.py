"""Broker credentials from the environment or a file instead of the command line.

A password on a command line is in the shell's history and in every ``ps`` listing on the
machine. flowdeck takes it from, in this order:

1. ``--password-file FILE``: the file's first line (a secrets mount, ``chmod 600``);
2. ``FLOWDECK_PASSWORD`` in the environment;
3. the broker URI itself (``amqp://user:password@host``; the URI may come from
   ``FLOWDECK_URI`` rather than ``--uri``).

Whichever it is, the password goes into the URI the engine connects with and nowhere else:
specs, sessions, events, summaries and messages show URIs masked (``user:***@host``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from engine.errors import SpecError

PASSWORD_ENV = "FLOWDECK_PASSWORD"
URI_ENV = "FLOWDECK_URI"
#: A password file larger than this is not a password file.
_MAX_PASSWORD_FILE = 64 * 1024


def read_password_file(path: Path | str) -> str:
    """The password in ``path``: its first line without the line end."""
    file = Path(path)
    try:
        if file.stat().st_size > _MAX_PASSWORD_FILE:
            raise SpecError(
                "password_file",
                f"password file {file} is larger than {_MAX_PASSWORD_FILE // 1024} KiB; "
                "give a file holding only the password",
            )
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("password_file", f"password file {file} does not exist") from None
    except OSError as exc:
        raise SpecError(
            "password_file", f"password file {file} cannot be read: {exc.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise SpecError("password_file", f"password file {file} is not UTF-8 text") from None
    lines = text.splitlines()
    password = lines[0] if lines else ""
    if not password:
        raise SpecError(
            "password_file", f"password file {file} is empty; put the password on its first line"
        )
    return password


def with_password(uri: str, password: str) -> str:
    """``uri`` with ``password`` (percent-encoded) as its password; the user stays, or is
    ``guest`` when the URI has none.
    """
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = quote(unquote(parts.username), safe="") if parts.username else "guest"
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def resolve_uri(
    uri: str,
    *,
    password_file: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The URI to connect with: its password replaced by the password file's or
    ``FLOWDECK_PASSWORD``'s when one is given (see the module doc). Empty stays empty.
    """
    if not uri:
        return uri
    env = os.environ if environ is None else environ
    if password_file:
        return with_password(uri, read_password_file(password_file))
    password = env.get(PASSWORD_ENV, "")
    if password:
        return with_password(uri, password)
    return uri
