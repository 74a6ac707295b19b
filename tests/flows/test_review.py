"""The review flow in process: ``run_review`` and "Apply safe fixes" on the local GitHub and model.

No receiver and no worker process: each test seeds its repository, runs the flow an event asks for, and
checks what GitHub shows. The stories and their helpers are tests/e2e/test_review.py's, which keeps what
needs processes and the intake (debounced bursts, stops and pushes reaching a running review, commands, a
re-run on an older head).
"""

from __future__ import annotations

import re
from typing import Any

from bot import keys
from bot.core.anchors import read_suggestion
from sandbox.scenario import Event
from tests.flows.conftest import Flow, StartFlow
from tests.stories import (
    BARE_EXCEPT,
    LOADER,
    LOADER_BASE,
    LOADER_FIXED,
    UNCLOSED,
    apply_as_github,
    checks,
    head,
    model_requests,
    pr_key,
    quiet,
    reviews,
)
from tests.stories import review_finding as finding
from tests.stories import review_story as story
from workers.commands.review import review_on_request


def act(flow: Flow, kind: str, **data: Any) -> str | None:
    """Make one event happen and run the flow it asks for; return what the flow returned."""
    return flow.act(Event(kind, data))


def test_open_posts_one_review_whose_suggestions_make_the_models_fix(flows: StartFlow) -> None:
    flow = flows(
        story(
            "acme/loader",
            {"app/config.py": LOADER_BASE},
            {"app/config.py": LOADER},
            [{"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED}],
        ),
    )
    assert act(flow, "open") == "posted"
    [review] = reviews(flow)
    assert review["commit_id"] == head(flow) and review["user"]["login"] == flow.github.bot_login
    assert len(review["comments"]) == 2
    assert all(read_suggestion(c["body"]) is not None for c in review["comments"])
    # Every comment sits on lines GitHub accepted (it would have refused the review otherwise), and
    # applying them all as GitHub does yields exactly the file the model's edits describe.
    head_text = flow.github.file_at(flow.scene.repo, head(flow), "app/config.py")
    assert head_text == LOADER
    assert apply_as_github(head_text, review["comments"]) == LOADER_FIXED

    [run] = checks(flow)
    assert (run["name"], run["status"], run["conclusion"], run["head_sha"]) == (
        "Spark",
        "completed",
        "neutral",
        head(flow),
    )
    summary = run["output"]["summary"]
    assert "**2 new findings** (1 high, 1 medium)" in summary
    assert "Files: 1 reviewed" in summary and "`app/config.py`: reviewed" in summary
    assert "first token" in summary and "tok/s" in summary and "total" in summary
    assert [a["identifier"] for a in run["actions"]] == ["apply_fixes"]


def test_apply_safe_fixes_commits_every_suggestion_once_and_resolves_their_threads(flows: StartFlow) -> None:
    flow = flows(
        story(
            "acme/loader-fixes",
            {"app/config.py": LOADER_BASE},
            {"app/config.py": LOADER},
            [{"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED}],
        ),
    )
    act(flow, "open")
    reviewed = head(flow)
    [run] = checks(flow)
    flow.github.request_check_run_action(run["id"], "apply_fixes", author="bob")
    # The button's job commits; the push it causes is recognised as Spark's own and not reviewed again.
    assert flow.apply_safe_fixes() == "committed"
    assert flow.review("synchronize") == "own commit"
    commits = [c for c in flow.github.commits(flow.scene.repo, "feature") if c["sha"] != reviewed]
    new = [c for c in commits if reviewed in c["parents"]]
    assert len(new) == 1 and new[0]["verified"]
    assert flow.github.file_at(flow.scene.repo, head(flow), "app/config.py") == LOADER_FIXED
    threads = flow.github.threads(flow.scene.repo, flow.scene.pr_number)
    assert len(threads) == 2 and all(t["resolved"] for t in threads)
    assert len(reviews(flow)) == 1
    bot = [c for c in flow.github.issue_comments(flow.scene.repo, flow.scene.pr_number)]
    assert any("Applied 2 verified suggestions" in c["body"] for c in bot)


def test_apply_safe_fixes_on_a_protected_branch_names_the_rule_and_commits_nothing(flows: StartFlow) -> None:
    document = story(
        "acme/loader-guarded",
        {"app/config.py": LOADER_BASE},
        {"app/config.py": LOADER},
        [{"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED}],
    )
    document["github"] = {
        "branch_rules": [{"branch": "feature", "required_signatures": True, "allowed_pushers": ["bob"]}]
    }
    flow = flows(document)
    act(flow, "open")
    reviewed = head(flow)
    [run] = checks(flow)
    graphql_before = sum(1 for r in flow.github.request_log if r.path == "/graphql")
    flow.github.request_check_run_action(run["id"], "apply_fixes", author="bob")
    assert flow.apply_safe_fixes() == "refused"
    assert head(flow) == reviewed
    # One createCommitOnBranch, refused and not retried (the threads query is a GraphQL call too, not sent).
    assert sum(1 for r in flow.github.request_log if r.path == "/graphql") == graphql_before + 1
    bodies = [c["body"] for c in flow.github.issue_comments(flow.scene.repo, flow.scene.pr_number)]
    [note] = [b for b in bodies if "Nothing was committed" in b]
    assert "branch protection refused the commit" in note and "not authorized to push" in note


def test_a_push_that_fixes_a_finding_resolves_its_thread_and_posts_nothing_again(flows: StartFlow) -> None:
    flow = flows(
        quiet(
            "acme/fixed-by-push",
            [
                {"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED},
                # After the push the bare except is gone; the unclosed handle is still there.
                {"path": "app/config.py", "reply": UNCLOSED},
            ],
        ),
    )
    flow.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}}))
    assert len(reviews(flow)) == 1
    fixed = LOADER.replace("    except:", "    except ValueError:") + "\n"
    assert act(flow, "push", files={"app/config.py": fixed}) == "nothing new"
    assert len(reviews(flow)) == 1
    threads = {t["line"]: t["resolved"] for t in flow.github.threads(flow.scene.repo, flow.scene.pr_number)}
    bare = next(c for c in reviews(flow)[0]["comments"] if "bare except" in c["body"])
    assert threads[bare["line"]] is True
    assert list(threads.values()).count(False) == 1
    summary = checks(flow)[-1]["output"]["summary"]
    assert "Resolved 1 earlier thread" in summary and "Not repeated (already reported): 1" in summary


def test_findings_answered_or_thumbed_down_are_not_posted_again(flows: StartFlow) -> None:
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED}] * 2
    doc = quiet("acme/answered", replies)
    # Bob's reply is for the people reading the thread, not a question for Spark (tests/e2e/test_ask.py).
    doc["repository"]["files"][".github/spark.yml"] = "ask:\n  thread_chat: false\n"
    flow = flows(doc)
    flow.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}}))
    [review] = reviews(flow)
    bare = next(c for c in review["comments"] if "bare except" in c["body"])
    unclosed = next(c for c in review["comments"] if "never closed" in c["body"])
    flow.github.reply(flow.scene.repo, flow.scene.pr_number, bare["id"], "Intended here.", author="bob")
    flow.github.react(unclosed["id"], "-1", author="carol")
    # Lose Spark's own memory of what it posted: what GitHub shows must be enough.
    ledger = keys.LEDGER.format(pr_key(flow))
    assert flow.redis.delete(ledger) == 1
    assert act(flow, "push", files={"app/config.py": "# a header\n" + LOADER + "\n"}) == "nothing new"
    assert len(reviews(flow)) == 1
    states = sorted(v.decode() if isinstance(v, bytes) else v for v in flow.redis.hvals(ledger))
    assert states == ["answered", "dismissed"]
    summary = checks(flow)[-1]["output"]["summary"]
    assert "Not repeated (already reported): 2 (1 answered, 1 dismissed)" in summary


