"""`/spark ask` and replies in Spark's threads, end to end: receiver, Redis, workers, both sandboxes.

One stack serves the module (as in test_review.py): each test seeds a repository of its own, adds its scripted
model replies and fires its events, then reads what GitHub shows and what the model was asked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from rq import Queue
from rq.job import Job

from bot import keys
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.stack import Stack, start_stack
from tests.e2e.conftest import assert_no_planted_secret
from tests.stories import BARE_EXCEPT, LOADER, LOADER_BASE, head, pr_key, reviews
from tests.stories import REVIEW_PLACEHOLDER as PLACEHOLDER
from tests.stories import review_act as act
from tests.stories import review_results as results
from tests.stories import review_story as story
from tests.stories import review_use as use

ASK_DB = 4
PATH = "app/config.py"
QUOTE = "```quote app/config.py\n    except:\n        data = {}\n```"
# The code of the finding's thread, and lines of LOADER (1-based) the quote above is at.
EXCEPT_LINE = LOADER.splitlines().index("    except:") + 1
ANSWER = (
    "A bare except also swallows KeyboardInterrupt, as on line 99 of the file.\n\n"
    f"{QUOTE}\n\n"
    "```quote app/config.py\n    return made_up(handle)\n```\n\n"
    "NOT SHOWN: the callers of load\n"
    "/spark fix catch json.JSONDecodeError only\n"
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: PrivateRedis) -> Iterator[Stack]:
    """Start one stack for the module: both sandboxes, the receiver, two worker processes."""
    url = redis_server.url.rsplit("/", 1)[0] + f"/{ASK_DB}"
    redis.Redis.from_url(url).flushdb()
    base = Settings.load({"REDIS_URL": url, "SPARK_REVIEW_DEBOUNCE_SECONDS": "0.2"}, env_file=None)
    started = start_stack(scenarios.parse(PLACEHOLDER), base, tmp_path_factory.mktemp("ask-e2e"), processes=2)
    yield started
    started.close()
    assert_no_planted_secret(started)
    conn = redis.Redis.from_url(url)
    try:
        assert keys.unbounded(conn) == [], "spark:* keys with no TTL and no bound in bot/keys.py"
    finally:
        conn.close()


def quiet(
    repo: str, replies: list[dict[str, Any]], config: str | None = None, *, opened: bool = False
) -> Any:
    """Return a story whose PR is open (reviewed when ``opened``), with Dave (read access) around."""
    base = {PATH: LOADER_BASE}
    if config is not None:
        base[".github/spark.yml"] = config
    doc = story(repo, base, {PATH: LOADER}, replies, events=[{"open": {}}] if opened else [{"wait": 0}])
    doc["collaborators"]["dave"] = "read"
    return doc


def app_comments(stack: Stack) -> list[dict[str, Any]]:
    """Return the App's conversation comments."""
    gh = stack.github
    return [
        c
        for c in gh.issue_comments(stack.scene.repo, stack.scene.pr_number)
        if c["user"]["login"] == gh.bot_login
    ]


def thread_replies(stack: Stack, root: int) -> list[dict[str, Any]]:
    """Return the replies in the thread whose first comment is ``root``, oldest first."""
    comments = stack.github.review_comments(stack.scene.repo, stack.scene.pr_number)
    return [c for c in comments if c.get("in_reply_to_id") == root]


