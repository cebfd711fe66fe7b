"""Builds the sample results fixture (``sample_results.json``); run to regenerate it."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["HOSTILE", "HOSTILE_SVG", "SECRET", "build_sample"]

SECRET = "sk-test-PLANTED-7c1e9b04d2aa"
HOSTILE = (
    '<script>document.title="PWNED";document.body.append("PWNED-SCRIPT")</script>'
    "<img src=x onerror=\"document.title='PWNED-IMG'\">"
    '<a href="javascript:alert(1)">click</a>'
)
# Text that lands inside the report's inline SVG: it tries to close the element it is in and the
# picture, and to run from SVG's own elements and attributes.
HOSTILE_SVG = (
    "<svg onload=alert(1)>"  # short enough to survive a picture's clipping of long labels
    "</text></title></svg><svg onload=\"document.title='PWNED-SVG'\">"
    '<script>document.title="PWNED-SVG"</script>'
    '<a href="javascript:alert(2)"><text>PWNED-LINK</text></a>'
)

# A scenario id goes into the timeline's SVG title.
RTY_SCENARIO = "rty-429-retry-after-seconds" + HOSTILE_SVG

CATALOGUE = [
    ("RTY-01", "MUST", "429 with Retry-After seconds is honoured", None),
    ("RTY-02", "SHOULD", "Retry-After as an HTTP-date is honoured " + HOSTILE_SVG, None),
    ("RTY-10", "MAY", "expired credentials are refreshed once", "credential_refresh"),
    ("STR-01", "MUST", "a cut stream is retried, partial text withdrawn", None),
    ("STR-12", "MUST", "stream fallback to non-streaming", None),
    ("TOL-01", "MUST", "tool errors are reported to the model", "tools"),
    ("CTX-01", "SHOULD", "compaction keeps the recent turns", "compaction"),
    ("CTL-01", "MUST", "user abort stops the turn promptly", "abort"),
    ("ERR-01", "MUST", "API errors are shown to the user", None),
    ("DBG-01", "MAY", "debug dump on HTTP 400", "debug_dump"),
]


def _chat_entry(seq, t, step, *, fault=None, status=200, cut=None, sent=None, auth=True):
    sent = sent or 'data: {"choices":[{"delta":{"content":"Hello"}}]}\n\ndata: [DONE]\n\n'
    headers = {"content-type": "application/json"}
    if auth:
        # Deliberately unredacted: the renderer must scrub it on its own.
        headers["authorization"] = f"Bearer {SECRET}"
    return {
        "seq": seq,
        "kind": "chat",
        "step": step,
        "method": "POST",
        "path": "/s/7f3a/v1/chat/completions",
        "headers": headers,
        "body": {
            "model": "gpt-test",
            "stream": True,
            "messages": [{"role": "user", "content": "Say hello " + HOSTILE}],
        },
        "body_error": None,
        "t_arrival_ns": t,
        "fault": fault,
        "response": {
            "status": status,
            "headers": {"content-type": "text/event-stream"},
            "stream": True,
            "sent": sent if cut is None else sent[:cut],
            "sent_bytes": len(sent) if cut is None else cut,
            "full_bytes": len(sent),
            "events_sent": 1,
            "cut_at_byte": cut,
            "t_headers_ns": t + 1_000_000,
            "t_end_ns": t + 5_000_000,
            "end": "complete" if cut is None else "reset",
        },
        "harness_error": None,
    }


def _tool_entry(seq, t):
    return {
        "seq": seq,
        "kind": "tool",
        "method": "POST",
        "path": "/s/7f3a/tools/write_file",
        "tool": HOSTILE_SVG,
        "call_id": "call_1",
        "arguments": {"path": "a.txt"},
        "behaviour": "output" + HOSTILE_SVG,
        "t_arrival_ns": t,
        "fault": None,
        "response": {
            "status": 200,
            "headers": {"content-type": "application/json"},
            "stream": False,
            "sent": '{"output": "wrote 2 bytes"}',
            "sent_bytes": 27,
            "full_bytes": 27,
            "events_sent": 0,
            "cut_at_byte": None,
            "t_headers_ns": t + 1_000_000,
            "t_end_ns": t + 2_000_000,
            "end": "complete",
        },
    }


def _scenario(sid, status="ran", *, entries=(), events=(), log="", error=None):
    return {
        "id": sid,
        "file": f"scenarios/{sid.split('-')[0]}/{sid}.yaml",
        "status": status,
        "duration_s": 0.21,
        "rerun": f"conformance run --scenario {sid}",
        "journal": {
            "session": "7f3a",
            "scenario": sid,
            "time_scale": 0.05,
            "entries": list(entries),
        },
        "events": list(events),
        "agent_log": log,
        "error": error,
    }


def _rich_scenarios(base):
    t = 1_000_000_000
    cut = _chat_entry(0, t, 0, fault="cut", cut=20)
    retry = _chat_entry(1, t + 60_000_000, 1)
    events = [
        {"type": "hello", "t_ns": t - 5_000_000, "name": "x"},
        {"type": "message", "id": "m1", "role": "assistant", "text": "Hel", "t_ns": t + 3_000_000},
        {"type": "removed", "id": "m1", "t_ns": t + 6_000_000},
        {
            "type": "message",
            "id": "m2",
            "role": "system",
            "text": "retrying " + HOSTILE,
            "meta": True,
            "t_ns": t + 7_000_000,
        },
        {"type": "retry", "attempt": 1, "delay_s": 0.05, "t_ns": t + 8_000_000},
        {
            "type": "message",
            "id": "m3",
            "role": "assistant",
            "text": "Hello",
            "t_ns": t + 66_000_000,
        },
        {"type": "turn_end", "reason": "done", "t_ns": t + 67_000_000},
    ]
    log = f"starting with key {SECRET}\nx-api-key: {SECRET}\n{HOSTILE}\n"
    rty = _scenario(
        RTY_SCENARIO,
        entries=[
            _chat_entry(0, t, 0, fault=HOSTILE_SVG, status=429, sent='{"error":"rate"}'),
            _tool_entry(1, t + 20_000_000),
            _chat_entry(2, t + 1_050_000_000, 1),
        ],
        events=events[:1] + events[5:],
        log=log,
    )
    # The failed response ends 5 ms after arrival; at time scale 0.05 the 1.045 s real wait is
    # 20.9 scenario seconds, outside the band it is drawn against.
    rty["waits"] = [
        {
            "after_seq": 0,
            "seq": 2,
            "retry": 1,
            "stream": True,
            "from_ns": t + 5_000_000,
            "wait_s": 20.9,
            "band_s": [0.9, 1.5],
            "core_s": [1.0, 1.25],
            "rule": "RTY-01" + HOSTILE_SVG,
            "basis": "Retry-After 1 s " + HOSTILE_SVG,
        }
    ]
    return {
        RTY_SCENARIO: rty,
        "str-cut-mid-stream": _scenario(
            "str-cut-mid-stream", entries=[cut, retry], events=events, log=log
        ),
        "ctl-abort": _scenario("ctl-abort", status="timeout", error="no turn_end within 10 s"),
        "err-401": _scenario("err-401", status="error", error=f"agent crashed: Bearer {SECRET}"),
        "tol-error": _scenario("tol-error", status="unsupported"),
    }


def _agent(name, verdicts, base):
    scen = _rich_scenarios(base)
    cites = {
        "RTY-01": RTY_SCENARIO,
        "RTY-02": RTY_SCENARIO,
        "RTY-10": "tol-error",
        "STR-01": "str-cut-mid-stream",
        "STR-12": "str-cut-mid-stream",
        "TOL-01": "tol-error",
        "CTX-01": "str-cut-mid-stream",
        "CTL-01": "ctl-abort",
        "ERR-01": "err-401",
        "DBG-01": "str-cut-mid-stream",
    }
    criteria = {}
    for cid, v in verdicts.items():
        criteria[cid] = {
            "verdict": v,
            "scenarios": [
                {
                    "id": cites[cid],
                    "verdict": v,
                    "expected": "second attempt >= 1.0 s after the 429",
                    "observed": f"observed {v.lower()} " + HOSTILE,
                }
            ],
        }
    return {
        "name": name,
        "adapter": "command" if name != "reference" else "reference",
        "version": "0.1.0",
        "capabilities": ["abort", "tools"],
        "criteria": criteria,
        "scenarios": list(scen.values()),
    }


def build_sample(*, interrupted: bool = False) -> dict:
    """Return the sample results document: three agents, every verdict at least once."""
    ref = {
        "RTY-01": "PASS", "RTY-02": "PASS", "RTY-10": "UNSUPPORTED", "STR-01": "PASS",
        "STR-12": "PASS", "TOL-01": "PASS", "CTX-01": "INFORMATIONAL", "CTL-01": "PASS",
        "ERR-01": "PASS", "DBG-01": "UNSUPPORTED",
    }  # fmt: skip
    bad = {
        "RTY-01": "FAIL", "RTY-02": "NON-STRICT", "RTY-10": "UNSUPPORTED", "STR-01": "FAIL",
        "STR-12": "PASS", "TOL-01": "UNSUPPORTED", "CTX-01": "NON-STRICT", "CTL-01": "TIMEOUT",
        "ERR-01": "ERROR", "DBG-01": "INFORMATIONAL",
    }  # fmt: skip
    hostile_name = {k: "PASS" for k in ref} | {"RTY-01": "FAIL"}
    return {
        "format": "conformance-results",
        "version": 1,
        "run": {
            "started": "2026-12-02T19:00:00Z",
            "finished": None if interrupted else "2026-12-02T19:01:00Z",
            "time_scale": 0.05,
            "interrupted": interrupted,
            "command": "conformance run --agent all",
            "harness_version": "0.1.0",
        },
        "catalogue": [
            {
                "id": cid,
                "level": level,
                "area": cid.split("-")[0],
                "title": title,
                "text": f"{title}. Full criterion text.",
                "source": "seed 000, 速率限制弹性",
                "capability": cap,
            }
            for cid, level, title, cap in CATALOGUE
        ],
        "agents": [
            _agent("reference", ref, 0),
            _agent("flaky", bad, 1),
            _agent("evil<b>agent</b>", hostile_name, 2),
        ],
    }


if __name__ == "__main__":
    out = Path(__file__).with_name("sample_results.json")
    out.write_text(json.dumps(build_sample(), indent=1, ensure_ascii=False) + "\n", "utf-8")
