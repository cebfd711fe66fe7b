"""What an agent is judged on, for its author: ``docs/judged-on.md``, written by ``conformance
list --judged-on``.

Every number and exact string on the page is imported from where the checks and the harness
define it (the catalogue's numbers, ``conformance.checks``, the deadlines, the timing
allowances), so the page cannot say other than what is judged; the capabilities and start
``config`` keys are those the catalogue and the bundled scenarios use, and one without a
description here stops the page from being written (a test compares the committed page with
this output).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from conformance.adapters.command import EXIT_UNSUPPORTED
from conformance.catalogue import CATALOGUE, by_id
from conformance.checks import INVARIANTS
from conformance.checks.err import _RETRY_WORDS, TYPED_KINDS, expected_kinds
from conformance.checks.fmt import _NOTICE, OVER_CHARS, OVER_LINES, SHORT_LINES
from conformance.checks.lop import COMPACTION_BREAKER, TEXT_REPEATS
from conformance.checks.reminder import _DONT, _FAILED, _REPEATED
from conformance.checks.rty import (
    JITTER_HIGH,
    JITTER_LOW,
    MAX_RETRIES,
    NON_RETRYABLE,
    SERVER_ERRORS,
)
from conformance.checks.rty_cases import EXCESSIVE_WAIT_S
from conformance.checks.seed_strings import CONTINUATION_TEXT, TRUNCATION_HINT
from conformance.checks.str_ import ATTEMPTS_PER_MODE, MAX_EMPTY, WATCHDOG_FLOOR_S
from conformance.checks.tjs import _INVALID_WORDS
from conformance.checks.tol import _HOW_TO, _SUGGEST, _TIMEOUT_WORDS, LIMIT_LATE_SHARE
from conformance.checks.trn import MAX_RECOVERIES
from conformance.judging.deadlines import (
    ATTEMPT_OVERHEAD_S,
    DEADLINE_GRACE_S,
    DEFAULT_DEADLINE_S,
    DEFAULT_TOOL_LIMIT_S,
)
from conformance.judging.timing import EARLY_SLACK_S, LATE_FLOOR_S

__all__ = ["CAPABILITIES", "CONFIG_KEYS", "as_markdown", "capabilities", "config_keys"]

# What each capability promises; the criteria that need it come from the catalogue.
CAPABILITIES = {
    "tools": "runs the hosted tools of `start.tools` (`POST {tool_endpoint}/NAME`)",
    "abort": 'stops at `{"type": "abort"}`: no retry, fallback or continuation after it',
    "time_scale": "multiplies every delay and time limit by `start.time_scale` (otherwise the "
    "run is at 1.0: real seconds)",
    "background_requests": "sends the auxiliary title request of `config.background_title`",
    "credential_refresh": "refreshes expired credentials once on a 401 saying so",
    "should_retry_header": "honours `x-should-retry: true / false`",
    "stream_fallback_config": "honours `config.stream_fallback: false` (no non-streaming fallback)",
    "background_tools": 'starts a call with `"run_in_background": true` without waiting for it',
    "batch_tools": "runs the tool `batch` itself, item by item",
    "compaction": "compacts the conversation (a summary request) when the prompt is too long",
    "training_data_mode": "honours `config.training_data_mode` (no repair of tool pairing)",
    "media": "strips media parts and resends when media is too large",
    "fallback_model": "switches to `config.fallback_model` after repeated overload",
    "hooks": "calls the stop hook (`config.stop_hook`) and treats its block as a decision",
    "debug_dump": "writes a JSON dump per HTTP 400 and `tool-calls.jsonl` into `start.debug_dir`",
    "mcp_tools": "takes the hosted tools from the MCP server of `start.mcp_endpoint` "
    "(`--tool-transport mcp`)",
    "dialect:anthropic_messages": "speaks `{base}/messages` (`--dialect anthropic_messages`)",
    "dialect:openai_responses": "speaks `{base}/responses` (`--dialect openai_responses`)",
}
# Capabilities the harness itself reads, apart from the catalogue's and the scenarios'.
_HARNESS_CAPABILITIES = ("time_scale", "dialect:anthropic_messages", "dialect:openai_responses")

# What each start `config` key asks; None (JSON null) means "not set".
CONFIG_KEYS: dict[str, tuple[str, str]] = {
    "stream_fallback": ("STR-12", "false: make no non-streaming fallback (default true)"),
    "stop_hook": (
        "ERR-03, CTL-02",
        "true: after a turn that completed without an API error, call the hosted tool "
        "`stop_hook` once (`POST {tool_endpoint}/stop_hook`, arguments `{}`); an error of type "
        "`blocked` is the hook's block",
    ),
    "background_title": (
        "RTY-09",
        'true: send one auxiliary title request (non-streaming, no `tools`, the word "title" '
        "in its messages); a 429 or 529 on it is not retried",
    ),
    "max_tool_calls": (
        "LOP-03",
        "N: at most N hosted tool calls in the turn; once the model asks for more, offer no "
        "tools again and end the turn",
    ),
    "tool_timeout_s": (
        "TOL-04",
        "a hosted tool's time limit, in scenario seconds (times `time_scale`); the result of a "
        "call stopped then says it timed out and states the limit",
    ),
    "request_timeout_s": (
        "RTY-06",
        "how long to wait for a model request's response headers (scenario seconds, times "
        "`time_scale`); then retry it like a connection failure",
    ),
    "training_data_mode": ("CTX-04", "true: refuse the repair of unpaired tool calls"),
    "context_window": ("LOP-05", "the model's window in tokens, for proactive compaction"),
    "fallback_model": (
        "MFB-01, MFB-02, MFB-03, MFB-04",
        "the model to switch to after repeated overload (null: none)",
    ),
    "max_output_tokens": (
        "TRN-07, RTY-11",
        "the user's output limit: never send a larger one (null: the agent's own default, "
        "which it may raise once after a length finish)",
    ),
}


def _scenario_docs() -> Iterable[dict[str, Any]]:
    from scenarios import SCENARIO_DIR

    for path in sorted(Path(SCENARIO_DIR).rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict):
            yield doc


def capabilities() -> dict[str, list[str]]:
    """Every capability an agent may declare -> the criteria that need it (catalogue order)."""
    out: dict[str, list[str]] = {}
    for c in CATALOGUE:
        if c.capability:
            out.setdefault(c.capability, []).append(c.id)
    for name in _HARNESS_CAPABILITIES:
        out.setdefault(name, [])
    for doc in _scenario_docs():
        for cap in doc.get("capabilities") or []:
            out.setdefault(str(cap), [])
    return out


def config_keys() -> set[str]:
    """Every start ``config`` key: in every start message, set by a bundled scenario, or named
    by a criterion."""
    keys = {"fallback_model", "max_output_tokens"}  # in every start message
    for doc in _scenario_docs():
        keys.update(str(k) for k in doc.get("config") or {})
    keys.update(k for c in CATALOGUE for k in c.config_keys)
    return keys


def _ids(ids: Iterable[str]) -> str:
    return ", ".join(ids) or "-"


def _words(words: Iterable[str]) -> str:
    return ", ".join(f"`{w}`" for w in words)


def _kinds_table() -> list[str]:
    rows = ["| the last failure on the wire | kinds that fit |", "|---|---|"]
    cases: list[tuple[str, int | None]] = [("no response (refused, reset, timed out)", None)]
    cases += [(f"HTTP {s}", s) for s in (400, 401, 403, 404, 408, 409, 413, 422, 429)]
    cases += [(f"HTTP {s}", s) for s in sorted(SERVER_ERRORS)]
    cases += [("a 200 stream that broke after the headers", 200)]
    for label, status in cases:
        response = {"status": status, "end": "reset"}
        kinds = expected_kinds({"response": response, "body": {}})  # type: ignore[typeddict-item]
        rows.append(f"| {label} | {_words(sorted(kinds))} |")
    return rows


def _retries() -> list[str]:
    """Retry a failed model request."""
    backoff = by_id("RTY-03").numbers
    base, cap = backoff["base_s"], backoff["cap_s"]
    retryable = sorted({429, 408, 409} | SERVER_ERRORS)
    return [
        "",
        "## 3. Retry a failed model request",
        "",
        f"- Retryable: HTTP {', '.join(map(str, retryable))}, and a connection refused or reset "
        "before the response headers, or no headers within `config.request_timeout_s` "
        "(RTY-03, RTY-05, RTY-06, RTY-16). Never retried unchanged: HTTP "
        f"{', '.join(map(str, sorted(NON_RETRYABLE)))} (RTY-07).",
        f"- Without a server-asked wait, retry n (1, 2, ...) waits min({cap:g}, {base:g} x "
        f"2^(n-1)) s times a random factor in [{JITTER_LOW:g}, {JITTER_HIGH:g}] "
        f"({(JITTER_HIGH - 1) * 100:g} % jitter, drawn anew each time: RTY-03, RTY-08).",
        "- A server-asked wait replaces the backoff: `retry-after-ms` (milliseconds, preferred), "
        "else `Retry-After` in seconds or as an HTTP-date; wait at least the time asked and "
        f"at most {JITTER_HIGH:g} times it (RTY-01, RTY-02, RTY-13). A wait above "
        f"{EXCESSIVE_WAIT_S:g} s is surfaced as an error, or capped at min({EXCESSIVE_WAIT_S:g} "
        "s, asked / 2) (RTY-14).",
        f"- Budget: {MAX_RETRIES} retries ({ATTEMPTS_PER_MODE} attempts) per request and mode "
        "(streaming, then the non-streaming fallback with a budget of its own): survive "
        f"{MAX_RETRIES} failures in a row, never send an attempt after the "
        f"{ATTEMPTS_PER_MODE}th failure (RTY-04, RTY-05, STR-05).",
        "- A retry resends the identical body (RTY-12). Emit a `retry` event per retry, its "
        "`delay_s` unscaled.",
        f"- Timing allowance: an attempt may come {EARLY_SLACK_S * 1000:g} ms (real) early and "
        f"at least {LATE_FLOOR_S * 1000:g} ms (real; more on a slow machine, measured at the "
        "run's start) late.",
    ]


def _streams_and_continuation() -> list[str]:
    """Recover a failed stream."""
    return [
        "",
        "## 4. Recover a failed stream",
        "",
        "- A stream that fails after the headers (reset or cut body, a clean close without "
        "`finish_reason`, a malformed event, an in-band `error` event) is resent once with "
        "`stream: false` and the same messages; its partial output is discarded, messages "
        "already shown from it are withdrawn with `removed` (STR-01, STR-02, STR-08, STR-14, "
        "STR-15). Nothing shown yet: no `removed` (STR-07). Never after a user abort (STR-04).",
        "- A failure before the headers is retried in streaming mode first; once its budget is "
        "spent, one non-streaming fallback, with its own full budget (STR-05). A failed "
        "fallback surfaces the error: no second fallback (STR-06).",
        "- A stream with `finish_reason` is complete even without `[DONE]` (STR-09, STR-13). "
        "Tool calls of a failed stream never run (STR-03).",
        "- Idle watchdog: a stream silent for long is abandoned and recovered within the idle "
        "limit (STR-10; its scenarios judge a 330 s limit and stay silent 390 s); one silent "
        f"less than {WATCHDOG_FLOOR_S:g} s must not be.",
        f"- An empty 200 reply (no choices, or an empty message) is retried, at most "
        f"{MAX_EMPTY} times for one request, never taken as the answer (STR-16).",
        "",
        '## 5. Continue after `finish_reason: "length"`',
        "",
        "Append a user message with exactly this text (note the em dash, U+2014), report it as "
        "a `message` with `meta: true`, and call the model again (TRN-01, TRN-02):",
        "",
        "```text",
        CONTINUATION_TEXT,
        "```",
        "",
        "- With tool calls in the truncated reply: run the tools first; the next request "
        "carries their results, then the continuation message last (TRN-03). That does not "
        "count as a recovery, and a tool call resets the count (TRN-05, TRN-06).",
        f"- At most {MAX_RECOVERIES} consecutive continuations; a length finish after the "
        f"{MAX_RECOVERIES}rd ends the turn with an `error` event saying the output limit was "
        "repeatedly exceeded (TRN-04).",
        "- The request after a truncation carries the content produced so far (TRN-08); an "
        "assistant message carries its reasoning as `reasoning_content` and a non-empty "
        "`content` (a short note when the reply was reasoning only); no assistant message "
        "without content and tool calls is ever sent (RSN-01..04).",
        "- At your own default output limit (`config.max_output_tokens: null`), raise the limit "
        "once and resend the same messages before continuing (TRN-07).",
    ]


def _tool_calls() -> list[str]:
    """Check and run tool calls."""
    return [
        "",
        "## 6. Check and run tool calls",
        "",
        "- Arguments cut short by a length finish: close an unterminated string and unclosed "
        "`{`, nothing else, and run the call with a truncation warning after its output "
        "(TJS-02); an unclosed `[`, or text that still does not parse once closed: do not "
        "run it, and its error result contains exactly (TJS-01, TJS-03, TJS-04):",
        "",
        "```text",
        TRUNCATION_HINT,
        "```",
        "",
        "- Malformed arguments without a length finish: an invalid-JSON error without that "
        f"hint, with one of {_words(_INVALID_WORDS)} (TJS-05). Arguments (or an object or array "
        "field) sent as JSON text are decoded first (TJS-06).",
        "- An unknown tool: the error result names it, every available tool, and the closest "
        f"name after a suggestion word (regex `{_SUGGEST.pattern}`) (TOL-01).",
        "- Arguments that violate the tool's schema: not run; the result names each wrong "
        "field and what it expects (type, format or allowed values) (TOL-02).",
        "- A tool that fails becomes an error result and the turn goes on (TOL-03); a tool "
        "failure never resends the chat request (TOL-08); every tool call gets exactly one "
        "result in the next request (TOL-06), and tool calls without results in `history` get "
        "non-empty placeholder results before anything is sent (CTX-03).",
        f"- Time limit (`config.tool_timeout_s`, else your own; a scenario's deadline counts "
        f"{DEFAULT_TOOL_LIMIT_S:g} s for a tool without one): stop the call at the limit, at "
        f"most {LIMIT_LATE_SHARE * 100:g} % late, and say so with one of "
        f"{_words(_TIMEOUT_WORDS)} and the limit in seconds (TOL-04).",
        "- A permission denial: say the reason and how to obtain permission (regex "
        f"`{_HOW_TO.pattern}`), and do not call again (TOL-05). A transient failure (503 "
        "`transient`, or a timeout the tool reported) is retried before the next chat request, "
        "the model seeing only the success (TOL-07).",
        f"- Output over {OVER_CHARS} characters and {OVER_LINES} lines is cut, keeping head and "
        "tail, with a notice that holds a cut word (regex "
        f"`{_NOTICE.pattern}`) and the full size in characters, bytes or lines (FMT-01, "
        f"FMT-02); output under {SHORT_LINES} lines and {OVER_CHARS} characters reaches the "
        "model unchanged (FMT-03).",
    ]


def _loops() -> list[str]:
    """Break loops."""
    return [
        "",
        "## 7. Break loops",
        "",
        "- The same tool with the same arguments failing 3 times within 5 calls: the next "
        "request carries a user or system message after the tool results that names the tool "
        "and either says it failed repeatedly (regexes "
        f"`{_REPEATED.pattern}` and `{_FAILED.pattern}`) or tells the model not to retry it "
        f"the same way (regex `{_DONT.pattern}`) (LOP-01). Ignored: leave the tool out of the "
        "next requests' `tools` for a while (LOP-02).",
        f"- The same assistant text {TEXT_REPEATS} times in a row, or tool calls A-B-A-B: the "
        "next request carries a note after the last assistant message, or offers fewer tools, "
        f"or the turn stops (LOP-06). {COMPACTION_BREAKER} compaction failures in a row stop "
        "compaction (LOP-05). Every turn ends, whatever the faults (LOP-04).",
    ]


def _errors() -> list[str]:
    """Surface errors."""
    return [
        "",
        "## 8. Surface errors",
        "",
        "Intermediate errors are not shown (ERR-02). An error that exhausted its recovery ends "
        "the turn with an `error` event whose `kind` fits the last failure on the wire "
        f"(ERR-01; the vocabulary: {_words(sorted(TYPED_KINDS))}), and whose `message` names "
        f"each recovery tried: retries (regex `{_RETRY_WORDS.pattern}`), the non-streaming "
        'fallback ("stream"), the model fallback, compaction (ERR-04). An error that is not an '
        "API error (the output limit repeatedly exceeded, TRN-04) is not judged by ERR-01: its "
        "kind is yours to name.",
        "",
        *_kinds_table(),
    ]


def _key_and_crashes() -> list[str]:
    """Never leak the key, never crash."""
    return [
        "",
        "## 9. Never leak the key, never crash",
        "",
        "- The API key (`OPENAI_API_KEY`) appears nowhere you write: events, stderr, debug "
        "files, request bodies, even when a server echoes it back (DBG-02, judged on every run).",
        "- Every failure ends the turn with `turn_end`; exiting before it is a crash (ERR-05). "
        f"Exit {EXIT_UNSUPPORTED} only before your first model request (unsupported scenario).",
        f"- A scenario's turn must end within max(deadline, floor) x time_scale + "
        f"{ATTEMPT_OVERHEAD_S:g} s per request + {DEADLINE_GRACE_S:g} s, real (deadline {DEFAULT_DEADLINE_S:g} unless the "
        "scenario says; floor: what a correct agent may spend waiting), or it is TIMEOUT.",
    ]


def as_markdown() -> str:
    """The page docs/judged-on.md (`conformance list --judged-on`)."""
    caps, keys = capabilities(), config_keys()
    undescribed = sorted((set(caps) - set(CAPABILITIES)) | (set(keys) - set(CONFIG_KEYS)))
    if undescribed:
        raise ValueError(
            f"conformance/judged_page.py: no description for {', '.join(undescribed)}: add one "
            "to CAPABILITIES or CONFIG_KEYS"
        )
    out = [
        "# What you are judged on",
        "",
        "Generated by `conformance list --judged-on` from the criteria catalogue and the checks "
        "(every number and string below is the one the checks use). The protocol itself is in "
        "[adapter-protocol.md](adapter-protocol.md); every criterion, with its level and source, "
        "in [criteria.md](criteria.md); the conventions where the seeds leave the wire shape "
        'open in [contracts.md, section 5, "Observable conventions"]'
        "(contracts.md#5-observable-conventions-where-the-seeds-leave-the-wire-shape-open). "
        "A MUST that fails is FAIL, a SHOULD or MAY that fails is NON-STRICT; a criterion that "
        "needs a capability you do not declare is UNSUPPORTED. Judged on every run, whatever "
        "the scenario: " + _ids(sorted(INVARIANTS)) + ".",
        "",
        "## 1. Declare what you implement (`hello.capabilities`)",
        "",
        "| capability | what it promises | criteria that need it |",
        "|---|---|---|",
    ]
    out += [f"| `{c}` | {CAPABILITIES[c]} | {_ids(ids)} |" for c, ids in caps.items()]
    out += [
        "",
        "## 2. Honour the start message's `config`",
        "",
        "| key | what it asks | criteria judged on it |",
        "|---|---|---|",
    ]
    out += [f"| `{k}` | {CONFIG_KEYS[k][1]} | {CONFIG_KEYS[k][0]} |" for k in sorted(keys)]
    out += _retries()
    out += _streams_and_continuation()
    out += _tool_calls()
    out += _loops()
    out += _errors()
    out += _key_and_crashes()
    return "\n".join(out) + "\n"
