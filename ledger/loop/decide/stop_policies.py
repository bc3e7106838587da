"""The stop-hook registry: preset and custom hooks, evaluated in registration order.

A hook looks at what one iteration produced (``AgentContext``) and answers complete / continue /
escalate. Presets are recorded as ``hook_registered`` events and rebuilt from them (``Registry``);
every evaluation is returned so the engine records it as a ``hook_decided`` event. The rules
(evaluation order, a hook that raises, no hooks, persistence), each tested in
``tests/unit/test_stop_policies.py``: docs/design/stop-hooks.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ledger import events as ev
from ledger.core.errors import one_line
from ledger.core.words import plural

PRESETS: Final = ("default", "validation", "promise")


@dataclass(frozen=True, slots=True)
class AgentContext:
    """What a hook sees: what one iteration produced."""

    task_id: str
    iteration: int
    files_modified: Sequence[str] = ()
    validation_results: Sequence[ev.RuleResult] = ()
    promises: Sequence[ev.Signal] = ()  # signals of the promises detected, in text order
    execution_phase: str = ""
    agent_output: str = ""
    promise_words: Sequence[str] = ()  # the words of those promises (``DONE ALL`` for a phrase)

    def promise_word(self, signal: ev.Signal) -> str:
        """The word of the first promise with ``signal`` (the signal's name when words are not known)."""
        return next(
            (w for s, w in zip(self.promises, self.promise_words, strict=False) if s == signal), signal
        )


@dataclass(frozen=True, slots=True)
class HookResult:
    """A hook's answer: ``action`` and ``reason``, an optional next prompt, checkpoint data (recorded
    as a ``hook`` checkpoint) and metadata.
    """

    action: ev.HookAction
    reason: str
    next_prompt: str = ""
    checkpoint_data: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


HookFn = Callable[[AgentContext], HookResult]


@dataclass(frozen=True, slots=True)
class Hook:
    """A registered hook: its id, type (a preset name or ``custom``), callable and switch."""

    hook_id: str
    hook_type: str
    fn: HookFn
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One hook's answer (a ``hook_decided`` event), or the no-hooks answer."""

    hook_id: str
    hook_type: str
    result: HookResult
    error: str = ""


def _failed_rules(ctx: AgentContext) -> list[ev.RuleResult]:
    return [r for r in ctx.validation_results if not r.passed or r.errored]


def _feedback(ctx: AgentContext) -> str:
    failed = _failed_rules(ctx)
    return "Fix the failing validation rules: " + "; ".join(f"{r.name}: {r.message}" for r in failed)


def promise_hook(ctx: AgentContext) -> HookResult:
    """Only completion promises: COMPLETE completes, ESCALATE or BLOCKED escalate."""
    if "COMPLETE" in ctx.promises:
        word = ctx.promise_word("COMPLETE")
        return HookResult("complete", f"Agent signaled completion via <promise>{word}</promise>")
    if "ESCALATE" in ctx.promises:
        word = ctx.promise_word("ESCALATE")
        return HookResult("escalate", f"Agent signaled escalation via <promise>{word}</promise>")
    if "BLOCKED" in ctx.promises:
        word = ctx.promise_word("BLOCKED")
        return HookResult("escalate", f"Agent signaled it is blocked via <promise>{word}</promise>")
    return HookResult("continue", "No completion promise detected")


def validation_hook(ctx: AgentContext) -> HookResult:
    """Only validation: all rules pass completes; a failure continues with feedback."""
    if not ctx.validation_results:
        return HookResult("continue", "No validation rules")
    if _failed_rules(ctx):
        return HookResult(
            "continue",
            f"{plural(len(_failed_rules(ctx)), 'validation rule')} failing",
            next_prompt=_feedback(ctx),
        )
    return HookResult("complete", "All validation rules pass")


def default_hook(ctx: AgentContext) -> HookResult:
    """Promises first (COMPLETE, then ESCALATE, then BLOCKED), then validation."""
    by_promise = promise_hook(ctx)
    if by_promise.action != "continue":
        return by_promise
    if ctx.validation_results:
        return validation_hook(ctx)
    return HookResult("continue", "Iteration in progress")


PRESET_FNS: Final[dict[str, HookFn]] = {
    "default": default_hook,
    "validation": validation_hook,
    "promise": promise_hook,
}

NO_HOOKS: Final = Evaluation("default", "none", HookResult("continue", "No hooks registered for this task"))


def evaluate(hooks: Iterable[Hook], ctx: AgentContext) -> list[Evaluation]:
    """Evaluate hooks in order; the last evaluation is the decision."""
    done: list[Evaluation] = []
    for hook in hooks:
        if not hook.enabled:
            continue
        try:
            result = hook.fn(ctx)
            error = ""
        except Exception as exc:  # a hook must never take the loop down
            error = one_line(exc)
            result = HookResult("escalate", f"Hook evaluation failed: {error}", metadata={"error": error})
        done.append(Evaluation(hook.hook_id, hook.hook_type, result, error))
        if result.action in ("complete", "escalate"):
            break
    return done or [NO_HOOKS]


class Registry:
    """The hooks of one session: declarative ones rebuilt from its events, plus
    custom callables registered in this process."""

    def __init__(self) -> None:
        self._hooks: dict[str, Hook] = {}

    @classmethod
    def from_events(cls, events: Iterable[ev.Event], custom: dict[str, HookFn] | None = None) -> Registry:
        """Replay ``hook_registered`` / ``hooks_cleared``; a custom hook whose
        callable is not in ``custom`` (another process registered it) is kept
        but escalates when evaluated, so it is never silently skipped."""
        reg = cls()
        for e in events:
            if isinstance(e, ev.HookRegistered):
                fn = PRESET_FNS.get(e.hook_type) or (custom or {}).get(e.hook_id) or _missing(e.hook_id)
                reg._hooks[e.hook_id] = Hook(e.hook_id, e.hook_type, fn, e.enabled)
            elif isinstance(e, ev.HooksCleared):
                for hook_id in e.hook_ids or list(reg._hooks):
                    reg._hooks.pop(hook_id, None)
        return reg

    def add(self, hook: Hook) -> None:
        """Register ``hook`` in this process, replacing any hook with the same id."""
        self._hooks[hook.hook_id] = hook

    def hooks(self) -> list[Hook]:
        """The hooks in evaluation (registration) order."""
        return list(self._hooks.values())

    def clear(self) -> list[str]:
        """Remove every hook; returns the ids removed."""
        ids = list(self._hooks)
        self._hooks.clear()
        return ids

    def evaluate(self, ctx: AgentContext) -> list[Evaluation]:
        """Evaluate the hooks in order (see the module-level ``evaluate``)."""
        return evaluate(self._hooks.values(), ctx)

    @property
    def active(self) -> bool:
        """Whether any hook is enabled."""
        return any(h.enabled for h in self._hooks.values())


def _missing(hook_id: str) -> HookFn:
    def fn(ctx: AgentContext) -> HookResult:
        raise LookupError(f"custom hook {hook_id!r} is not registered in this process")

    return fn


def decided_events(evals: Sequence[Evaluation], *, session_id: str, iteration: int) -> list[ev.HookDecided]:
    """The ``hook_decided`` events for a list of evaluations."""
    return [
        ev.HookDecided(
            session_id=session_id,
            iteration=iteration,
            hook_id=e.hook_id,
            hook_type=e.hook_type,
            action=e.result.action,
            reason=e.result.reason,
            next_prompt=e.result.next_prompt,
            error=e.error,
        )
        for e in evals
    ]
