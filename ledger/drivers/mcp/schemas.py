"""The MCP tools' arguments and results (docs/design/mcp-tools.md), as msgspec types: ``tools/list``
gives the JSON schemas generated from them, and each call's arguments are decoded with them. Names are
camelCase (``taskId``, ``completionSignal``) for every tool: ``validate_completion`` takes ``stopReason``,
``toolCount`` and ``retryCount``, and still the snake_case names of its own contract, which it took
before (``ALIASES``).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from ledger.events import HookAction, RuleResult, SessionStatus, Signal
from ledger.loop.validate.todos import Todo

SERVER_NAME: Final = "ralph-ledger"
"""The server's name: in MCP's ``initialize`` and as its key in a project's ``.mcp.json``."""
MAX_OUTPUT_CHARS: Final = 1_000_000
"""The longest ``agentOutput`` a call may carry (1 MB of text; the journal keeps its last 2000)."""
MAX_FILES: Final = 10_000
MAX_PATH_CHARS: Final = 4096

TaskId = Annotated[str, Meta(description="The task: one ledger session (letters, digits, '.', '_', '-').")]
Path = Annotated[str, Meta(min_length=1, max_length=MAX_PATH_CHARS)]
Files = Annotated[
    list[Path], Meta(max_length=MAX_FILES, description="Files the iteration changed, inside the project.")
]
Output = Annotated[
    str,
    Meta(max_length=MAX_OUTPUT_CHARS, description="The agent's output of this iteration (its promises)."),
]
HookType = Literal["default", "validation", "promise"]
"""The preset stop hooks (``ledger.loop.decide.stop_policies.PRESETS``; a test keeps the two equal)."""


class _Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Arguments every tool takes."""

    task_id: TaskId


class TaskArgs(_Args, frozen=True, kw_only=True):
    """A tool that needs only the task."""


class StartArgs(_Args, frozen=True, kw_only=True):
    """iteration_start: the loop's settings; what is left out comes from the agent's frontmatter
    (``.claude/agents/<agent>.md``), then the project's ``ralph.toml``."""

    task: Annotated[str, Meta(description="What the loop works on, recorded as the session's task.")] = ""
    agent: Annotated[str, Meta(description="Agent whose iteration: frontmatter gives the defaults.")] = ""
    max_iterations: Annotated[int, Meta(ge=1)] | Literal["auto"] | None = None
    kind: Annotated[str, Meta(description="The kind of task; groups past loops for maxIterations auto.")] = ""
    completion_promises: list[Annotated[str, Meta(min_length=1)]] | None = None
    validation_rules: (
        Annotated[list[str], Meta(description="Names of rules defined in the project's configuration.")]
        | None
    ) = None


class ValidateArgs(_Args, frozen=True, kw_only=True):
    """iteration_validate: what the iteration produced."""

    agent_output: Output = ""
    files_modified: Files = []
    tool_count: Annotated[int, Meta(ge=0)] = 0
    todos: Annotated[list[Todo], Meta(description="The agent's todo list, for the todos rule.")] | None = None


class NextArgs(_Args, frozen=True, kw_only=True):
    """iteration_next."""

    notes: str = ""


class CompleteArgs(_Args, frozen=True, kw_only=True):
    """iteration_complete."""

    completion_promise: str = ""


class CheckpointArgs(_Args, frozen=True, kw_only=True):
    """checkpoint_create: the agent's context to carry over (the latest one when left out)."""

    trigger: Annotated[str, Meta(min_length=1, max_length=64)] = "iteration_checkpoint"
    execution_phase: str = ""
    execution_step: Annotated[int, Meta(ge=0)] | None = None
    agent_context: dict[str, Any] | None = None


class ResumeArgs(_Args, frozen=True, kw_only=True):
    """checkpoint_resume: the checkpoint named, or the latest one not expired."""

    checkpoint_id: str | None = None


class ListArgs(_Args, frozen=True, kw_only=True):
    """checkpoint_list."""

    include_expired: bool = False