def test_fork_pr_is_reviewed_with_the_base_config_not_the_heads(flows: StartFlow) -> None:
    base = {"app/config.py": LOADER_BASE, ".github/spark.yml": "review:\n  min_severity: high\n"}
    # The PR tries to change its own rules: report everything, and stay silent.
    head_rules = "dry_run: true\nreview:\n  min_severity: info\n  paths:\n    exclude: ['**']\n"
    replies = [
        {"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED},
        {"path": ".github/spark.yml", "reply": "NO_FINDINGS"},
    ]
    doc = story("acme/forked", base, {"app/config.py": LOADER, ".github/spark.yml": head_rules}, replies)
    doc["pull_request"]["fork"] = {"owner": "mallory"}
    doc["collaborators"] = {}
    flow = flows(doc)
    assert act(flow, "open") == "posted"
    assert flow.scene.head_repo == "mallory/forked"
    [review] = reviews(flow)
    # The base's threshold (high) holds: the medium finding is held back, the high one is posted.
    assert [
        ("bare except" in c["body"], read_suggestion(c["body"]) is not None) for c in review["comments"]
    ] == [(True, True)]
    [run] = checks(flow)
    assert "below the severity threshold: 1" in run["output"]["summary"]
    # Spark cannot commit to a fork it may not write: no "Apply safe fixes" button.
    assert not run["actions"]
    # The head's spark.yml is a changed file like any other; excluded from review is only what base says.
    assert "`.github/spark.yml`: reviewed" in run["output"]["summary"]
    assert run["output"]["title"] == "1 new finding"


def test_org_config_fallback_and_extends_are_followed(flows: StartFlow) -> None:
    encoding = finding(
        "high", "no encoding given", "    handle = open(path)", '    handle = open(path, encoding="utf-8")'
    )
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED + "\n" + encoding}]
    flow = flows(story("orgx/app", {"app/config.py": LOADER_BASE}, {"app/config.py": LOADER}, replies))
    installation = flow.github.state.repo(flow.scene.repo).installation_id
    # No spark.yml in the repository: the organisation's .github repository's file extends a shared one.
    org_rules = "_extends: shared-rules\nreview:\n  max_inline_comments: 1\n"
    flow.github.create_repo("orgx/.github", {".github/spark.yml": org_rules}, installation_id=installation)
    shared = {".github/spark.yml": "review:\n  min_severity: high\n  max_inline_comments: 9\n"}
    flow.github.create_repo("orgx/shared-rules", shared, installation_id=installation)
    act(flow, "open")
    [review] = reviews(flow)
    # min_severity comes from the extended file; max_inline_comments from the org file, which wins.
    assert len(review["comments"]) == 1
    summary = checks(flow)[0]["output"]["summary"]
    assert "over the inline limit: 1" in summary and "below the severity threshold: 1" in summary
    assert "Configuration problems" not in summary


