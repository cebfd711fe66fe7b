"""The recovery behaviours of the reference agent, one switch each (the fuzzer's broken copies)."""

from __future__ import annotations

from dataclasses import dataclass

from .mcp_client import McpSwitches

__all__ = ["Behaviours"]


@dataclass(frozen=True)
class Behaviours:
    """One switch per recovery behaviour; all on. Switching one off breaks only that one."""

    honour_retry_after: bool = True
    # off: a Retry-After is waited twice over, late by less than a loaded machine makes a wait
    # at the default time scale (RTY-01: a late failure is run again beside the others, then
    # confirmed alone: conformance.verify.beside)
    retry_after_on_time: bool = True
    backoff: bool = True
    retry_5xx: bool = True
    retry_connection_errors: bool = True
    stream_fallback: bool = True
    remove_partial_messages: bool = True
    continuation: bool = True
    output_truncation: bool = True
    reasoning_preservation: bool = True
    withhold_errors: bool = True
    idle_watchdog: bool = True
    history_repair: bool = True
    model_fallback: bool = True
    context_recovery: bool = True  # CTX-01: one reactive compaction on prompt too long
    window_correction: bool = True  # RTY-11: a window overflow lowers max_tokens once
    loop_detection: bool = True
    credential_refresh: bool = True  # RTY-10: an expired-credential 401 refreshes once
    # RTY-10: the refresh asks the run's credential source; off: the 401'd request is resent
    # with the key that expired (a plain retry that calls itself a refresh).
    fresh_credentials: bool = True
    background_tools: bool = True  # TRN-10: run_in_background calls are not waited for
    media_stripping: bool = True  # CTX-05: media too large -> resend without media once
    compaction_breaker: bool = True  # LOP-05: 3 failed compactions in a row stop compacting
    # Broken copies for the fuzzer: off = a classic agent bug.
    bound_continuations: bool = True  # off: the continuation never stops (TRN-04)
    discard_failed_tool_calls: bool = True  # off: a failed stream's tool calls run (STR-03)
    stop_on_abort: bool = True  # off: after an abort the agent retries / falls back (CTL-01)
    retry_budget: bool = True  # off: 11 retries of one request instead of 10 (RTY-04)
    give_up_when_exhausted: bool = True  # off: retryable errors are retried without end (RTY-04)
    backoff_cap: bool = True  # off: the backoff 0.5 x 2^(n-1) s is never capped at 32 s (RTY-03)
    jitter: bool = True  # off: every backoff wait is its nominal value exactly (RTY-08)
    backoff_base: bool = True  # off: the backoff starts at 0.25 s instead of 0.5 s (RTY-03)
    fallback_after_first_cut: bool = True  # off: a cut stream is resent streaming 10 times first
    honest_exit: bool = True  # off: the front end exits 89 "unsupported" after turn_end
    strict_truncated_json: bool = True  # off: a dangling key is dropped and the call run (TJS-04)
    redact_own_key: bool = True  # off: the key a server echoes reaches events, logs, dumps (DBG-02)
    final_client_errors: bool = True  # off: 400/401/403/404/422 are retried like a 5xx (RTY-07)
    bound_retry_after: bool = True  # off: a Retry-After of an hour is slept on (RTY-14)
    should_retry_header: bool = True  # off: x-should-retry is ignored (RTY-15)
    fallback_on_overload_only: bool = True  # off: a 403/404 switches to the fallback (MFB-02)
    overloads_before_fallback: bool = True  # off: the first overload switches model (MFB-03)
    strip_private_on_fallback: bool = True  # off: signatures reach the fallback model (MFB-04)
    aux_single_attempt: bool = True  # off: a title request is resent after a 429/529 (RTY-09)
    hide_continuation: bool = True  # off: the continuation message is shown as the user's (TRN-02)
    keep_partial_output: bool = True  # off: a cut reply is not kept in history (TRN-08)
    tool_calls_reset_count: bool = (
        True  # off: tool calls do not reset the truncation count (TRN-05)
    )
    free_tool_truncation: bool = True  # off: a cut reply with tool calls counts (TRN-06)
    drop_empty_turns: bool = True  # off: an empty assistant turn is sent back in history (RSN-03)
    debug_dump: bool = True  # off: a rejected request (HTTP 400) is not dumped (DBG-01)
    one_compaction_per_turn: bool = True  # off: a second overflow compacts again (CTX-02)
    hook_block_final: bool = True  # off: a stop hook's block reruns the turn (CTL-02)
    no_hook_after_error: bool = True  # off: the stop hook runs after an API error too (ERR-03)
    successful_usage_only: bool = True  # off: a failed attempt's usage counts too (STR-11)
    finish_completes: bool = True  # off: a stream without [DONE] failed, finish or not (STR-13)
    fallback_switch: bool = True  # off: stream_fallback: false in the config is ignored (STR-12)
    training_mode_refusal: bool = True  # off: training-data mode repairs history too (CTX-04)
    placeholder_repair: bool = True  # off: an unanswered history call is dropped (CTX-03)
    tool_call_log: bool = True  # off: no structured record per tool call (DBG-03)
    typed_errors: bool = True  # off: every surfaced error has the kind "error" (ERR-01)
    name_recovery_tried: bool = True  # off: a surfaced error names no recovery tried (ERR-04)
    identical_retries: bool = True  # off: a retry carries a note of its attempt (RTY-12)
    contain_crashes: bool = True  # off: a malformed event raises, the agent dies mid-turn (ERR-05)
    # The tool layer's broken copies (off = a classic tool-layer bug).
    reject_unknown_tools: bool = True  # off: an unknown tool's call goes to the tool host (TOL-01)
    suggest_closest_tool: bool = True  # off: the unknown-tool error suggests no name (TOL-01)
    validate_arguments: bool = True  # off: arguments run unchecked against the schema (TOL-02)
    capture_tool_errors: bool = True  # off: a tool's execution error ends the turn (TOL-03)
    tool_time_limit: bool = True  # off: a tool is waited for however long it runs (TOL-04)
    exact_tool_limit: bool = True  # off: the limit timer runs twice the limit it states (TOL-04)
    final_denials: bool = True  # off: a permission denial is retried like a blip (TOL-05)
    retry_transient_tools: bool = True  # off: a transient tool failure goes to the model (TOL-07)
    keep_tool_errors_local: bool = True  # off: a tool failure resends the chat request (TOL-08)
    report_skipped_items: bool = True  # off: a batch's skipped items are left unreported (TOL-09)
    recover_truncated_arguments: bool = True  # off: cut-short arguments are never closed (TJS-02)
    refuse_unclosed_array: bool = True  # off: the repair closes '[' too and runs the call (TJS-03)
    hint_only_on_length: bool = True  # off: every invalid-JSON error gets the cut hint (TJS-05)
    decode_string_arguments: bool = True  # off: an object sent as JSON text is not decoded (TJS-06)
    cap_tool_output: bool = True  # off: tool output reaches the model uncut, however long (FMT-01)
    keep_output_tail: bool = True  # off: a cut output keeps its head only (FMT-02)
    verbatim_tool_output: bool = True  # off: every tool output is whitespace-stripped (FMT-03)
    block_ignored_tool: bool = True  # off: an ignored loop reminder keeps the tool offered (LOP-02)
    tool_call_cap: bool = True  # off: no cap on tool calls per turn (LOP-03)
    sse_across_reads: bool = True  # off: each network read is taken as whole events (STR-09)
    # The MCP client's recoveries (tools over MCP): off, each breaks its MCP criterion.
    mcp_error_results: bool = True  # off: a failed MCP call raises, the turn crashes (MCP-01)
    mcp_error_messages: bool = True  # off: a failed MCP call's result drops its message (MCP-01)
    mcp_reinitialize: bool = True  # off: an expired MCP session is not initialized again (MCP-02)
    mcp_cut_results: bool = True  # off: a cut or unreadable MCP answer raises (MCP-03)
    mcp_list_changes: bool = True  # off: tools/list_changed is ignored (MCP-04)

    @property
    def mcp(self) -> McpSwitches:
        """The MCP client's switches."""
        return McpSwitches(
            error_results=self.mcp_error_results,
            error_messages=self.mcp_error_messages,
            reinitialize=self.mcp_reinitialize,
            cut_results=self.mcp_cut_results,
            follow_list_changes=self.mcp_list_changes,
        )
