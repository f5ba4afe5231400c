"""The link between a controller and a worker on another host: what goes over its TCP stream.

The same command and message objects as the local pipe (``engine.commands``), pickled, each
frame a 4-byte big-endian length and the pickle. Unpickling runs code, so nothing is
unpickled before the peer has shown the run's token: the worker's first bytes are a fixed
header (``MAGIC``, one length byte, the token in UTF-8), read raw and compared in constant
time; anything else closes the link unread.

After the header the worker sends a :class:`WorkerHello` (or a ``WorkerFailed`` when it
cannot even load the worker runtime), the controller answers with the run's
``WorkerAssignment`` or a :class:`LinkRefused`, and from then on it is the pipe's
conversation: commands one way; snapshots, changes applied, events and the report the
other, then :class:`TaskUsage` and :class:`LinkFinished`.
"""

from __future__ import annotations

import asyncio
import hmac
import pickle
import struct
from dataclasses import dataclass

from flowdeck.engine.process import with_process_cpu

#: First bytes of every link: a worker of this link's version, not a stray client.
MAGIC = b"FDW1"
#: Longest token the header carries (one length byte).
MAX_TOKEN = 255
#: Largest frame taken: a report of a long run with many gaps in its sequences is the largest.
MAX_FRAME = 256 * 1024 * 1024
#: Seconds a connecting peer has to show the token and say hello.
HANDSHAKE_TIMEOUT = 15.0

_LENGTH = struct.Struct("!I")


class LinkError(Exception):
    """The peer broke the link's rules (an oversized or unreadable frame)."""


@dataclass(frozen=True, slots=True)
class WorkerHello:
    """Worker -> controller, first frame: which worker this is and where it runs. ``pid`` is
    the process the load runs in (the Spark task's Python worker)."""

    worker: int
    host: str
    pid: int
    version: str


@dataclass(frozen=True, slots=True)
class LinkRefused:
    """Controller -> worker instead of an assignment: why this worker is not taken."""

    reason: str


@dataclass(frozen=True, slots=True)
class TaskUsage:
    """Worker -> controller after its report: the CPU its process used over the run, for
    the per-host rows (a local worker's CPU the controller can read itself)."""

    worker: int
    cpu_seconds: float
    wall_seconds: float


@dataclass(frozen=True, slots=True)
class LinkFinished:
    """Either way: nothing follows on this link."""


def frame(message: object) -> bytes:
    """One message as it travels: length, then the pickle. A worker's snapshot leaves with
    its process's CPU seconds (``engine.process.with_process_cpu``), as on the local pipe:
    the controller's per-host rows show each host's CPU while the run goes."""
    body = pickle.dumps(with_process_cpu(message), protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> object:
    """The next message. Raises ``asyncio.IncompleteReadError`` at the end of the stream
    and :class:`LinkError` for a frame over ``MAX_FRAME`` or one that does not unpickle."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if length > MAX_FRAME:
        raise LinkError(f"a frame of {length:,} bytes is over the link's {MAX_FRAME:,}")
    body = await reader.readexactly(length)
    try:
        return pickle.loads(body)
    except Exception as exc:  # a class this side lacks: say which, never crash the reader
        raise LinkError(f"unreadable message ({type(exc).__name__}: {exc})") from None


def token_header(token: str) -> bytes:
    """What a worker sends first: the magic and the run's token."""
    raw = token.encode()
    if not 0 < len(raw) <= MAX_TOKEN:
        raise ValueError(f"a link token is 1..{MAX_TOKEN} bytes, got {len(raw)}")
    return MAGIC + bytes([len(raw)]) + raw


async def token_shown(reader: asyncio.StreamReader, token: str) -> bool:
    """Whether the peer's first bytes are the magic and ``token``; reads nothing more."""
    head = await reader.readexactly(len(MAGIC) + 1)
    if head[: len(MAGIC)] != MAGIC or head[-1] == 0:
        return False
    given = await reader.readexactly(head[-1])
    return hmac.compare_digest(given, token.encode())
