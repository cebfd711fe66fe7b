"""--verify: a failed timing verdict stands only when it reproduces; one that differs between
runs is flaky, with every run's verdict and evidence kept."""

from __future__ import annotations

import pytest

from conformance.checks import TIMING
from conformance.verify import judged, settle, verified


def _run(tag: str, **verdicts: str) -> tuple[dict, dict[str, dict]]:
    entry = {"id": "s", "status": "ran", "journal": {"entries": [], "tag": tag}}
    return entry, {
        c.replace("_", "-"): {"id": "s", "verdict": v, "expected": "e", "observed": f"{tag}:{v}"}
        for c, v in verdicts.items()
    }


class Reruns:
    """Hands out the given runs in turn, counting how many were asked for."""

    def __init__(self, *runs: tuple[dict, dict[str, dict]]) -> None:
        self.runs = list(runs)
        self.asked = 0

    def __call__(self) -> tuple[dict, dict[str, dict]]:
        self.asked += 1
        return self.runs.pop(0)


@pytest.mark.parametrize(
    "seen, settled",
    [
        (["FAIL", "FAIL"], "FAIL"),
        (["FAIL", "PASS"], "PASS"),
        (["FAIL", "PASS", "PASS"], "PASS"),
        (["FAIL", "PASS", "FAIL"], "FAIL"),
        (["NON-STRICT", "INFORMATIONAL", "PASS"], "PASS"),
        (["FAIL", "TIMEOUT"], "FAIL"),  # nothing reproduced: the worst of them
        (["FAIL", "ERROR", "ERROR"], "ERROR"),
    ],
)
def test_a_failing_verdict_stands_only_when_it_reproduces(seen, settled):
    assert settle(seen) == settled


def test_the_timing_criteria_are_the_ones_judged_on_waits_and_silences():
    assert {"RTY-03", "RTY-05", "RTY-08", "RTY-16", "STR-10", "TOL-04"} <= TIMING
    assert not {"RTY-04", "RTY-07", "RTY-12", "STR-01", "DBG-02"} & TIMING


def test_no_rerun_without_verify_or_without_a_failed_timing_verdict():
    again = Reruns()
    first = _run("1", RTY_03="FAIL")
    assert verified(first, again, 0) is first
    passing = _run("1", RTY_03="PASS", RTY_04="FAIL")  # RTY-04 counts, it does not time
    assert verified(passing, again, 3) is passing
    assert again.asked == 0


def test_a_reproduced_failure_takes_one_rerun_and_is_not_flaky():
    again = Reruns(_run("2", RTY_03="FAIL", RTY_08="PASS"), _run("3", RTY_03="PASS"))
    entry, verdicts = verified(_run("1", RTY_03="FAIL", RTY_08="PASS"), again, 3)
    assert again.asked == 1
    assert verdicts["RTY-03"] == {
        "id": "s",
        "verdict": "FAIL",
        "expected": "e",
        "observed": "1:FAIL",
    }
    assert [r["journal"]["tag"] for r in entry["reruns"]] == ["2"]


def test_a_failure_that_does_not_reproduce_is_flaky_with_every_run():
    again = Reruns(
        _run("2", RTY_03="PASS", RTY_05="FAIL", RTY_12="FAIL"),
        _run("3", RTY_03="PASS", RTY_05="FAIL", RTY_12="FAIL"),
    )
    first = _run("1", RTY_03="FAIL", RTY_05="FAIL", RTY_12="PASS")
    entry, verdicts = verified(first, again, 2)
    assert again.asked == 2  # flaky: every rerun is made
    assert verdicts["RTY-03"]["verdict"] == "PASS" and verdicts["RTY-03"]["flaky"] is True
    assert verdicts["RTY-03"]["observed"] == "2:PASS"  # the evidence of a run that gave it
    assert [r["verdict"] for r in verdicts["RTY-03"]["runs"]] == ["FAIL", "PASS", "PASS"]
    assert verdicts["RTY-05"]["verdict"] == "FAIL" and "flaky" not in verdicts["RTY-05"]
    assert verdicts["RTY-12"]["verdict"] == "PASS"  # not doubtful: the first run's verdict
    assert [r["journal"]["tag"] for r in entry["reruns"]] == ["2", "3"]
    assert entry["id"] == "s" and "reruns" not in first[0]  # the first entry is not changed


