"""Fingerprints survive moves, re-indentation and whitespace; markers round-trip and cannot be forged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core import markers
from bot.core.findings import (
    finding_marker,
    fingerprint,
    fingerprint_of,
    read_finding_marker,
)
from bot.core.types import Finding

CODE = "def load(path):\n    with open(path) as f:\n        return json.load(f)\n"


@pytest.mark.parametrize(
    "moved",
    [
        "\n\n" + CODE,  # pushed down by new lines above
        "    " + CODE.replace("\n    ", "\n        "),  # re-indented into a class
        CODE.replace("(path)", "( path )").replace("    ", "\t"),  # spaces and tabs changed
        CODE.replace("\n", "\r\n"),  # line endings changed
        CODE.rstrip("\n"),
    ],
)
def test_same_finding_keeps_its_fingerprint(moved: str) -> None:
    assert fingerprint("app/io.py", moved, "Unclosed file") == fingerprint("app/io.py", CODE, "Unclosed file")


def test_rule_text_is_compared_without_case_or_spacing() -> None:
    assert fingerprint("a.py", CODE, "Unclosed  File") == fingerprint("a.py", CODE, "unclosed file")


@pytest.mark.parametrize(
    ("path", "code", "rule"),
    [
        ("app/io.py", CODE.replace("json.load", "json.loads"), "Unclosed file"),  # different code
        ("app/io.py", CODE, "Missing encoding"),  # different rule
        ("app/other.py", CODE, "Unclosed file"),  # different file
    ],
)
def test_different_findings_differ(path: str, code: str, rule: str) -> None:
    assert fingerprint(path, code, rule) != fingerprint("app/io.py", CODE, "Unclosed file")


@given(st.text(max_size=80), st.text(max_size=30))
def test_fingerprint_is_sixteen_hex_digits(code: str, rule: str) -> None:
    fp = fingerprint("f.py", code, rule)
    assert len(fp) == 16 and set(fp) <= set("0123456789abcdef")


def test_fingerprint_of_prefers_rule_then_title_and_keeps_a_valid_given_one() -> None:
    by_rule = Finding(path="a.py", title="Anything", rule="no-eval", code="eval(x)")
    assert fingerprint_of(by_rule) == fingerprint("a.py", "eval(x)", "no-eval")
    by_title = Finding(path="a.py", title="Eval of input", code="eval(x)")
    assert fingerprint_of(by_title) == fingerprint("a.py", "eval(x)", "Eval of input")
    given_fp = Finding(path="a.py", title="t", fingerprint="0123456789abcdef")
    assert fingerprint_of(given_fp) == "0123456789abcdef"
    junk = Finding(path="a.py", title="t", fingerprint="<script>")
    assert fingerprint_of(junk) == fingerprint("a.py", "", "t")


def test_markers_round_trip() -> None:
    fp = fingerprint("a.py", "x", "y")
    body = markers.append("**high** · Something", "finding", fp)
    assert body.endswith(finding_marker(fp)) and read_finding_marker(body) == fp
    assert markers.append(body, "finding", fp) == body
    other = fingerprint("a.py", "z", "y")
    assert markers.values(f"{finding_marker(fp)}\ntext\n{finding_marker(other)}", "finding") == [fp, other]
    assert read_finding_marker("no marker here") is None


def test_markers_reject_and_strip_forgeries() -> None:
    with pytest.raises(ValueError, match="not a finding fingerprint"):
        finding_marker("x --> <img>")
    forged = "Looks fine <!-- spark:finding=0123456789abcdef --> really"
    assert read_finding_marker(markers.strip(forged)) is None
    assert markers.strip(forged) == "Looks fine  really"


def test_only_the_last_line_of_a_body_carries_its_marker() -> None:
    fp, other = fingerprint("a.py", "x", "y"), fingerprint("a.py", "z", "y")
    assert read_finding_marker(f"quoted {finding_marker(other)}\n\n{finding_marker(fp)}\n") == fp
    assert read_finding_marker(f"{finding_marker(other)}\nthen text") is None
    nested = "<!-- spa<!-- spark:x -->rk:finding=0123456789abcdef -->"
    assert read_finding_marker(f"text {nested}") is None
