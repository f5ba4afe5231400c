"""TLS for the broker: the one place that builds ssl contexts, for AMQP and for HTTP.

The settings travel in the broker URI's query, with the names of RabbitMQ's URI spec, so
one string says everything about where and how to connect (a spec file, ``--uri``,
``FLOWDECK_URI``, the cockpit's uri field and the worker processes all carry it)::

    amqps://flowdeck@broker:5671/%2F?cacertfile=/etc/ca.pem&certfile=/etc/client.pem&keyfile=/etc/client.key

``verify=verify_none`` switches certificate and host name checks off. That is for a lab
broker with a throw-away certificate only: whoever asks for it is told loudly (the run's
first event and a warning line), never silently. ``flowdeck run --ca-file --cert-file
--key-file --insecure`` add these parameters to the URI.

The management API gets the same trust: an ``https://`` management URL is verified against
the same CA file and presents the same client certificate.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from flowdeck.collectors import PEM_FILE_LIMIT, UnreadableFile, printable, read_file_text
from flowdeck.collectors.broker_uri import BrokerUri, BrokerUriError, parse_broker_uri
from flowdeck.engine.errors import SpecError

#: URI query parameters (RabbitMQ's URI spec names) and what they set.
CA_PARAMETER = "cacertfile"
CERT_PARAMETER = "certfile"
KEY_PARAMETER = "keyfile"
VERIFY_PARAMETER = "verify"
VERIFY_NONE = "verify_none"
VERIFY_PEER = "verify_peer"

INSECURE_WARNING = (
    "TLS certificate verification is OFF (--insecure / verify=verify_none): anyone between "
    "flowdeck and the broker can read and change the traffic, including the password"
)


class TlsError(SpecError):
    """TLS settings that cannot work: a missing or unreadable file, a bad parameter.

    Bad input like any other spec value (exit 2), wherever it is found: the files are only
    read when the first connection is made.
    """

    def __init__(self, message: str, field: str = "uri") -> None:
        super().__init__(field, message)


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """How to talk TLS to the broker; empty strings mean the system's defaults."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure: bool = False

    @property
    def configured(self) -> bool:
        return bool(self.ca_file or self.cert_file or self.key_file or self.insecure)


def _parsed(uri: str) -> BrokerUri:
    try:
        return parse_broker_uri(uri)
    except BrokerUriError as exc:
        raise TlsError(exc.message) from None


def tls_options(uri: str) -> TlsOptions:
    """The TLS settings in a broker URI's query (see the module doc)."""
    query = _parsed(uri).query_params
    verify = query.get(VERIFY_PARAMETER, VERIFY_PEER)
    if verify not in (VERIFY_PEER, VERIFY_NONE):
        raise TlsError(
            f"uri parameter verify must be {VERIFY_PEER} or {VERIFY_NONE}, got {verify!r}"
        )
    return TlsOptions(
        ca_file=query.get(CA_PARAMETER, ""),
        cert_file=query.get(CERT_PARAMETER, ""),
        key_file=query.get(KEY_PARAMETER, ""),
        insecure=verify == VERIFY_NONE,
    )


def with_tls_options(uri: str, options: TlsOptions) -> str:
    """``uri`` with ``options`` set in its query (others kept; empty options left as they
    were). Relative file names become absolute: worker processes may run elsewhere.
    """
    if not options.configured:
        return uri
    parsed = _parsed(uri)
    query = parsed.query_params
    for name, value in (
        (CA_PARAMETER, options.ca_file),
        (CERT_PARAMETER, options.cert_file),
        (KEY_PARAMETER, options.key_file),
    ):
        if value:
            query[name] = str(Path(value).expanduser().absolute())
    if options.insecure:
        query[VERIFY_PARAMETER] = VERIFY_NONE
    return str(parsed.with_query(urlencode(query, safe="/")))


def ssl_context(options: TlsOptions) -> ssl.SSLContext:
    """A client context: the CA file (or the system's CAs), the client certificate if one
    is given, and verification unless ``insecure``. Raises TlsError naming the bad file.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if options.ca_file:
        authorities = read_pem("CA file", options.ca_file, "--ca-file / cacertfile")
        try:
            context.load_verify_locations(cadata=authorities)
        except (ssl.SSLError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or "no PEM certificate in it"
            raise TlsError(
                f"CA file {printable(options.ca_file)} holds no usable certificate ({reason}); "
                "give a PEM file with the CA that signed the broker's certificate"
            ) from None
    if options.key_file and not options.cert_file:
        raise TlsError(
            f"a client key ({options.key_file}) needs its certificate too: add --cert-file"
        )
    if options.cert_file:
        read_pem("client certificate", options.cert_file, "--cert-file / certfile")
        if options.key_file:
            read_pem("client key", options.key_file, "--key-file / keyfile")
        try:
            context.load_cert_chain(options.cert_file, options.key_file or None)
        except ssl.SSLError as exc:
            raise TlsError(
                f"client certificate {options.cert_file} and key "
                f"{options.key_file or '(in the same file)'} do not load ({exc.reason}); "
                "give PEM files of a certificate and its private key"
            ) from None
    if options.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def context_for_uri(uri: str) -> ssl.SSLContext | None:
    """The context an ``amqps://`` URI needs; None for plain ``amqp://``."""
    if not _parsed(uri).tls:
        return None
    return ssl_context(tls_options(uri))


def http_verify(uri: str) -> ssl.SSLContext | bool:
    """What to give httpx as ``verify`` for the management API of the broker at ``uri``:
    the same trust and client certificate as AMQP when the URI has TLS settings, else
    True (the system's CAs).
    """
    options = tls_options(uri)
    if not options.configured:
        return True
    return ssl_context(options)


def http_context(uri: str) -> ssl.SSLContext:
    """:func:`http_verify` as a context in every case: for ``True``, httpx's own default
    (certifi's CAs). httpx builds that default for each client it is given ``True``,
    reading the CA bundle each time (~75 ms, even for ``http://``); a caller on an event
    loop builds this once, in a thread, and gives it to all its clients.
    """
    verify = http_verify(uri)
    if isinstance(verify, ssl.SSLContext):
        return verify
    import httpx

    return httpx.create_ssl_context()


def read_pem(what: str, path: str, option: str) -> str:
    """The text of a CA, certificate or key file, read within bounds (a FIFO, a device, a
    directory or a file over 1 MiB refused in one line naming ``option``)."""
    try:
        return read_file_text(path, what=what, limit=PEM_FILE_LIMIT)
    except UnreadableFile as exc:
        raise TlsError(f"{exc.message}; check {option}") from None