# -- a fast clock: a failed timing verdict is confirmed on the real clock -----------------------


def _warped(run: tuple[dict, dict[str, dict]], speed: float = 10) -> tuple[dict, dict[str, dict]]:
    entry, verdicts = run
    return {**entry, "clock": {"time_warp": speed}}, verdicts


class Clocked:
    """``once(attempt)``: the fast-clock run first, then the given confirming runs; ``asked``
    records True for each confirming attempt (alone or slower), False for a first run."""

    def __init__(self, fast, *real) -> None:
        self.fast, self.real, self.asked, self.attempts = fast, list(real), [], []

    def __call__(self, attempt: str):
        self.attempts.append(attempt)
        self.asked.append(attempt != "first")
        return self.real.pop(0) if attempt != "first" else self.fast


def test_a_failed_timing_verdict_on_a_fast_clock_is_judged_on_the_real_clock():
    fast = _warped(_run("fast", RTY_05="FAIL", RTY_07="FAIL", RTY_01="PASS"))
    once = Clocked(fast, _run("real", RTY_05="PASS", RTY_07="FAIL", RTY_01="PASS"))
    entry, verdicts = judged(once, 0)  # without --verify too
    assert once.asked == [False, True]
    assert verdicts["RTY-05"]["verdict"] == "PASS"
    assert verdicts["RTY-05"]["fast_clock"] == {
        "speed": 10.0,
        "verdict": "FAIL",
        "observed": "fast:FAIL",
    }
    assert "on the real clock" in verdicts["RTY-05"]["observed"]
    assert "x10 fast clock: FAIL" in verdicts["RTY-05"]["observed"]
    # The scenario's result is the real-clock run; the fast one is kept beside it.
    assert entry["journal"]["tag"] == "real" and entry["fast_clock_run"]["journal"]["tag"] == "fast"
    assert "real time" in entry["clock"]["note"]
    assert verdicts["RTY-07"] == {**_run("real", RTY_07="FAIL")[1]["RTY-07"]}


def test_a_fast_clock_failure_that_the_real_clock_reproduces_stands():
    fast = _warped(_run("fast", RTY_05="FAIL"))
    entry, verdicts = judged(Clocked(fast, _run("real", RTY_05="FAIL")), 0)
    assert verdicts["RTY-05"]["verdict"] == "FAIL"


def test_no_confirming_run_for_a_passing_timing_verdict():
    once = Clocked(_warped(_run("fast", RTY_05="PASS", RTY_07="FAIL")))
    assert judged(once, 0) == once.fast and once.asked == [False]


def test_a_failed_timing_verdict_on_a_scaled_clock_stands_only_when_a_slower_one_confirms_it():
    # Not on a fast clock: the confirming run is on a slower time scale (CONFIRM_SLOWER).
    first = _run("scaled", RTY_05="FAIL")
    first[0]["journal"] = {"time_scale": 0.02}
    again = _run("slower", RTY_05="PASS")
    again[0]["journal"] = {"time_scale": 0.1}
    once = Clocked(first, again)
    entry, verdicts = judged(once, 0)
    assert once.asked == [False, True]
    assert verdicts["RTY-05"]["verdict"] == "PASS"
    assert verdicts["RTY-05"]["confirmed"] == {
        "first": {"verdict": "FAIL", "observed": "scaled:FAIL"},
        "on": "time scale 0.1",
    }
    assert "on time scale 0.1; on time scale 0.02: FAIL" in verdicts["RTY-05"]["observed"]
    assert entry["first_run"] is first[0]
    # A wrong wait is wrong on the slower clock too: the failure stands.
    still = _run("slower", RTY_05="FAIL")
    still[0]["journal"] = {"time_scale": 0.1}
    _, verdicts = judged(Clocked(first, still), 0)
    assert verdicts["RTY-05"]["verdict"] == "FAIL"


