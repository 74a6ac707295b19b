"""Failed checks as Spark reports and fixes them: located failures, the summary, targets, the instruction."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.core.ci import (
    Annotation,
    CheckReport,
    annotation_failures,
    ci_targets,
    instruction,
    read_check,
    selects_check,
    summary_line,
)
from bot.core.ci_failures import Failure
from bot.core.ci_log import read_log
from bot.core.policy import check_target_path

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "ci_logs"
PROJECTS = yaml.safe_load((LOGS / "expected.yaml").read_text())["projects"]
EXIT = Annotation(".github", 1, "failure", "Process completed with exit code 1.")


def _report(log: str, name: str, project: str = "python") -> CheckReport:
    excerpt = read_log([(LOGS / log).read_bytes()])
    return read_check(name, 7, "failure", [EXIT], excerpt, PROJECTS[project])


def test_the_summary_names_each_check_its_count_and_files() -> None:
    ruff = read_check(
        "ruff",
        1,
        "failure",
        [],
        read_log([(LOGS / "flake8.log").read_bytes()]),
        PROJECTS["python"],
    )
    pytest_report = _report("pytest_short.log", "pytest")
    line = summary_line([ruff, pytest_report])
    assert line.startswith("2 checks failed: ruff (4 errors in `src/shop/cart.py`), pytest (4 failures, ")
    assert "`tests/test_cart.py` → `src/shop/cart.py`" in line
    assert "`tests/test_cart.py` → `src/shop/tax.py`" in line


def test_a_failing_test_in_product_code_targets_the_product_file_and_says_why() -> None:
    targets = ci_targets([_report("unittest.log", "unit")], check_target_path)
    assert targets.paths == ("src/shop/tax.py", "tests_ut/test_units.py")
    assert targets.moved == (("tests_ut/test_units.py", "src/shop/tax.py"),)


def test_files_spark_may_not_edit_are_refused_with_the_reason() -> None:
    failure = Failure("actionlint", ".github/workflows/ci.yml", 12, "unknown key")
    report = CheckReport("lint", 1, "failure", (failure, Failure("ruff", "a.py", 1, "F401")))
    targets = ci_targets([report], check_target_path)
    assert targets.paths == ("a.py",)
    assert targets.refused == ((".github/workflows/ci.yml", check_target_path(".github/workflows/ci.yml")),)


def test_without_the_log_the_annotations_still_locate_failures() -> None:
    annotations = [
        Annotation("src/shop/cart.py", 13, "failure", "F821 Undefined name `undefined_name`"),
        Annotation("src/shop/cart.py", 3, "warning", "deprecated"),
        EXIT,
    ]
    report = read_check("ruff", 3, "failure", annotations, None, PROJECTS["python"], note="no actions: read")
    assert [(f.path, f.line) for f in report.failures] == [("src/shop/cart.py", 13)]
    assert report.source == "annotations"
    assert report.evidence == ()


def test_a_file_the_repository_does_not_have_is_not_reported() -> None:
    annotations = [Annotation("generated/api.py", 1, "failure", "E999")]
    assert annotation_failures("ruff", annotations)
    assert read_check("ruff", 3, "failure", annotations, None, PROJECTS["python"]).failures == ()


def test_the_instruction_quotes_the_failures_and_their_log_lines() -> None:
    report = _report("mypy.log", "types")
    text = instruction([report], "src/shop/tax.py")
    assert "Check 'types' (failure):" in text
    assert (
        '- mypy: line 11: Incompatible return value type (got "float", expected "str")  [return-value]'
        in text
    )
    assert "    src/shop/tax.py:11: error: Unsupported operand types" in text
    assert "cart.py:17" not in text.split("Log lines:")[0]


def test_a_log_nothing_understood_gives_its_error_tail() -> None:
    log = (
        "2026-11-28T17:02:11.1234567Z ##[group]Run ./build.sh\n"
        "2026-11-28T17:02:11.1234567Z Segmentation fault (core dumped)\n"
        "2026-11-28T17:02:11.1234567Z ##[error]Process completed with exit code 139.\n"
    )
    report = read_check("build", 1, "failure", [EXIT], read_log([log.encode()]), PROJECTS["python"])
    assert report.failures == ()
    assert "Segmentation fault (core dumped)" in report.evidence
    assert summary_line([report]) == "1 check failed: build (nothing located in the repository)"


def test_checks_are_chosen_by_name_or_glob() -> None:
    assert selects_check("lint / ruff (3.12)", [])
    assert selects_check("lint / ruff (3.12)", ["lint / *"])
    assert not selects_check("deploy", ["lint / *", "test*"])
    assert selects_check("tests (ubuntu)", ["lint / *", "test*"])


def test_auto_mode_says_once_which_checks_failed_again_on_its_own_fix() -> None:
    from bot.core.ci import stop_notice

    assert stop_notice(["lint", "test"], ["build"]) is None
    notice = stop_notice(["lint", "test"], ["test", "build"])
    assert notice is not None and notice.startswith("`test` failed again on Spark's own fix")
    assert "/spark undo" in notice


def test_a_check_that_passed_before_and_fails_now_is_a_regression() -> None:
    from bot.core.ci import regressions

    before = {"lint": "success", "test": "failure", "docs": "success"}
    after = {"lint": "failure", "test": "failure", "build": "failure", "docs": "success"}
    assert regressions(before, after) == ["lint"]
