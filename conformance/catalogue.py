"""The criteria catalogue: every certified behaviour, in our own words, with its source.

Levels: MUST (stated outright by the seeds), SHOULD (recommended; a failure is NON-STRICT),
MAY (optional; needs a declared capability). ``capability`` names the adapter capability a
criterion needs; an agent that does not declare it gets UNSUPPORTED for that criterion.
``dialects`` names the wire dialects a criterion makes sense in (all three unless the behaviour
exists in fewer); run in another, it is INFORMATIONAL.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Criterion", "CATALOGUE", "AREAS", "by_id", "LEVELS", "DIALECTS", "as_markdown"]

LEVELS = ("MUST", "SHOULD", "MAY")

# The wire dialects the gateway speaks (the journal's names).
DIALECTS = ("openai_chat", "anthropic_messages", "openai_responses")

AREAS: dict[str, str] = {
    "RTY": "Request retry",
    "STR": "Streaming failure and non-streaming fallback",
    "TRN": "Output truncation and automatic continuation",
    "RSN": "Reasoning preservation",
    "TJS": "Tool-argument JSON",
    "TOL": "Tool-layer errors",
    "FMT": "Tool result size",
    "LOP": "Loops and caps",
    "CTX": "Context layer",
    "MFB": "Model fallback",
    "ERR": "Surfacing errors",
    "DBG": "Diagnostics",
    "CTL": "Control decisions",
}


@dataclass(frozen=True)
class Criterion:
    """One certified behaviour."""

    id: str
    level: str
    area: str
    title: str
    text: str
    source: str
    capability: str | None = None
    dialects: tuple[str, ...] = DIALECTS


_S000_RATE = "seed 000, 速率限制弹性"
_S000_STREAM = "seed 000, 流式响应正文中途断连时降级为非流式重发"
_S000_TRN = "seed 000, 截断时自动继续"
_S000_TRN_TOOLS = "seed 000, 带工具调用的截断"
_S000_TRN_CAP = "seed 000, 连续截断恢复上限"
_S000_RSN = "seed 000, 截断恢复时保留推理内容"
_S000_TJS_BAD = "seed 000, 处理格式错误的工具参数"
_S000_TJS_CUT = "seed 000, 恢复截断的工具参数"
_S000_DBG = "seed 000, 调试 API 错误"
_BEYOND = "criteria.md, beyond the seeds (production SDK and agent retry code)"

# (id, level, title, text, source, capability)
_ROWS: tuple[tuple[str, str, str, str, str, str | None], ...] = (
    # RTY
    (
        "RTY-01",
        "MUST",
        "Retry-After in seconds is honoured",
        "After a 429 carrying Retry-After in seconds, the next attempt waits at least the asked "
        "time (and not much longer), in place of the backoff delay.",
        _S000_RATE + ", scenario 1",
        None,
    ),
    (
        "RTY-02",
        "SHOULD",
        "Retry-After as an HTTP-date is honoured",
        "A Retry-After header given as an HTTP-date is honoured like the seconds form.",
        "seed 001, retry policy (Retry-After)",
        None,
    ),
    (
        "RTY-03",
        "MUST",
        "Exponential backoff without Retry-After",
        "After a 429 without Retry-After, retries back off exponentially: 500 ms base, doubling "
        "per attempt, 25 % jitter, capped at 32 s.",
        _S000_RATE + ", scenario 2",
        None,
    ),
    (
        "RTY-04",
        "MUST",
        "Retry budget of 10",
        "One request is retried up to 10 times: a burst of 10 failures is survived, and after an "
        "11th failure that request is not sent again in the same mode.",
        _S000_RATE + ", scenario 3",
        None,
    ),
    (
        "RTY-05",
        "MUST",
        "5xx retried like 429",
        "Server errors 500, 502, 503, 504 and 529 are retried with the same policy as 429: the "
        "same backoff and the same budget of 10 retries per request.",
        _S000_RATE + ", requirements",
        None,
    ),
    (
        "RTY-06",
        "MUST",
        "Connection failures and timeouts retried",
        "Refused or reset connections before response headers, and request timeouts, are retried "
        "with the same policy (backoff and budget).",
        "seed 001, retryable errors; seed 002, connection errors",
        None,
    ),
    (
        "RTY-07",
        "MUST",
        "Non-retryable 4xx not retried",
        "Client errors 400, 401, 403, 404 and 422 are never resent unchanged.",
        _S000_RATE + ", requirements; seed 001, non-retryable errors",
        None,
    ),
    (
        "RTY-08",
        "SHOULD",
        "Jitter is real",
        "Retry delays vary: the ratios of observed to nominal delay are not all identical.",
        _S000_RATE + ", scenario 2 (jitter)",
        None,
    ),
    (
        "RTY-09",
        "SHOULD",
        "Background requests fail fast",
        "Auxiliary background requests (titles, summaries) are not retried on 429 or 529.",
        "seed 001, foreground vs background requests",
        "background_requests",
    ),
    (
        "RTY-10",
        "MAY",
        "Expired credentials refreshed once",
        "A 401 for expired credentials leads to one credential refresh and one retry.",
        "seed 001, authentication errors",
        "credential_refresh",
    ),
    (
        "RTY-11",
        "SHOULD",
        "Context overflow corrected by lowering max tokens",
        "When input plus maximum output exceeds the context window, the maximum output is lowered "
        "and the request retried.",
        "seed 001, max-tokens overflow adjustment",
        None,
    ),
    (
        "RTY-12",
        "MUST",
        "A retry resends the identical request",
        "Each retry of a request carries exactly the same body as the failed attempt.",
        _S000_RATE + "; seed 002, retry semantics",
        None,
    ),
    (
        "RTY-13",
        "SHOULD",
        "retry-after-ms honoured and preferred",
        "The retry-after-ms header is honoured and takes precedence over Retry-After.",
        _BEYOND,
        None,
    ),
    (
        "RTY-14",
        "SHOULD",
        "Excessive Retry-After is bounded",
        "A very long Retry-After (e.g. an hour) never makes the agent sleep that long: it surfaces "
        "the error or caps the wait at a documented bound.",
        _BEYOND,
        None,
    ),
    (
        "RTY-15",
        "MAY",
        "x-should-retry honoured",
        "x-should-retry: false suppresses a retry; x-should-retry: true forces one.",
        _BEYOND,
        "should_retry_header",
    ),
    (
        "RTY-16",
        "SHOULD",
        "408 and 409 retried",
        "Request timeout (408) and conflict (409) are retried like 429: the same backoff and "
        "the same budget of 10 retries per request.",
        _BEYOND,
        None,
    ),
    # STR
    (
        "STR-01",
        "MUST",
        "Mid-stream failure falls back to non-streaming",
        "When the body fails after headers (and the user did not abort), partial output is "
        "discarded and the same request is resent once with stream false; its result is the turn's.",
        _S000_STREAM + ", scenario 1",
        None,
    ),
    (
        "STR-02",
        "MUST",
        "Partial messages withdrawn by id",
        "Messages shown from the failed attempt are withdrawn by id so no half text or dangling "
        "tool block remains.",
        _S000_STREAM + ", scenario 2",
        None,
    ),
    (
        "STR-03",
        "MUST",
        "Tool calls from a failed stream never run",
        "Tool calls parsed from a failed streaming attempt are never executed.",
        _S000_STREAM + ", scenario 3",
        "tools",
    ),
    (
        "STR-04",
        "MUST",
        "No fallback on user abort",
        "A user abort during the stream does not trigger the non-streaming fallback.",
        _S000_STREAM + ", scenario 4",
        "abort",
    ),
    (
        "STR-05",
        "MUST",
        "Failure before headers: retries, then one fallback",
        "A failure before headers is retried with backoff first; once exhausted, one "
        "non-streaming fallback is made, which itself retries fully.",
        _S000_STREAM + ", scenario 5",
        None,
    ),
    (
        "STR-06",
        "MUST",
        "Failed fallback surfaces the error",
        "When the fallback request fails too, the error is shown; no second fallback, no loop.",
        _S000_STREAM + ", edge cases",
        None,
    ),
    (
        "STR-07",
        "MUST",
        "Nothing streamed: fallback without removal",
        "If nothing was streamed yet, the fallback happens directly and no removal is announced.",
        _S000_STREAM + ", edge cases",
        None,
    ),
    (
        "STR-08",
        "MUST",
        "Clean close without finish marker is truncation",
        "A stream that ends cleanly without ever sending finish_reason is treated as cut and takes "
        "the fallback path.",
        _S000_STREAM + ", edge cases",
        None,
    ),
    (
        "STR-09",
        "MUST",
        "Healthy stream: no fallback",
        "A stream that completes with finish_reason is not followed by a fallback request.",
        _S000_STREAM + ", regression guard",
        None,
    ),
    (
        "STR-10",
        "SHOULD",
        "Idle watchdog",
        "Headers received but no chunk within the idle limit: the stream is aborted and recovered.",
        "seed 001, stream idle timeout",
        None,
    ),
    (
        "STR-11",
        "SHOULD",
        "Only the successful request's usage counts",
        "Token usage is recorded only for the request that succeeded.",
        "seed 001, usage accounting",
        None,
    ),
    (
        "STR-12",
        "MAY",
        "Fallback can be disabled",
        "Configuration can switch the non-streaming fallback off.",
        "seed 001, fallback configuration",
        "stream_fallback_config",
    ),
    (
        "STR-13",
        "SHOULD",
        "finish_reason without [DONE] is complete",
        "A stream carrying finish_reason but missing [DONE] counts as a finished turn.",
        _S000_STREAM + ", edge cases",
        None,
    ),
    (
        "STR-14",
        "SHOULD",
        "Malformed SSE event is a stream failure",
        "A malformed event in the middle of the stream is a failure and takes the fallback path.",
        "seed 001, stream parsing errors",
        None,
    ),
    (
        "STR-15",
        "SHOULD",
        "In-band error event is a failure",
        "An error object delivered inside a 200 stream is a failure, never a finished turn.",
        _BEYOND,
        None,
    ),
    (
        "STR-16",
        "SHOULD",
        "Empty 200 reply retried, bounded",
        "A 200 reply with no choices or an empty assistant message is retried a bounded number of "
        "times.",
        _BEYOND,
        None,
    ),
    # TRN
    (
        "TRN-01",
        "MUST",
        "Automatic continuation after length",
        "After finish_reason length, a hidden user message with the seed's exact continuation "
        "text is appended and a new call is made without user action.",
        _S000_TRN + ", scenario 1",
        None,
    ),
    (
        "TRN-02",
        "MUST",
        "Continuation message is hidden",
        "The continuation message is sent on the wire but shown to the user only as meta.",
        _S000_TRN + ", scenario 2",
        None,
    ),
    (
        "TRN-03",
        "MUST",
        "Truncation with tool calls: tools first",
        "A truncated reply with tool calls has its tools run first, then the continuation message, "
        "then a new call.",
        _S000_TRN_TOOLS,
        "tools",
    ),
    (
        "TRN-04",
        "MUST",
        "At most 3 consecutive recoveries",
        "The first three consecutive truncations are each continued; the fourth ends the turn "
        "with an error saying the output limit was repeatedly exceeded.",
        _S000_TRN_CAP + ", scenario 1",
        None,
    ),
    (
        "TRN-05",
        "MUST",
        "Tool call resets the recovery count",
        "A tool call between truncations resets the consecutive-recovery count.",
        _S000_TRN_CAP + ", scenario 2",
        "tools",
    ),
    (
        "TRN-06",
        "MUST",
        "Truncation with tool calls does not count",
        "A truncated reply that carries tool calls does not consume the recovery count.",
        _S000_TRN_CAP + ", scenario 3",
        "tools",
    ),
    (
        "TRN-07",
        "SHOULD",
        "Raise the output limit first",
        "At the default output limit with no user override, the limit is raised before continuing.",
        "seed 001, max output tokens escalation",
        None,
    ),
    (
        "TRN-08",
        "MUST",
        "Produced content kept in history",
        "The request after a truncation carries the content produced so far.",
        _S000_TRN + ", requirements",
        None,
    ),
    (
        "TRN-09",
        "MUST",
        "User abort stops recovery",
        "A user abort during recovery stops the continuation recursion.",
        _S000_TRN + ", edge cases",
        "abort",
    ),
    (
        "TRN-10",
        "MAY",
        "Backgrounded tool stops recovery",
        "A tool moved to the background during recovery stops the recursion.",
        _S000_TRN + ", edge cases",
        "background_tools",
    ),
    # RSN
    (
        "RSN-01",
        "MUST",
        "Reasoning-only truncation keeps reasoning",
        "After a truncated reply holding only reasoning, the next request carries that assistant "
        "message with reasoning_content and a non-empty explanatory content.",
        _S000_RSN + ", scenario 1",
        None,
    ),
    (
        "RSN-02",
        "MUST",
        "Reasoning sent alongside real text",
        "After a truncated reply with text, reasoning_content is sent alongside and content is "
        "the real text.",
        _S000_RSN + ", scenario 2",
        None,
    ),
    (
        "RSN-03",
        "MUST",
        "Empty assistant turns never sent",
        "An assistant turn with no text, no tool calls and no reasoning is never sent.",
        _S000_RSN + ", scenario 3",
        None,
    ),
    (
        "RSN-04",
        "MUST",
        "Wire invariant: assistant messages have content or tool calls",
        "No assistant message without content and without tool_calls is ever sent.",
        _S000_RSN + ", requirements",
        None,
    ),
    # TJS
    (
        "TJS-01",
        "MUST",
        "Truncation hint on malformed arguments",
        "Malformed tool arguments with finish_reason length (an unclosed '[', or text that "
        "closing strings and braces does not make parse) are not executed, and their error "
        "contains the seed's exact hint '(output truncated, please reduce your output)'.",
        _S000_TJS_BAD,
        "tools",
    ),
    (
        "TJS-02",
        "MUST",
        "Cut-short arguments recovered",
        "Arguments missing a closing brace or quote are closed, parsed and executed, with a "
        "truncation warning appended to the result.",
        _S000_TJS_CUT + ", scenario 1",
        "tools",
    ),
    (
        "TJS-03",
        "MUST",
        "Unclosed array not recovered",
        "Arguments with an unclosed '[' are not recovered; the standard error is returned.",
        _S000_TJS_CUT + ", scenario 2",
        "tools",
    ),
    (
        "TJS-04",
        "MUST",
        "Unparsable recovered text is an error",
        "If the recovered text still does not parse, the error is returned, with the truncation "
        "hint when finish_reason is length.",
        _S000_TJS_CUT + ", scenario 3",
        "tools",
    ),
    (
        "TJS-05",
        "SHOULD",
        "Malformed arguments without truncation",
        "Malformed arguments without truncation give an invalid-JSON error without the "
        "truncation hint.",
        "seed 002, tool argument validation",
        "tools",
    ),
    (
        "TJS-06",
        "SHOULD",
        "JSON-encoded object repaired",
        "An object sent as a JSON-encoded string is decoded before execution.",
        "seed 002, tool argument repair",
        "tools",
    ),
    # TOL
    (
        "TOL-01",
        "MUST",
        "Unknown tool reported with suggestions",
        "Calling an unknown tool yields an error result that says so, lists the available tools "
        "and suggests the closest name.",
        "seed 004, §7.1",
        "tools",
    ),
    (
        "TOL-02",
        "MUST",
        "Schema violation names the field",
        "Arguments violating the schema give an error naming the field and the expected type.",
        "seed 004, §7.1",
        "tools",
    ),
    (
        "TOL-03",
        "MUST",
        "Raising tool captured",
        "A tool that raises becomes an error result and the loop continues.",
        "seed 004, §7.3",
        "tools",
    ),
    (
        "TOL-04",
        "MUST",
        "Tool timeout enforced",
        "A tool past its time limit is stopped and reported as timed out, stating the limit.",
        "seed 004, §7.3",
        "tools",
    ),
    (
        "TOL-05",
        "SHOULD",
        "Permission denied explained, not retried",
        "A permission denial gives the reason and how to obtain permission, and is not retried.",
        "seed 004, §7.5",
        "tools",
    ),
    (
        "TOL-06",
        "MUST",
        "Tool call / result pairing",
        "Every tool call gets exactly one result in the next request.",
        "seed 004, §7.3; seed 001, tool result pairing",
        "tools",
    ),
    (
        "TOL-07",
        "SHOULD",
        "Transient tool failures retried invisibly",
        "Transient tool failures (timeout, network) are retried by the harness without the model "
        "seeing them.",
        "seed 004, §7.3",
        "tools",
    ),
    (
        "TOL-08",
        "MUST",
        "Tool failures never retried as API requests",
        "A tool failure never causes the chat request to be resent.",
        "seed 002, error layers",
        "tools",
    ),
    (
        "TOL-09",
        "MAY",
        "Batch tools report per item",
        "A batch tool reports completed, failed and skipped items.",
        "seed 004, §7.3",
        "batch_tools",
    ),
    # FMT
    (
        "FMT-01",
        "MUST",
        "Oversized output cut with notice",
        "Tool output over the limit is cut with an explicit notice giving the full size.",
        "seed 004, §7.2",
        "tools",
    ),
    (
        "FMT-02",
        "SHOULD",
        "Head and tail kept",
        "A cut output keeps its head and tail and states how much was omitted.",
        "seed 004, §7.2",
        "tools",
    ),
    (
        "FMT-03",
        "MUST",
        "Short output verbatim",
        "Tool output under the limit is passed through unchanged.",
        "seed 004, §7.2",
        "tools",
    ),
    # LOP
    (
        "LOP-01",
        "MUST",
        "Repeated failing call triggers a reminder",
        "The same tool with the same arguments failing 3 times within 5 calls leads to a reminder "
        "in the next request that names the tool and says it failed repeatedly or must not be "
        "retried the same way.",
        "seed 004, §7.6",
        "tools",
    ),
    (
        "LOP-02",
        "SHOULD",
        "Ignored reminder disables the tool",
        "If the reminder is ignored, the tool is removed from the tools list for a while.",
        "seed 004, §7.6",
        "tools",
    ),
    (
        "LOP-03",
        "MUST",
        "Tool-call cap per turn",
        "A cap on tool calls per turn pauses or ends the turn.",
        "seed 004, §7.6",
        "tools",
    ),
    (
        "LOP-04",
        "MUST",
        "Every recovery path is bounded",
        "Under any fault schedule the turn ends.",
        "seed 004, §7.6; seed 002, bounded recovery",
        None,
    ),
    (
        "LOP-05",
        "SHOULD",
        "Compaction failures stop compaction",
        "Three consecutive compaction failures stop further compaction attempts.",
        "seed 002, compaction circuit breaker",
        "compaction",
    ),
    (
        "LOP-06",
        "SHOULD",
        "Repetition detected as a loop",
        "The same assistant text three times in a row, or an A-B-A-B tool-call pattern, is "
        "treated as a loop.",
        _BEYOND,
        "tools",
    ),
    # CTX
    (
        "CTX-01",
        "SHOULD",
        "Prompt too long: one reactive compaction",
        "A prompt-too-long error is not resent verbatim; one reactive compaction per user turn, "
        "then a retry.",
        "seed 001, reactive compaction; seed 002",
        "compaction",
    ),
    (
        "CTX-02",
        "SHOULD",
        "Second overflow surfaces the error",
        "Overflow again in the same turn surfaces the original error.",
        "seed 001, reactive compaction",
        "compaction",
    ),
    (
        "CTX-03",
        "MUST",
        "Unpaired tool calls repaired",
        "Tool calls without results in history get placeholder results before sending.",
        "seed 001, message normalisation; seed 002",
        None,
    ),
    (
        "CTX-04",
        "MAY",
        "Training-data mode refuses repair",
        "In training-data mode the pairing repair is refused.",
        "seed 002, training-data mode",
        "training_data_mode",
    ),
    (
        "CTX-05",
        "MAY",
        "Oversized media stripped",
        "Media too large for the request is stripped and the request retried.",
        "seed 001, media size errors",
        "media",
    ),
    # MFB
    (
        "MFB-01",
        "SHOULD",
        "Repeated overload switches model",
        "Consecutive overload errors (529 / overloaded_error) with a fallback model configured "
        "switch the model.",
        "seed 001, model fallback; seed 002",
        "fallback_model",
    ),
    (
        "MFB-02",
        "MUST",
        "404 and access errors never switch model",
        "Not-found and model-access errors never trigger the model fallback.",
        "seed 001, model fallback",
        "fallback_model",
    ),
    (
        "MFB-03",
        "SHOULD",
        "No switch on the first overload",
        "A single overload does not switch the model.",
        "seed 001, model fallback",
        "fallback_model",
    ),
    (
        "MFB-04",
        "SHOULD",
        "Vendor-private blocks stripped on fallback",
        "Signatures and other vendor-private fields are removed before the fallback model sees "
        "the history.",
        "seed 001, model fallback",
        "fallback_model",
    ),
    # ERR
    (
        "ERR-01",
        "MUST",
        "Exhausted errors are typed",
        "An API error that exhausted its retries is surfaced as a typed error (rate_limit, "
        "timeout, connection, prompt_too_long, auth, ...), even when the agent reports the turn "
        "as completed.",
        "seed 001, error classification; seed 002",
        None,
    ),
    (
        "ERR-02",
        "MUST",
        "Intermediate errors withheld",
        "Recoverable intermediate errors are not shown: the user sees the final success or the "
        "exhausted failure.",
        "seed 001, error surfacing; seed 004",
        None,
    ),
    (
        "ERR-03",
        "SHOULD",
        "No stop hook after an API error",
        "The stop hook does not run after a turn that ended in an API error.",
        "seed 001, stop hooks",
        "hooks",
    ),
    (
        "ERR-04",
        "SHOULD",
        "Surfaced error names recovery tried",
        "The error shown names the recovery actions that were attempted.",
        "seed 004, §7.9",
        None,
    ),
    (
        "ERR-05",
        "MUST",
        "Never crash",
        "Every failure ends the turn cleanly; the agent never crashes.",
        "seed 002, robustness; seed 004",
        None,
    ),
    # DBG
    (
        "DBG-01",
        "MUST",
        "HTTP 400 dumped for debugging",
        "On HTTP 400, the request messages, model configuration and error details are saved to a "
        "temporary directory.",
        _S000_DBG,
        "debug_dump",
    ),
    (
        "DBG-02",
        "MUST",
        "Secrets redacted",
        "Nothing the agent writes contains the API key, whatever a server echoes: not its "
        "events, its log, its debug dumps or its request bodies (judged on every run).",
        _S000_DBG + "; seed 004, §7.9",
        None,
    ),
    (
        "DBG-03",
        "MAY",
        "Structured tool-call log",
        "A structured log record is written per tool call.",
        "seed 004, §7.9",
        "debug_dump",
    ),
    # CTL
    (
        "CTL-01",
        "MUST",
        "User abort stops all recovery",
        "After a user abort there is no retry, no fallback and no continuation.",
        _S000_STREAM + " (abort); seed 001, abort handling",
        "abort",
    ),
    (
        "CTL-02",
        "SHOULD",
        "Hook block is a decision",
        "A hook's block is never retried automatically.",
        "seed 001, hooks",
        "hooks",
    ),
)

# Criteria whose behaviour exists in fewer dialects than all, and why.
_ONLY_IN: dict[str, tuple[str, ...]] = {
    # A finish marker without the end-of-stream marker: chat's finish chunk without [DONE],
    # Anthropic's message_delta without message_stop. The Responses terminal event is both.
    "STR-13": ("openai_chat", "anthropic_messages"),
    # Usage of a failed attempt: a Responses stream carries usage only on its terminal event,
    # so a failed Responses attempt never carries any, and there is nothing to count wrongly.
    "STR-11": ("openai_chat", "anthropic_messages"),
}

CATALOGUE: tuple[Criterion, ...] = tuple(
    Criterion(
        id=i,
        level=lv,
        area=i.split("-")[0],
        title=t,
        text=x,
        source=s,
        capability=c,
        dialects=_ONLY_IN.get(i, DIALECTS),
    )
    for (i, lv, t, x, s, c) in _ROWS
)

_BY_ID: dict[str, Criterion] = {c.id: c for c in CATALOGUE}


def by_id(criterion_id: str) -> Criterion:
    """The criterion with that ID; KeyError naming the ID when unknown."""
    try:
        return _BY_ID[criterion_id]
    except KeyError:
        raise KeyError(f"unknown criterion id: {criterion_id!r}") from None


def as_markdown() -> str:
    """The catalogue as a Markdown page (the source of docs/criteria.md)."""
    # The checks import this module: read what they declare only when the page is made.
    from conformance.checks import FINAL_ON_PARTIAL, INVARIANTS

    out = [
        "# Criteria catalogue",
        "",
        "Generated from `conformance/catalogue.py`. MUST failures are FAIL; SHOULD and MAY "
        "failures are NON-STRICT; a criterion whose capability the agent does not declare is "
        "UNSUPPORTED. A criterion limited to some wire dialects (column *dialects*; `all` = "
        + ", ".join(f"`{d}`" for d in DIALECTS)
        + ") is INFORMATIONAL when the scenario is run in another.",
        "",
        "Judged on every run, whatever criteria the scenario lists: "
        + ", ".join(sorted(INVARIANTS))
        + ". When the turn never ends (TIMEOUT, or an ERROR before `turn_end`), only the "
        "criteria marked *final* in the column *cut short* are judged, on what the wire already "
        "shows: a violation of theirs (one attempt too many, a request that must not be sent) "
        "stands whatever would have come after. The others, which need the end of the turn, "
        "stay TIMEOUT or ERROR.",
    ]
    for area, name in AREAS.items():
        out += [
            "",
            f"## {area}: {name}",
            "",
            "| ID | level | capability | dialects | cut short | criterion | source |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in CATALOGUE:
            if c.area == area:
                text = f"**{c.title}.** {c.text}".replace("|", "\\|")
                only = "all" if c.dialects == DIALECTS else ", ".join(f"`{d}`" for d in c.dialects)
                final = "final" if c.id in FINAL_ON_PARTIAL else "-"
                out.append(
                    f"| {c.id} | {c.level} | {c.capability or '-'} | {only} | {final} | {text} "
                    f"| {c.source} |"
                )
    return "\n".join(out) + "\n"
