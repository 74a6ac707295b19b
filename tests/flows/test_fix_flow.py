"""``/spark fix`` in process: ``run_fix`` on the local GitHub and model, no receiver and no worker process.

The stories are the calculator's of tests/e2e/test_fix_flow.py (which keeps what needs processes: the
intake ignoring bots, and cancellation between jobs); each checks what a user would see on GitHub and what
the local model was asked.
"""

from __future__ import annotations

import ast
import json
import re
import time

import yaml

from bot import keys
from tests.flows.conftest import Flow, StartFlow
from tests.stories import (
    BASE,
    BUG,
    FIX,
    FIX_ANSWER,
    FIX_SCRIPT,
    FIXED,
    HEAD,
    PATH,
    REPO,
    answer,
    bot_comments,
    comment,
    head_file,
    reactions_by_app,
    user_comment_ids,
)
from tests.stories import fix_story as story
from workers.memory import last_seen

NO_REVIEW = "review:\n  auto: false\n"


OTHER = "src/util.py"


def two_file_story(util_reply: str, *, repeat: bool = False) -> str:
    """Return a story whose PR changes two files and whose comment names both (by bare file name)."""
    document = yaml.safe_load(story(FIX, [FIX_SCRIPT], speed={"ttft_ms": 300, "tokens_per_second": 20000}))
    document["repository"]["files"][OTHER] = "\n"
    document["pull_request"]["files"][OTHER] = "def double(x: int) -> int:\n    return x + x + x\n"
    # Bare file names: the scripts match requests by full path, so each request names only its own file.
    document["events"] = [comment("/spark fix the average in calc.py and double in util.py")]
    script = {"name": "fix-util", "path": OTHER, "command": "fix", "reply": util_reply, "repeat": repeat}
    document["model"]["replies"].append(script)
    return yaml.safe_dump(document, sort_keys=False)


UTIL_ANSWER = f"{OTHER}\n<<<<<<< SEARCH\n    return x + x + x\n=======\n    return x * 2\n>>>>>>> REPLACE\n"


def test_same_repo_fix_is_one_verified_commit_with_trailer_reactions_and_reply(flows: StartFlow) -> None:
    flow = flows(story(FIX, [FIX_SCRIPT]))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    assert commit["verified"] and commit["author"] == flow.github.bot_login
    [comment_id] = user_comment_ids(flow)
    headline, _, body = commit["message"].partition("\n")
    assert headline == "Average divides by the wrong count"
    assert f"Spark-Requested-In: {flow.settings.github_url}/{REPO}/pull/1#issuecomment-{comment_id}" in body
    assert FIXED in head_file(flow) and BUG not in head_file(flow)
    assert "-" + BUG in commit["diff"] and "+" + FIXED in commit["diff"]
    assert reactions_by_app(flow, comment_id) == ["eyes", "rocket"]
    [reply] = bot_comments(outcome)
    assert f"/commit/{commit['sha']}" in reply
    assert f"`{PATH}` (+1 −1)" in reply
    for label in ("queue", "first token", "tokens", "tok/s", "total"):
        assert label in reply
    # 👀 is the first feedback: GitHub saw it before the model was asked anything.
    eyes = next(r for r in flow.github.request_log if r.method == "POST" and "/reactions" in r.path)
    assert flow.model is not None
    [request] = flow.model.requests
    assert request.script == "fix" and eyes.started < request.received_at
    # The base branch is untouched.
    assert "def average" not in outcome["files"]["base"][PATH]


def test_non_writer_is_refused_politely_without_a_model_call(flows: StartFlow) -> None:
    events = [comment("/spark fix make it faster", by="mallory")]
    flow = flows(story(events, [FIX_SCRIPT], collaborators={"alice": "write", "mallory": "read"}))
    outcome = flow.run_all()
    [reply] = bot_comments(outcome)
    assert "Sorry @mallory" in reply and "write permission" in reply
    assert outcome["new_commits"] == [] and head_file(flow) == HEAD
    assert flow.model is not None and flow.model.requests == []
    # The collaborators permission API decided, not the comment's author_association.
    assert any(r.path.endswith("/collaborators/mallory/permission") for r in flow.github.request_log)


def test_fork_gets_suggestions_that_github_applies_into_the_fixed_file(flows: StartFlow) -> None:
    flow = flows(
        story(FIX, [FIX_SCRIPT], fork={"owner": "dana"}, collaborators={"alice": "write", "dana": "read"})
    )
    outcome = flow.run_all()
    assert outcome["new_commits"] == []
    [review] = outcome["reviews"]
    [suggestion] = review["comments"]
    assert suggestion["path"] == PATH and "```suggestion" in suggestion["body"]
    # The suggestion sits on a RIGHT line of the diff: the line with the bug.
    assert HEAD.splitlines()[suggestion["line"] - 1] == BUG.rstrip("\n")
    flow.github.apply_suggestion(suggestion["id"], author="dana")
    assert head_file(flow) == HEAD.replace(BUG, FIXED)
    assert any("suggestion" in body for body in bot_comments(outcome))


