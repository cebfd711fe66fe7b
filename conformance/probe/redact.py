"""Keeping the API key and URL credentials out of everything the probe writes or prints."""

from __future__ import annotations

import urllib.parse
from typing import Any

from fakes.session import SECRET_HEADERS  # the one list of credential headers

__all__ = ["MASK", "SECRET_HEADERS", "safe_url", "scrub"]

MASK = "[REDACTED]"


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment (they may hold credentials)."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    if u.port:
        host += f":{u.port}"
    return urllib.parse.urlunsplit((u.scheme, host, u.path, "", ""))


def scrub(value: Any, secret: str | None) -> Any:
    """``value`` with ``secret`` masked in every string and every secret header's value masked,
    however deep in dicts and lists (a gateway may echo the key back in a body or a header)."""
    if isinstance(value, str):
        return value.replace(secret, MASK) if secret else value
    if isinstance(value, dict):
        return {
            k: (MASK if k.lower() in SECRET_HEADERS else scrub(v, secret)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [scrub(v, secret) for v in value]
    return value
