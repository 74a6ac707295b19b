"""The commit-replay benchmark's answers: each variant says exactly the commit's change (the core judges)."""

from __future__ import annotations

import pytest

from bench.commit_replay import Case, answers, main
from bot.core.fixes import judge_answers

BEFORE = """import os


class Store:
    def __init__(self, root):
        self.root = root

    def path(self, name):
        return os.path.join(self.root, name)

    def read(self, name):
        with open(self.path(name)) as handle:
            return handle.read()


def path(name):
    return name
"""
AFTER = (
    BEFORE.replace("import os\n", "import os\nimport pathlib\n")
    .replace("        return os.path.join(self.root, name)", "        return pathlib.Path(self.root) / name")
    .replace("            return handle.read()", "            return handle.read().strip()")
)
CASE = Case("demo", "0" * 40, "store.py", BEFORE, AFTER)


@pytest.mark.parametrize("variant", ["exact", "minimal", "prose", "drift", "retry"])
def test_each_variant_commits_the_real_file(variant: str) -> None:
    made = answers(CASE, variant)
    assert made is not None
    replies, expect_commit = made
    attempt = judge_answers(CASE.path, BEFORE, BEFORE, replies)
    assert expect_commit and attempt.ok and attempt.text == AFTER


def test_two_wrong_blocks_and_one_correction_commit_nothing() -> None:
    made = answers(CASE, "partial")
    assert made is not None
    replies, expect_commit = made
    assert not expect_commit and not judge_answers(CASE.path, BEFORE, BEFORE, replies).ok


def test_without_material_it_skips(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SPARK_BENCH_REPOS", raising=False)
    assert main([]) == 0
    assert "skipped, no material" in capsys.readouterr().out
