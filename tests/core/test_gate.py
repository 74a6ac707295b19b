"""The merge gate's decision (``bot.core.gate``): which findings hold it, what releases them, what the check
concludes for each gate setting and outcome."""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.assembly import FileResult, assemble_review
from bot.core.config import parse_config
from bot.core.diff import parse_diff
from bot.core.gate import (
    MAX_LISTED,
    GateFinding,
    GateStatus,
    error_verdict,
    fixed_at_head,
    gate_status,
    published,
    review_verdict,
    with_fixed,
)
from bot.core.ledger import LedgerState
from bot.core.types import Finding, Severity

HEAD = "import os\n\n\ndef run(cmd):\n    os.system(cmd)\n    return True\n"
DIFF = """diff --git a/app.py b/app.py
new file mode 100644
--- /dev/null
+++ b/app.py
@@ -0,0 +1,6 @@
+import os
+
+
+def run(cmd):
+    os.system(cmd)
+    return True
"""


def gf(
    fp: str, severity: Severity = "high", path: str = "app.py", code: str = "os.system(cmd)"
) -> GateFinding:
    return GateFinding(fp, severity, path, f"title {fp}", code)


# ---- which findings a review publishes for the gate --------------------------------------------------


def test_published_keeps_high_and_critical_findings_whose_code_is_at_the_head() -> None:
    findings = (
        Finding("app.py", "shell injection", severity="critical", code="    os.system(cmd)"),
        Finding("app.py", "always true", severity="high", code="    return True"),
        Finding("app.py", "style", severity="medium", code="import os"),
        # A claim about code that is not in the file: not verified, it cannot hold the gate.
        Finding("app.py", "imaginary", severity="high", code="eval(cmd)"),
        Finding("app.py", "no code", severity="high"),
    )
    draft = assemble_review(parse_diff(DIFF), [FileResult("app.py", findings, HEAD)])
    kept = published(draft)
    assert sorted((f.severity, f.title) for f in kept) == [
        ("critical", "shell injection"),
        ("high", "always true"),
    ]
    assert all(f.path == "app.py" and not f.fixed for f in kept)
    assert {f.fingerprint for f in kept} <= set(draft.fingerprints)


def test_published_leaves_out_findings_already_in_the_ledger() -> None:
    finding = Finding("app.py", "shell injection", severity="high", code="    os.system(cmd)")
    first = assemble_review(parse_diff(DIFF), [FileResult("app.py", (finding,), HEAD)])
    [fp] = first.fingerprints
    again = assemble_review(parse_diff(DIFF), [FileResult("app.py", (finding,), HEAD)], {fp: "posted"})
    assert published(again) == ()


def test_a_finding_round_trips_through_what_spark_remembers() -> None:
    finding = GateFinding("0123456789abcdef", "critical", "a.py", "t", "x = 1", fixed=True)
    assert GateFinding.from_dict(finding.fingerprint, finding.as_dict()) == finding
    assert GateFinding.from_dict("f", {"severity": "urgent", "path": "a", "code": ""}) is None
    assert GateFinding.from_dict("f", {"severity": "high", "code": ""}) is None


# ---- fixed at the head -------------------------------------------------------------------------------


def test_fixed_when_the_code_is_gone_the_file_is_gone_never_when_the_text_is_unknown() -> None:
    findings = [
        gf("still", code="os.system(cmd)"),
        gf("reindented", code="  os.system( cmd )".replace("( cmd )", "(cmd)")),
        gf("gone", code="eval(cmd)"),
        gf("deleted", path="old.py"),
        gf("unread", path="big.py", code="anything"),
        GateFinding("was", "high", "app.py", "t", "eval(cmd)", fixed=True),
    ]
    fixed = fixed_at_head(findings, {"app.py": HEAD}, {"old.py"})
    assert fixed == ("gone", "deleted")


def test_with_fixed_marks_only_those_named() -> None:
    marked = with_fixed([gf("a"), gf("b")], {"b"})
    assert [(f.fingerprint, f.fixed) for f in marked] == [("a", False), ("b", True)]


# ---- how each finding stands ---------------------------------------------------------------------------

CASES: list[tuple[str, bool, LedgerState | None, bool | None, str]] = [
    # (name, fixed, ledger state, thread resolved (None: no thread listed), standing)
    ("posted, thread open", False, "posted", False, "open"),
    ("posted, thread resolved", False, "posted", True, "resolved"),
    ("answered then resolved", False, "answered", True, "resolved"),
    ("answered, thread open", False, "answered", False, "open"),
    ("ledger resolved, thread unresolved again", False, "resolved", False, "open"),
    ("ledger resolved, no thread listed", False, "resolved", None, "resolved"),
    ("in the body, posted", False, "posted", None, "open"),
    ("not in the ledger yet (this review)", False, None, None, "open"),
    ("dismissed, thread open", False, "dismissed", False, "dismissed"),
    ("dismissed, no thread", False, "dismissed", None, "dismissed"),
    ("fixed, thread open", True, "posted", False, "fixed"),
    ("fixed and dismissed", True, "dismissed", True, "fixed"),
]


@pytest.mark.parametrize(("name", "fixed", "state", "thread", "standing"), CASES, ids=[c[0] for c in CASES])
def test_standing(
    name: str, fixed: bool, state: LedgerState | None, thread: bool | None, standing: str
) -> None:
    finding = GateFinding("fp", "high", "app.py", "t", "x", fixed=fixed)
    ledger = {"fp": state} if state is not None else {}
    threads = {"fp": thread} if thread is not None else {}
    assert gate_status([finding], ledger, threads).standing == {"fp": standing}


