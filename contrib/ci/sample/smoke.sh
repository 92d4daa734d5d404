#!/bin/sh
# A stand-in for an integration test that leaves a server log behind (say `docker compose up`
# plus an end-to-end suite). It writes logs/server.log; the gate step scans it afterwards.
#   SAMPLE_ERROR=1   the server logs an ERROR   (the server-log gate is crossed)
mkdir -p logs
{
    echo "2026-05-16T12:00:00Z INFO server listening on :8080"
    echo "2026-05-16T12:00:01Z INFO GET /health 200 1ms"
    if [ "${SAMPLE_ERROR:-0}" = 1 ]; then
        echo "2026-05-16T12:00:02Z ERROR db: connection refused (retrying)"
    fi
    echo "2026-05-16T12:00:03Z INFO POST /orders 201 12ms"
    echo "2026-05-16T12:00:04Z INFO shutting down"
} > logs/server.log
echo "smoke test done: logs/server.log"