def test_skipped_files_are_listed_with_the_reason(flows: StartFlow) -> None:
    head_files = {
        "app/config.py": LOADER,
        "package-lock.json": '{"lockfileVersion": 3}\n',
        "assets/logo.png": "\x89PNG\x00\x00binary",
        "docs/notes.md": "Notes\n",
        "app/locked.py": "LOCKED = True\n",
    }
    base = {
        "app/config.py": LOADER_BASE,
        ".github/spark.yml": "review:\n  paths:\n    exclude: ['docs/**']\n",
    }
    doc = story("acme/skips", base, head_files, [{"path": "app/config.py", "reply": BARE_EXCEPT}])
    # GitHub refuses one file's contents: that file is listed as not reviewed, the others still are.
    doc["github"] = {
        "faults": [{"status": 403, "method": "GET", "path": "contents/app/locked.py", "times": 1}]
    }
    flow = flows(doc)
    act(flow, "open")
    assert [
        len(model_requests(flow, p)) for p in ("app/config.py", "package-lock.json", "docs/notes.md")
    ] == [1, 0, 0]
    summary = checks(flow)[0]["output"]["summary"]
    coverage = {line.split("`")[1]: line for line in summary.splitlines() if line.startswith("- `")}
    assert coverage["app/config.py"].endswith(": reviewed")
    assert "skipped" in coverage["package-lock.json"] and "lock" in coverage["package-lock.json"]
    assert "skipped" in coverage["assets/logo.png"] and "binary" in coverage["assets/logo.png"]
    assert "skipped: excluded by .github/spark.yml" in coverage["docs/notes.md"]
    assert "could not be read from GitHub" in coverage["app/locked.py"]
    assert "4 skipped" in summary


def test_dry_run_posts_nothing_and_shows_what_it_would_post(flows: StartFlow) -> None:
    base = {"app/config.py": LOADER_BASE, ".github/spark.yml": "dry_run: true\n"}
    flow = flows(
        story("acme/dry", base, {"app/config.py": LOADER}, [{"path": "app/config.py", "reply": BARE_EXCEPT}]),
    )
    assert act(flow, "open") == "nothing new"
    assert reviews(flow) == []
    assert flow.github.review_comments(flow.scene.repo, flow.scene.pr_number) == []
    summary = checks(flow)[0]["output"]["summary"]
    assert "**Dry run**: nothing was posted" in summary and "bare except hides real errors" in summary
    # Nothing was remembered as posted either: turning dry run off would post it.
    assert not flow.redis.exists(keys.LEDGER.format(pr_key(flow)))


