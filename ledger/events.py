"""The one vocabulary of ralph-ledger: every event a loop can record.

Each event is a frozen msgspec Struct with an explicit, permanent tag (the ``type`` field of a
journal line). The rules for evolving this module (a tag is never renamed; a field is never renamed,
removed or retyped; a field added later has a default; unknown fields are skipped; a field name
means one thing in every event), checked by ``tests/unit/test_events.py``:
docs/ledger.md#schema-evolution-rules.
"""

# No ``from __future__ import annotations`` here: msgspec would then compile every annotation string
# to build the decoder below, which costs each Stop hook process about 1 ms.
from datetime import UTC, datetime
from typing import Any, Final, Literal, get_args

import msgspec

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

Signal = Literal["CONTINUE", "COMPLETE", "BLOCKED", "ESCALATE"]
HookAction = Literal["complete", "continue", "escalate"]
StopDecision = Literal["allow", "block"]
SessionStatus = Literal["running", "complete", "blocked", "escalated"]
"""A session's status (the ``sessions`` view's ``status``): running until an event ends it."""
SESSION_STATUSES: Final[tuple[SessionStatus, ...]] = get_args(SessionStatus)
ENDING_STATUS: Final[dict[str, SessionStatus]] = {
    "session_completed": "complete",
    "session_blocked": "blocked",
    "session_escalated": "escalated",
}
"""The event type that ends a session -> the status it leaves (``sql/views/sessions.sql`` says the same)."""


def session_status(value: object) -> SessionStatus:
    """``value`` (a ``sessions`` row's ``status``) as a ``SessionStatus``; ``ValueError`` when it is none
    of ``SESSION_STATUSES`` (the view and this Literal disagree)."""
    for status in SESSION_STATUSES:
        if value == status:
            return status
    raise ValueError(f"unknown session status {value!r} (expected one of {', '.join(SESSION_STATUSES)})")


