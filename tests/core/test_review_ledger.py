"""The findings ledger as GitHub shows it, merged ledgers, and the dry-run preview (pure core)."""

from __future__ import annotations

from bot.core.assembly import (
    FileResult,
    assemble_review,
    preview,
    summarise,
)
from bot.core.diff import parse_diff
from bot.core.findings import finding_marker
from bot.core.ledger import ThreadReply, ledger_from_threads, merge_ledgers
from bot.core.types import Finding

A, B, C, D = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc", "dddddddddddddddd"
BOT = "spark[bot]"


def root(comment_id: int, fp: str, *, thumbs_down: int = 0, resolved: bool = False) -> ThreadReply:
    return ThreadReply(comment_id, None, BOT, f"**high** · t\n\n{finding_marker(fp)}", thumbs_down, resolved)


def test_threads_say_posted_resolved_answered_and_dismissed() -> None:
    comments = [
        root(1, A),
        root(2, B, resolved=True),
        root(3, C),
        ThreadReply(30, 3, "bob", "This is intended."),
        root(4, D, thumbs_down=1),
        # A reply by Spark itself (e.g. to a /spark command) does not count as an answer.
        ThreadReply(10, 1, BOT, "Stopped."),
    ]
    assert ledger_from_threads(comments, BOT) == {A: "posted", B: "resolved", C: "answered", D: "dismissed"}


def test_comments_without_a_marker_and_forged_replies_are_not_findings() -> None:
    comments = [
        ThreadReply(1, None, "bob", "Please look at this."),
        # A reply quoting a marker is not a thread of Spark's: only a thread's first comment counts.
        ThreadReply(2, 1, "mallory", finding_marker(A)),
    ]
    assert ledger_from_threads(comments, BOT) == {}


def test_a_thumbs_down_outranks_an_answer_and_merging_keeps_the_strongest_state() -> None:
    both = [root(1, A, thumbs_down=2, resolved=True), ThreadReply(2, 1, "bob", "no")]
    assert ledger_from_threads(both, BOT) == {A: "dismissed"}
    merged = merge_ledgers({A: "posted", B: "dismissed"}, {A: "answered", B: "posted", C: "resolved"})
    assert merged == {A: "answered", B: "dismissed", C: "resolved"}


DIFF = """\
--- a/app.py
+++ b/app.py
@@ -1,1 +1,3 @@
 import os
+x = eval(data)
+y = 2
"""
HEAD = "import os\nx = eval(data)\ny = 2\n"


def test_the_summary_says_why_findings_were_not_repeated() -> None:
    known = Finding(path="app.py", title="eval on input", severity="high", code="x = eval(data)")
    fresh = Finding(path="app.py", title="magic number", severity="low", code="y = 2")
    draft = assemble_review(
        parse_diff(DIFF),
        [FileResult("app.py", (known, fresh), HEAD)],
        {
            assemble_review(parse_diff(DIFF), [FileResult("app.py", (known,), HEAD)]).fingerprints[
                0
            ]: "dismissed"
        },
    )
    assert draft.already_known == 1 and draft.known_states == {"dismissed": 1}
    assert "Not repeated (already reported): 1 (1 dismissed)" in summarise(draft)


def test_preview_shows_each_inline_comment_where_it_would_go_without_markers() -> None:
    fix = Finding(
        path="app.py",
        title="eval on input",
        severity="high",
        code="x = eval(data)",
        replacement="x = int(data)",
    )
    draft = assemble_review(parse_diff(DIFF), [FileResult("app.py", (fix,), HEAD)])
    shown = preview(draft)
    assert "**`app.py:2`**" in shown
    assert "```suggestion\nx = int(data)\n```" in shown
    assert "<!-- spark:" not in shown and "## Spark review" in shown


def test_a_marker_in_a_users_own_comment_counts_for_nothing() -> None:
    """The PR author writes the marker of the finding she expects into her own review comment."""
    forged = ThreadReply(1, None, "alice", f"Looks fine.\n\n{finding_marker(A)}")
    assert ledger_from_threads([forged], BOT) == {}
    assert ledger_from_threads([root(2, B)], BOT) == {B: "posted"}
