"""A review finding's fix becomes a suggestion of exactly the lines its edit changed, where it applied."""

from __future__ import annotations

from bot.core.anchors import apply_suggestions
from bot.core.answers import parse_review_answer
from bot.core.assembly import FileResult, assemble_review
from bot.core.diff import format_patch, parse_diff
from bot.core.types import Diff
from workers.flows.review import _finding

PATH = "svc/calc.py"
BEFORE = "def a():\n    setup()\n    x = compute()\n    return x\n\n\ndef b():\n    setup()\n"
HEAD = BEFORE + "\n    x = compute()\n    return x\n"
ANSWER = (
    "### FINDING: medium: b may return None\n"
    "Default it.\n"
    "```python\n"
    "<<<<<<< SEARCH\n"
    "\n"
    "    x = compute()\n"
    "    return x\n"
    "=======\n"
    "\n"
    "    x = compute()\n"
    "    return x or 0\n"
    ">>>>>>> REPLACE\n"
    "```\n"
)


def test_search_starting_with_a_blank_line_suggests_exactly_the_changed_line() -> None:
    """The SEARCH starts with a blank line and its two code lines also exist in ``a``: the suggestion must not
    land on ``a`` nor insert a stray blank line (issue 14, section 6; blank-led SEARCH blocks are common in
    Aider tests/basic/test_editblock.py inputs)."""
    (proposed,) = parse_review_answer(ANSWER, PATH).findings
    finding = _finding(PATH, HEAD, HEAD, proposed)
    assert finding.replacement is not None
    diff = Diff(files=(parse_diff(format_patch(PATH, BEFORE, HEAD)).files[0],))
    draft = assemble_review(diff, [FileResult(PATH, (finding,), HEAD)])
    assert len(draft.comments) == 1
    assert apply_suggestions(HEAD, draft.comments) == BEFORE + "\n    x = compute()\n    return x or 0\n"
    (comment,) = draft.comments
    assert (comment.start_line, comment.line) == (None, 11)
