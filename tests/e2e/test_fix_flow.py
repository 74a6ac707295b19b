"""``/spark fix`` end to end: real receiver, real Redis, a real ``spark worker`` process, both sandboxes.

Each test tells a short story in scenario form (YAML built here), fires it through the local GitHub, and
checks what a user would see there and what the local model was asked.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from sandbox.stack import Stack, collect_outcome, fire, wait_for_jobs
from tests.e2e.conftest import StartStack

REPO = "acme/calculator"
PATH = "src/calc.py"
BASE = '''"""Small arithmetic helpers."""


def add(a: float, b: float) -> float:
    """Return the sum of a and b."""
    return a + b
'''
HEAD = (
    BASE
    + '''

def average(values: list[float]) -> float:
    """Return the arithmetic mean of values."""
    return sum(values) / (len(values) - 1)
'''
)
BUG = "    return sum(values) / (len(values) - 1)\n"
FIXED = "    return sum(values) / len(values)\n"
FIX_ANSWER = f"{PATH}\n<<<<<<< SEARCH\n{BUG}=======\n{FIXED}>>>>>>> REPLACE\n"


def answer(search: str, replace: str) -> str:
    """Return a SEARCH/REPLACE answer for ``src/calc.py``."""
    return f"{PATH}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def story(
    events: list[dict[str, Any]],
    replies: list[dict[str, Any]],
    *,
    collaborators: dict[str, str] | None = None,
    speed: Mapping[str, float] | None = None,
    fork: dict[str, Any] | None = None,
    head: str = HEAD,
    config: str | None = None,
) -> str:
    """Return scenario YAML: Alice's calculator PR (opened quietly) and the given events and replies."""
    files = {PATH: BASE}
    if config is not None:
        files[".github/spark.yml"] = config
    pull_request: dict[str, Any] = {
        "title": "Add an average helper",
        "author": "alice",
        "head_branch": "average",
        "files": {PATH: head},
    }
    if fork:
        pull_request["fork"] = fork
    document: dict[str, Any] = {
        "name": "fix-story",
        "repository": {"owner": "acme", "name": "calculator", "files": files},
        "pull_request": pull_request,
        "collaborators": collaborators or {"alice": "write"},
        "events": events,
        "model": {"speed": dict(speed or {"ttft_ms": 20, "tokens_per_second": 20000}), "replies": replies},
    }
    return yaml.safe_dump(document, sort_keys=False)


def comment(body: str, by: str = "alice") -> dict[str, Any]:
    """Return a PR conversation comment event."""
    return {"comment": {"by": by, "body": body}}


FIX = [comment("/spark fix average divides by the wrong count")]
FIX_SCRIPT = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER}


def run_all(stack: Stack) -> dict[str, Any]:
    """Fire every event of the stack's scenario in order and return the outcome; no job may fail."""
    for event in stack.scenario.events:
        step = fire(stack, event)
        assert [j for j in step.jobs if j["status"] != "finished"] == []
    return collect_outcome(stack)


def bot_comments(outcome: dict[str, Any]) -> list[str]:
    """Return the bodies of the App's PR conversation comments."""
    return [c["body"] for c in outcome["comments"] if c["by_app"]]


def user_comment_ids(stack: Stack) -> list[int]:
    """Return the ids of the users' (not the App's) conversation comments, oldest first."""
    gh = stack.github
    return [c["id"] for c in gh.issue_comments(REPO, 1) if c["user"]["login"] != gh.bot_login]


def reactions_by_app(stack: Stack, comment_id: int) -> list[str]:
    """Return the App's reactions on a comment, oldest first."""
    gh = stack.github
    return [content for content, login in gh.reactions(comment_id) if login == gh.bot_login]


def head_file(stack: Stack) -> str:
    """Return ``src/calc.py`` at the PR's head."""
    pull = stack.github.pull(REPO, 1)
    text = stack.github.file_at(pull["head"]["repo"]["full_name"], pull["head"]["sha"], PATH)
    assert text is not None
    return text


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll ``condition`` until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a condition"
        time.sleep(0.005)


