"""The typed, immutable configuration model that every other module reads."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from msgspec import Struct, field

from watchrun.match.redact import Redactor, Rule, redactor


class RestartPolicy(StrEnum):
    NEVER = "never"
    ON_FAILURE = "on-failure"
    ALWAYS = "always"


class Limits(Struct, frozen=True):
    """Runner-wide limits (SPEC §3.1), already clamped into their ranges."""

    enabled: bool = True
    wake_on_match: bool = False
    max_watchers: int = 20
    max_agents: int = 8
    max_matches: int = 200
    max_log_lines: int = 500
    match_lines: int = 50
    poll_ms: int = 500
    max_line_bytes: int = 65536
    max_event_bytes: int = 16 * 1024 * 1024
    stop_timeout_ms: int = 5000
    max_generations: int = 10
    """Unread rotated generations of a file read after a stop or stall (the newest ones)."""
    rotate_wait_ms: int = 5000
    """A rotated-away file is read until it has not grown for this long."""
    once_write_ms: int = 5000
    """A once run (and `agent run`) retries a failing write this long, then gives it up."""


class OutputSpec(Struct, frozen=True):
    """Where JSONL, state and the control socket go, and how JSONL files rotate."""

    dir: Path
    max_bytes: int = 64 * 1024 * 1024
    keep: int = 5
    redact: bool = False
    """Redact secrets in match records too (prompts are always redacted)."""


class GateSpec(Struct, frozen=True):
    """A CI gate on one watcher (SPEC §8)."""

    max_matches: int | None = None
    """Crossed when the watcher's matches exceed this number."""
    exit_code: bool = False
    """Crossed when the command exits non-zero (command watchers)."""
    require: str | None = None
    """A pattern that must appear at least once, else the gate is crossed."""


class ThresholdSpec(Struct, frozen=True):
    """`when: {threshold: "N in WINDOW"}`: fire when N matches fall within WINDOW."""

    count: int
    window_ms: int


BODY_BYTES = 1024 * 1024
"""The default `maxBodyBytes` of an action (nginx takes 1 MiB by default)."""


class ActionSpec(Struct, frozen=True):
    """A reaction to a watcher's matches (SPEC §3.4): POST a webhook or run a program."""

    name: str
    """Unique within its watcher; names the action in records, logs and metrics."""
    type: str
    """`webhook` or `exec`."""
    threshold: ThresholdSpec | None = None
    """None: every batch of matches fires (`when: match`)."""
    throttle_ms: int | None = None
    """At most one firing per this window; the rest are suppressed, counted and passed on."""
    timeout_ms: int = 10_000
    """One webhook attempt, or one run of the program."""
    concurrency: int = 1
    """Firings of this action in flight at once."""
    queue: int = 100
    """Firings waiting beyond `concurrency`; more are dropped and counted."""
    max_body_bytes: int = BODY_BYTES
    """A firing's body (webhook) or stdin (exec) at most: lines that do not fit are left out
    (`omitted`), one that alone does not is clipped (`truncated`)."""
    url: str | None = None
    format: str = "json"
    """Webhook body: `json` (the generic payload) or `slack` (an incoming-webhook message)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    retries: int = 3
    """Webhook: attempts after the first on a 5xx, a timeout or a connection error."""
    command: tuple[str, ...] = ()
    """Exec: argv (never a shell string)."""
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def origin(self) -> str:
        """What records and logs may show of the target: `scheme://host[:port]` of a webhook
        (its path and query often hold the secret, as Slack's do), the program of an exec."""
        if self.type == "exec":
            return self.command[0] if self.command else ""
        scheme, _, rest = (self.url or "").partition("://")
        host = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
        return f"{scheme}://{host}"


class WatcherSpec(Struct, frozen=True):
    """One watcher: a file or a command, a pattern, and what to do on a match."""

    id: str
    label: str
    pattern: str
    exclude: tuple[str, ...] = ()
    case_sensitive: bool = False
    path: Path | None = None
    """Absolute path of the watched file (file watchers)."""
    command: str | tuple[str, ...] | None = None
    """A string runs under /bin/sh -c; a tuple runs as argv (command watchers)."""
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    from_start: bool = False
    wake: tuple[str, ...] = ()
    """Names of the agents woken by a match (resolved: `true` becomes every agent)."""
    restart: RestartPolicy = RestartPolicy.NEVER
    restart_delay_ms: int = 1000
    schedule: str | None = None
    gate: GateSpec | None = None
    actions: tuple[ActionSpec, ...] = ()
    """Reactions to its matches (webhook, exec), each gated by its own threshold and throttle."""
    backtracking: bool = False
    """Patterns that need Python `re` are allowed; they run in a worker under a time budget."""
    previous_id: str | None = None
    """File watchers: the id this watcher had before; its checkpoint is adopted."""

    @property
    def kind(self) -> str:
        return "file" if self.path is not None else "command"


class AgentSpec(Struct, frozen=True):
    """One agent: a coding-agent CLI run one turn at a time."""

    name: str
    provider: str
    command: tuple[str, ...]
    """argv template; `{prompt}` is replaced by the prompt as one whole argument."""
    prompt: str
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    schedule: str | None = None
    deadline_ms: int | None = None
    idle_timeout_ms: int | None = None
    until: str | None = None
    pty: bool = False
    max_turns: int = 100
    redact: tuple[Rule, ...] = ()
    """The config's `redact:` rules and its `${VAR}` secrets' (`config/secrets.py`), applied
    with the built-in ones to every prompt."""
    depends_on: tuple[str, ...] = ()
    """Agents whose answers this one needs: woken together, they run as a plan (SPEC §3.3)."""


class Config(Struct, frozen=True):
    """The whole resolved configuration."""

    limits: Limits
    output: OutputSpec
    watchers: tuple[WatcherSpec, ...] = ()
    agents: tuple[AgentSpec, ...] = ()
    sources: tuple[Path, ...] = ()
    """The config files it was loaded from, in layering order."""
    empty: tuple[Path, ...] = ()
    """Those of them with no settings (a layer that adds nothing: a warning)."""
    redact: tuple[Rule, ...] = ()
    """`redact:` rules added to the built-in secret rules (`match/redact.py`), and a `known`
    rule for each `${VAR}` value the config puts where a secret goes (`config/secrets.py`)."""

    def watcher(self, wid: str) -> WatcherSpec | None:
        return next((w for w in self.watchers if w.id == wid), None)

    def agent(self, name: str) -> AgentSpec | None:
        return next((a for a in self.agents if a.name == name), None)

    def missing_agents(self, spec: WatcherSpec) -> list[str]:
        """The agents `spec` wakes that this config does not have (a runtime watcher's, after
        a reload removed them: its matches would wake no one)."""
        return [n for n in spec.wake if self.agent(n) is None]

    def records_redactor(self) -> Redactor | None:
        """What redacts the text records and snapshots hold: with `output.redact`, else None."""
        return redactor(self.redact) if self.output.redact else None
