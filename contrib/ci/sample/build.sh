#!/bin/sh
# A stand-in for a real build (say `make && make test`): it compiles, runs the unit tests and
# prints what a build prints. Knobs for trying the gates out:
#   SAMPLE_WARN=1   the compiler prints a warning       (gate.maxMatches: 0 is crossed)
#   SAMPLE_FAIL=1   a unit test fails and the build exits 1   (gate.exitCode and gate.require)
set -e
echo "cc -Wall -O2 -c src/main.c -o build/main.o"
if [ "${SAMPLE_WARN:-0}" = 1 ]; then
    echo "src/main.c:12:9: warning: unused variable 'retries' [-Wunused-variable]"
fi
echo "cc build/main.o -o build/app"
echo "running 3 unit tests"
echo "test_parse ... ok"
echo "test_render ... ok"
if [ "${SAMPLE_FAIL:-0}" = 1 ]; then
    echo "test_retry ... FAILED: expected 3, got 2"
    echo "1 of 3 tests failed"
    exit 1
fi
echo "test_retry ... ok"
echo "3 tests passed"
