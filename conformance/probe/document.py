"""The JSON probe report (schema ``reports/schemas/probe.schema.json``), the secrets scrubbed.

``reports/probe.py`` renders it as HTML and writes it as JSON; this module only builds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance import __version__
from conformance.probe.exchange import Exchange
from conformance.probe.observations import observe
from conformance.probe.redact import keep_vocabulary, safe_url, scrub

__all__ = ["probe_document"]

# A body longer than this is cut in the report (the recording keeps it whole).
_BODY_CHARS = 20000


def _exchange_doc(ex: Exchange) -> dict[str, Any]:
    body = ex.body.decode("utf-8", "replace")
    return {
        "name": ex.name,
        "stream": ex.stream,
        "request": ex.request,
        "status": ex.status,
        "headers": ex.headers,
        "end": ex.end,
        "error": ex.error,
        "elapsed_ms": ex.elapsed_ms,
        "body_bytes": len(ex.body),
        "chunks": len(ex.chunks),
        "events": len(ex.events()),
        "body": body if len(body) <= _BODY_CHARS else body[:_BODY_CHARS] + "\n[... cut]",
    }


def probe_document(
    exchanges: list[Exchange],
    *,
    base_url: str,
    model: str,
    started: str,
    finished: str,
    max_requests: int,
    rate: float,
    secrets: Sequence[str | None] = (),
    error: str | None = None,
    dialect: str = "openai_chat",
    header_names: Sequence[str] = (),
    query_names: Sequence[str] = (),
) -> dict[str, Any]:
    """The JSON probe report (schema ``reports/schemas/probe.schema.json``), ``secrets`` (the
    key, the extra headers' and query parameters' values) scrubbed. Of the extra headers and
    query parameters only the names are kept."""
    obs = observe(exchanges, dialect) if error is None else []
    missing = [o["id"] for o in obs if o["verdict"] == "MISSING"]
    doc = {
        "format": "gateway-probe",
        "version": 1,
        "probe": {
            "base_url": safe_url(base_url),
            "model": model,
            "dialect": dialect,
            "headers": list(header_names),
            "query": list(query_names),
            "started": started,
            "finished": finished,
            "requests_sent": len(exchanges),
            "max_requests": max_requests,
            "rate_per_s": rate,
            "harness_version": __version__,
        },
        "outcome": "error" if error else ("missing" if missing else "ok"),
        "error": error,
        "observations": obs,
        "exchanges": [_exchange_doc(x) for x in exchanges],
    }
    return keep_vocabulary(doc, scrub(doc, secrets))