def test_verify_reruns_a_confirmed_scenario_on_the_real_clock():
    fast = _warped(_run("fast", RTY_05="FAIL"))
    once = Clocked(
        fast,
        _run("real1", RTY_05="FAIL"),
        _run("real2", RTY_05="PASS"),
        _run("real3", RTY_05="PASS"),
    )
    entry, verdicts = judged(once, 2)
    assert once.asked == [False, True, True, True]
    assert verdicts["RTY-05"]["verdict"] == "PASS" and verdicts["RTY-05"]["flaky"]


def test_a_confirmation_on_a_slower_calibrated_clock_says_which():
    fast = _warped(_run("fast", RTY_05="FAIL"), 10)
    entry, verdicts = judged(Clocked(fast, _warped(_run("slow", RTY_05="PASS"), 5)), 0)
    assert verdicts["RTY-05"]["verdict"] == "PASS"
    assert "on the x5 clock; on the x10 fast clock: FAIL" in verdicts["RTY-05"]["observed"]
    assert (
        entry["clock"]["time_warp"] == 5 and "confirmed on the x5 clock" in entry["clock"]["note"]
    )


def test_a_confirmation_that_could_not_have_the_machine_alone_says_so():
    # The run's hold (conformance.share) gave up waiting for the other processes: the runner
    # marks the confirming run, and the verdict says where it was confirmed.
    alone = _warped(_run("slow", RTY_05="PASS"), 5)
    beside = _warped(_run("slow", RTY_05="PASS"), 5)
    beside[0]["alone"] = False
    _, had = judged(Clocked(_warped(_run("fast", RTY_05="FAIL"), 10), alone), 0)
    entry, verdicts = judged(Clocked(_warped(_run("fast", RTY_05="FAIL"), 10), beside), 0)
    assert "beside" not in had["RTY-05"]["observed"]
    assert verdicts["RTY-05"]["confirmed"]["on"] == (
        "the x5 clock, beside the run's other processes (the machine was not free for it)"
    )
    assert "beside the run's other processes" in entry["clock"]["note"]


# -- alone on the same clock first, when the run's own load may explain a late wait -----------


def _late(tag: str, late_real_s: float, speed: float = 20, **verdicts: str):
    """A fast-clock run whose RTY-05 wait is ``late_real_s`` real beyond its band (or early,
    when negative), as the entry's ``waits`` record it."""
    entry, v = _warped(_run(tag, **verdicts), speed)
    over = late_real_s * speed
    wait = 1.0 + over if over > 0 else 0.5 + over
    entry["journal"]["time_scale"] = 1 / speed
    entry["waits"] = [{"rule": "RTY-05", "wait_s": wait, "band_s": [0.5, 1.0]}]
    return entry, v


def test_a_slightly_late_wait_is_first_confirmed_alone_on_its_own_clock():
    first = _late("fast", 0.05, RTY_05="FAIL")
    alone = _warped(_run("alone", RTY_05="PASS"), 20)
    once = Clocked(first, alone)
    entry, verdicts = judged(once, 0, try_alone=True)
    assert once.attempts == ["first", "alone"]  # no slower run: the alone one settled it
    assert verdicts["RTY-05"]["verdict"] == "PASS"
    assert verdicts["RTY-05"]["confirmed"]["on"] == (
        "the x20 clock again, with the machine to itself"
    )
    assert entry["journal"]["tag"] == "alone" and entry["fast_clock_run"] is first[0]
    assert "alone_run" not in entry


def test_a_failure_alone_on_its_own_clock_goes_on_to_the_slower_one_and_is_kept():
    first = _late("fast", 0.05, RTY_05="FAIL")
    alone = _late("alone", 0.04, RTY_05="FAIL")
    slower = _warped(_run("slow", RTY_05="FAIL"), 5)
    once = Clocked(first, alone, slower)
    entry, verdicts = judged(once, 0, try_alone=True)
    assert once.attempts == ["first", "alone", "slower"]
    assert verdicts["RTY-05"]["verdict"] == "FAIL"
    assert (
        "on the x20 fast clock again, with the machine to itself: FAIL, alone:FAIL"
        in (verdicts["RTY-05"]["observed"])
    )
    assert verdicts["RTY-05"]["confirmed"]["alone"]["verdict"] == "FAIL"
    assert entry["journal"]["tag"] == "slow" and entry["alone_run"] is alone[0]
    # A slower run that passes settles it: a failure stands only when every run alone gives it.
    once = Clocked(first, alone, _warped(_run("slow", RTY_05="PASS"), 5))
    assert judged(once, 0, try_alone=True)[1]["RTY-05"]["verdict"] == "PASS"