def own(stack: Stack, comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the App's comments among ``comments``."""
    return [c for c in comments if c["user"]["login"] == stack.github.bot_login]


def asked(stack: Stack, since: int) -> list[str]:
    """Return the prompts (all messages joined) the model received since request ``since``."""
    assert stack.model is not None
    return ["\n".join(str(m.get("content")) for m in r.messages) for r in stack.model.requests[since:]]


def requests(stack: Stack) -> int:
    """Return how many requests the model has had."""
    assert stack.model is not None
    return len(stack.model.requests)


def ledger(stack: Stack) -> dict[str, str]:
    """Return the pull request's review ledger (fingerprint -> state)."""
    raw = stack.redis.hgetall(keys.LEDGER.format(pr_key(stack)))
    return {k.decode(): v.decode() for k, v in raw.items()}


def spark_thread(stack: Stack) -> int:
    """Return the id of the first comment of the thread Spark's review opened."""
    [review] = reviews(stack)
    return int(review["comments"][0]["id"])


# -- /spark ask in the conversation ----------------------------------------------------------------------


def test_ask_in_a_pr_comment_answers_with_permalinks_at_the_head(stack: Stack) -> None:
    use(stack, quiet("acme/ask-pr", [{"name": "ask", "command": "ask", "reply": ANSWER}]))
    before = requests(stack)
    settled = act(stack, "comment", by="dave", body="/spark ask why does load use a bare except?")
    assert results(stack, settled)["command"] == ["answered"]
    [reply] = app_comments(stack)
    body, sha = reply["body"], head(stack)
    # The quote is linked to its lines at the head commit, found by Spark, with the code that is there.
    link = f"{stack.settings.github_url}/acme/ask-pr/blob/{sha}/{PATH}#L{EXCEPT_LINE}-L{EXCEPT_LINE + 1}"
    assert f"]({link})" in body and "        data = {}" in body
    # The model's own line number and its made-up quote never reach the user.
    assert "line 99" not in body and "made_up" not in body
    assert f"not in the code at {sha[:7]} was left out" in body
    assert "Beyond what I was shown: the callers of load" in body
    assert "```\n/spark fix catch json.JSONDecodeError only\n```" in body
    assert "total " in body and "first token" in body
    # 👀 at once; nothing committed, nothing suggested.
    [comment] = [c for c in stack.github.issue_comments("acme/ask-pr", 1) if c["user"]["login"] == "dave"]
    assert ("eyes", stack.github.bot_login) in stack.github.reactions(comment["id"])
    assert reviews(stack) == [] and "```suggestion" not in body
    [prompt] = asked(stack, before)
    assert "/spark ask why does load use a bare except?" in prompt and "    except:" in prompt
    assert "Change things" in prompt  # the pull request's title, as context


def test_a_re_run_of_an_answered_ask_posts_nothing_again(stack: Stack) -> None:
    use(stack, quiet("acme/ask-once", [{"name": "ask", "command": "ask", "reply": ANSWER, "repeat": True}]))
    settled = act(stack, "comment", by="dave", body="/spark ask what does load return?")
    [info] = settled["jobs"]
    job = Job.fetch(info["id"], connection=stack.redis)
    assert len(app_comments(stack)) == 1
    # RQ runs the same job again (a retry): the recorded answer id stops it before anything is posted.
    assert rerun(stack, job) == "already answered"
    # A worker died after posting but before recording: the re-run finds its marked reply and edits it.
    [command_id] = [
        c["id"] for c in stack.github.issue_comments("acme/ask-once", 1) if c["user"]["login"] == "dave"
    ]
    assert stack.redis.delete(keys.ASK_ANSWERED.format(command_id)) == 1
    assert rerun(stack, job) == "answered"
    assert len(app_comments(stack)) == 1
    assert stack.redis.get(keys.ASK_ANSWERED.format(command_id)) is not None


def rerun(stack: Stack, job: Job) -> Any:
    """Enqueue the same job function with the same arguments, as a retry would; return its result."""
    again = Queue("spark-interactive", connection=stack.redis).enqueue(job.func_name, **job.kwargs)
    deadline = time.monotonic() + 30
    while not again.is_finished:
        assert not again.is_failed, again.exc_info
        assert time.monotonic() < deadline, "the re-run never finished"
        time.sleep(0.02)
        again.refresh()
    return again.return_value()


# -- /spark ask in a review thread -------------------------------------------------------------------------


def test_ask_in_a_review_thread_puts_the_threads_lines_first(stack: Stack) -> None:
    use(stack, quiet("acme/ask-line", [{"name": "ask", "command": "ask", "reply": ANSWER}]))
    before = requests(stack)
    act(stack, "review_comment", by="dave", path=PATH, line=EXCEPT_LINE, body="/spark ask is this safe?")
    root = stack.github.review_comments("acme/ask-line", 1)[0]
    [answer] = own(stack, thread_replies(stack, root["id"]))
    assert f"/blob/{head(stack)}/{PATH}#L{EXCEPT_LINE}-L{EXCEPT_LINE + 1}" in answer["body"]
    assert app_comments(stack) == []
    [prompt] = asked(stack, before)
    assert prompt.index("asked in a review thread about these lines") < prompt.index(
        "The changes of the pull"
    )
    assert ("eyes", stack.github.bot_login) in stack.github.reactions(root["id"])


# -- replies in Spark's own threads -----------------------------------------------------------------------

REVIEW = {"path": PATH, "reply": BARE_EXCEPT}
THREAD_ANSWER = f"It hides every error, not only bad JSON:\n\n{QUOTE}\n"


def test_a_reply_in_sparks_thread_is_answered_and_wont_fix_dismisses_the_finding(stack: Stack) -> None:
    replies = [REVIEW, {"name": "answer", "reply": THREAD_ANSWER}, {**REVIEW, "repeat": True}]
    use(stack, quiet("acme/chat", replies, opened=True))
    act(stack, "open")
    root = spark_thread(stack)
    before = requests(stack)
    settled = act(stack, "reply", by="dave", body="Why is this a problem?", to="last_by_app")
    assert results(stack, settled)["command"] == ["answered"]
    [answer] = own(stack, thread_replies(stack, root))
    assert f"#L{EXCEPT_LINE}-L{EXCEPT_LINE + 1}" in answer["body"]
    [prompt] = asked(stack, before)
    # The thread (Spark's finding and the reply) comes first.
    assert "bare except hides real errors" in prompt and "Why is this a problem?" in prompt
    assert "spark:finding" not in prompt

    before = requests(stack)
    settled = act(stack, "reply", by="bob", body="Won't fix: this loader must never fail.", to="last_by_app")
    assert results(stack, settled)["command"] == ["dismissed"]
    assert requests(stack) == before  # no model call to dismiss
    assert "Dismissed" in own(stack, thread_replies(stack, root))[-1]["body"]
    assert list(ledger(stack).values()) == ["dismissed"]
    # The next review finds the same problem and does not post it again.
    settled = act(stack, "push", files={PATH: "# a header\n" + LOADER})
    assert results(stack, settled)["review"] == ["nothing new"]
    comments = own(stack, stack.github.review_comments("acme/chat", 1))
    assert len([c for c in comments if "spark:finding=" in c["body"]]) == 1


def test_a_thumbs_down_is_read_when_someone_replies_and_dismisses_the_finding(stack: Stack) -> None:
    use(stack, quiet("acme/thumbs", [REVIEW, {"name": "answer", "reply": THREAD_ANSWER}], opened=True))
    act(stack, "open")
    root = spark_thread(stack)
    stack.github.react(root, "-1", author="bob")
    act(stack, "reply", by="bob", body="Does this matter in tests?", to="last_by_app")
    [answer] = own(stack, thread_replies(stack, root))
    assert answer["body"].startswith("Noted your 👎: I marked this finding dismissed")
    assert list(ledger(stack).values()) == ["dismissed"]


def test_spark_fix_alone_in_sparks_thread_fixes_that_finding(stack: Stack) -> None:
    fix = f"{PATH}\n<<<<<<< SEARCH\n    except:\n=======\n    except json.JSONDecodeError:\n>>>>>>> REPLACE\n"
    use(
        stack,
        quiet("acme/thread-fix", [REVIEW, {"name": "fix", "command": "fix", "reply": fix}], opened=True),
    )
    act(stack, "open")
    before = requests(stack)
    settled = act(stack, "reply", by="bob", body="/spark fix", to="last_by_app")
    assert results(stack, settled)["command"] == ["committed"]
    [prompt] = asked(stack, before)
    assert "Fix this review finding: " in prompt and "bare except hides real errors" in prompt
    text = stack.github.file_at("acme/thread-fix", head(stack), PATH)
    assert text is not None and "    except json.JSONDecodeError:" in text


def test_thread_chat_off_bots_and_other_threads_get_no_answer(stack: Stack) -> None:
    use(stack, quiet("acme/quiet-threads", [REVIEW], "ask:\n  thread_chat: false\n", opened=True))
    act(stack, "open")
    before = requests(stack)
    settled = act(stack, "reply", by="dave", body="Why?", to="last_by_app")
    assert results(stack, settled)["command"] == ["thread chat off"]
    # A bot's reply queues nothing at all.
    settled = act(stack, "reply", by="ci-helper[bot]", body="Why?", to="last_by_app")
    assert settled["jobs"] == []
    # A thread a person started is theirs: a reply there is not for Spark.
    act(stack, "review_comment", by="bob", path=PATH, line=EXCEPT_LINE, body="Odd spacing here.")
    settled = act(stack, "reply", by="dave", body="Agreed.")
    assert results(stack, settled)["command"] == ["not spark's thread"]
    assert requests(stack) == before
    root = spark_thread(stack)
    assert own(stack, thread_replies(stack, root)) == []
