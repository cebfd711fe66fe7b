"""FMT-01..03, LOP-02, LOP-03, LOP-05, LOP-06: passing, failing and not-applicable runs."""

from __future__ import annotations

import json
from typing import Any

from conformance.checks import FINAL_ON_PARTIAL, run_check
from conformance.checks.seed_strings import CONTINUATION_TEXT
from tests.checks.synth import Journal

U = {"role": "user", "content": "do it"}
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("read_file", "write_file")
]


def big_text(n: int) -> str:
    """The gateway's large_output shape: lines 'line 00001 xxx…' of 64 bytes, cut at n bytes."""
    lines = "".join(f"line {i:05d} " + "x" * 52 + "\n" for i in range(1, n // 64 + 2))
    return lines[:n]


def sse(text: str = "", calls: list[tuple[str, str, str]] = (), finish: str = "stop") -> str:
    """A streamed reply as the gateway writes it."""
    delta: dict[str, Any] = {"role": "assistant"}
    if text:
        delta["content"] = text
    if calls:
        delta["tool_calls"] = [
            {"index": i, "id": cid, "type": "function", "function": {"name": n, "arguments": a}}
            for i, (cid, n, a) in enumerate(calls)
        ]
    chunks = [
        {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def call_msg(*calls: tuple[str, str, str], text: str | None = None) -> dict:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": a}}
            for cid, n, a in calls
        ],
    }


def result(text: str, cid: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def body(*m: dict, tools: list | None = None) -> dict:
    b: dict[str, Any] = {"model": "m", "stream": True, "messages": [U, *m]}
    b["tools"] = TOOLS if tools is None else tools
    if not b["tools"]:
        del b["tools"]
    return b


def tool(
    j: Journal,
    name: str,
    cid: str,
    args: dict,
    *,
    output: str | None = None,
    error: str | None = None,
) -> dict:
    """Append a hosted tool entry, as the gateway records it."""
    payload = {"output": output} if error is None else {"error": {"message": error}}
    j.t += 0.01
    e = {
        "seq": len(j.entries),
        "kind": "tool",
        "tool": name,
        "call_id": cid,
        "arguments": args,
        "behaviour": "output" if error is None else "error",
        "t_arrival_ns": j._ns(j.t),
        "response": {"status": 200, "sent": json.dumps(payload), "stream": False},
        "harness_error": None,
    }
    j.t += 0.01
    j.entries.append(e)
    return e


def reply(j: Journal, b: dict, sent: str) -> dict:
    e = j.chat(body=b)
    e["response"]["sent"] = sent
    return e


def one_output_run(out: str, res: str | None) -> Journal:
    """The model reads one file; the tool returns ``out``; the model gets ``res``."""
    j = Journal()
    c = ("c1", "read_file", '{"path": "a"}')
    reply(j, body(), sse(calls=[c], finish="tool_calls"))
    tool(j, "read_file", "c1", {"path": "a"}, output=out)
    if res is not None:
        reply(j, body(call_msg(c), result(res, "c1")), sse("done"))
    return j


BIG = big_text(200000)  # 3125 lines


def head_tail(out: str, head: int, tail: int, notice: str) -> str:
    return out[:head] + notice + out[len(out) - tail :]


# FMT-01 -------------------------------------------------------------------------------------
def test_fmt_01_pass_cut_with_full_size() -> None:
    res = head_tail(BIG, 18000, 12000, "\n[... output truncated: 200000 characters in total ...]\n")
    f = run_check("FMT-01", one_output_run(BIG, res).evidence())
    assert f.outcome == "pass", f


def test_fmt_01_pass_seed_truncate_output_in_chinese() -> None:
    # seed 004 §7.2.1 truncateOutput: first lines, then "[输出已截断：共 X 行，显示前 Y 行]".
    lines = BIG.split("\n")
    res = "\n".join(lines[:200]) + f"\n\n[输出已截断：共{len(lines)}行，显示前 200 行]"
    f = run_check("FMT-01", one_output_run(BIG, res).evidence())
    assert f.outcome == "pass", f


def test_fmt_01_fail_passed_uncut() -> None:
    f = run_check("FMT-01", one_output_run(BIG, BIG).evidence())
    assert f.outcome == "fail" and "uncut" in f.observed


def test_fmt_01_fail_cut_silently() -> None:
    f = run_check("FMT-01", one_output_run(BIG, BIG[:30000]).evidence())
    assert f.outcome == "fail" and "no cut notice" in f.observed


def test_fmt_01_fail_notice_without_full_size() -> None:
    res = head_tail(BIG, 18000, 12000, "\n[... output truncated ...]\n")
    f = run_check("FMT-01", one_output_run(BIG, res).evidence())
    assert f.outcome == "fail" and "full size" in f.observed
    # Old text: "(the full size ({'characters': 200000, 'bytes': ...}); ...": a dict repr.
    assert f"({len(BIG)} characters, " in f.observed and "{'" not in f.observed, f.observed


def test_fmt_01_fail_seed_smart_truncate_gives_only_the_omitted_count() -> None:
    lines = BIG.split("\n")
    res = "\n".join([*lines[:140], f"\n[... 省略了 {len(lines) - 200} 行 ...]\n", *lines[-60:]])
    f = run_check("FMT-01", one_output_run(BIG, res).evidence())
    assert f.outcome == "fail", f


def test_fmt_01_fail_no_result_on_the_wire() -> None:
    f = run_check("FMT-01", one_output_run(BIG, None).evidence())
    assert f.outcome == "fail" and "no tool message" in f.observed


def test_fmt_01_not_applicable_when_under_the_seed_caps() -> None:
    # 40000 characters but only 625 lines: some limits keep it whole, so it is not judged.
    out = big_text(40000)
    f = run_check("FMT-01", one_output_run(out, out).evidence())
    assert f.outcome == "not_applicable"


# FMT-02 -------------------------------------------------------------------------------------
def test_fmt_02_pass_head_tail_and_omitted_chars() -> None:
    omitted = len(BIG) - 18000 - 12000
    res = head_tail(BIG, 18000, 12000, f"\n[... {omitted} characters omitted, 200000 total ...]\n")
    f = run_check("FMT-02", one_output_run(BIG, res).evidence())
    assert f.outcome == "pass", f


def test_fmt_02_pass_seed_smart_truncate_lines() -> None:
    lines = BIG.split("\n")  # trailing "" is the empty last element: 3126 parts
    res = "\n".join([*lines[:140], f"\n[... 省略了 {len(lines) - 200} 行 ...]\n", *lines[-60:]])
    f = run_check("FMT-02", one_output_run(BIG, res).evidence())
    assert f.outcome == "pass", f


def test_fmt_02_fail_head_only() -> None:
    lines = BIG.split("\n")
    res = "\n".join(lines[:200]) + f"\n\n[输出已截断：共 {len(lines)} 行，显示前 200 行]"
    f = run_check("FMT-02", one_output_run(BIG, res).evidence())
    assert f.outcome == "fail" and "tail lost" in f.observed


def test_fmt_02_fail_omitted_not_stated() -> None:
    res = head_tail(BIG, 18000, 12000, "\n[... output truncated: 200000 characters in total ...]\n")
    f = run_check("FMT-02", one_output_run(BIG, res).evidence())
    assert f.outcome == "fail" and "omitted" in f.observed


def test_fmt_02_fail_head_lost() -> None:
    res = "[output truncated: 200000 characters, 170000 omitted]\n" + BIG[-30000:]
    f = run_check("FMT-02", one_output_run(BIG, res).evidence())
    assert f.outcome == "fail" and "head lost" in f.observed


def test_fmt_02_not_applicable_when_not_cut() -> None:
    f = run_check("FMT-02", one_output_run(BIG, BIG).evidence())
    assert f.outcome == "not_applicable"


# FMT-03 -------------------------------------------------------------------------------------
SHORT = '  indented\n\ttab\t \n\nüñí — "q"\ntrailing   \n\n'


def test_fmt_03_pass_verbatim() -> None:
    f = run_check("FMT-03", one_output_run(SHORT, SHORT).evidence())
    assert f.outcome == "pass", f


def test_fmt_03_fail_whitespace_stripped() -> None:
    f = run_check("FMT-03", one_output_run(SHORT, SHORT.strip()).evidence())
    assert f.outcome == "fail" and "differs at character 0" in f.observed


def test_fmt_03_fail_short_output_capped() -> None:
    out = big_text(99 * 64)  # 99 lines
    res = out[:3000] + "\n[... output truncated: 6336 characters in total ...]"
    f = run_check("FMT-03", one_output_run(out, res).evidence())
    assert f.outcome == "fail", f


def test_fmt_03_fail_no_result_on_the_wire() -> None:
    f = run_check("FMT-03", one_output_run(SHORT, None).evidence())
    assert f.outcome == "fail"


def test_fmt_03_not_applicable_without_short_outputs() -> None:
    f = run_check("FMT-03", one_output_run(BIG, BIG[:100]).evidence())
    assert f.outcome == "not_applicable"


# LOP-02 -------------------------------------------------------------------------------------
W = ("cw", "write_file", '{"path": "a.txt", "content": "hi"}')
WARGS = {"path": "a.txt", "content": "hi"}
REMINDER = {
    "role": "user",
    "content": "<system-reminder>You called write_file 3 times with the same arguments; it "
    "failed each time.",
}


def lop_02_run(*, repeat: bool, offered_after: list | None, remind: bool = True) -> Journal:
    j = Journal()
    hist: list[dict] = []
    reply(j, body(), sse(calls=[W], finish="tool_calls"))
    for i in range(3):
        tool(j, "write_file", "cw", WARGS, error="disk full")
        hist += [call_msg(W), result("Error: disk full", "cw")]
        extra = [REMINDER] if (i == 2 and remind) else []
        last = i == 2 and not repeat
        reply(
            j,
            body(*hist, *extra),
            sse("giving up") if last else sse(calls=[W], finish="tool_calls"),
        )
    if repeat:
        tool(j, "write_file", "cw", WARGS, error="disk full")
        hist += [REMINDER, call_msg(W), result("Error: disk full", "cw")]
        reply(j, body(*hist, tools=offered_after), sse("giving up"))
    return j


def test_lop_02_pass_tool_left_out() -> None:
    f = run_check("LOP-02", lop_02_run(repeat=True, offered_after=TOOLS[:1]).evidence())
    assert f.outcome == "pass", f


def test_lop_02_pass_all_tools_left_out() -> None:
    f = run_check("LOP-02", lop_02_run(repeat=True, offered_after=[]).evidence())
    assert f.outcome == "pass", f


def test_lop_02_fail_tool_still_offered() -> None:
    f = run_check("LOP-02", lop_02_run(repeat=True, offered_after=TOOLS).evidence())
    assert f.outcome == "fail" and "still offers" in f.observed


def test_lop_02_not_applicable_when_heeded() -> None:
    f = run_check("LOP-02", lop_02_run(repeat=False, offered_after=None).evidence())
    assert f.outcome == "not_applicable" and "heeded" in f.observed


def test_lop_02_not_applicable_without_reminder() -> None:
    run = lop_02_run(repeat=True, offered_after=TOOLS, remind=False)
    f = run_check("LOP-02", run.evidence())
    assert f.outcome == "not_applicable"


# LOP-03 -------------------------------------------------------------------------------------
def lop_03_run(cap: int | None, *, ran: int, asked: int, more_tools: bool = False) -> Any:
    j = Journal()
    hist: list[dict] = []
    for i in range(asked):
        c = (f"c{i}", "read_file", json.dumps({"path": f"f{i}"}))
        reply(j, body(*hist), sse(calls=[c], finish="tool_calls"))
        if i < ran:
            tool(j, "read_file", f"c{i}", {"path": f"f{i}"}, output="x")
            hist += [call_msg(c), result("x", f"c{i}")]
    if more_tools:
        reply(j, body(*hist), sse("done"))
    scenario = {"id": "s", "config": {"max_tool_calls": cap} if cap else {}}
    events = [{"type": "error", "message": "Too many tool calls"}, {"type": "turn_end"}]
    return j.evidence(events, scenario=scenario)


def test_lop_03_pass_stops_at_cap() -> None:
    f = run_check("LOP-03", lop_03_run(3, ran=3, asked=4))
    assert f.outcome == "pass", f


def test_lop_03_fail_runs_past_cap() -> None:
    f = run_check("LOP-03", lop_03_run(3, ran=5, asked=5))
    assert f.outcome == "fail" and "5 tool calls ran" in f.observed


def test_lop_03_fail_turn_goes_on_with_tools() -> None:
    f = run_check("LOP-03", lop_03_run(3, ran=3, asked=4, more_tools=True))
    assert f.outcome == "fail" and "went on" in f.observed


def test_lop_03_leaves_a_turn_that_never_ended_to_lop_04() -> None:
    ev = lop_03_run(3, ran=3, asked=4)
    ev.events = [e for e in ev.events if e["type"] != "turn_end"]
    assert run_check("LOP-03", ev).outcome == "not_applicable"
    assert run_check("LOP-04", ev).outcome == "fail"


def test_lop_03_fail_past_the_cap_on_a_run_cut_short() -> None:
    ev = lop_03_run(3, ran=4, asked=4)
    ev.events = [e for e in ev.events if e["type"] != "turn_end"]
    assert "LOP-03" in FINAL_ON_PARTIAL
    f = run_check("LOP-03", ev)
    assert f.outcome == "fail" and "4 tool calls ran" in f.observed


def test_lop_03_not_applicable_without_cap_or_chance() -> None:
    assert run_check("LOP-03", lop_03_run(None, ran=4, asked=4)).outcome == "not_applicable"
    assert run_check("LOP-03", lop_03_run(5, ran=4, asked=4)).outcome == "not_applicable"


# LOP-05 -------------------------------------------------------------------------------------
PTL = {"error": {"code": "context_length_exceeded"}}


def compaction(j: Journal, ok: bool) -> None:
    b = {"model": "m", "stream": False, "messages": [{"role": "system", "content": "Summarize."}]}
    if ok:
        e = j.chat(body=b, stream=False)
        e["response"]["sent"] = json.dumps(
            {"choices": [{"message": {"role": "assistant", "content": "sum"}}]}
        )
    else:
        e = j.chat(400, body=b, stream=False)
        e["response"]["sent"] = json.dumps(PTL)


def lop_05_run(pattern: str) -> Any:
    """'m' a main request that overflows, 'f' a failed compaction, 's' a good one."""
    j = Journal()
    for c in pattern:
        if c == "m":
            j.chat(400, body=body())["response"]["sent"] = json.dumps(PTL)
        else:
            compaction(j, c == "s")
    return j.evidence()


def test_lop_05_pass_breaker_holds() -> None:
    f = run_check("LOP-05", lop_05_run("mfmfmfmm"))
    assert f.outcome == "pass", f


def test_lop_05_pass_success_resets_streak() -> None:
    f = run_check("LOP-05", lop_05_run("mfmfmsmfmfmfmm"))
    assert f.outcome == "pass", f


def test_lop_05_fail_fourth_compaction() -> None:
    f = run_check("LOP-05", lop_05_run("mfmfmfmfm"))
    assert f.outcome == "fail" and "after 3 consecutive" in f.observed


def test_lop_05_fail_empty_summaries_count_as_failures() -> None:
    j = Journal()
    for _ in range(4):
        j.chat(400, body=body())
        e = j.chat(
            body={
                "model": "m",
                "stream": False,
                "messages": [{"role": "user", "content": "summarize"}],
            },
            stream=False,
        )
        e["response"]["sent"] = json.dumps({"choices": [{"message": {"content": ""}}]})
    assert run_check("LOP-05", j.evidence()).outcome == "fail"


def test_lop_05_not_applicable() -> None:
    assert run_check("LOP-05", lop_05_run("mfm")).outcome == "not_applicable"
    assert run_check("LOP-05", lop_05_run("mfmfmf")).outcome == "not_applicable"


# LOP-06 -------------------------------------------------------------------------------------
A = ("ca", "read_file", '{"path": "a.txt"}')
B = ("cb", "write_file", '{"path": "a.txt", "content": "x"}')


def abab_run(note: str | None, *, tools_after: list | None = None, stop: bool = False) -> Any:
    j = Journal()
    hist: list[dict] = []
    for c in (A, B, A, B):
        reply(j, body(*hist), sse(calls=[c], finish="tool_calls"))
        tool(j, c[1], c[0], json.loads(c[2]), output="ok")
        hist += [call_msg(c), result("ok", c[0])]
    if not stop:
        extra = [{"role": "user", "content": note}] if note else []
        reply(j, body(*hist, *extra, tools=tools_after), sse("done"))
    return j.evidence()


def test_lop_06_pass_abab_note() -> None:
    f = run_check("LOP-06", abab_run("<system-reminder>You are alternating.</system-reminder>"))
    assert f.outcome == "pass" and "A-B-A-B" in f.observed


def test_lop_06_pass_abab_tool_taken_away() -> None:
    f = run_check("LOP-06", abab_run(None, tools_after=TOOLS[:1]))
    assert f.outcome == "pass" and "drops" in f.observed


def test_lop_06_pass_turn_stopped() -> None:
    f = run_check("LOP-06", abab_run(None, stop=True))
    assert f.outcome == "pass" and "stopped" in f.observed


def test_lop_06_fail_abab_ignored() -> None:
    f = run_check("LOP-06", abab_run(None))
    assert f.outcome == "fail" and "A-B-A-B" in f.observed


def test_lop_06_fail_continuation_text_is_no_loop_note() -> None:
    f = run_check("LOP-06", abab_run(CONTINUATION_TEXT))
    assert f.outcome == "fail"


def text_run(texts: list[str], note: str | None = None) -> Any:
    j = Journal()
    hist: list[dict] = []
    for i, t in enumerate(texts):
        c = (f"c{i}", "read_file", json.dumps({"path": f"f{i}"}))
        reply(j, body(*hist), sse(t, calls=[c], finish="tool_calls"))
        tool(j, "read_file", c[0], {"path": f"f{i}"}, output="no")
        hist += [call_msg(c, text=t), result("no", c[0])]
    extra = [{"role": "system", "content": note}] if note else []
    reply(j, body(*hist, *extra), sse("done"))
    return j.evidence()


def test_lop_06_pass_same_text_note() -> None:
    f = run_check("LOP-06", text_run(["Next."] * 3, note="You keep repeating yourself."))
    assert f.outcome == "pass" and "same text" in f.observed


def test_lop_06_fail_same_text_ignored() -> None:
    f = run_check("LOP-06", text_run(["Next."] * 3))
    assert f.outcome == "fail" and "same text" in f.observed


def test_lop_06_not_applicable_without_repetition() -> None:
    assert run_check("LOP-06", text_run(["One.", "Two.", "One."])).outcome == "not_applicable"
    # Two identical texts split by a reply without text: not 3 in a row.
    assert run_check("LOP-06", text_run(["Next.", "Next.", "", "Next."])).outcome == (
        "not_applicable"
    )
