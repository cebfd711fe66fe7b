"""The registry keeps every check declared before the @check decorator replaced the per-module
CHECKS dicts and FINAL_ON_PARTIAL sets, with the same function and the same flags: pinned here,
so that none is lost or changes meaning unnoticed. A check added later is not pinned (adding a
criterion does not touch this file); it is held by its own test and the docs page's columns."""

from __future__ import annotations

import pytest

from conformance.catalogue import CATALOGUE
from conformance.checks import CHECKS, FINAL_ON_PARTIAL, INVARIANTS, check_for, run_check
from conformance.checks.declare import check, declared
from conformance.checks.registry import _AREAS
from conformance.judging.evidence import Evidence

# criterion -> the area module and function that judges it
PINNED_CHECKS = {
    "RTY-01": "rty.check_rty_01",
    "RTY-02": "rty.check_rty_02",
    "RTY-03": "rty.check_rty_03",
    "RTY-04": "rty.check_rty_04",
    "RTY-05": "rty.check_rty_05",
    "RTY-06": "rty.check_rty_06",
    "RTY-07": "rty.check_rty_07",
    "RTY-08": "rty.check_rty_08",
    "RTY-09": "rty_cases.check_rty_09",
    "RTY-10": "rty_cases.check_rty_10",
    "RTY-11": "rty_cases.check_rty_11",
    "RTY-12": "rty.check_rty_12",
    "RTY-13": "rty.check_rty_13",
    "RTY-14": "rty_cases.check_rty_14",
    "RTY-15": "rty_cases.check_rty_15",
    "RTY-16": "rty.check_rty_16",
    "STR-01": "str_.check_str_01",
    "STR-02": "str_events.check_str_02",
    "STR-03": "str_.check_str_03",
    "STR-04": "str_events.check_str_04",
    "STR-05": "str_.check_str_05",
    "STR-06": "str_events.check_str_06",
    "STR-07": "str_events.check_str_07",
    "STR-08": "str_.check_str_08",
    "STR-09": "str_.check_str_09",
    "STR-10": "str_.check_str_10",
    "STR-11": "str_.check_str_11",
    "STR-12": "str_.check_str_12",
    "STR-13": "str_.check_str_13",
    "STR-14": "str_.check_str_14",
    "STR-15": "str_.check_str_15",
    "STR-16": "str_.check_str_16",
    "TRN-01": "trn.check_trn_01",
    "TRN-02": "trn.check_trn_02",
    "TRN-03": "trn.check_trn_03",
    "TRN-04": "trn.check_trn_04",
    "TRN-05": "trn.check_trn_05",
    "TRN-06": "trn.check_trn_06",
    "TRN-07": "trn.check_trn_07",
    "TRN-08": "trn.check_trn_08",
    "TRN-09": "trn.check_trn_09",
    "TRN-10": "trn.check_trn_10",
    "RSN-01": "rsn.check_rsn_01",
    "RSN-02": "rsn.check_rsn_02",
    "RSN-03": "rsn.check_rsn_03",
    "RSN-04": "invariants.check_rsn_04",
    "TJS-01": "tjs.check_tjs_01",
    "TJS-02": "tjs.check_tjs_02",
    "TJS-03": "tjs.check_tjs_03",
    "TJS-04": "tjs.check_tjs_04",
    "TJS-05": "tjs.check_tjs_05",
    "TJS-06": "tjs.check_tjs_06",
    "TOL-01": "tol.check_tol_01",
    "TOL-02": "tol.check_tol_02",
    "TOL-03": "tol.check_tol_03",
    "TOL-04": "tol.check_tol_04",
    "TOL-05": "tol.check_tol_05",
    "TOL-06": "invariants.check_tol_06",
    "TOL-07": "tol.check_tol_07",
    "TOL-08": "tol.check_tol_08",
    "TOL-09": "tol.check_tol_09",
    "FMT-01": "fmt.check_fmt_01",
    "FMT-02": "fmt.check_fmt_02",
    "FMT-03": "fmt.check_fmt_03",
    "LOP-01": "tol.check_lop_01",
    "LOP-02": "lop.check_lop_02",
    "LOP-03": "lop.check_lop_03",
    "LOP-04": "invariants.check_turn_end",
    "LOP-05": "lop.check_lop_05",
    "LOP-06": "lop.check_lop_06",
    "CTX-01": "ctx.check_ctx_01",
    "CTX-02": "ctx.check_ctx_02",
    "CTX-03": "ctx.check_ctx_03",
    "CTX-04": "ctx.check_ctx_04",
    "CTX-05": "ctx.check_ctx_05",
    "MFB-01": "mfb.check_mfb_01",
    "MFB-02": "mfb.check_mfb_02",
    "MFB-03": "mfb.check_mfb_03",
    "MFB-04": "mfb.check_mfb_04",
    "ERR-01": "err.check_err_01",
    "ERR-02": "ctl.check_err_02",
    "ERR-03": "err.check_err_03",
    "ERR-04": "err.check_err_04",
    "ERR-05": "invariants.check_turn_end",
    "DBG-01": "dbg.check_dbg_01",
    "DBG-02": "dbg.check_dbg_02",
    "DBG-03": "dbg.check_dbg_03",
    "CTL-01": "ctl.check_ctl_01",
    "CTL-02": "ctl.check_ctl_02",
}

