"""The sandbox's diffs are real diffs: every `patch` turns the old file into the new one."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.github.state import GitStore

LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "def f():\n", "    return 1\n", "\n"]), max_size=40)


def apply_patch(old: str, patch: str) -> str:
    """Apply a GitHub per-file patch (hunks only) to a text, checking every context and removed line."""
    source = old.splitlines(keepends=True)
    out: list[str] = []
    position = 0
    # A header may end with git's hunk heading (the nearest line above that starts a "function").
    hunks = re.split(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@[^\n]*\n?", patch, flags=re.M)[1:]
    for start_text, length_text, body in zip(hunks[0::3], hunks[1::3], hunks[2::3], strict=True):
        start, length = int(start_text), int(length_text or 1)
        begin = start if length == 0 else start - 1  # an empty old side inserts after line `start`
        out += source[position:begin]
        position = begin
        for line in body.splitlines():
            kind, text = line[:1], line[1:] + "\n"
            if kind in (" ", "-"):
                assert source[position] == text
                position += 1
            if kind in (" ", "+"):
                out.append(text)
    out += source[position:]
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(old=LINES, new=LINES)
def test_patch_reproduces_the_new_file(old: list[str], new: list[str]) -> None:
    store = GitStore()
    before = store.put_commit(store.build_tree({"f.py": "".join(old).encode()}), [], "a", "u", "u@x", False)
    after = store.put_commit(store.build_tree({"f.py": "".join(new).encode()}), [], "b", "u", "u@x", False)
    files = store.diff(before.sha, after.sha)
    if old == new:
        assert files == []
        return
    [changed] = files
    assert changed.patch is not None
    assert apply_patch("".join(old), changed.patch) == "".join(new)
    assert changed.additions == sum(1 for h in changed.hunks for line in h.lines if line.startswith("+"))


def test_hunks_are_gits_not_difflibs() -> None:
    # GitHub computes diffs with git (https://docs.github.com/rest/commits/commits#compare-two-commits: "the
    # response ... in the same format as `git diff`"): Myers keeps "a" as context where difflib keeps the
    # blank line, and which lines are commentable follows from that.
    store = GitStore()
    before = store.put_commit(store.build_tree({"f.txt": b"b\n\na\n"}), [], "a", "u", "u@x", False)
    after = store.put_commit(store.build_tree({"f.txt": b"a\n\nc\n"}), [], "b", "u", "u@x", False)
    [changed] = store.diff(before.sha, after.sha)
    assert changed.patch == "@@ -1,3 +1,3 @@\n-b\n-\n a\n+\n+c"
    assert (changed.hunks[0].left, changed.hunks[0].right) == ({1, 2, 3}, {1, 2, 3})


def test_git_hunk_headings_and_missing_final_newlines() -> None:
    store = GitStore()
    old = b"def f():\n" + b"".join(b"    x%d = 1\n" % i for i in range(10))
    new = old.replace(b"x7 = 1", b"x7 = 2") + b"# end"
    before = store.put_commit(store.build_tree({"f.py": old}), [], "a", "u", "u@x", False)
    after = store.put_commit(store.build_tree({"f.py": new}), [], "b", "u", "u@x", False)
    [changed] = store.diff(before.sha, after.sha)
    assert changed.patch is not None
    headers = [h.header for h in changed.hunks]
    assert headers == ["@@ -6,6 +6,7 @@ def f():"]
    assert changed.patch.endswith("+# end\n\\ No newline at end of file")
