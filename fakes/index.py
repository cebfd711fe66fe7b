"""What the gateway's root answers: the index of sessions (JSON, or HTML for a browser) and the
404 body of an unknown path, which lists the prefixes that do answer.

A user who points a client at the printed root must learn where the working URLs are from the
answer itself, so every miss outside a known session names them.
"""

from __future__ import annotations

import html
from typing import Any, TypedDict

__all__ = ["IndexSession", "index_doc", "prefers_html", "render_html", "valid_prefixes"]


class IndexSession(TypedDict):
    """One served session as the index lists it."""

    session: str
    scenario: str
    title: str
    base_url: str
    tool_endpoint: str
    mcp_endpoint: str


def valid_prefixes(root_v1: str | None, sessions: list[IndexSession]) -> list[str]:
    """The URL prefixes a client can use: the root ``/v1`` (one scenario served), then each
    session's base URL."""
    return ([root_v1] if root_v1 else []) + [s["base_url"] for s in sessions]


def index_doc(base_url: str, root_v1: str | None, sessions: list[IndexSession]) -> dict[str, Any]:
    """The JSON index of ``GET /``."""
    if root_v1:
        hint = f"one scenario is served: point an OpenAI client's base_url at {root_v1}"
    elif sessions:
        hint = "each scenario has its own session: point an OpenAI client's base_url at one"
    else:
        hint = "no session yet: create one with POST /_control/sessions"
    return {
        "gateway": base_url,
        "hint": hint,
        "base_url": root_v1,  # the root /v1, when exactly one scenario is served
        "sessions": sessions,
        "valid_prefixes": valid_prefixes(root_v1, sessions),
    }


def _q(ranges: list[tuple[str, float]], media: str) -> float:
    """Quality of ``media`` under the most specific matching range (RFC 9110 §12.5.1)."""
    kind = media.split("/", 1)[0]
    best, q = -1, 0.0
    for rng, rq in ranges:
        rank = 2 if rng == media else 1 if rng == f"{kind}/*" else 0 if rng == "*/*" else -1
        if rank > best:
            best, q = rank, rq
    return q


def prefers_html(accept: str) -> bool:
    """True when ``accept`` ranks text/html strictly above application/json (a browser); a
    client that says nothing, ``*/*`` or JSON gets JSON."""
    ranges: list[tuple[str, float]] = []
    for part in accept.split(","):
        media, *params = part.split(";")
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
        if media.strip():
            ranges.append((media.strip().lower(), q))
    return _q(ranges, "text/html") > _q(ranges, "application/json")


def render_html(doc: dict[str, Any]) -> str:
    """The index for a browser; every value from a scenario is escaped."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(s['scenario'])}</td><td>{e(s['title'])}</td>"
        f"<td>{e(s['base_url'])}</td>"
        f"<td>{e(s['tool_endpoint'])}</td><td>{e(s['mcp_endpoint'])}</td></tr>\n"
        for s in doc["sessions"]
    )
    # Plain text, not links: a click would be a request journaled in the session.
    root = f"<p>OpenAI base_url: {e(doc['base_url'])}</p>\n" if doc["base_url"] else ""
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>fake gateway</title></head>'
        f"<body>\n<h1>fake gateway {e(doc['gateway'])}</h1>\n<p>{e(doc['hint'])}</p>\n{root}"
        "<table>\n<tr><th>scenario</th><th>title</th><th>base_url</th><th>tools</th><th>MCP</th></tr>\n"
        f"{rows}</table>\n</body></html>\n"
    )