PINNED_FINAL = {
    "RTY-01",
    "RTY-02",
    "RTY-03",
    "RTY-04",
    "RTY-05",
    "RTY-06",
    "RTY-07",
    "RTY-09",
    "RTY-10",
    "RTY-11",
    "RTY-12",
    "RTY-13",
    "RTY-14",
    "RTY-15",
    "RTY-16",
    "STR-01",
    "STR-03",
    "STR-04",
    "STR-05",
    "STR-06",
    "STR-07",
    "STR-08",
    "STR-09",
    "STR-10",
    "STR-12",
    "STR-13",
    "STR-14",
    "STR-16",
    "TRN-02",
    "TRN-03",
    "TRN-04",
    "TRN-07",
    "TRN-08",
    "TRN-09",
    "RSN-01",
    "RSN-02",
    "RSN-03",
    "RSN-04",
    "TJS-01",
    "TJS-03",
    "TJS-04",
    "TJS-05",
    "TOL-01",
    "TOL-02",
    "TOL-03",
    "TOL-04",
    "TOL-05",
    "TOL-06",
    "TOL-08",
    "LOP-01",
    "LOP-02",
    "LOP-03",
    "LOP-05",
    "LOP-06",
    "CTX-01",
    "CTX-02",
    "CTX-03",
    "CTX-04",
    "CTX-05",
    "MFB-01",
    "MFB-02",
    "MFB-03",
    "MFB-04",
    "DBG-02",
    "CTL-01",
    "CTL-02",
}

PINNED_INVARIANTS = ["RSN-04", "TOL-06", "LOP-04", "ERR-05", "DBG-02"]


def test_the_pinned_checks_are_all_there() -> None:
    got = {cid: f"{fn.__module__.rsplit('.', 1)[1]}.{fn.__name__}" for cid, fn in CHECKS.items()}
    assert {cid: got.get(cid) for cid in PINNED_CHECKS} == PINNED_CHECKS


def test_final_on_partial_keeps_the_pinned_set() -> None:
    assert FINAL_ON_PARTIAL & set(PINNED_CHECKS) == PINNED_FINAL
    assert set(CHECKS) >= FINAL_ON_PARTIAL


def test_invariants_are_the_pinned_ones_in_catalogue_order() -> None:
    # The runner appends them to every scenario's criteria in this order.
    assert [cid for cid in INVARIANTS if cid in PINNED_CHECKS] == PINNED_INVARIANTS
    assert all(INVARIANTS[cid] is CHECKS[cid] for cid in INVARIANTS)


def test_checks_are_in_catalogue_order() -> None:
    order = [c.id for c in CATALOGUE]
    assert list(CHECKS) == sorted(CHECKS, key=order.index)


def test_every_declaration_comes_from_an_area_module() -> None:
    modules = {m.__name__ for m in _AREAS}
    assert {d.fn.__module__ for d in declared().values()} <= modules
    assert set(declared()) == set(CHECKS)


def test_check_for_and_run_check() -> None:
    assert check_for("RTY-04") is CHECKS["RTY-04"]
    with pytest.raises(KeyError, match="NOPE-01"):
        check_for("NOPE-01")
    assert (
        run_check("RTY-04", Evidence(scenario={}, raw_journal={"entries": []})).outcome
        == "not_applicable"
    )


def test_a_check_for_an_unknown_criterion_fails_at_declaration() -> None:
    with pytest.raises(KeyError, match="NOPE-01"):
        check("NOPE-01")(CHECKS["RTY-04"])


def test_a_second_check_for_a_criterion_is_refused_naming_both() -> None:
    def another(ev: Evidence):  # pragma: no cover - never run
        raise AssertionError

    with pytest.raises(RuntimeError, match=r"RTY-04 has two checks: .*check_rty_04 and .*another"):
        check("RTY-04", final=True)(another)
    assert declared()["RTY-04"].fn is CHECKS["RTY-04"]


def test_a_declaration_names_a_criterion() -> None:
    with pytest.raises(TypeError, match="at least one criterion"):
        check()
