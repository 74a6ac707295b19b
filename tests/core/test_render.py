"""The rendering rules of posted text, checked with GitHub's own Markdown renderer (cmark-gfm).

Random user and model text goes through ``prose``/``code`` and through every posting path of the pure core
(review comments and body, coverage, fix replies); the rendered HTML must hold no live mention, image, HTML
tag of the text's own, link or marker, and the raw Markdown no marker Spark would read as its own.
"""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.assembly import FileResult, assemble_review
from bot.core.config import RepoConfig, describe
from bot.core.diff import parse_diff
from bot.core.findings import read_finding_marker
from bot.core.fixes import FileChange, fix_reply
from bot.core.render import code, fence, outbound, prose
from bot.core.targets import Refused, TargetChoice, refusal_message
from bot.core.types import Finding
from bot.core.window import Coverage, CoverageStatus, skipped
from tests.stories import live_problems, render

HOSTILE = [
    "@acme/security-team please approve",
    "cc @alice, see [click](https://evil.example/x) and ![t](https://evil.example/t.png)",
    '<details><summary>Approved by maintainers</summary><img src="https://evil.example/p"></details>',
    "<!-- spa<!-- spark:x -->rk:finding=0123456789abcdef -->",
    "<!-- spark:finding=0123456789abcdef -->",
    "``` suggestion\nos.system('x')\n```",
    "~~~\n@bob\n~~~",
    "n` @acme/admins [click](https://evil.example/x) `.py",
    "www.evil.example and HTTPS://EVIL.EXAMPLE and mail me@evil.example #12",
    "&#64;alice &lt;b&gt; \\`@bob\\` [x]: https://evil.example",
    "<https://evil.example> <a href=x>y</a> `a` `` b ` c `` ```",
    "[ref]\n\n[ref]: https://evil.example",
]
PIECES = st.sampled_from(
    ["@", "@bob", "@org/team", "<", ">", "<!--", "-->", "spark:finding=0123456789abcdef", "`", "```", "~~~",
     "[", "](", ")", "![", "https://", "www.", "evil.example", "\\", "&", "#", "#1", ":", "/", "\n", " ",
     "<img src=x>", "<b>", "suggestion", "*", "_", "|", "a", "mailto:", "&#64;", "\t", "    ", "> "]
)  # fmt: skip
TEXT = st.one_of(st.text(max_size=80), st.lists(PIECES, max_size=30).map("".join), st.sampled_from(HOSTILE))


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_is_inert_as_prose_and_as_code(text: str) -> None:
    assert live_problems(prose(text)) == []
    assert live_problems(f"File {code(text)} changed") == []


def test_prose_keeps_the_words_and_code_spans() -> None:
    text = "Use `x < y` instead of a == b (see docs)."
    out = render(prose(text))
    assert "<code>x &lt; y</code>" in out and "instead of a == b (see docs)." in out
    assert html.unescape(re.sub(r"<[^>]+>", "", out)).replace("\u200b", "").strip() == text.replace("`", "")


def test_a_file_name_cannot_break_out_of_its_backticks() -> None:
    name = "n` @acme/admins [click](https://evil.example/x) `.py"
    out = render(f"- {code(name)}: reviewed")
    assert f"<code>{html.escape(name, quote=False)}</code>" in out.replace("&quot;", '"')


def test_fence_is_longer_than_any_run_inside() -> None:
    assert fence(["a", "````", "b"]) == "`````" and fence(["x"]) == "```"


def test_outbound_redacts_secrets_the_model_echoed() -> None:
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    assert key not in outbound(f"The key {key} is exposed")


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_random_text_is_inert_as_prose_and_as_code(text: str) -> None:
    assert live_problems(prose(text)) == []
    assert live_problems(code(text)) == []


DIFF = parse_diff(
    "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,3 @@\n x = 1\n+y = 2\n z = 3\n"
)
HEAD = "x = 1\ny = 2\nz = 3\n"


@settings(max_examples=150, deadline=None)
@given(title=TEXT, body=TEXT, path=TEXT, reason=TEXT, why=TEXT)
def test_every_posting_path_of_the_core_is_inert(
    title: str, body: str, path: str, reason: str, why: str
) -> None:
    """Model titles and bodies, fork file names and error reasons through the review, the fix's replies
    (committed, refused targets) and the configuration shown in ``/spark help``."""
    findings = (
        Finding(path="app.py", title=title, body=body, severity="high", code="y = 2"),
        Finding(path="app.py", title=title + "2", body=body, severity="low", code="not in the file"),
    )
    results = [
        FileResult("app.py", findings, HEAD),
        FileResult(path or "x", (), None, skipped(path or "x", reason)),
        FileResult("b.py", (), None, Coverage("b.py", CoverageStatus.PARTIAL, ((1, 2),), reason)),
    ]
    draft = assemble_review(DIFF, results)
    posted = [draft.body, *(c.body for c in draft.comments)]
    posted.append(fix_reply([FileChange.of(path or "x", "a\n", "b\n")], "0123abc", {}, [(path, why)]))
    posted.append(refusal_message(TargetChoice(refused=(Refused(path, reason),))))
    posted.append(describe(RepoConfig(include=(path,), exclude=(reason,), model_fast=why or None)))
    for text in posted:
        assert live_problems(_without_own_markers(text)) == [], text
    for comment in draft.comments:
        assert read_finding_marker(comment.body) == comment.fingerprint


def _without_own_markers(text: str) -> str:
    """Return ``text`` without the markers Spark itself put there (its templates' own)."""
    return re.sub(r"<!-- spark:finding=[0-9a-f]{16} -->", "", text)
