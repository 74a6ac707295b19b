"""The sandbox's diffs are real diffs: every `patch` turns the old file into the new one."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.sandbox.github.state import GitStore

LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "def f():\n", "    return 1\n", "\n"]), max_size=40)


def apply_patch(old: str, patch: str) -> str:
    """Apply a GitHub per-file patch (hunks only) to a text, checking every context and removed line."""
    source = old.splitlines(keepends=True)
    out: list[str] = []
    position = 0
    hunks = re.split(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@\n?", patch, flags=re.M)[1:]
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