class HookArgs(_Args, frozen=True, kw_only=True):
    """hook_register."""

    hook_type: Annotated[
        HookType,
        Meta(
            description="The preset: default (promises, then validation), validation (the rules alone) "
            "or promise (a completion promise alone)."
        ),
    ] = "default"
    enabled: Annotated[bool, Meta(description="Whether hook_evaluate asks it (false: registered, off).")] = (
        True
    )
    metadata: Annotated[
        dict[str, Any], Meta(description="Anything the agent wants recorded with the hook; given back.")
    ] = {}


class EvaluateArgs(_Args, frozen=True, kw_only=True):
    """hook_evaluate: the hooks asked about this output, with the iteration's latest validation."""

    agent_output: Output = ""
    files_modified: Files = []


class CompletionArgs(_Args, frozen=True, kw_only=True):
    """validate_completion (the stop contract's ``ValidationParams``, and the task)."""

    stop_reason: Annotated[
        str, Meta(description="Why the agent stops (its API's stop reason: end_turn, max_tokens, ...).")
    ] = "end_turn"
    tool_count: Annotated[int, Meta(ge=0, description="The tool calls of the turn that stops.")] = 0
    retry_count: Annotated[
        Annotated[int, Meta(ge=0)] | None,
        Meta(
            description="Stops already refused in this iteration; left out, counted from the journal. "
            "At 3 the stop is allowed with a warning (the fail-open rule)."
        ),
    ] = None


ALIASES: Final[dict[str, dict[str, str]]] = {
    "validate_completion": {
        "stop_reason": "stopReason",
        "tool_count": "toolCount",
        "retry_count": "retryCount",
    },
}
"""Per tool, the older names of arguments a call may still use, and the name each stands for."""