@pytest.mark.parametrize(
    "first",
    [
        _late("fast", 1.5, RTY_05="FAIL"),  # later than the run's own load makes a wait
        _late("fast", -0.01, RTY_05="FAIL"),  # early: load does not make a wait short
        _warped(_run("fast", STR_10="NON-STRICT"), 20),  # not a wait of the entry's waits
    ],
    ids=["late-beyond-load", "early", "no-wait"],
)
def test_a_failure_the_run_s_load_cannot_explain_goes_straight_to_the_slower_clock(first):
    verdicts = first[1]
    slower = _warped(({**first[0], "journal": {"tag": "slow"}}, dict(verdicts)), 5)
    once = Clocked(first, slower)
    judged(once, 0, try_alone=True)
    assert once.attempts == ["first", "slower"]


def test_no_run_alone_on_the_same_clock_without_other_processes_or_a_slower_clock():
    once = Clocked(_late("fast", 0.05, RTY_05="FAIL"), _warped(_run("slow", RTY_05="PASS"), 5))
    judged(once, 0)  # try_alone False: one process, or no slower clock
    assert once.attempts == ["first", "slower"]


def test_a_scaled_agent_s_run_alone_on_its_scale_says_so():
    first = _run("scaled", RTY_05="FAIL")
    first[0]["journal"] = {"time_scale": 0.02}
    first[0]["waits"] = [{"rule": "RTY-05", "wait_s": 1.5, "band_s": [0.5, 1.0]}]  # 10 ms real
    alone = _run("alone", RTY_05="PASS")
    alone[0]["journal"] = {"time_scale": 0.02}
    once = Clocked(first, alone)
    entry, verdicts = judged(once, 0, try_alone=True)
    assert once.attempts == ["first", "alone"]
    assert (
        "(on time scale 0.02 again, with the machine to itself; on time scale 0.02: FAIL"
        in (verdicts["RTY-05"]["observed"])
    )
    assert entry["first_run"] is first[0]


# -- a failure no load explains is not confirmed --------------------------------------------


def test_a_silence_waited_out_beyond_load_is_not_confirmed_but_verify_still_reruns_it():
    first = _warped(_run("fast", STR_10="NON-STRICT"), 10)
    first[1]["STR-10"]["beyond_load"] = True
    once = Clocked(first)
    assert judged(once, 0, try_alone=True) == first
    assert once.attempts == ["first"]  # no run alone, no slower clock
    once = Clocked(first)
    assert judged(once, 1, try_alone=True)[1]["STR-10"]["verdict"] == "NON-STRICT"
    assert once.attempts == ["first", "first"]  # --verify reruns it, on its own clock


def test_a_failure_beyond_load_beside_a_doubtful_one_is_settled_by_the_same_confirmation():
    first = _late("fast", 0.05, RTY_05="FAIL", STR_10="NON-STRICT")
    first[1]["STR-10"]["beyond_load"] = True
    alone = _warped(_run("alone", RTY_05="PASS", STR_10="NON-STRICT"), 20)
    alone[1]["STR-10"]["beyond_load"] = True
    once = Clocked(first, alone)
    entry, verdicts = judged(once, 0, try_alone=True)
    # RTY-05's lateness alone decides the ladder; the run alone settles both.
    assert once.attempts == ["first", "alone"]
    assert verdicts["RTY-05"]["verdict"] == "PASS"
    assert verdicts["STR-10"]["verdict"] == "NON-STRICT"


def test_a_wait_late_by_half_a_second_real_may_still_be_the_run_s_load():
    # Claude Code 2.1.332's first retry came 469 ms real late once under a -n 4 run's own load.
    once = Clocked(_late("fast", 0.469, RTY_03="FAIL"), _warped(_run("alone", RTY_03="PASS"), 20))
    once.fast[0]["waits"][0]["rule"] = "RTY-03"
    judged(once, 0, try_alone=True)
    assert once.attempts == ["first", "alone"]


