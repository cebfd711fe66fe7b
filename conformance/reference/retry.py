"""Sans-IO retry policy: classify a failed attempt and decide retry-or-surface and the delay.

Theory of operation: the caller counts retries per request mode (streaming and the one
non-streaming fallback each have their own budget of ``MAX_RETRIES``) and, after each failed
attempt, calls :func:`decide` with the number of retries already made in that mode, the failure
(an HTTP status or a connection-error kind), the response headers and the current time. The
result says whether to retry and how long to wait first. Nothing here reads a clock, sleeps or
draws randomness of its own: ``now`` and the jitter source are injected.

Delay precedence: a server-requested wait (``retry-after-ms``, then ``retry-after`` as seconds
or HTTP-date) replaces the backoff; a wait above ``MAX_RETRY_AFTER_S`` surfaces the error
instead of sleeping; otherwise the exponential backoff ``min(32, 0.5 * 2**(n-1))`` seconds with
25 % jitter (a factor in [0.75, 1.25]) is used. ``x-should-retry`` overrides the status table.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = [
    "BASE_DELAY_S",
    "CONNECTION_ERROR_KINDS",
    "ERROR_KINDS",
    "JITTER",
    "MAX_DELAY_S",
    "MAX_RETRIES",
    "MAX_RETRY_AFTER_S",
    "NON_RETRYABLE_STATUSES",
    "RETRYABLE_STATUSES",
    "RetryDecision",
    "classify",
    "decide",
    "jittered_backoff",
    "nominal_backoff",
    "parse_retry_after",
    "should_retry_header",
]

MAX_RETRIES = 10  # retries per request mode: 11 attempts in all
BASE_DELAY_S = 0.5
MAX_DELAY_S = 32.0
JITTER = 0.25
MAX_RETRY_AFTER_S = 60.0  # above this the error is surfaced rather than slept on

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
NON_RETRYABLE_STATUSES = frozenset({400, 401, 403, 404, 422})

ERROR_KINDS = frozenset(
    {
        "rate_limit",
        "overloaded",
        "server",
        "timeout",
        "connection",
        "auth",
        "permission",
        "not_found",
        "bad_request",
    }
)

# Connection-error kinds a driver may report, mapped to the typed error kind.
CONNECTION_ERROR_KINDS: Mapping[str, str] = {
    "refused": "connection",
    "reset": "connection",
    "closed": "connection",
    "dns": "connection",
    "tls": "connection",
    "timeout": "timeout",
}

_STATUS_KINDS: Mapping[int, str] = {
    400: "bad_request",
    401: "auth",
    403: "permission",
    404: "not_found",
    408: "timeout",
    409: "server",
    422: "bad_request",
    429: "rate_limit",
    529: "overloaded",
}


@dataclass(frozen=True)
class RetryDecision:
    """Outcome of one failed attempt.

    ``retry``: send the identical request again after ``delay_s`` seconds (unscaled).
    ``kind``: the typed error kind, to surface when ``retry`` is False.
    ``reason``: short human-readable why (for ``retry`` events and error messages).
    ``nominal_s``: the un-jittered backoff delay, or None when a server-requested wait is used.
    """

    retry: bool
    delay_s: float | None
    kind: str
    reason: str
    nominal_s: float | None = None


def nominal_backoff(retry_number: int, *, cap: bool = True, base: float = BASE_DELAY_S) -> float:
    """Nominal delay in seconds before retry ``retry_number`` (1-based): min(32, 0.5*2^(n-1)).

    ``cap=False`` (a broken copy) drops the 32 s cap; another ``base`` (a broken copy) starts
    the doubling elsewhere.
    """
    if retry_number < 1:
        raise ValueError(f"retry_number must be >= 1, got {retry_number}")
    # Cap the exponent so huge retry numbers cannot overflow.
    delay = base * float(2 ** min(retry_number - 1, 64))
    return min(MAX_DELAY_S, delay) if cap else delay


def jittered_backoff(
    retry_number: int,
    rand: Callable[[], float],
    *,
    cap: bool = True,
    base: float = BASE_DELAY_S,
    jitter: float = JITTER,
) -> float:
    """Nominal backoff times a jitter factor in [0.75, 1.25]; ``rand()`` returns a float in [0, 1].
    ``jitter=0`` (a broken copy) waits the nominal delay exactly."""
    r = rand()
    if not (isinstance(r, (int, float)) and 0.0 <= r <= 1.0):
        raise ValueError(f"jitter source must return a float in [0, 1], got {r!r}")
    return nominal_backoff(retry_number, cap=cap, base=base) * (1.0 - jitter + 2.0 * jitter * r)


def _lower(headers: Mapping[str, str] | None) -> dict[str, str]:
    return {str(k).lower(): str(v).strip() for k, v in (headers or {}).items()}


def parse_retry_after(headers: Mapping[str, str] | None, now: datetime) -> float | None:
    """Server-requested wait in seconds, or None when absent or unparseable.

    ``retry-after-ms`` (milliseconds) is preferred over ``retry-after`` (seconds or HTTP-date).
    A date in the past gives 0. ``now`` must be timezone-aware for HTTP-date comparison.
    """
    h = _lower(headers)
    ms = h.get("retry-after-ms")
    if ms:
        try:
            value = float(ms)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value / 1000.0
    ra = h.get("retry-after")
    if not ra:
        return None
    try:
        value = float(ra)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) and value >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def should_retry_header(headers: Mapping[str, str] | None) -> bool | None:
    """``x-should-retry``: True / False when the server says so, else None."""
    v = _lower(headers).get("x-should-retry", "").lower()
    if v == "true":
        return True
    if v == "false":
        return False
    return None


def classify(status: int | None = None, connection_error: str | None = None) -> str:
    """Typed error kind of a failure: an HTTP status, or a connection-error kind."""
    if status is None:
        if connection_error is None:
            raise ValueError("classify needs a status or a connection_error")
        if connection_error not in CONNECTION_ERROR_KINDS:
            raise ValueError(
                f"unknown connection_error {connection_error!r}; "
                f"expected one of {sorted(CONNECTION_ERROR_KINDS)}"
            )
        return CONNECTION_ERROR_KINDS[connection_error]
    if status in _STATUS_KINDS:
        return _STATUS_KINDS[status]
    return "server" if status >= 500 else "bad_request"


def _retryable(status: int | None) -> bool:
    return status is None or status in RETRYABLE_STATUSES or status >= 500


def decide(
    *,
    retries_done: int,
    now: datetime,
    rand: Callable[[], float],
    status: int | None = None,
    connection_error: str | None = None,
    headers: Mapping[str, str] | None = None,
    max_retries: int | None = MAX_RETRIES,
    honour_retry_after: bool = True,
    retry_after_on_time: bool = True,
    honour_should_retry: bool = True,
    backoff: bool = True,
    cap: bool = True,
    jitter: bool = True,
    full_base: bool = True,
    final_4xx: bool = True,
    bound_retry_after: bool = True,
) -> RetryDecision:
    """Decide whether the failed attempt is retried and after what delay (seconds, unscaled).

    ``retries_done``: retries already made in this request mode (0 after the first failure).
    Exactly one of ``status`` / ``connection_error`` describes the failure. The switches
    (``honour_retry_after``, ``honour_should_retry``, ``backoff``, ``cap``, ``jitter``,
    ``full_base``) exist so a deliberately broken agent can be built; ``backoff=False`` retries
    immediately, ``cap=False`` lets the backoff grow past 32 s, ``jitter=False`` waits the
    nominal delay exactly, ``full_base=False`` starts the backoff at half the base (0.25 s),
    ``final_4xx=False`` retries 400/401/403/404/422 like a 5xx, ``bound_retry_after=False``
    sleeps on any Retry-After however long, ``retry_after_on_time=False`` waits it twice over. ``max_retries=None`` never gives up.
    """
    if retries_done < 0:
        raise ValueError(f"retries_done must be >= 0, got {retries_done}")
    kind = classify(status, connection_error)
    what = f"HTTP {status}" if status is not None else f"connection {connection_error}"
    forced = should_retry_header(headers) if honour_should_retry else None
    if forced is False:
        return RetryDecision(False, None, kind, f"{what}: server sent x-should-retry: false")
    retryable = _retryable(status) or (not final_4xx and status in NON_RETRYABLE_STATUSES)
    if forced is None and not retryable:
        return RetryDecision(False, None, kind, f"{what} is not retryable")
    n = retries_done + 1
    if max_retries is not None and n > max_retries:
        return RetryDecision(False, None, kind, f"{what} after {retries_done} retries")
    asked = parse_retry_after(headers, now) if honour_retry_after else None
    if asked is not None:
        if asked > MAX_RETRY_AFTER_S and bound_retry_after:
            return RetryDecision(
                False,
                None,
                kind,
                f"{what}: Retry-After of {asked:g} s exceeds the {MAX_RETRY_AFTER_S:g} s bound",
            )
        wait = asked if retry_after_on_time else 2 * asked
        return RetryDecision(True, wait, kind, f"{what}: retry-after {asked:g} s")
    if not backoff:
        return RetryDecision(True, 0.0, kind, f"{what}: immediate retry", 0.0)
    base = BASE_DELAY_S if full_base else BASE_DELAY_S / 2
    nominal = nominal_backoff(n, cap=cap, base=base)
    delay = jittered_backoff(n, rand, cap=cap, base=base, jitter=JITTER if jitter else 0.0)
    return RetryDecision(True, delay, kind, f"{what}: backoff", nominal)
