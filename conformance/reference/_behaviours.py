"""The recovery behaviours of the reference agent, one switch each (the fuzzer's broken copies)."""

from __future__ import annotations

from dataclasses import dataclass

from .mcp_client import McpSwitches

__all__ = ["Behaviours"]


@dataclass(frozen=True)
class Behaviours:
    """One switch per recovery behaviour; all on. Switching one off breaks only that one."""

    honour_retry_after: bool = True
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
    # The MCP client's recoveries (tools over MCP): off, each breaks its MCP criterion.
    mcp_error_results: bool = True  # off: a failed MCP call raises, the turn crashes (MCP-01)
    mcp_reinitialize: bool = True  # off: an expired MCP session is not initialized again (MCP-02)
    mcp_cut_results: bool = True  # off: a cut or unreadable MCP answer raises (MCP-03)
    mcp_list_changes: bool = True  # off: tools/list_changed is ignored (MCP-04)

    @property
    def mcp(self) -> McpSwitches:
        """The MCP client's switches."""
        return McpSwitches(
            error_results=self.mcp_error_results,
            reinitialize=self.mcp_reinitialize,
            cut_results=self.mcp_cut_results,
            follow_list_changes=self.mcp_list_changes,
        )
