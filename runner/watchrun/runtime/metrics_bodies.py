"""The `/metrics` bodies: built one at a time on the loop, spaced so that scraping, however
often, takes at most SCRAPE_SHARE of the loop's time; none is older than its request."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

__all__ = ["SCRAPE_SHARE", "Bodies", "Response", "plain"]

SCRAPE_SHARE = 0.1
"""The most of the loop's time bodies take to build (about 0.1 ms a watcher, 57 ms for 500):
after one took T, the next is built no sooner than T / SCRAPE_SHARE - T after it ended; a
scrape that comes sooner waits for it. Back-to-back scrapers held the loop most of the time,
and a flood of matches 1.4 s long took 41 s under 16 of them."""
KEPT = 8
"""Bodies kept for the scrapes that waited while they were built (one per format, encoding
and `name[]` filter)."""

Response = tuple[str, list[tuple[str, str]], bytes]
"""Status line, headers, body."""
Key = tuple[str, tuple[str, ...], bool]
"""What a body is: its content type, its `name[]` filters, gzipped or not."""


class Bodies:
    """The bodies of `registry`, for the requests' `Accept`, `Accept-Encoding` and `name[]`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._building = asyncio.Lock()
        self._next = 0.0  # the loop time from which the next body may be built
        self._built: dict[Key, tuple[float, Response]] = {}
        """The last bodies built, by what they are, with the loop time their build began."""

    async def answer(self, fields: dict[str, str], query: dict[str, list[str]]) -> Response:
        """A body built after the request came: one built while it waited for its turn, or one
        built now, once the spacing since the last build has passed."""
        encoder, content_type = choose_encoder(fields.get("accept", ""))
        key = (content_type, tuple(query.get("name[]", ())),
               gzip_accepted(fields.get("accept-encoding", "")))
        loop = asyncio.get_running_loop()
        came = loop.time()
        async with self._building:
            kept = self._built.pop(key, None)
            if kept is not None and kept[0] >= came:
                self._built[key] = kept
                return kept[1]
            await asyncio.sleep(max(0.0, self._next - loop.time()))
            began = loop.time()
            try:
                response = _encoded(self.registry, encoder, key)
            except Exception as exc:  # a bug in a collector: say so, keep serving
                response = plain("500 Internal Server Error", f"cannot collect: {exc!r}\n")
            ended = loop.time()
            self._next = ended + (ended - began) * (1 / SCRAPE_SHARE - 1)
            self._built[key] = began, response
            if len(self._built) > KEPT:
                del self._built[next(iter(self._built))]
            return response


def _encoded(registry: CollectorRegistry, encoder: Callable[[Any], bytes], key: Key) -> Response:
    content_type, names, gzipped = key
    body = encoder(registry.restricted_registry(names) if names else registry)
    headers = [("Content-Type", content_type)]
    if gzipped:
        body = gzip.compress(body)
        headers.append(("Content-Encoding", "gzip"))
    return "200 OK", headers, body


def plain(status: str, text: str) -> Response:
    """A text/plain response."""
    return status, [("Content-Type", "text/plain; charset=utf-8")], text.encode()
