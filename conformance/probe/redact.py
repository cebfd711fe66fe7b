"""Keeping the API key, the values of extra headers and query parameters, and URL credentials
out of everything the probe writes or prints."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import Any

from fakes.session import SECRET_HEADERS  # the one list of credential headers
from reports.probe import keep_vocabulary  # the report's list of the probe's own words

__all__ = ["MASK", "SECRET_HEADERS", "keep_vocabulary", "safe_url", "scrub"]

MASK = "[REDACTED]"


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment (they may hold credentials)."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    if u.port:
        host += f":{u.port}"
    return urllib.parse.urlunsplit((u.scheme, host, u.path, "", ""))


def scrub(value: Any, secrets: str | Iterable[str | None] | None) -> Any:
    """``value`` with every secret masked in every string and every credential header's value
    masked, however deep in dicts and lists (a gateway may echo a secret back in a body or a
    header). ``secrets`` is one secret or several; empty ones are ignored. Keys are left as they
    are: they are the document's structure (``stream``, ``headers``), not what a gateway said."""
    if secrets is None or isinstance(secrets, str):
        secrets = [secrets]
    # Longest first, so a secret containing another is masked whole.
    found = sorted({s for s in secrets if s}, key=len, reverse=True)
    return _scrub(value, found)


def _scrub(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for s in secrets:
            value = value.replace(s, MASK)
        return value
    if isinstance(value, dict):
        return {
            k: (MASK if k.lower() in SECRET_HEADERS else _scrub(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    return value