# --- the headline: same-repository fix --------------------------------------------------------------------


def test_same_repo_fix_is_one_verified_commit_with_trailer_reactions_and_reply(start: StartStack) -> None:
    stack = start(story(FIX, [FIX_SCRIPT]))
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    assert commit["verified"] and commit["author"] == stack.github.bot_login
    [comment_id] = user_comment_ids(stack)
    headline, _, body = commit["message"].partition("\n")
    assert headline == "Average divides by the wrong count"
    assert f"Spark-Requested-In: https://github.com/{REPO}/pull/1#issuecomment-{comment_id}" in body
    assert FIXED in head_file(stack) and BUG not in head_file(stack)
    assert "-" + BUG in commit["diff"] and "+" + FIXED in commit["diff"]
    assert reactions_by_app(stack, comment_id) == ["eyes", "rocket"]
    [reply] = bot_comments(outcome)
    assert f"/commit/{commit['sha']}" in reply
    assert f"`{PATH}` (+1 −1)" in reply
    for label in ("queue", "first token", "tokens", "tok/s", "total"):
        assert label in reply
    # 👀 is the first feedback: GitHub saw it before the model was asked anything.
    eyes = next(r for r in stack.github.request_log if r.method == "POST" and "/reactions" in r.path)
    assert stack.model is not None
    [request] = stack.model.requests
    assert request.script == "fix" and eyes.started < request.received_at
    # The base branch is untouched.
    assert "def average" not in outcome["files"]["base"][PATH]


def test_non_writer_is_refused_politely_without_a_model_call(start: StartStack) -> None:
    events = [comment("/spark fix make it faster", by="mallory")]
    stack = start(story(events, [FIX_SCRIPT], collaborators={"alice": "write", "mallory": "read"}))
    outcome = run_all(stack)
    [reply] = bot_comments(outcome)
    assert "Sorry @mallory" in reply and "write permission" in reply
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    assert stack.model is not None and stack.model.requests == []
    # The collaborators permission API decided, not the comment's author_association.
    assert any(r.path.endswith("/collaborators/mallory/permission") for r in stack.github.request_log)


def test_bots_and_the_app_itself_are_ignored(start: StartStack) -> None:
    events = [
        comment("/spark fix average divides by the wrong count", by="dependabot[bot]"),
        comment("/spark fix average divides by the wrong count", by="spark[bot]"),
    ]
    stack = start(story(events, [FIX_SCRIPT]))
    steps = [fire(stack, event) for event in stack.scenario.events]
    for step in steps:
        assert [d["status_code"] for d in step.deliveries] == [202] and step.jobs == []
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == [] and outcome["reactions"] == []
    assert stack.model is not None and stack.model.requests == []


# --- forks ------------------------------------------------------------------------------------------------


def test_fork_gets_suggestions_that_github_applies_into_the_fixed_file(start: StartStack) -> None:
    stack = start(
        story(FIX, [FIX_SCRIPT], fork={"owner": "dana"}, collaborators={"alice": "write", "dana": "read"})
    )
    outcome = run_all(stack)
    assert outcome["new_commits"] == []
    [review] = outcome["reviews"]
    [suggestion] = review["comments"]
    assert suggestion["path"] == PATH and "```suggestion" in suggestion["body"]
    # The suggestion sits on a RIGHT line of the diff: the line with the bug.
    assert HEAD.splitlines()[suggestion["line"] - 1] == BUG.rstrip("\n")
    stack.github.apply_suggestion(suggestion["id"], author="dana")
    assert head_file(stack) == HEAD.replace(BUG, FIXED)
    assert any("suggestion" in body for body in bot_comments(outcome))


def test_fork_that_allows_maintainer_edits_gets_the_commit(start: StartStack) -> None:
    stack = start(story(FIX, [FIX_SCRIPT], fork={"owner": "dana", "maintainer_can_modify": True}))
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    assert commit["verified"] and FIXED in head_file(stack)
    assert outcome["reviews"] == []
    assert outcome["files"]["base"][PATH] == BASE