def test_status_lists_open_findings_by_severity_and_counts_releases() -> None:
    findings = [gf("h2", path="b.py"), gf("c1", "critical", "z.py"), gf("h1", path="a.py"), gf("r"), gf("d")]
    status = gate_status(findings, {"d": "dismissed", "r": "resolved"}, {})
    assert [f.fingerprint for f in status.open] == ["c1", "h1", "h2"]
    assert status.released == {"resolved": 1, "dismissed": 1}


# ---- the verdicts --------------------------------------------------------------------------------------

OPEN = gate_status([gf("a"), gf("b", "critical", "b.py")], {}, {})
RELEASED = gate_status(
    [gf("a"), gf("b"), GateFinding("c", "high", "gone.py", "t", "x", fixed=True)],
    {"b": "dismissed"},
    {"a": True},
)
NONE = GateStatus()


@pytest.mark.parametrize("status", [OPEN, RELEASED, NONE])
@pytest.mark.parametrize(("conclusion", "gaps"), [("neutral", 0), ("success", 0), ("neutral", 2)])
def test_gate_off_keeps_the_reviews_own_conclusion(status: GateStatus, conclusion: str, gaps: int) -> None:
    verdict = review_verdict("off", conclusion, "2 new findings", status, gaps=gaps)
    assert (verdict.conclusion, verdict.title, verdict.section) == (conclusion, "2 new findings", "")


@pytest.mark.parametrize("conclusion", ["neutral", "success"])
@pytest.mark.parametrize("gaps", [0, 3])
def test_gate_high_fails_on_any_open_finding_whatever_else(conclusion: str, gaps: int) -> None:
    verdict = review_verdict("high", conclusion, "No new findings", OPEN, gaps=gaps)
    assert verdict.conclusion == "failure"
    assert verdict.title == "No new findings; 2 high-severity findings unresolved"
    lines = verdict.section.splitlines()
    assert lines[0] == (
        "**Merge gate** (`review.gate: high`): 2 high-severity findings stand unresolved, "
        "so this check fails:"
    )
    # Most severe first.
    assert lines[2:4] == ["- **critical** `b.py` title b", "- **high** `app.py` title a"]
    assert "re-run this check" in verdict.section


@pytest.mark.parametrize("status", [RELEASED, NONE])
def test_gate_high_succeeds_when_nothing_is_open_and_every_file_was_reviewed(status: GateStatus) -> None:
    verdict = review_verdict("high", "neutral", "1 new finding", status)
    assert (verdict.conclusion, verdict.title) == ("success", "1 new finding")
    assert "no high-severity finding stands unresolved." in verdict.section


def test_gate_high_says_what_released_the_findings() -> None:
    status = gate_status(
        [gf("a"), gf("b"), GateFinding("c", "high", "app.py", "t", "x", fixed=True)],
        {"b": "dismissed"},
        {"a": True},
    )
    section = review_verdict("high", "success", "t", status).section
    assert section.endswith("3 findings released (1 resolved, 1 fixed, 1 dismissed).")


@pytest.mark.parametrize(
    ("gaps", "words"),
    [(1, "1 file of the head was not reviewed"), (4, "4 files of the head were not reviewed")],
)
def test_gate_high_is_neutral_not_success_when_files_were_not_reviewed(gaps: int, words: str) -> None:
    verdict = review_verdict("high", "neutral", "No new findings", RELEASED, gaps=gaps)
    assert verdict.conclusion == "neutral"
    assert words in verdict.section and "not a pass" in verdict.section


def test_a_long_list_of_open_findings_is_cut_and_counted() -> None:
    status = gate_status([gf(f"f{i:02}", path=f"f{i:02}.py") for i in range(MAX_LISTED + 5)], {}, {})
    section = review_verdict("high", "neutral", "t", status).section
    assert section.count("\n- **high**") == MAX_LISTED
    assert "- and 5 more" in section


def test_a_findings_title_is_made_inert() -> None:
    status = gate_status([GateFinding("x", "high", "a.py", "<img src=x> @team", "c")], {}, {})
    section = review_verdict("high", "neutral", "t", status).section
    assert "<img" not in section and "@team" not in section.replace("`", "")


@pytest.mark.parametrize(
    ("conclusion", "title"), [("failure", "Review failed"), ("neutral", "Model unavailable")]
)
def test_an_error_keeps_todays_conclusion_with_the_gate_off(conclusion: str, title: str) -> None:
    assert error_verdict("off", conclusion, title, "boom").conclusion == conclusion
    assert error_verdict("off", conclusion, title, "boom").section == ""


@pytest.mark.parametrize(
    ("conclusion", "title"), [("failure", "Review failed"), ("neutral", "Model unavailable")]
)
def test_an_error_is_neutral_with_its_reason_under_the_gate_never_success(
    conclusion: str, title: str
) -> None:
    verdict = error_verdict("high", conclusion, title, "The model call failed: timeout")
    assert verdict.conclusion == "neutral" and verdict.title == title
    assert "not evaluated" in verdict.section and "The model call failed: timeout" in verdict.section


# ---- the setting ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gate", "errors"),
    [
        ("", "off", 0),
        ("review:\n  gate: high\n", "high", 0),
        ("review:\n  gate: off\n", "off", 0),  # YAML 1.1 reads a bare off as false
        ("review:\n  gate: 'off'\n", "off", 0),
        ("review:\n  gate: medium\n", "off", 1),
        ("review:\n  gate: true\n", "off", 1),
    ],
)
def test_the_setting(text: str, gate: str, errors: int) -> None:
    result: Any = parse_config(text)
    assert result.config.gate == gate
    assert len(result.errors) == errors