class Payload(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A nested value carried inside an event."""


class TokenUsage(Payload, frozen=True, kw_only=True, gc=False):
    """Token counts of one agent turn (Claude's ``message.usage`` names)."""

    input: int = 0
    output: int = 0
    cache_creation: int = 0
    cache_read: int = 0


class RuleSpec(Payload, frozen=True, kw_only=True, gc=False):
    """A validation rule as configured (what it is, not how it went)."""

    name: str
    type: str
    cadence: str = "cheap"
    enabled: bool = True


class RuleResult(Payload, frozen=True, kw_only=True, gc=False):
    """The outcome of one validation rule in one iteration."""

    name: str
    type: str
    passed: bool
    errored: bool = False
    duration_ms: float = 0.0
    message: str = ""


class TaskSpec(Payload, frozen=True, kw_only=True, gc=False):
    """One task of a task-list loop as the loop started with it (``ledger.loop.tasks``): its
    ``task_no`` (1-based position in the list), ``title``, ``description``, its ``key`` in the file
    (a prd.json story's ``id``; "" for other formats), the validation ``rules`` of its own (rule
    tables, as ``ralph.toml``'s), its own ``max_iterations`` (None: only the loop's) and whether the
    file said it was ``done`` already (such a task is never started)."""

    task_no: int
    title: str
    description: str = ""
    key: str = ""
    rules: list[dict[str, Any]] = []
    max_iterations: int | None = None
    done: bool = False


class Event(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type"):
    """Envelope shared by every event.

    ``seq`` is assigned by the journal on append (1-based, per session, no
    gaps); ``iteration`` is 0 before the first iteration starts. ``prev``, also set on append, links
    the event to the line before it in its journal (its hash: ``ledger.storage.chain``); "" in
    journals written before the chain and in events not yet written.
    """

    session_id: str
    seq: int = 0
    ts: datetime = EPOCH
    iteration: int = 0
    prev: str = ""


class SessionStarted(Event, frozen=True, kw_only=True, gc=False, tag="session_started"):
    """A loop began; carries the loop's configuration. ``prompt`` and ``command`` are what the loop
    runner (``ralph-ledger run``) feeds and starts each iteration, empty for loops driven otherwise;
    ``worktree`` and ``branch`` the git worktree (its root) and branch it runs in (``run --worktree``),
    empty when it runs in the project's own checkout. ``task_kind`` is the configured kind of task
    (``kind``; "" when none); ``max_iterations_reason`` says how ``max_iterations`` was chosen when the
    configuration asked for ``"auto"`` ("" otherwise). ``work_dir`` is the folder a runner's agent works
    in, relative to the folder holding the home (absolute outside it): ``run --resume`` works there
    again, wherever it is typed ("" for loops driven otherwise, and before it was recorded)."""

    task: str = ""
    task_id: str = ""
    agent: str = ""
    prompt: str = ""
    command: list[str] = []
    max_iterations: int = 15
    completion_promises: list[str] = []
    rules: list[RuleSpec] = []
    config: dict[str, Any] = {}
    worktree: str = ""
    branch: str = ""
    task_kind: str = ""
    max_iterations_reason: str = ""
    work_dir: str = ""


class HookRegistered(Event, frozen=True, kw_only=True, gc=False, tag="hook_registered"):
    """A hook was registered: appended by ``Engine.start`` for each configured and custom hook,
    and by ``Engine.hook_register``.
    """

    hook_id: str
    hook_type: str
    enabled: bool = True
    metadata: dict[str, Any] = {}


class HooksCleared(Event, frozen=True, kw_only=True, gc=False, tag="hooks_cleared"):
    """Hooks were removed (``hook_ids``; an empty list means all): appended by ``Engine.hook_clear``,
    and by ``Engine.complete`` when the session still has hooks.
    """

    hook_ids: list[str] = []


class IterationStarted(Event, frozen=True, kw_only=True, gc=False, tag="iteration_started"):
    """An iteration began: appended by ``Engine.start`` (iteration 1, with ``max_iterations``) and by
    ``Engine.next`` (with the caller's ``notes``). ``guidance`` is what a human steered the loop
    with (``steer`` / ``unblock`` overrides since the previous iteration began): this iteration's
    prompt carries it (``ledger.loop.steering.commands``).
    """

    max_iterations: int | None = None
    checkpoint_id: str = ""
    notes: str = ""
    guidance: str = ""


class AgentTurn(Event, frozen=True, kw_only=True, gc=False, tag="agent_turn"):
    """What the agent did in one turn (one stop)."""

    output_excerpt: str = ""
    files_modified: list[str] = []
    tool_count: int = 0
    stop_reason: str = ""
    tokens: TokenUsage = TokenUsage()
    duration_ms: float = 0.0
    transcript_offset: int = 0  # where the agent's transcript was read up to (stop hooks)
    model: str = ""  # the model the agent named for the turn ("": not known)
    cost_usd: float | None = None  # the turn's cost as the agent reported it (None: it reported none)
    context_tokens: int = 0  # input tokens (cache included) of the turn's last request (0: not known)
    failure: str = ""  # why the agent's run failed ("": it did not); a failed run fails its iteration
    stderr_excerpt: str = ""  # the end of the agent's stderr (runner), never searched for a promise


class PromiseDetected(Event, frozen=True, kw_only=True, gc=False, tag="promise_detected"):
    """A ``<promise>`` tag in the agent's output and the signal it maps to: appended by
    ``Engine.validate``, one per promise found, after the ``agent_turn``.
    """

    promise: str
    signal: Signal = "CONTINUE"
    reason: str = ""
    summary: str = ""
    context: dict[str, str] = {}
    raw: str = ""


class ValidationRan(Event, frozen=True, kw_only=True, gc=False, tag="validation_ran"):
    """Every rule's result in one iteration, the overall verdict and score."""

    results: list[RuleResult] = []
    passed: bool = False
    score: float = 100.0


class SignalResolved(Event, frozen=True, kw_only=True, gc=False, tag="signal_resolved"):
    """The engine's answer to one validate call."""

    signal: Signal
    passed: bool = False
    promise: str = ""
    feedback: list[str] = []


class HookDecided(Event, frozen=True, kw_only=True, gc=False, tag="hook_decided"):
    """One hook's answer (action, reason, next prompt; ``error`` if it raised): appended by
    ``Engine.validate`` for each hook evaluated (none when no hook is registered).
    """

    hook_id: str
    hook_type: str = ""
    action: HookAction = "continue"
    reason: str = ""
    next_prompt: str = ""
    error: str = ""


class GuardTripped(Event, frozen=True, kw_only=True, gc=False, tag="guard_tripped"):
    """A safety guard fired, with its detail, the signal it forces and its evidence: appended by
    ``Engine.validate``, one per guard tripped.
    """

    guard: str
    detail: str = ""
    signal: Signal = "ESCALATE"
    evidence: dict[str, Any] = {}


class CheckpointCreated(Event, frozen=True, kw_only=True, gc=False, tag="checkpoint_created"):
    """A checkpoint: appended by ``Engine.start`` (trigger ``iteration_start``), ``Engine.next``
    (``auto_iteration``), ``Engine.validate`` when a hook returns checkpoint data (``hook``), and by
    ``checkpoints.create``.
    """

    checkpoint_id: str
    trigger: str = "auto_iteration"
    phase: str = ""
    step: int = 0
    agent_context: dict[str, Any] = {}
    draft: str = ""
    draft_type: str = ""
    expires_at: datetime | None = None


class CheckpointExpired(Event, frozen=True, kw_only=True, gc=False, tag="checkpoint_expired"):
    """A checkpoint can no longer be resumed: appended by ``checkpoints.expire`` (reason ``manual`` by
    default) and ``checkpoints.prune`` (reason ``pruned``).
    """

    checkpoint_id: str
    reason: str = ""


class Override(Event, frozen=True, kw_only=True, gc=False, tag="override"):
    """A human intervened: ``kind`` is ``manual_stop``, ``max_iterations``, ``interrupted`` (the loop
    runner was stopped by a signal; the session stays resumable), or one of the steering kinds
    (``ledger.loop.steering.commands``): ``pause`` and ``resume``, ``steer`` (``reason`` is the guidance for
    the next iteration's prompt) and ``unblock`` (a blocked or escalated session goes on, up to
    ``max_iterations``, with ``reason`` as its guidance), and ``rollback`` (``ralph-ledger rollback``
    restored the work tree to the snapshot ``commit``, docs/snapshots.md)."""

    kind: str
    reason: str = ""
    max_iterations: int | None = None
    commit: str = ""  # ``rollback``: the snapshot commit the work tree was restored to


class StopDecided(Event, frozen=True, kw_only=True, gc=False, tag="stop_decided"):
    """What the harness was told: allow the agent to stop, or block it. From a Claude Code Stop
    hook (2.1.x) also what its input said: ``prompt_id`` (the user prompt the turn answers), the
    ``background_tasks`` still known to the client (each as sent: ``id``, ``type`` such as
    ``subagent``, ``status`` such as ``running``, ``description``, ``agent_type``) and its
    ``session_crons``. ``waiting``: the stop was allowed without ending the iteration because
    sub-agents still ran (docs/design/claude-code-stop.md). ``stop_id``: the stop's identity, and
    ``answer``: what the hook printed on stdout for it; a stop run again after its answer was lost
    (its warm worker killed) is answered with ``answer`` and recorded once (``""`` in older
    journals and for other agents)."""

    decision: StopDecision
    reason: str = ""
    system_message: str = ""
    prompt_id: str = ""
    background_tasks: list[dict[str, Any]] = []
    session_crons: list[dict[str, Any]] = []
    waiting: bool = False
    stop_id: str = ""
    answer: str = ""


class SessionCompleted(Event, frozen=True, kw_only=True, gc=False, tag="session_completed"):
    """The loop finished: appended by ``Engine.complete`` with the promise given, the iterations used
    and the last iteration's score.
    """

    promise: str = ""
    total_iterations: int = 0
    score: float | None = None
    reason: str = ""


class SessionBlocked(Event, frozen=True, kw_only=True, gc=False, tag="session_blocked"):
    """The loop stopped as BLOCKED: appended by ``Engine.validate`` when the signal resolves to BLOCKED."""

    reason: str = ""
    signal: Signal = "BLOCKED"


class SessionEscalated(Event, frozen=True, kw_only=True, gc=False, tag="session_escalated"):
    """The loop stopped for a human: appended by ``Engine.validate`` when the signal resolves to
    ESCALATE; ``guard`` names the guard that caused it, if one did.
    """

    reason: str = ""
    guard: str = ""
    signal: Signal = "ESCALATE"


class ErrorRecorded(Event, frozen=True, kw_only=True, gc=False, tag="error_recorded"):
    """An internal error that was survived (e.g. a hook that failed open)."""

    component: str
    message: str = ""


class RateLimited(Event, frozen=True, kw_only=True, gc=False, tag="rate_limited"):
    """The agent hit a usage or rate limit: its run is not an iteration; the loop waits (until
    ``resets_at`` when the agent said it, else a bounded back-off of ``wait_s``) and runs the same
    iteration again. Never a failed validation (the circuit breaker does not see it). What it spent
    on other models than ``model`` follows as ``model_tokens`` events."""

    reason: str = ""
    resets_at: datetime | None = None
    wait_s: float = 0.0
    tokens: TokenUsage = TokenUsage()
    model: str = ""  # the model the run named, its tokens priced at it ("": not known)


class SubagentStopped(Event, frozen=True, kw_only=True, gc=False, tag="subagent_stopped"):
    """A sub-agent of the loop's agent finished (Claude Code's ``SubagentStop``), recorded in the parent
    loop's session at its current iteration: which sub-agent (``agent_id``, ``agent_type``), its own
    transcript (``transcript_path``, read up to ``transcript_offset``) and what it did there. Its
    ``tokens`` count in the session's tokens and, priced at its ``model`` (its transcript's), in its
    cost (``sql/views/turn_tokens.sql``, ``turn_costs.sql``); it never decides a stop. ``stop_id``:
    the SubagentStop's identity (as ``stop_decided``'s), so one run again is recorded once.
    """

    agent_id: str = ""
    agent_type: str = ""
    transcript_path: str = ""
    transcript_offset: int = 0
    tokens: TokenUsage = TokenUsage()
    tool_count: int = 0
    files_modified: list[str] = []
    output_excerpt: str = ""
    model: str = ""
    stop_id: str = ""


class NotificationSent(Event, frozen=True, kw_only=True, gc=False, tag="notification_sent"):
    """A notification about the session went out (``[notify]`` in the configuration,
    ``ledger.notify``): what it was about (``notice``: complete, blocked, escalated or guard), its
    ``title`` and ``body``, the services it went to (``services``: each URL's scheme, never the URL,
    which may hold a secret), to how many URLs (``targets``) and how many of them failed
    (``failed``; each failure is also an ``error_recorded`` of component ``notify``)."""

    notice: str = ""
    title: str = ""
    body: str = ""
    services: list[str] = []
    targets: int = 0
    failed: int = 0


class SummaryGiven(Event, frozen=True, kw_only=True, gc=False, tag="summary_given"):
    """The summary of the loop so far (``ledger.loop.prompt.summary``, on with ``summary = true``) that the
    prompt of iteration ``iteration`` carries: appended by the runner and the ledger-native hook in
    the append that starts that iteration, before its ``iteration_started``."""

    loop_summary: str = ""


class ModelTokens(Event, frozen=True, kw_only=True, gc=False, tag="model_tokens"):
    """Tokens an agent's run spent on a model other than its turn's own (``AgentTurn.model``), as
    the agent reported them apart (Gemini CLI's model router and utility calls, turns it gave
    another model): one per other model, appended with the ``agent_turn`` at its iteration, whose
    ``tokens`` are then its own model's only. They count in the iteration's tokens and, priced at
    this ``model``, in its cost (``sql/views/turn_tokens.sql``), as a sub-agent's do."""

    model: str = ""
    tokens: TokenUsage = TokenUsage()


class TaskStarted(Event, frozen=True, kw_only=True, gc=False, tag="task_started"):
    """Task ``task_no`` of the session's list (``title``) became the current task, at the iteration
    that begins its work: in the append that starts that iteration. The session's first one (in
    ``session_started``'s append) carries the whole list as the loop started with it (``task_list``)
    and the file it was read from (``task_file``, relative to the folder holding the home when inside
    it): the ledger's copy is the truth (docs/design/task-lists.md)."""

    task_no: int = 0
    title: str = ""
    task_list: list[TaskSpec] = []
    task_file: str = ""


class TaskCompleted(Event, frozen=True, kw_only=True, gc=False, tag="task_completed"):
    """Task ``task_no`` is done: its completion held at ``iteration`` (the ``promise`` word and the
    task's own rules)."""

    task_no: int = 0
    title: str = ""
    promise: str = ""


class TaskBlocked(Event, frozen=True, kw_only=True, gc=False, tag="task_blocked"):
    """Task ``task_no`` could not be done (the agent said BLOCKED, or it used its own maximum of
    iterations): ``skipped`` when the loop went on to the next task, else the loop stopped on it."""

    task_no: int = 0
    title: str = ""
    reason: str = ""
    skipped: bool = False


class FileChange(Payload, frozen=True, kw_only=True, gc=False):
    """One file a snapshot changed against its parent: lines ``added`` and ``removed`` (``None`` for
    a binary file, as ``git diff --numstat`` says)."""

    path: str
    added: int | None = None
    removed: int | None = None


class SnapshotTaken(Event, frozen=True, kw_only=True, gc=False, tag="snapshot_taken"):
    """The work tree as iteration ``iteration`` left it, stored as the git commit ``commit`` (its
    ``tree``; its ``parent``: the previous snapshot, the one a rollback restored, or ``HEAD``; ""
    in a repository without commits) under the ref ``ref`` of the repository whose work tree is
    ``work_tree`` (relative to the folder holding the home, absolute outside it). ``files``: what
    changed against the parent; ``left_out``: files over the size limit, never stored
    (docs/snapshots.md, docs/design/snapshots.md)."""

    commit: str = ""
    parent: str = ""
    tree: str = ""
    ref: str = ""
    work_tree: str = ""
    files: list[FileChange] = []
    left_out: list[str] = []


AnyEvent = (
    SessionStarted
    | HookRegistered
    | HooksCleared
    | IterationStarted
    | AgentTurn
    | PromiseDetected
    | ValidationRan
    | SignalResolved
    | HookDecided
    | GuardTripped
    | CheckpointCreated
    | CheckpointExpired
    | Override
    | StopDecided
    | SessionCompleted
    | SessionBlocked
    | SessionEscalated
    | ErrorRecorded
    | RateLimited
    | SubagentStopped
    | NotificationSent
    | SummaryGiven
    | ModelTokens
    | TaskStarted
    | TaskCompleted
    | TaskBlocked
    | SnapshotTaken
)

EVENT_TYPES: Final[tuple[type[Event], ...]] = AnyEvent.__args__

# Permanent tags, in release order. tests/unit/test_events.py fails if one changes.
TAGS: Final[tuple[str, ...]] = tuple(str(t.__struct_config__.tag) for t in EVENT_TYPES)

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    """One journal line for ``event``, newline included."""
    return _encoder.encode(event) + b"\n"


def decode(line: bytes | str) -> AnyEvent:
    """Decode one journal line; raises ``msgspec.DecodeError`` or ``ValidationError``."""
    return _decoder.decode(line)


def decode_lines(buf: bytes) -> list[AnyEvent]:
    """Decode a buffer of complete JSON lines in one call (fast path)."""
    return _decoder.decode_lines(buf)


def encode_lines(events: list[AnyEvent]) -> bytes:
    """Encode events as JSON Lines (normalised: defaults filled in, unknown fields gone)."""
    return _encoder.encode_lines(events)
