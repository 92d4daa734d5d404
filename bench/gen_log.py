# Copied unchanged (below this header) from ../shared/bench/gen_log.py, the realistic log generator
# the performance anchors and issue #14 use (access, app, Java and JSON lines, ~15 % non-ASCII,
# --error-rate ERROR/FATAL lines). Kept here so the benchmarks run from this repository alone.
#!/usr/bin/env python3
"""Generate a deterministic, realistic mixed log file for the watch-runner benchmarks.

Line mix (by construction, seeded, reproducible):
  * nginx-style access lines, app lines (ISO timestamp + level + logger), Java-style
    lines and JSON lines; 80-200 bytes each (avg ~125 B), ~15% contain non-ASCII UTF-8
    (accented names, CJK, emoji).
  * ~0.20% "real" error lines containing upper-case ERROR or FATAL.
  * a few "healthcheck ERROR" lines (~0.01%) that the exclude regex must drop.
  * ~0.05% lines with lower/mixed-case "error"/"fatal" (e.g. "errors=0", "/error.png",
    "[error]", "Fatal:") -- they match only the case-INSENSITIVE pattern, which is the
    product's default. This is why case-sensitive and case-insensitive tools are
    checked in two separate groups.

Usage:
  gen_log.py --out data/static.log --size-mb 300 [--seed 42] [--error-rate 0.002]

The module also exposes make_line(rng, kind=None) for the tail writer.
"""
import argparse
import os
import random
import sys

METHODS = ["GET"] * 8 + ["POST"] * 3 + ["PUT", "DELETE", "PATCH", "HEAD"]
PATHS = [
    "/api/v1/orders/{n}", "/api/v1/users/{n}/profile", "/api/v2/search?q={w}&page={p}",
    "/static/js/app.{h}.js", "/static/css/main.{h}.css", "/img/products/{n}.webp",
    "/checkout/cart", "/login", "/logout", "/api/v1/inventory/{n}?warehouse=eu-{p}",
    "/feeds/rss.xml", "/robots.txt", "/favicon.ico", "/api/v1/payments/{n}/capture",
]
STATUSES = [200] * 40 + [201, 204, 301, 302, 304, 304, 400, 401, 403, 404, 404, 429, 500, 502, 503]
AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0", "curl/8.4.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1) Mobile/15E148", "Go-http-client/1.1",
    "python-requests/2.31.0", "Googlebot/2.1", "okhttp/4.12.0",
]
WORDS = ["alpha", "beta", "shoes", "laptop", "coffee", "garden", "lamp", "book", "café",
         "naïve", "größe", "東京", "ラーメン", "emoji-🚀", "smörgåsbord", "jalapeño"]
USERS = ["alice", "bob", "carol", "dave", "eve", "José", "Zoë", "Ægir", "Łukasz",
         "François", "Müller", "王芳", "Søren", "mallory", "trent", "peggy"]
LOGGERS = ["orders.service", "db.pool", "http.client", "auth.jwt", "cache.redis",
           "payments.gateway", "search.indexer", "mail.sender", "scheduler", "metrics"]
JLOGGERS = ["c.e.shop.OrderController", "c.e.shop.PaymentClient", "o.h.engine.jdbc.spi",
            "c.e.shop.InventorySync", "o.s.web.servlet.DispatcherServlet"]
INFO_MSGS = [
    "processed order id={n} user={u} items={p} took={t}ms",
    "cache hit key=user:{n} ttl={p}s",
    "cache miss key=product:{n} loading from db",
    "request completed path=/api/v1/orders/{n} status=200 took={t}ms",
    "user {u} logged in from 198.51.100.{p}",
    "scheduled job reindex-{p} finished in {t}ms rows={n}",
    "sent mail template=welcome to={u}@example.com",
    "payment authorized amount={n}.{p} EUR user={u}",
    "search query='{w}' results={p} took={t}ms",
    "connection pool stats active={p} idle={t} waiting=0",
]
WARN_MSGS = [
    "slow query took={t}ms table=orders rows={n}",
    "retrying request attempt={p} upstream=payments",
    "rate limit approaching user={u} remaining={p}",
    "deprecated endpoint used path=/api/v1/legacy/{n}",
]
ERROR_MSGS = [
    ("ERROR", "connection reset by peer upstream=10.0.{p}.{t}:5432"),
    ("ERROR", "failed to process order id={n}: timeout after {t}ms"),
    ("ERROR", "payment declined user={u} code=E{p}{t}"),
    ("ERROR", "unhandled exception in worker-{p}: KeyError('{w}')"),
    ("ERROR", "could not write to /var/lib/app/spool/{n}.tmp: disk full"),
    ("FATAL", "out of memory while allocating {n} bytes, shutting down"),
    ("FATAL", "config reload failed: missing key 'db.url' (user={u})"),
]
# match only case-insensitively ("error"/"fatal" in lower or mixed case)
LOWER_MSGS = [
    "metrics flushed requests={n} errors=0 retries={p}",
    "[error] upstream timed out while reading response header ({p})",
    "Fatal: could not acquire lock on /tmp/job-{n}.lock",
    "retrying after transient error (attempt {p}) user={u}",
    "static asset served path=/img/error-{p}.png bytes={n}",
]
HEALTH_MSG = "ERROR healthcheck ERROR: GET /healthz returned 503 after {t}ms"


