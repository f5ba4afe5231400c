"""A TCP link with a fixed one-way delay, for tests that need a broker some milliseconds
away: every chunk read on one side is written to the other `delay` seconds later, in order,
both ways. The round trip through it is at least twice the delay, whatever the machine's
load, where loopback's own is a fraction of a millisecond.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType


class DelayedLink:
    """Listens on 127.0.0.1 (a free port) and forwards each connection to `target`."""

    def __init__(self, target_host: str, target_port: int, delay: float) -> None:
        self.target = (target_host, target_port)
        self.delay = delay
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> DelayedLink:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, upstream_writer))
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await reader.read(65536):
                # Equal delays keep the order: each chunk leaves `delay` after it came.
                loop.call_later(self.delay, self._write, writer, chunk)
        loop.call_later(self.delay, self._close, writer)

    def _write(self, writer: asyncio.StreamWriter, chunk: bytes) -> None:
        if not writer.is_closing():
            writer.write(chunk)

    def _close(self, writer: asyncio.StreamWriter) -> None:
        self._writers.discard(writer)
        writer.close()