def test_a_finding_outside_the_diff_goes_in_the_body_with_its_patch(flows: StartFlow) -> None:
    docstring = finding(
        "low",
        "module docstring is vague",
        '"""Configuration loading."""',
        '"""Load settings from JSON files."""',
    )
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + docstring}]
    flow = flows(story("acme/outside", {"app/config.py": LOADER_BASE}, {"app/config.py": LOADER}, replies))
    act(flow, "open")
    [review] = reviews(flow)
    assert [("bare except" in c["body"]) for c in review["comments"]] == [True]
    body = review["body"]
    assert "### Findings outside the diff" in body and "`app/config.py:1`" in body
    assert '-"""Configuration loading."""' in body and '+"""Load settings from JSON files."""' in body
    assert "in the review body: 1" in checks(flow)[0]["output"]["summary"]


def test_thirty_findings_give_twenty_inline_comments_and_a_summary_of_the_rest(flows: StartFlow) -> None:
    names = [f"value_{n:02d}" for n in range(30)]
    text = "".join(f"{name} = {n}\n" for n, name in enumerate(names))
    reply = "\n".join(
        finding("low", f"magic number in {name}", f"{name} = {n}", f"{name} = {n}  # why {n}?")
        for n, name in enumerate(names)
    )
    flow = flows(
        story(
            "acme/noisy",
            {"app/values.py": "\n"},
            {"app/values.py": text},
            [{"path": "app/values.py", "reply": reply}],
        ),
    )
    act(flow, "open")
    [review] = reviews(flow)
    assert len(review["comments"]) == 20
    assert "### More findings (over the limit of 20 inline comments)" in review["body"]
    listed = [line for line in review["body"].splitlines() if line.startswith("- **low**")]
    assert len(listed) == 10
    assert "over the inline limit: 10" in checks(flow)[0]["output"]["summary"]


def test_a_secret_the_pull_request_removes_never_reaches_the_review_when_the_model_repeats_it(
    flows: StartFlow,
) -> None:
    """The model was never shown the old password (``.env`` is redacted whole), yet repeats it: the job
    removes it by value from the finding, the review and the check run (issue 29)."""
    password = "hunter2"
    title = f"the old password {password} was committed"
    flow = flows(
        story(
            "acme/loader-secret",
            {"app/config.py": LOADER_BASE, ".env": f"DB_PASSWORD={password}\nDEBUG=true\n"},
            {"app/config.py": LOADER, ".env": "DB_PASSWORD=${DB_PASSWORD}\nDEBUG=true\n"},
            [
                {"path": "app/config.py", "reply": finding("high", title, "    except:")},
                {"path": ".env", "reply": finding("high", title, "DEBUG=true")},
            ],
        ),
    )
    assert act(flow, "open") == "posted"
    [review] = reviews(flow)
    posted = [review["body"], *(c["body"] for c in review["comments"])]
    posted += [v for run in checks(flow) for v in run["output"].values() if isinstance(v, str)]
    assert any("the old password [REDACTED:secret] was committed" in text for text in posted), posted
    assert not [text for text in posted if password in text]


def test_a_requested_review_that_finds_nothing_says_so_and_its_model_time_is_wall_clock(
    flows: StartFlow,
) -> None:
    files = {f"app/m{n}.py": f"def f{n}():\n    return {n}\n" for n in range(6)}
    replies = [{"reply": "NO_FINDINGS", "repeat": True}]
    doc = story("acme/clean", {"app/m0.py": "X = 1\n"}, files, replies, events=[{"wait": 0}])
    # Slow enough that the files' parallel calls dominate the review's time.
    doc["model"]["speed"] = {"ttft_ms": 400, "tokens_per_second": 1000}
    flow = flows(doc)
    command = flow.comment("/spark review", by="bob")
    assert review_on_request(flow.context("review", claim=False), command) == "nothing new"
    [reply] = [
        c
        for c in flow.github.issue_comments(flow.repo, flow.number)
        if c["user"]["login"] == flow.github.bot_login
    ]
    assert reply["body"].startswith("@bob Reviewed the latest commit: no new findings")
    assert ("rocket", flow.github.bot_login) in flow.github.reactions(command.comment_id)
    # Asked again (a redelivery, a re-run): the same reply, edited, not a second one.
    review_on_request(flow.context("review", claim=False), command)
    assert (
        len(
            [
                c
                for c in flow.github.issue_comments(flow.repo, flow.number)
                if c["user"]["login"] == flow.github.bot_login
            ]
        )
        == 1
    )
    [run, *_] = checks(flow)
    timings = dict(
        re.findall(
            r"(\w[\w ]*?) ([\d.]+) s", run["output"]["summary"].split("Timings: ", 1)[1].splitlines()[0]
        )
    )
    assert len(flow.model.requests) == 12  # six files, twice
    # Six calls of about 0.4 s at once: their sum would be far more than the review took.
    assert 0 < float(timings["model"]) <= float(timings["total"]), timings