def test_fork_that_allows_maintainer_edits_gets_the_commit(flows: StartFlow) -> None:
    flow = flows(story(FIX, [FIX_SCRIPT], fork={"owner": "dana", "maintainer_can_modify": True}))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    assert commit["verified"] and FIXED in head_file(flow)
    assert outcome["reviews"] == []
    assert outcome["files"]["base"][PATH] == BASE


def test_branch_moved_elsewhere_re_applies_the_fix_on_the_new_head(flows: StartFlow) -> None:
    flow = flows(story(FIX, [FIX_SCRIPT], config=NO_REVIEW))
    # Someone pushes another file just before Spark's commit reaches GitHub.
    flow.github.move_head_on(
        REPO, 1, {"NOTES.md": "pushed meanwhile\n"}, "POST", "^/graphql$", author="alice"
    )
    outcome = flow.run_all()
    commits = outcome["new_commits"]
    assert [c["author"] for c in commits] == ["alice", flow.github.bot_login]
    theirs, ours = commits
    assert ours["parents"] == [theirs["sha"]] and ours["verified"]
    assert outcome["files"]["head"]["NOTES.md"] == "pushed meanwhile\n"
    assert FIXED in head_file(flow)
    assert len(bot_comments(outcome)) == 1 and "Pushed a fix" in bot_comments(outcome)[0]
    assert flow.model is not None and len(flow.model.requests) == 1  # re-applied, not re-asked


def test_branch_moved_on_the_same_lines_never_clobbers_the_other_push(flows: StartFlow) -> None:
    flow = flows(story(FIX, [FIX_SCRIPT], config=NO_REVIEW))
    theirs = HEAD.replace(BUG, "    return sum(values) / max(len(values) - 1, 1)\n")
    flow.github.move_head_on(REPO, 1, {PATH: theirs}, "POST", "^/graphql$", author="alice")
    outcome = flow.run_all()
    assert [c["author"] for c in outcome["new_commits"]] == ["alice"]
    assert head_file(flow) == theirs
    [reply] = bot_comments(outcome)
    assert "moved" in reply and "Nothing was committed" in reply
    [comment_id] = user_comment_ids(flow)
    assert reactions_by_app(flow, comment_id) == ["eyes", "confused"]


