# syntax=docker/dockerfile:1
# watchrun's container image: the wheel and its dependencies are built in one stage and
# installed into a slim runtime that runs as an unprivileged user (uid 10001).
#
#   docker build -t ghcr.io/OWNER/watchrun:0.1.0 .
#   docker run --rm -v "$PWD:/work:ro" ghcr.io/OWNER/watchrun:0.1.0 validate -c /work/watch.yaml
#
# The Kubernetes examples in contrib/kubernetes/ use this image: replace OWNER with the
# registry path you push it to. watchrun is fine as PID 1: it handles SIGTERM/SIGINT/SIGHUP
# itself and reaps orphaned processes (it is a subreaper).
ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY runner/ runner/
RUN python -m pip install --no-cache-dir "build>=1.2" \
 && python -m build --wheel --outdir /wheels \
 && python -m pip wheel --no-cache-dir --wheel-dir /wheels /wheels/watchrun-*.whl

FROM python:${PYTHON_VERSION}-slim AS runtime
LABEL org.opencontainers.image.title="watchrun" \
      org.opencontainers.image.description="Tail files and commands, match lines, supervise AI coding agents, write JSONL." \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 watchrun \
 && useradd --system --uid 10001 --gid watchrun --home-dir /var/lib/watchrun \
      --no-create-home --shell /usr/sbin/nologin watchrun \
 && install -d -o watchrun -g watchrun -m 0750 /var/lib/watchrun \
 && install -d -m 0755 /etc/watchrun
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-cache-dir --no-index --find-links /wheels watchrun \
 && watchrun --version
ENV PYTHONDONTWRITEBYTECODE=1
WORKDIR /var/lib/watchrun
USER 10001:10001
EXPOSE 9464
ENTRYPOINT ["watchrun"]
CMD ["run", "-c", "/etc/watchrun/watch.yaml", "--output-dir", "/var/lib/watchrun", "--log-format", "json", "--metrics", "0.0.0.0:9464"]