# --- the branch moves while the job runs ----------------------------------------------------------------


NO_REVIEW = "review:\n  auto: false\n"


def test_branch_moved_elsewhere_re_applies_the_fix_on_the_new_head(start: StartStack) -> None:
    stack = start(story(FIX, [FIX_SCRIPT], config=NO_REVIEW))
    # Someone pushes another file just before Spark's commit reaches GitHub.
    stack.github.move_head_on(
        REPO, 1, {"NOTES.md": "pushed meanwhile\n"}, "POST", "^/graphql$", author="alice"
    )
    outcome = run_all(stack)
    commits = outcome["new_commits"]
    assert [c["author"] for c in commits] == ["alice", stack.github.bot_login]
    theirs, ours = commits
    assert ours["parents"] == [theirs["sha"]] and ours["verified"]
    assert outcome["files"]["head"]["NOTES.md"] == "pushed meanwhile\n"
    assert FIXED in head_file(stack)
    assert len(bot_comments(outcome)) == 1 and "Pushed a fix" in bot_comments(outcome)[0]
    assert stack.model is not None and len(stack.model.requests) == 1  # re-applied, not re-asked


def test_branch_moved_on_the_same_lines_never_clobbers_the_other_push(start: StartStack) -> None:
    stack = start(story(FIX, [FIX_SCRIPT], config=NO_REVIEW))
    theirs = HEAD.replace(BUG, "    return sum(values) / max(len(values) - 1, 1)\n")
    stack.github.move_head_on(REPO, 1, {PATH: theirs}, "POST", "^/graphql$", author="alice")
    outcome = run_all(stack)
    assert [c["author"] for c in outcome["new_commits"]] == ["alice"]
    assert head_file(stack) == theirs
    [reply] = bot_comments(outcome)
    assert "moved" in reply and "Nothing was committed" in reply
    [comment_id] = user_comment_ids(stack)
    assert reactions_by_app(stack, comment_id) == ["eyes", "confused"]


# --- bad answers from the model ------------------------------------------------------------------------


