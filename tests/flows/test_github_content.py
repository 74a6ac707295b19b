"""GitHub's content rules met by the flows in process (issue 16): the local GitHub serves them as GitHub does.

Each test seeds a repository and runs the flows its events ask for; tests/e2e/test_github_content.py keeps
what needs the receiver and processes (the events Spark is sent, a worker killed mid-fix, check-run clicks).
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.github import Submodule, Symlink
from sandbox.scenario import Event
from tests.flows.conftest import Flow, StartFlow
from tests.stories import check_summary, head_commits, quiet_review, replies_to_spark
from tests.stories import content_fix_reply as fix_reply
from tests.stories import content_story as story

# A generated file a little over 1 MB: the contents API sends it without content (`encoding: "none"`).
TABLE = "TABLE = [\n" + "".join(f"    {i},\n" for i in range(150_000)) + "]\n"


def act(flow: Flow, kind: str, **data: Any) -> dict[str, list[Any]]:
    """Make one event happen and run the flow it asks for; return its result under its job's name."""
    result = flow.act(Event(kind, data))
    job = "command" if kind in ("comment", "review_comment") else "review"
    return {job: [result]}


def test_a_file_over_1_mb_is_never_read_as_empty_nor_overwritten(flows: StartFlow) -> None:
    """Bug 1: a 1-100 MB file came back empty, and an empty SEARCH then replaced all of it."""
    assert len(TABLE.encode()) > 1024 * 1024
    flow = flows(
        story(
            "acme/large",
            {"gen/table.py": "TABLE = []\n", "consts.py": "X = 1\n"},
            {"consts.py": "X = 2\n"},
            [fix_reply("gen/table.py", "", "TABLE = [1, 2, 3]"), quiet_review("consts.py")],
        ),
    )
    # The big file is on the base branch already: the pull request changes one of its lines (a small diff).
    flow.github.push(flow.scene.repo, "main", {"gen/table.py": TABLE})
    act(flow, "open")
    ran = act(flow, "push", files={"gen/table.py": TABLE.replace("    7,\n", "    70,\n")}, by="bob")
    assert set(ran["review"]) == {"nothing new"}
    assert "`gen/table.py`: skipped: too large (1,688,903 bytes; the limit is 1,000,000)" in check_summary(
        flow
    )
    before = head_commits(flow)[0]["sha"]
    ran = act(flow, "comment", body="/spark fix regenerate gen/table.py", by="bob")
    assert ran["command"] == ["failed"]
    assert head_commits(flow)[0]["sha"] == before
    assert "`gen/table.py`: it is too large" in replies_to_spark(flow)[-1]


def test_a_symlink_is_not_fixed_through_its_target(flows: StartFlow) -> None:
    """Bug 2: a symlink to a file reads as the file; fixing it wrote the target's text over the link."""
    flow = flows(
        story(
            "acme/links",
            {"src/app.py": "def main():\n    return 1\n"},
            {"src/app.py": "def main():\n    return 2\n"},
            [fix_reply("src/main.py", "    return 2", "    return 3"), quiet_review("src/app.py")],
        ),
    )
    act(flow, "open")
    # The PR adds a link to the file; GitHub serves the link's path as the target's content.
    act(flow, "push", files={"src/main.py": Symlink("app.py")}, by="bob")
    assert "`src/main.py`: skipped: a symbolic link to `app.py`" in check_summary(flow)
    before = head_commits(flow)[0]["sha"]
    ran = act(flow, "comment", body="/spark fix the return value in src/main.py", by="bob")
    assert ran["command"] == ["failed"]
    assert head_commits(flow)[0]["sha"] == before
    reply = replies_to_spark(flow)[-1]
    assert "`src/main.py`: it is a symbolic link to `app.py`" in reply
    assert "Name the file it points to" in reply


def test_a_submodule_is_refused_with_its_reason(flows: StartFlow) -> None:
    """Bug 2: a submodule raised an error that ended in "GitHub refused a call"."""
    flow = flows(
        story(
            "acme/subs",
            {"app.py": "x = 1\n", "libs/core": "placeholder\n"},
            {"app.py": "x = 2\n"},
            [quiet_review("app.py")],
        ),
    )
    act(flow, "open")
    act(flow, "push", files={"libs/core": Submodule("https://github.com/acme/lib.git", "a" * 40)}, by="bob")
    assert "`libs/core`: skipped: a submodule" in check_summary(flow)
    before = head_commits(flow)[0]["sha"]
    ran = act(flow, "comment", body="/spark fix bump libs/core", by="bob")
    assert ran["command"] == ["failed"]
    assert head_commits(flow)[0]["sha"] == before
    reply = replies_to_spark(flow)[-1]
    assert "`libs/core`: it is a submodule" in reply
    assert "GitHub refused a call" not in reply
    assert "Fix it in the submodule's own repository." in reply  # what to do instead


