"""A small HTTP/1.1 client on asyncio streams for webhooks: one POST per connection, TLS with
the system's trust store, one deadline over the whole exchange, a bounded response read (a
success's body not at all), and cancellable at every await (no thread is left behind by a
hanging server; a host name is looked up by `resolve.py`)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import os
import socket
import ssl
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit

from msgspec import Struct

from watchrun import __version__
from watchrun.actions.resolve import connect, is_address, lookup

__all__ = ["BODY_BYTES", "HEAD_BYTES", "HttpError", "Response", "basic_credentials", "post"]

HEAD_BYTES = 64 * 1024
"""The status line and headers of a response together; more is a protocol error."""
BODY_BYTES = 4096
"""Of a response body, only this much is read (an error's explanation, for the record)."""


class Response(Struct, frozen=True):
    status: int
    reason: str
    body: bytes
    """Its first BODY_BYTES bytes (de-chunked), as far as they came before the deadline; empty
    for a 2xx, whose body is not read (the status is the answer)."""
    retry_after: float | None = None
    """Seconds from a `Retry-After: N` header, when the server sent one."""


class HttpError(Exception):
    """No response: `code` is `timeout`, `connect`, `tls` or `protocol`. The message names the
    host, never the URL's path or query (which may hold a secret)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_context: ssl.SSLContext | None = None


def _tls() -> ssl.SSLContext:
    global _context
    if _context is None:
        _context = ssl.create_default_context()
    return _context


def basic_credentials(url: str) -> str:
    """The `Basic` credentials of a URL's `user:password@` (base64)."""
    parts = urlsplit(url)
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    return base64.b64encode(pair).decode()


async def post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float,
               content_type: str = "application/json") -> Response:
    """POST `body` to `url`; the response, or HttpError. Redirects are not followed."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    where = f"{host}:{port}"
    fields = {"Host": parts.netloc.rsplit("@", 1)[-1], "User-Agent": f"watchrun/{__version__}",
              "Content-Type": content_type, "Content-Length": str(len(body)),
              "Connection": "close"}
    if parts.username is not None and not any(k.lower() == "authorization" for k in headers):
        fields["Authorization"] = "Basic " + basic_credentials(url)
    fields.update(headers)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = f"POST {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    writer: asyncio.StreamWriter | None = None
    until = asyncio.get_running_loop().time() + timeout_s
    waiting = "no response"
    try:
        async with asyncio.timeout_at(until):
            sock: socket.socket | None = None
            if not is_address(host):
                waiting = "the DNS lookup did not answer"
                infos = await lookup(host, port)
                waiting = "no response"
                sock = await connect(infos)
            try:
                reader, writer = await asyncio.open_connection(
                    host if sock is None else None, port if sock is None else None, sock=sock,
                    ssl=_tls() if https else None, limit=HEAD_BYTES,
                    server_hostname=host if https else None)
            except BaseException:
                if sock is not None:
                    sock.close()
                raise
            writer.write(head.encode() + b"\r\n" + body)
            # the answer is read while the body goes out: a receiver may answer (413) and
            # close before it read the body, and then the rest of it meets a reset connection
            sending = asyncio.ensure_future(writer.drain())
            try:
                status, reason, fields = await _final_head(reader)
            finally:
                sending.cancel()
                sending.add_done_callback(_retrieve)
            retry_after = _retry_after(fields.get("retry-after", ""))
        answer = b"" if 200 <= status < 300 else await _body(reader, fields, until)
        return Response(status, reason, answer, retry_after)
    except TimeoutError:
        raise HttpError("timeout", f"{where}: {waiting} within {timeout_s:g} s") from None
    except ssl.SSLError as exc:
        raise HttpError("tls", f"{where}: TLS failed: {exc.reason or exc}") from None
    except (OSError, EOFError) as exc:
        why = _why(exc)
        code = "protocol" if isinstance(exc, EOFError | ConnectionResetError) else "connect"
        raise HttpError(code, f"{where}: {why or type(exc).__name__}") from None
    except (ValueError, asyncio.LimitOverrunError) as exc:
        raise HttpError("protocol", f"{where}: bad response: {exc}") from None
    finally:
        if writer is not None:
            writer.transport.abort()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _retrieve(done: asyncio.Future[None]) -> None:
    """A send that failed after its answer came (the receiver closed): nothing to report."""
    if not done.cancelled():
        done.exception()


async def _final_head(reader: asyncio.StreamReader) -> tuple[int, str, dict[str, str]]:
    """The final response's status, reason and header fields; a 2xx's fields are not read (its
    status line is the answer: headers that never end must not make it a timeout)."""
    while True:  # 1xx responses (100 Continue) come before the real one
        status, reason, size = await _status_line(reader)
        if 200 <= status < 300:
            return status, reason, {}
        fields = await _fields(reader, size)
        if status >= 200:
            return status, reason, fields


async def _body(reader: asyncio.StreamReader, fields: dict[str, str], until: float) -> bytes:
    """The start of an error response's body (the server's explanation, for the record): what
    of it came before the deadline `until`, however it ends (a stall, a reset, a bad chunk),
    since the status already is the answer."""
    got = bytearray()
    with contextlib.suppress(TimeoutError, OSError, EOFError, ValueError,
                             asyncio.LimitOverrunError):
        async with asyncio.timeout_at(until):
            if fields.get("transfer-encoding", "").lower().endswith("chunked"):
                await _chunked(reader, got)
            else:
                length = fields.get("content-length", "")
                n = BODY_BYTES
                if length.isascii() and length.isdigit():
                    n = min(int(length), BODY_BYTES)
                await _read_up_to(reader, n, got)
    return bytes(got)


def _retry_after(value: str) -> float | None:
    """Seconds from now by a `Retry-After` header: delay-seconds, or an HTTP-date (RFC 9110
    10.2.3); None when there is none or it cannot be read."""
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None  # (not an IMF-fixdate: HTTP dates are GMT)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


async def _status_line(reader: asyncio.StreamReader) -> tuple[int, str, int]:
    """The status, the reason phrase and the line's length."""
    line = await reader.readline()
    if not line:
        raise EOFError("the server closed the connection without a response")
    version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not (
            len(code) == 3 and code.isascii() and code.isdigit() and "1" <= code[0] <= "5"):
        # (its start, up to 1 KiB: the caller hides the action's secrets in it, then cuts it)
        raise ValueError(f"not an HTTP/1.x status line: {line[:1024].decode('latin-1')}")
    return int(code), reason, len(line)