def _fill(rng, tmpl):
    return tmpl.format(
        n=rng.randint(1000, 999999), p=rng.randint(1, 99), t=rng.randint(1, 4999),
        u=rng.choice(USERS), w=rng.choice(WORDS), h="%08x" % rng.getrandbits(32),
    )


def _ts(rng, sec):
    return "2025-11-29T%02d:%02d:%02d.%03dZ" % ((sec // 3600) % 24, (sec // 60) % 60, sec % 60,
                                               rng.randint(0, 999))


def make_line(rng, kind=None, sec=0):
    """Return one log line (str, no newline). kind: None(random)|'error'|'lower'|'health'|'normal'."""
    if kind is None:
        r = rng.random()
        if r < 0.0020:
            kind = "error"
        elif r < 0.0025:
            kind = "lower"
        elif r < 0.0026:
            kind = "health"
        else:
            kind = "normal"
    ts = _ts(rng, sec)
    if kind == "error":
        lvl, msg = rng.choice(ERROR_MSGS)
        line = "%s %s [worker-%d] %s: %s" % (ts, lvl, rng.randint(1, 16), rng.choice(LOGGERS),
                                            _fill(rng, msg))
    elif kind == "lower":
        line = "%s INFO  [worker-%d] %s: %s" % (ts, rng.randint(1, 16), rng.choice(LOGGERS),
                                               _fill(rng, rng.choice(LOWER_MSGS)))
    elif kind == "health":
        line = "%s [probe] lb.health: %s" % (ts, _fill(rng, HEALTH_MSG))
    else:
        r = rng.random()
        if r < 0.45:  # nginx access log
            path = _fill(rng, rng.choice(PATHS))
            line = '203.0.113.%d - - [29/Nov/2025:%02d:%02d:%02d +0000] "%s %s HTTP/1.1" %d %d "-" "%s" rt=0.%03d' % (
                rng.randint(1, 254), (sec // 3600) % 24, (sec // 60) % 60, sec % 60,
                rng.choice(METHODS), path, rng.choice(STATUSES), rng.randint(0, 99999),
                rng.choice(AGENTS), rng.randint(0, 999))
        elif r < 0.80:  # app log
            lvl, msgs = ("WARN ", WARN_MSGS) if rng.random() < 0.1 else ("INFO ", INFO_MSGS)
            line = "%s %s [worker-%d] %s: %s" % (ts, lvl, rng.randint(1, 16), rng.choice(LOGGERS),
                                                _fill(rng, rng.choice(msgs)))
        elif r < 0.92:  # java style
            line = "2025-11-29 %02d:%02d:%02d,%03d INFO  [pool-2-thread-%d] %s - %s" % (
                (sec // 3600) % 24, (sec // 60) % 60, sec % 60, rng.randint(0, 999),
                rng.randint(1, 32), rng.choice(JLOGGERS), _fill(rng, rng.choice(INFO_MSGS)))
        else:  # json
            line = '{"ts":"%s","level":"info","svc":"%s","msg":"%s","trace":"%016x"}' % (
                ts, rng.choice(LOGGERS), _fill(rng, rng.choice(INFO_MSGS)).replace("'", ""),
                rng.getrandbits(64))
    # enforce 80..200 bytes (UTF-8)
    b = line.encode("utf-8")
    if len(b) < 80:
        line += " req_id=%032x" % rng.getrandbits(128)
        b = line.encode("utf-8")
        if len(b) < 80:
            line += " pad=" + "x" * (80 - len(b) - 5)
    if len(b) > 200:
        line = b[:200].decode("utf-8", "ignore")
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size-mb", type=float, default=300)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--error-rate", type=float, default=0.0020, help="share of ERROR/FATAL lines (default 0.002)")
    a = ap.parse_args()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    e = a.error_rate
    rng = random.Random(a.seed)
    target = int(a.size_mb * 1024 * 1024)
    written = 0
    nlines = 0
    kinds = {"error": 0, "lower": 0, "health": 0}
    with open(a.out + ".tmp", "wb") as f:
        buf = []
        while written < target:
            sec = nlines // 2000  # ~2000 lines per simulated second
            r = rng.random()
            kind = ("error" if r < e else "lower" if r < e + 0.0005 else
                    "health" if r < e + 0.0006 else "normal")
            if kind != "normal":
                kinds[kind] += 1
            line = make_line(rng, kind, sec).encode("utf-8") + b"\n"
            buf.append(line)
            written += len(line)
            nlines += 1
            if len(buf) >= 10000:
                f.write(b"".join(buf))
                buf.clear()
        f.write(b"".join(buf))
    os.replace(a.out + ".tmp", a.out)
    print("wrote %s: %d bytes, %d lines, avg %.1f B/line, generated kinds=%s" % (
        a.out, written, nlines, written / nlines, kinds), file=sys.stderr)


if __name__ == "__main__":
    main()