def test_a_first_run_made_earlier_is_finished_as_if_made_then():
    from conformance.verify import needs_more

    first = _late("fast", 0.05, RTY_05="FAIL")
    alone = _warped(_run("alone", RTY_05="PASS"), 20)
    assert needs_more(first, 0)  # a failed timing verdict: to confirm
    assert not needs_more(_run("1", RTY_05="PASS", RTY_07="FAIL"), 3)
    assert needs_more(_run("1", STR_10="FAIL"), 0)
    # Beyond load: not confirmed, but --verify reruns it.
    beyond = _run("1", STR_10="FAIL")
    beyond[1]["STR-10"]["beyond_load"] = True
    assert not needs_more(beyond, 0) and needs_more(beyond, 1)
    # The first run handed in: only the runs after it are made, and the outcome is the same.
    later = Clocked(None, alone)  # it has no first run to give
    assert judged(later, 0, try_alone=True, first=first) == judged(
        Clocked(first, alone), 0, try_alone=True
    )
    assert later.attempts == ["alone"]


# -- at once beside the run's other runs, before the confirmations at the end -----------------


def test_a_late_failure_that_passes_beside_the_others_at_once_is_settled_there():
    from conformance.verify import beside, needs_more

    first = _late("fast", 0.05, RTY_05="FAIL")
    again = _warped(
        ({**_run("beside", RTY_05="PASS")[0], "beside": True}, _run("b", RTY_05="PASS")[1]), 20
    )
    once = Clocked(None, again)
    entry, verdicts = beside(first, once)
    assert once.attempts == ["beside"]
    assert verdicts["RTY-05"]["verdict"] == "PASS"
    assert verdicts["RTY-05"]["confirmed"]["on"] == (
        "the x20 clock again, beside the run's other runs, at once"
    )
    assert verdicts["RTY-05"]["confirmed"]["first"]["verdict"] == "FAIL"
    assert entry["fast_clock_run"] is first[0] and entry["beside"] is True
    assert not needs_more((entry, verdicts), 0)  # nothing left for the end


def test_a_failure_beside_the_others_is_kept_and_left_to_the_runs_alone():
    from conformance.verify import beside, needs_more

    first = _late("fast", 0.05, RTY_05="FAIL")
    again = _late("beside", 0.03, RTY_05="FAIL")
    entry, verdicts = beside(first, Clocked(None, again))
    assert verdicts == first[1] and entry["beside_run"] is again[0]
    assert needs_more((entry, verdicts), 0)
    # The end goes on from the first run as before: alone, then the slower clock decides.
    slower = _warped(_run("slow", RTY_05="FAIL"), 5)
    later = Clocked(None, _late("alone", 0.04, RTY_05="FAIL"), slower)
    settled_entry, settled = judged(later, 0, try_alone=True, first=(entry, verdicts))
    assert later.attempts == ["alone", "slower"]
    assert settled["RTY-05"]["verdict"] == "FAIL"
    assert settled_entry["fast_clock_run"]["beside_run"] is again[0]


@pytest.mark.parametrize("verdict", ["ERROR", "TIMEOUT", None])
def test_a_run_beside_the_others_that_did_not_pass_settles_nothing(verdict):
    from conformance.verify import beside, needs_more

    first = _late("fast", 0.05, RTY_05="FAIL")
    again = _warped(_run("beside", **({"RTY_05": verdict} if verdict else {"RTY_07": "PASS"})), 20)
    entry, verdicts = beside(first, Clocked(None, again))
    assert verdicts == first[1] and entry["beside_run"] is again[0]
    assert needs_more((entry, verdicts), 0)


@pytest.mark.parametrize(
    "first",
    [
        _late("fast", 1.5, RTY_05="FAIL"),  # later than the run's own load makes a wait
        _late("fast", -0.01, RTY_05="FAIL"),  # early: load does not make a wait short
        _warped(_run("fast", STR_10="NON-STRICT"), 20),  # not a wait of the entry's waits
        _late("fast", 0.05, RTY_05="PASS"),  # nothing failed
    ],
    ids=["late-beyond-load", "early", "no-wait", "passed"],
)
def test_no_run_beside_the_others_for_a_failure_load_cannot_explain(first):
    from conformance.verify import beside

    once = Clocked(None)
    assert beside(first, once) == first
    assert once.attempts == []