def test_bad_edit_is_retried_once_with_the_error_then_committed(flows: StartFlow) -> None:
    wrong = answer("    return sum(values) / (len(values) + 1)\n", FIXED)
    replies = [
        {"name": "wrong-search", "path": PATH, "command": "fix", "reply": wrong},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    flow = flows(story(FIX, replies))
    outcome = flow.run_all()
    assert flow.model is not None
    first, retry = flow.model.requests
    assert (first.script, retry.script) == ("wrong-search", "fix")
    # The retry carries the apply error back to the model.
    feedback = retry.messages[-1]["content"]
    assert "len(values) + 1" in feedback or "SEARCH" in feedback
    assert len(retry.messages) > len(first.messages)
    assert len(outcome["new_commits"]) == 1 and FIXED in head_file(flow)


def test_two_bad_edits_give_a_clear_reply_and_no_commit(flows: StartFlow) -> None:
    wrong = answer("    return nothing_like_this\n", FIXED)
    replies = [{"name": "wrong", "path": PATH, "command": "fix", "reply": wrong, "repeat": True}]
    flow = flows(story(FIX, replies))
    outcome = flow.run_all()
    # The first answer, its retry, then the deep model once.
    assert flow.model is not None and len(flow.model.requests) == 3
    assert outcome["new_commits"] == [] and head_file(flow) == HEAD
    [reply] = bot_comments(outcome)
    assert "could not make a verified fix" in reply and "Nothing was committed" in reply
    [comment_id] = user_comment_ids(flow)
    assert reactions_by_app(flow, comment_id) == ["eyes", "confused"]


def test_an_edit_that_breaks_the_syntax_is_never_committed(flows: StartFlow) -> None:
    broken = answer(BUG, "    return sum(values) / len(values\n")
    replies = [{"name": "broken", "path": PATH, "command": "fix", "reply": broken, "repeat": True}]
    flow = flows(story(FIX, replies))
    outcome = flow.run_all()
    assert outcome["new_commits"] == [] and head_file(flow) == HEAD
    assert flow.model is not None
    _, retry, _deep = flow.model.requests
    assert "no longer parses as python" in retry.messages[-1]["content"].lower()
    [reply] = bot_comments(outcome)
    assert "no longer parses" in reply
    ast.parse(head_file(flow))


def test_syntax_error_then_a_good_answer_commits_the_good_one(flows: StartFlow) -> None:
    broken = answer(BUG, "    return sum(values) / len(values\n")
    replies = [
        {"name": "broken", "path": PATH, "command": "fix", "reply": broken},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    flow = flows(story(FIX, replies))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    ast.parse(head_file(flow))
    assert FIXED in head_file(flow) and "len(values\n" not in commit["diff"]


def test_fix_in_a_review_thread_commits_those_lines_and_replies_in_the_thread(flows: StartFlow) -> None:
    line = HEAD.splitlines().index(BUG.rstrip("\n")) + 1
    events = [
        {
            "review_comment": {
                "by": "alice",
                "path": PATH,
                "line": line,
                "body": "/spark fix divide by the number of values",
            }
        }
    ]
    flow = flows(story(events, [FIX_SCRIPT]))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    assert commit["verified"]
    changed = [int(m) for m in re.findall(r"^@@ -\d+(?:,\d+)? \+(\d+)", commit["diff"], re.M)]
    assert changed and all(abs(start - line) <= 3 for start in changed)
    assert bot_comments(outcome) == []  # the answer goes to the thread, not the conversation
    thread = flow.github.review_comments(REPO, 1)
    root, reply = thread
    assert reply["user"]["login"] == flow.github.bot_login and reply["in_reply_to_id"] == root["id"]
    assert f"/commit/{commit['sha']}" in reply["body"]
    assert reactions_by_app(flow, root["id"]) == ["eyes", "rocket"]
    assert flow.model is not None
    [request] = flow.model.requests
    assert "divide by the number of values" in "\n".join(m["content"] for m in request.messages)


def test_two_named_files_are_fixed_by_parallel_calls_in_one_commit(flows: StartFlow) -> None:
    flow = flows(two_file_story(UTIL_ANSWER))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    assert f"+++ b/{PATH}" in commit["diff"] and f"+++ b/{OTHER}" in commit["diff"]
    assert outcome["files"]["head"][OTHER].endswith("    return x * 2\n") and FIXED in head_file(flow)
    assert flow.model is not None
    first, second = flow.model.requests
    assert {first.script, second.script} == {"fix", "fix-util"}
    # One file per call, side by side: the second call started before the first one's first token.
    assert first.first_token_at is not None and second.received_at < first.first_token_at
    [reply] = bot_comments(outcome)
    assert f"`{PATH}` (+1 −1)" in reply and f"`{OTHER}` (+1 −1)" in reply


def test_a_file_whose_answer_fails_is_named_in_the_reply_while_the_other_is_committed(
    flows: StartFlow,
) -> None:
    flow = flows(two_file_story(UTIL_ANSWER.replace("x + x + x", "x + x + x + x"), repeat=True))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    assert f"+++ b/{PATH}" in commit["diff"] and f"+++ b/{OTHER}" not in commit["diff"]
    [reply] = bot_comments(outcome)
    assert f"`{PATH}` (+1 −1)" in reply
    assert f"Not changed:\n- `{OTHER}`:" in reply


def test_retry_correcting_one_of_two_failed_blocks_commits_nothing_and_lists_them(flows: StartFlow) -> None:
    """Whole answers or nothing (issue 14, section 2): three blocks, two misquoted; the retry corrects one.
    The first answer and the retry are judged together, so nothing is committed and the reply names the
    blocks that failed. (Partially applied answers: Aider-AI/aider #3824.)"""
    docstring = '    """Return the arithmetic mean of values."""\n'
    first = (
        answer(BUG, FIXED)
        + answer('    """Return the mean of values."""\n', '    """Return the mean (not empty)."""\n')
        + answer("def average(values: list) -> float:\n", "def average(values: list[float]) -> float:\n")
    )
    retry = answer(docstring, '    """Return the arithmetic mean of values (not empty)."""\n')
    replies = [
        {"name": "three-blocks", "path": PATH, "command": "fix", "reply": first},
        {"name": "corrects-one", "path": PATH, "command": "fix", "reply": retry},
    ]
    # The fast model's two answers alone (no deep model asked after them).
    flow = flows(story(FIX, replies, config="fix:\n  escalate: false\n"))
    outcome = flow.run_all()
    assert flow.model is not None and len(flow.model.requests) == 2
    assert outcome["new_commits"] == [] and head_file(flow) == HEAD
    [reply] = bot_comments(outcome)
    assert "Nothing was committed" in reply and "Pushed" not in reply
    assert "block 3" in reply and "SEARCH does not match" in reply


def test_reply_says_when_the_file_did_not_parse_before_the_edit(flows: StartFlow) -> None:
    """Issue 14, section 5: a file that was already broken is compared before and after; the fix is committed
    (it adds no syntax error) and the reply says plainly that the file did not parse before either."""
    broken_head = HEAD + "\n\ndef unfinished(:\n    pass\n"
    flow = flows(story(FIX, [FIX_SCRIPT], head=broken_head))
    outcome = flow.run_all()
    assert len(outcome["new_commits"]) == 1 and FIXED in head_file(flow)
    [reply] = bot_comments(outcome)
    assert "Pushed a fix" in reply
    assert "Check of `src/calc.py`: it did not parse before the edit either" in reply


def test_a_block_for_another_named_file_is_routed_there_and_committed_with_its_own(flows: StartFlow) -> None:
    """Issue 14, section 4: the answer for calc.py also edits util.py, named only by a comment line inside the
    fence (robertpiosik/CodeWebChat #145 shows the layout). util.py is a target of the same fix, so the block
    is applied there, together with util.py's own answer; calc.py never receives it."""
    routed = (
        f"```python\n# {OTHER}\n"
        "<<<<<<< SEARCH\n    return x + x + x\n=======\n    return x * 2\n>>>>>>> REPLACE\n```\n"
    )
    own_util = (
        f"{OTHER}\n<<<<<<< SEARCH\ndef double(x: int) -> int:\n=======\n"
        'def double(x: int) -> int:\n    """Return twice x."""\n>>>>>>> REPLACE\n'
    )
    document = yaml.safe_load(two_file_story(own_util))
    document["model"]["replies"][0]["reply"] = FIX_ANSWER + "\n" + routed
    flow = flows(yaml.safe_dump(document, sort_keys=False))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    assert f"+++ b/{PATH}" in commit["diff"] and f"+++ b/{OTHER}" in commit["diff"]
    util = outcome["files"]["head"][OTHER]
    assert util == 'def double(x: int) -> int:\n    """Return twice x."""\n    return x * 2\n'
    assert "x * 2" not in head_file(flow) and FIXED in head_file(flow)


def seen_by_a_review(flow: Flow) -> None:
    """Let Spark have seen the pull request's head and its changed file, as a review of it leaves them."""
    assert flow.review("synchronize") == "auto review off"  # the head and base only: no diff was read
    seen = last_seen.recall(flow.redis, flow.ref().key)
    assert seen is not None and seen.head_sha == flow.head() and seen.paths == ()
    document = {
        "head": seen.head_sha,
        "base_repo": seen.base_repo,
        "base_ref": seen.base_ref,
        "paths": [PATH],
    }
    flow.redis.set(keys.LAST_SEEN.format(flow.ref().key), json.dumps(document), ex=60)


def test_a_fix_on_a_head_spark_has_seen_reads_its_target_and_config_beside_the_pull_request(
    flows: StartFlow,
) -> None:
    document = yaml.safe_load(story([{"wait": 0}], [FIX_SCRIPT], config=NO_REVIEW))
    document["github"] = {"latency_ms": 100}  # rounds far apart, so overlap in the log means one round
    flow = flows(yaml.safe_dump(document, sort_keys=False))
    seen_by_a_review(flow)
    # The review leaves the repository's index building in the background (the archive, then the blobs):
    # its reads are the review's, not the fix's, so the fix starts once GitHub has heard nothing for a while.
    settled = -1
    while settled != len(flow.github.request_log):
        settled = len(flow.github.request_log)
        time.sleep(0.5)
    mark = len(flow.github.request_log)
    assert flow.fix(flow.comment(FIX[0]["comment"]["body"])) == "committed"
    log = flow.github.request_log[mark:]
    pulls = [r for r in log if r.method == "GET" and r.path.endswith("/pulls/1")]
    first_back = min(r.started + r.duration for r in pulls)
    reads = [r for r in log if r.method == "GET" and "/contents/" in r.path]
    assert sorted(r.path.split("/contents/")[1].split("?")[0] for r in reads) == [".github/spark.yml", PATH]
    assert all(r.started < first_back for r in reads)
    assert FIXED in head_file(flow)


def test_a_fix_on_a_head_spark_saw_before_a_push_fixes_the_pushed_file(flows: StartFlow) -> None:
    flow = flows(story([{"wait": 0}], [FIX_SCRIPT], config=NO_REVIEW))
    seen_by_a_review(flow)
    # A push Spark has not seen (its webhook not handled yet): what was read ahead is of the old head.
    pushed = HEAD.replace("def average", "# pushed since\ndef average")
    flow.github.push(REPO, "average", {PATH: pushed})
    assert flow.fix(flow.comment(FIX[0]["comment"]["body"])) == "committed"
    assert head_file(flow) == pushed.replace(BUG, FIXED)