async def _fields(reader: asyncio.StreamReader, size: int) -> dict[str, str]:
    """The header fields after a status line of `size` bytes, names lowercased."""
    fields: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        size += len(raw)
        if size > HEAD_BYTES:
            raise ValueError(f"response head longer than {HEAD_BYTES} bytes")
        name, _, value = raw.decode("latin-1").partition(":")
        fields[name.strip().lower()] = value.strip()
    return fields


async def _read_up_to(reader: asyncio.StreamReader, n: int, data: bytearray) -> None:
    """Read into `data` until it holds `n` bytes or the stream ends."""
    while len(data) < n and (more := await reader.read(n - len(data))):
        data += more


async def _chunked(reader: asyncio.StreamReader, data: bytearray) -> None:
    while len(data) < BODY_BYTES:
        size_line = (await reader.readline()).split(b";")[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            break
        if size == 0:
            break
        want = len(data) + min(size, BODY_BYTES - len(data))
        await _read_up_to(reader, want, data)
        if len(data) < BODY_BYTES:
            await reader.readline()  # the CRLF after the chunk


def _why(exc: OSError | EOFError) -> str:
    """What went wrong, in words: a refused or reset connection by its errno's text
    ("Connection refused", not asyncio's "Connect call failed ('127.0.0.1', 1)"); others by
    their own (a name lookup's, the resolver's)."""
    if isinstance(exc, ConnectionError) and exc.errno:
        return os.strerror(exc.errno)
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