class _Result(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Results are camelCase."""


class Step(_Result, frozen=True, kw_only=True):
    """iteration_start's and iteration_next's answer."""

    task_id: str
    iteration_number: int
    max_iterations: int
    checkpoint_id: str
    message: str
    guidance: Annotated[
        str, Meta(description="What a person steered the loop with for this iteration: follow it.")
    ] = ""


class ValidationReport(_Result, frozen=True, kw_only=True):
    """The rules of one validation, and its score."""

    total_rules: int
    passed_rules: int
    failed_rules: int
    errored_rules: int
    score: float
    rules: Annotated[list[RuleResult], Meta(description="Each rule's outcome, as the ledger records it.")]


class Validated(_Result, frozen=True, kw_only=True):
    """iteration_validate's answer: the signal to act on and why."""

    task_id: str
    iteration_number: int
    validation_passed: bool
    completion_signal: Signal
    detected_promise: str | None
    feedback: list[str]
    validation_report: ValidationReport
    reason: str
    next_prompt: Annotated[str, Meta(description="With CONTINUE: the task and what this iteration taught.")]
    guards_tripped: list[str]
    paused: Annotated[
        bool, Meta(description="A person paused the loop: iteration_next refuses until they resume it.")
    ] = False


class HistoryEntry(_Result, frozen=True, kw_only=True):
    """One iteration of the loop (a row of the ``iterations`` view)."""

    iteration: int
    signal: Signal | None
    validation_passed: bool | None
    score: float | None
    promise: str | None
    files_modified: list[str]
    tool_count: int
    guards: list[str]


class Completed(_Result, frozen=True, kw_only=True):
    """iteration_complete's answer."""

    task_id: str
    total_iterations: int
    final_validation_score: float | None
    iteration_history: list[HistoryEntry]
    completed_at: str
    message: str


class Status(_Result, frozen=True, kw_only=True):
    """iteration_status: where the loop is."""

    task_id: str
    status: SessionStatus
    task: str
    agent: str
    iteration_number: int
    max_iterations: int
    last_signal: str | None
    last_score: float | None
    consecutive_failures: int
    stop_requested: bool
    paused: bool = False


class Checkpoint(_Result, frozen=True, kw_only=True):
    """One checkpoint."""

    checkpoint_id: str
    iteration_number: int
    trigger: str
    execution_phase: str
    execution_step: int | None
    created_at: str
    expired: bool
    agent_context: dict[str, Any]


class CheckpointCreated(_Result, frozen=True, kw_only=True):
    """checkpoint_create's answer."""

    task_id: str
    checkpoint_id: str
    iteration_number: int


class Checkpoints(_Result, frozen=True, kw_only=True):
    """checkpoint_list's answer, oldest first."""

    task_id: str
    checkpoints: list[Checkpoint]


class Resumed(_Result, frozen=True, kw_only=True):
    """checkpoint_resume's answer."""

    task_id: str
    checkpoint_id: str
    iteration_number: int
    max_iterations: int
    status: SessionStatus
    iteration_config: dict[str, Any]
    iteration_history: list[HistoryEntry]
    agent_context: dict[str, Any]
    resume_instructions: str


class HookRegistered(_Result, frozen=True, kw_only=True):
    """hook_register's answer."""

    hook_id: str
    task_id: str
    hook_type: str
    enabled: bool
    metadata: dict[str, Any]


class HookDecision(_Result, frozen=True, kw_only=True):
    """hook_evaluate's answer: the deciding hook's."""

    hook_id: str
    task_id: str
    iteration: int
    action: HookAction
    reason: str
    next_prompt: str | None
    checkpoint_created: bool
    metadata: dict[str, Any]


class HookEntry(_Result, frozen=True, kw_only=True):
    """One registered hook."""

    id: str
    type: str
    enabled: bool


class Hooks(_Result, frozen=True, kw_only=True):
    """hook_list's answer, in evaluation order."""

    task_id: str
    hook_count: int
    hooks: list[HookEntry]


class HooksCleared(_Result, frozen=True, kw_only=True):
    """hook_clear's answer."""

    task_id: str
    cleared_count: int


class CompletionResult(msgspec.Struct, frozen=True, kw_only=True):
    """validate_completion's answer (the stop contract's ``ValidationResult``)."""

    complete: bool
    reason: str


TOOLS: Final[dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct], str]]] = {
    "iteration_start": (
        StartArgs,
        Step,
        "Start an iteration loop for a task and begin iteration 1. Validation rules are named, never "
        "defined: they come from the project's ralph.toml.",
    ),
    "iteration_validate": (
        ValidateArgs,
        Validated,
        "Validate the current iteration: run its rules, detect promises (<promise>COMPLETE</promise>), "
        "check the guards. Act on completionSignal: COMPLETE -> iteration_complete, CONTINUE -> "
        "iteration_next, BLOCKED or ESCALATE -> stop and report.",
    ),
    "iteration_next": (NextArgs, Step, "Advance to the next iteration (refused past the maximum)."),
    "iteration_complete": (
        CompleteArgs,
        Completed,
        "Finish the loop once iteration_validate answered COMPLETE.",
    ),
    "iteration_status": (TaskArgs, Status, "Where the task's loop is: status, iteration, last signal."),
    "checkpoint_create": (
        CheckpointArgs,
        CheckpointCreated,
        "Save the iteration's state and an agentContext that carries over to later iterations.",
    ),
    "checkpoint_resume": (
        ResumeArgs,
        Resumed,
        "After an interruption: the iteration, configuration, history and agentContext to go on with.",
    ),
    "checkpoint_list": (ListArgs, Checkpoints, "The task's checkpoints, oldest first."),
    "hook_register": (
        HookArgs,
        HookRegistered,
        "Register a stop hook: default (promises, then validation), validation or promise.",
    ),
    "hook_evaluate": (
        EvaluateArgs,
        HookDecision,
        "Ask the registered hooks about an output, with the iteration's latest validation.",
    ),
    "hook_list": (TaskArgs, Hooks, "The task's hooks, in evaluation order."),
    "hook_clear": (TaskArgs, HooksCleared, "Clear every hook of the task."),
    "validate_completion": (
        CompletionArgs,
        CompletionResult,
        "The stop check: may the agent stop now? Incomplete while the loop goes on. The stop "
        "contract's own names stop_reason, tool_count and retry_count are taken too.",
    ),
}
"""Each tool: its arguments, its result and its description."""


def json_schema(typ: type[msgspec.Struct]) -> dict[str, Any]:
    """``typ``'s JSON schema with the object itself at the top (as MCP wants it), the types it uses
    under ``$defs``."""
    (ref,), defs = msgspec.json.schema_components([typ], ref_template="#/$defs/{name}")
    name = str(ref["$ref"]).rsplit("/", 1)[-1]
    schema: dict[str, Any] = dict(defs.pop(name))
    if defs:
        schema["$defs"] = defs
    return schema
