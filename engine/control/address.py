"""Where a run's control endpoint listens, and the rule that keeps it on this machine.

Apart from the server (and its HTTP library) so that the command line checks
``--control`` at once, before anything starts and without loading the server.
"""

from __future__ import annotations

import ipaddress
import re
import ssl
from dataclasses import dataclass

from flowdeck.engine.errors import SpecError
from flowdeck.engine.tls import TlsError, TlsOptions, read_pem

LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


@dataclass(frozen=True, slots=True)
class ControlAddress:
    """Where the endpoint listens; port 0 = a free one."""

    host: str = "127.0.0.1"
    port: int = 0

    @property
    def loopback(self) -> bool:
        if self.host.lower() in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_control_address(text: str) -> ControlAddress:
    """``HOST:PORT`` (``[::1]:8089`` for IPv6), or ``PORT`` alone for 127.0.0.1."""
    text = text.strip()
    match = re.fullmatch(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\[\]]*)):(?P<port>\d+)", text)
    if text.isdigit():
        host, port = "127.0.0.1", text
    elif match:
        host, port = match.group("v6") or match.group("host") or "127.0.0.1", match.group("port")
    else:
        raise SpecError(
            "control", f"--control must be HOST:PORT (e.g. 127.0.0.1:8089), got {text!r}"
        )
    if int(port) > 65_535:
        raise SpecError("control", f"--control port must be 0..65535, got {port}")
    return ControlAddress(host, int(port))


def check_exposure(address: ControlAddress, *, allow_remote: bool, tls: TlsOptions) -> None:
    """Refuse to listen beyond this machine unless asked to, and then only with TLS: the
    token travels in every request."""
    if address.loopback:
        return
    if not allow_remote:
        raise SpecError(
            "control",
            f"--control {address} listens beyond this machine; add --control-allow-remote "
            "and TLS (--control-cert-file, --control-key-file), or use 127.0.0.1",
        )
    if not tls.cert_file:
        raise SpecError(
            "control",
            f"--control {address} listens beyond this machine and needs TLS: give "
            "--control-cert-file and --control-key-file",
        )


def server_tls_context(options: TlsOptions) -> ssl.SSLContext | None:
    """The server side of TLS for the endpoint: its certificate and key (None without)."""
    if not options.cert_file:
        if options.key_file:
            raise TlsError("--control-key-file needs --control-cert-file", field="control")
        return None
    read_pem("control certificate", options.cert_file, "--control-cert-file")
    if options.key_file:
        read_pem("control key", options.key_file, "--control-key-file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(options.cert_file, options.key_file or None)
    except ssl.SSLError as exc:
        raise TlsError(
            f"control certificate {options.cert_file} and key "
            f"{options.key_file or '(in the same file)'} do not load ({exc.reason}); "
            "give PEM files of a certificate and its private key",
            field="control",
        ) from None
    return context