def test_bad_edit_is_retried_once_with_the_error_then_committed(start: StartStack) -> None:
    wrong = answer("    return sum(values) / (len(values) + 1)\n", FIXED)
    replies = [
        {"name": "wrong-search", "path": PATH, "command": "fix", "reply": wrong},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    stack = start(story(FIX, replies))
    outcome = run_all(stack)
    assert stack.model is not None
    first, retry = stack.model.requests
    assert (first.script, retry.script) == ("wrong-search", "fix")
    # The retry carries the apply error back to the model.
    feedback = retry.messages[-1]["content"]
    assert "len(values) + 1" in feedback or "SEARCH" in feedback
    assert len(retry.messages) > len(first.messages)
    assert len(outcome["new_commits"]) == 1 and FIXED in head_file(stack)


def test_two_bad_edits_give_a_clear_reply_and_no_commit(start: StartStack) -> None:
    wrong = answer("    return nothing_like_this\n", FIXED)
    replies = [{"name": "wrong", "path": PATH, "command": "fix", "reply": wrong, "repeat": True}]
    stack = start(story(FIX, replies))
    outcome = run_all(stack)
    # The first answer, its retry, then the deep model once.
    assert stack.model is not None and len(stack.model.requests) == 3
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    [reply] = bot_comments(outcome)
    assert "could not make a verified fix" in reply and "Nothing was committed" in reply
    [comment_id] = user_comment_ids(stack)
    assert reactions_by_app(stack, comment_id) == ["eyes", "confused"]


def test_an_edit_that_breaks_the_syntax_is_never_committed(start: StartStack) -> None:
    broken = answer(BUG, "    return sum(values) / len(values\n")
    replies = [{"name": "broken", "path": PATH, "command": "fix", "reply": broken, "repeat": True}]
    stack = start(story(FIX, replies))
    outcome = run_all(stack)
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    assert stack.model is not None
    _, retry, _deep = stack.model.requests
    assert "no longer parses as python" in retry.messages[-1]["content"].lower()
    [reply] = bot_comments(outcome)
    assert "no longer parses" in reply
    ast.parse(head_file(stack))


def test_syntax_error_then_a_good_answer_commits_the_good_one(start: StartStack) -> None:
    broken = answer(BUG, "    return sum(values) / len(values\n")
    replies = [
        {"name": "broken", "path": PATH, "command": "fix", "reply": broken},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    stack = start(story(FIX, replies))
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    ast.parse(head_file(stack))
    assert FIXED in head_file(stack) and "len(values\n" not in commit["diff"]


# --- cancellation -----------------------------------------------------------------------------------------

# A slow stream (~2,000 tokens at 400 tok/s: about five seconds) that a cancel must cut short.
SLOW = {"ttft_ms": 50, "tokens_per_second": 400, "chunk_tokens": 4}
LONG_ANSWER = answer(
    BUG, FIXED + "".join(f"    # padding line {n:04d} to make the stream long\n" for n in range(180))
)


def _streaming(stack: Stack, index: int) -> Callable[[], bool]:
    def check() -> bool:
        assert stack.model is not None
        requests = stack.model.requests
        return len(requests) >= index and requests[index - 1].chunks_sent > 2

    return check


def test_a_second_fix_cancels_the_first_within_a_second(start: StartStack) -> None:
    replies = [
        {"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark fix the average")]
    stack = start(story(events, replies, speed=SLOW))
    first_event, second_event = stack.scenario.events
    stack.scene.act(first_event)
    wait_until(_streaming(stack, 1))
    second_at = time.monotonic()
    stack.scene.act(second_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    first, second = stack.model.requests
    # The sandbox notices the closed stream at its next write, maybe just after the job ended.
    wait_until(lambda: first.cancelled, timeout=5)
    assert first.cancelled and first.finished_at is not None
    assert first.finished_at - second_at < 1.0, "the first stream was not cut within a second"
    assert second.script == "fix"
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    first_id, second_id = user_comment_ids(stack)
    assert f"issuecomment-{second_id}" in commit["message"]
    # The superseded job posted nothing after the newer one started: only its 👀 from before.
    assert reactions_by_app(stack, first_id) == ["eyes"]
    [reply] = bot_comments(outcome)
    assert f"spark:reply=fix-{second_id}" in reply


def test_spark_stop_mid_fix_stops_the_stream_and_commits_nothing(start: StartStack) -> None:
    replies = [{"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER}]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark stop")]
    stack = start(story(events, replies, speed=SLOW))
    fix_event, stop_event = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stop_at = time.monotonic()
    stack.scene.act(stop_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    [request] = stack.model.requests
    wait_until(lambda: request.cancelled, timeout=5)
    assert request.cancelled and request.finished_at is not None
    assert request.finished_at - stop_at < 1.0
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    [reply] = bot_comments(outcome)
    assert reply.startswith("Stopped")


def test_a_strangers_stop_does_not_stop_someone_elses_fix(start: StartStack) -> None:
    """Anyone may comment `/spark stop`; only the PR's author and maintainers stop anything."""
    replies = [{"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER}]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark stop", by="mallory")]
    stack = start(story(events, replies, speed=SLOW))
    fix_event, stop_event = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stack.scene.act(stop_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    [request] = stack.model.requests
    assert not request.cancelled
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    assert commit["verified"]
    replies_text = bot_comments(outcome)
    assert any("Sorry @mallory" in text for text in replies_text)
    assert not any(text.startswith("Stopped") for text in replies_text)


# --- a review thread -----------------------------------------------------------------------------------


def test_fix_in_a_review_thread_commits_those_lines_and_replies_in_the_thread(start: StartStack) -> None:
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
    stack = start(story(events, [FIX_SCRIPT]))
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    assert commit["verified"]
    changed = [int(m) for m in re.findall(r"^@@ -\d+(?:,\d+)? \+(\d+)", commit["diff"], re.M)]
    assert changed and all(abs(start - line) <= 3 for start in changed)
    assert bot_comments(outcome) == []  # the answer goes to the thread, not the conversation
    thread = stack.github.review_comments(REPO, 1)
    root, reply = thread
    assert reply["user"]["login"] == stack.github.bot_login and reply["in_reply_to_id"] == root["id"]
    assert f"/commit/{commit['sha']}" in reply["body"]
    assert reactions_by_app(stack, root["id"]) == ["eyes", "rocket"]
    assert stack.model is not None
    [request] = stack.model.requests
    assert "divide by the number of values" in "\n".join(m["content"] for m in request.messages)


# --- an instruction that names two files -----------------------------------------------------------------


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


def test_two_named_files_are_fixed_by_parallel_calls_in_one_commit(start: StartStack) -> None:
    stack = start(two_file_story(UTIL_ANSWER))
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    assert f"+++ b/{PATH}" in commit["diff"] and f"+++ b/{OTHER}" in commit["diff"]
    assert outcome["files"]["head"][OTHER].endswith("    return x * 2\n") and FIXED in head_file(stack)
    assert stack.model is not None
    first, second = stack.model.requests
    assert {first.script, second.script} == {"fix", "fix-util"}
    # One file per call, side by side: the second call started before the first one's first token.
    assert first.first_token_at is not None and second.received_at < first.first_token_at
    [reply] = bot_comments(outcome)
    assert f"`{PATH}` (+1 −1)" in reply and f"`{OTHER}` (+1 −1)" in reply


def test_a_file_whose_answer_fails_is_named_in_the_reply_while_the_other_is_committed(
    start: StartStack,
) -> None:
    stack = start(two_file_story(UTIL_ANSWER.replace("x + x + x", "x + x + x + x"), repeat=True))
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    assert f"+++ b/{PATH}" in commit["diff"] and f"+++ b/{OTHER}" not in commit["diff"]
    [reply] = bot_comments(outcome)
    assert f"`{PATH}` (+1 −1)" in reply
    assert f"Not changed:\n- `{OTHER}`:" in reply


def test_retry_correcting_one_of_two_failed_blocks_commits_nothing_and_lists_them(start: StartStack) -> None:
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
    stack = start(story(FIX, replies, config="fix:\n  escalate: false\n"))
    outcome = run_all(stack)
    assert stack.model is not None and len(stack.model.requests) == 2
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    [reply] = bot_comments(outcome)
    assert "Nothing was committed" in reply and "Pushed" not in reply
    assert "block 3" in reply and "SEARCH does not match" in reply


def test_reply_says_when_the_file_did_not_parse_before_the_edit(start: StartStack) -> None:
    """Issue 14, section 5: a file that was already broken is compared before and after; the fix is committed
    (it adds no syntax error) and the reply says plainly that the file did not parse before either."""
    broken_head = HEAD + "\n\ndef unfinished(:\n    pass\n"
    stack = start(story(FIX, [FIX_SCRIPT], head=broken_head))
    outcome = run_all(stack)
    assert len(outcome["new_commits"]) == 1 and FIXED in head_file(stack)
    [reply] = bot_comments(outcome)
    assert "Pushed a fix" in reply
    assert "Check of `src/calc.py`: it did not parse before the edit either" in reply


def test_a_block_for_another_named_file_is_routed_there_and_committed_with_its_own(start: StartStack) -> None:
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
    stack = start(yaml.safe_dump(document, sort_keys=False))
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    assert f"+++ b/{PATH}" in commit["diff"] and f"+++ b/{OTHER}" in commit["diff"]
    util = outcome["files"]["head"][OTHER]
    assert util == 'def double(x: int) -> int:\n    """Return twice x."""\n    return x * 2\n'
    assert "x * 2" not in head_file(stack) and FIXED in head_file(stack)
