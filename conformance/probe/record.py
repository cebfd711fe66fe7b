"""``--record``: the exchanges as a scenario of ``replay`` steps (contracts §1).

Each step matches one probe request by its marker and stream flag and makes the fake gateway
send the same status, headers and body chunks again, and end the body the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.probe.exchange import Exchange, ProbeError
from conformance.probe.probes import PROBES
from conformance.probe.redact import scrub
from fakes.dialects import CHAT

__all__ = ["FRAMING_HEADERS", "recording"]

# Response headers that say nothing about the gateway's habits, or are the HTTP framing itself
# (which the fake gateway makes anew on replay).
FRAMING_HEADERS = {
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "date",
    "server",
    "content-encoding",
    "set-cookie",
}


def _chunk_strings(chunks: list[bytes]) -> list[str]:
    """Chunks as UTF-8 strings; a chunk ending inside a character is joined to the next."""
    out, pending = [], b""
    for c in chunks:
        pending += c
        try:
            out.append(pending.decode("utf-8"))
            pending = b""
        except UnicodeDecodeError:
            continue
    if pending:
        raise ProbeError("recording: the body is not UTF-8 and cannot be replayed as text")
    return out


def recording(
    exchanges: list[Exchange],
    scenario_id: str,
    secrets: str | Sequence[str | None] | None,
    dialect: str = CHAT,
) -> dict[str, Any]:
    """A scenario whose ``replay`` steps make the fake gateway send what was seen, ``secrets``
    (the key, the extra headers' and query parameters' values) scrubbed. A recording in
    another dialect than chat says so (``replay.dialect``): only that endpoint replays it."""
    steps = []
    probes = {p.name: p for p in PROBES}
    for ex in exchanges:
        p = probes.get(ex.name)
        if p is None or p.invalid:
            continue  # the fake gateway refuses an invalid body before any step
        step: dict[str, Any] = {"match": {"contains": p.marker, "stream": ex.stream}, "times": 100}
        if ex.status is None:
            step["fault"] = {"reset_before_headers": {}}
        else:
            rp: dict[str, Any] = {
                "status": ex.status,
                "headers": {k: v for k, v in ex.headers.items() if k not in FRAMING_HEADERS},
                "chunks": _chunk_strings(ex.chunks),
            }
            if ex.end in ("incomplete", "reset"):
                rp["end"] = "close" if ex.end == "incomplete" else "reset"
            if dialect != CHAT:
                rp["dialect"] = dialect
            step["replay"] = rp
        steps.append(step)
    if not steps:
        raise ProbeError("recording: no exchange can be replayed")
    sc = {
        "id": scenario_id,
        "title": "Recorded by conformance probe",
        "criteria": [],
        "prompt": "probe",
        "script": steps,
    }
    clean: dict[str, Any] = scrub(sc, secrets)  # scrub keeps the document's shape
    # What the probe itself wrote (the id, markers, the dialect, how a body ended) is put back
    # as it was: a short secret value must not garble the scenario, only the recorded bytes.
    clean["id"] = scenario_id
    for st, cl in zip(steps, clean["script"], strict=True):
        cl["match"] = st["match"]
        for k in ("dialect", "end"):
            if k in st.get("replay", {}):
                cl["replay"][k] = st["replay"][k]
    return clean