@pytest.mark.parametrize("path", ["docs/issue #7.py", "src/what?.py", "src/50%41.py", "src/my module.py"])
def test_paths_with_hash_question_mark_percent_and_spaces_are_fixed(flows: StartFlow, path: str) -> None:
    """Bug 9: paths were not URL-encoded in contents calls, so these files read as missing or wrong."""
    name = "acme/names-" + str(abs(hash(path)) % 10_000)
    flow = flows(
        story(
            name,
            {path: "def f():\n    return 1\n"},
            {path: "def f():\n    return 2\n"},
            [fix_reply(path, "    return 2", "    return 3"), quiet_review(path)],
        ),
    )
    act(flow, "open")
    # The only file of the PR: the fix finds it without the (space-splitting) name in the comment.
    ran = act(flow, "comment", body="/spark fix make f return 3", by="bob")
    assert ran["command"] == ["committed"], replies_to_spark(flow)
    assert flow.github.file_at(flow.scene.repo, "feature", path) == "def f():\n    return 3\n"


def test_files_github_sends_no_patch_for_are_listed_as_not_reviewed(flows: StartFlow) -> None:
    """Bug 8: past GitHub's diff limits (406) the file listing leaves out large patches; they were dropped."""
    rows = "".join(f"ROW_{i} = {i}\n" for i in range(20_500))  # one file's diff over 20,000 lines
    flow = flows(
        story(
            "acme/bigdiff",
            {"sums.py": "def add(a, b):\n    return a + b\n"},
            {"sums.py": "def add(a, b):\n    return a - b\n", "gen/rows.py": rows},
            [quiet_review("sums.py")],
        ),
    )
    ran = act(flow, "open")
    assert ran["review"] == ["nothing new"]
    [run] = [r for r in flow.github.check_runs(flow.scene.repo) if r["name"] == "Spark"]
    assert run["conclusion"] == "neutral"
    assert "1 file not reviewed (diff too large)" in run["output"]["title"]
    assert "`gen/rows.py`: skipped: GitHub sent no patch for it" in run["output"]["summary"]


def test_files_past_githubs_3000_file_listing_are_counted_as_not_reviewed(flows: StartFlow) -> None:
    """Bug 8: GitHub lists at most 3,000 files of a pull request; the rest went unmentioned."""
    files = {f"gen/f{i:04}.txt": f"{i}\n" for i in range(3001)}
    config = {".github/spark.yml": "review:\n  paths:\n    exclude: ['gen/**']\n"}
    flow = flows(story("acme/manyfiles", {"README.md": "hi\n", **config}, files))
    ran = act(flow, "open")
    assert ran["review"] == ["nothing new"]
    [run] = [r for r in flow.github.check_runs(flow.scene.repo) if r["name"] == "Spark"]
    assert "**1 more changed file not reviewed**" in run["output"]["summary"]
    assert "1 file not reviewed (diff too large)" in run["output"]["title"]
    # The files the config excludes are not read: at most the few started before the config was in.
    reads = [r for r in flow.github.request_log if "gen/f" in r.path]
    assert len(reads) <= flow.context("review", claim=False).settings.spark_review_concurrency, len(reads)


def test_a_symlinked_config_is_reported_not_followed(flows: StartFlow) -> None:
    """A `.github/spark.yml` that is a symlink is not read through the link: the review says so."""
    flow = flows(
        story("acme/linkedconf", {"conf.py": "A = 1\n"}, {"conf.py": "A = 2\n"}, [quiet_review("conf.py")]),
    )
    flow.github.push(flow.scene.repo, "main", {".github/spark.yml": Symlink("../spark.yml"), "spark.yml": ""})
    ran = act(flow, "open")
    assert ran["review"] == ["nothing new"]
    assert "spark.yml: a symbolic link to" in check_summary(flow)
