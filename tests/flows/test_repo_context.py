"""Spark sees the repository: a review's model request carries the callers of what the change touches, from
the index of the head built through the local GitHub's archive with the real clients."""

from __future__ import annotations

from bot import keys
from bot.index.warm import machine
from sandbox.scenario import Event
from tests.flows.conftest import StartFlow
from tests.stories import checks, model_requests, reviews
from tests.stories import review_finding as finding
from tests.stories import review_story as story
from workers.commands.ask import run_ask

HEADERS = "def parse_header(line):\n    '''Split one header line.'''\n    return line.split(':', 1)\n"
CHANGED = (
    "def parse_header(line, sep):\n    '''Split one header line at sep.'''\n    return line.split(sep, 1)\n"
)
READER = (
    "from pkg.headers import parse_header\n\n\ndef read(lines):\n    out = []\n    for line in lines:\n"
    "        out.append(parse_header(line))\n    return out\n"
)
MAIN = "from pkg.headers import parse_header\n\n\ndef main(raw):\n    return parse_header(raw)\n"
TESTS = "from pkg.headers import parse_header\n\n\ndef test_parse():\n    assert parse_header('a: b')\n"


def test_a_review_of_a_changed_signature_shows_the_model_the_callers_it_did_not_touch(
    flows: StartFlow,
) -> None:
    base = {"pkg/headers.py": HEADERS, "pkg/reader.py": READER, "app/main.py": MAIN, "tests/test_h.py": TESTS}
    flow = flows(
        story(
            "acme/headers",
            base,
            {"pkg/headers.py": CHANGED},
            [{"path": "pkg/headers.py", "reply": "NO_FINDINGS"}],
        ),
        SPARK_INDEX_WAIT_SECONDS="30",
    )
    assert flow.act(Event("open", {})) == "nothing new"
    [request] = model_requests(flow, "pkg/headers.py")  # type: ignore[arg-type]
    user = request.messages[-1]["content"]
    # The untouched callers, each in its function, verbatim and without line numbers of their own.
    assert "File: pkg/reader.py (references `parse_header`)" in user
    assert "    for line in lines:\n        out.append(parse_header(line))" in user
    assert "def main(raw):\n    return parse_header(raw)" in user
    assert "def test_parse():\n    assert parse_header('a: b')" in user
    # The archive was read once, through the redirect.
    tarballs = [r for r in flow.github.request_log if "/tarball/" in r.path]
    assert [r.status for r in tarballs] == [302]
    [run] = checks(flow)  # type: ignore[arg-type]
    assert "Context from other files" not in (run["output"]["summary"] or "")  # nothing was left out


def test_a_caller_the_change_left_behind_is_reported_in_the_body_with_a_permalink_never_on_its_lines(
    flows: StartFlow,
) -> None:
    """The model names the untouched caller at its line of the context it was shown: the review body links
    that line at the head; the caller's file gets no comment. A line it was not shown is dropped, and said."""
    answer = (
        "### FINDING: high: read still calls the parser with one argument\n"
        "AT: pkg/reader.py:7\n"
        "`sep` is now required, so every line read raises TypeError.\n\n"
        "### FINDING: medium: the import may break too\n"
        "AT: pkg/reader.py:12\n"
        "The file has no line 12; the model was never shown one.\n"
    )
    flow = flows(
        story(
            "acme/headers-left",
            {"pkg/headers.py": HEADERS, "pkg/reader.py": READER},
            {"pkg/headers.py": CHANGED},
            [{"path": "pkg/headers.py", "reply": answer}],
        ),
        SPARK_INDEX_WAIT_SECONDS="30",
    )
    assert flow.act(Event("open", {})) == "posted"
    [request] = model_requests(flow, "pkg/headers.py")  # type: ignore[arg-type]
    user = request.messages[-1]["content"]
    assert "File: pkg/reader.py (references `parse_header`)\n[lines 1-8]" in user
    assert "AT: <path>:<line>" in user  # the model is told how to name a line of another file
    [review] = reviews(flow)  # type: ignore[arg-type]
    assert review["comments"] == []  # nothing inline: the caller's file is not in the pull request
    link = f"/acme/headers-left/blob/{flow.head()}/pkg/reader.py#L7)"
    assert "- [`pkg/reader.py:7`](" in review["body"] and link in review["body"]
    assert "read still calls the parser with one argument" in review["body"]
    assert "the import may break too" not in review["body"]  # line 12 was not shown: dropped
    [run] = checks(flow)  # type: ignore[arg-type]
    assert (
        "1 finding named a line of another file the model was not shown (`pkg/reader.py:12`)"
        in (run["output"]["summary"])
    )
    # GitHub's page of the pull request shows the review, and no comment on a line of pkg/reader.py.
    comments = flow.github.review_comments(flow.repo, flow.number)
    assert not [c for c in comments if c["path"] == "pkg/reader.py"]


def test_a_secret_shown_in_a_callers_context_never_reaches_the_review_when_the_model_repeats_it(
    flows: StartFlow,
) -> None:
    """A caller outside the diff holds a password: the model is shown it redacted and repeats the real value
    anyway; the review's posts carry it by no channel (issue 29's rule, for context from other files)."""
    password = "Tr0ub4dor-and-3x"
    reader = READER.replace("    out = []\n", f"    password = '{password}'\n    out = []\n")
    title = f"pkg/reader.py still calls parse_header with one argument next to password {password}"
    flow = flows(
        story(
            "acme/headers-secret",
            {"pkg/headers.py": HEADERS, "pkg/reader.py": reader},
            {"pkg/headers.py": CHANGED},
            [{"path": "pkg/headers.py", "reply": finding("high", title, "def parse_header(line, sep):")}],
        ),
        SPARK_INDEX_WAIT_SECONDS="30",
    )
    assert flow.act(Event("open", {})) == "posted"
    [request] = model_requests(flow, "pkg/headers.py")  # type: ignore[arg-type]
    user = request.messages[-1]["content"]
    assert "File: pkg/reader.py (references `parse_header`)" in user and password not in user
    [review] = reviews(flow)  # type: ignore[arg-type]
    posted = [review["body"], *(c["body"] for c in review["comments"])]
    posted += [v for run in checks(flow) for v in run["output"].values() if isinstance(v, str)]  # type: ignore[arg-type]
    assert any("[REDACTED:secret]" in text for text in posted), posted
    assert not [text for text in posted if password in text]


def test_a_review_that_cannot_wait_for_the_index_says_so(flows: StartFlow) -> None:
    flow = flows(
        story("acme/slow", {"a.py": HEADERS}, {"a.py": CHANGED}, [{"path": "a.py", "reply": "NO_FINDINGS"}]),
        SPARK_INDEX_WAIT_SECONDS="0.2",
    )
    flow.scene.act(Event("open", {}))  # the pull request opens; its review runs below
    # Another job of this machine is building the head's index and does not finish within the bound.
    flow.redis.set(keys.INDEX_BUILD.format(machine(), f"acme/slow@{flow.head()}"), "other", ex=60)
    assert flow.review("opened") == "nothing new"
    [run] = checks(flow)  # type: ignore[arg-type]
    assert (
        "**Context from other files**: the repository index is still being built" in run["output"]["summary"]
    )


def test_a_question_about_callers_is_answered_from_the_index_with_permalinks(flows: StartFlow) -> None:
    answer = (
        "`parse_header` is called by the reader, once per line:\n\n"
        "```quote pkg/reader.py\n        out.append(parse_header(line))\n```\n\n"
        "and by `main`:\n\n```quote app/main.py\n    return parse_header(raw)\n```\n"
    )
    flow = flows(
        {
            "name": "ask-callers",
            "repository": {
                "owner": "acme",
                "name": "headers",
                "files": {"pkg/headers.py": HEADERS, "pkg/reader.py": READER, "app/main.py": MAIN},
            },
            "pull_request": {
                "title": "Separator",
                "author": "alice",
                "head_branch": "sep",
                "files": {"pkg/headers.py": CHANGED},
            },
            "collaborators": {"alice": "write"},
            "events": [{"wait": 0}],
            "model": {"replies": [{"name": "ask", "command": "ask", "reply": answer, "repeat": True}]},
        },
        SPARK_INDEX_WAIT_SECONDS="30",
    )
    command = flow.comment("/spark ask who calls `parse_header`?", by="dave")
    assert flow._ran(run_ask(flow.context("ask", claim=False), command)) == "answered"
    # The model was shown the callers from files the pull request does not touch...
    [request] = [r for r in flow.model.requests if "who calls" in str(r.messages)]
    user = request.messages[-1]["content"]
    assert "out.append(parse_header(line))" in user and "def main(raw):" in user
    # ... and each quote became a permalink to its lines at the head.
    [reply] = [c for c in flow.github.issue_comments(flow.repo, flow.number) if "reader" in c["body"]]
    head = flow.head()
    assert f"/acme/headers/blob/{head}/pkg/reader.py#L7" in reply["body"]
    assert f"/acme/headers/blob/{head}/app/main.py#L5" in reply["body"]


def test_a_fix_is_shown_the_definitions_its_file_uses(flows: StartFlow) -> None:
    fixed = READER.replace("    out = []\n", "    out: list[object] = []\n")
    reply = (
        "pkg/reader.py\n```python\n<<<<<<< SEARCH\n    out = []\n=======\n"
        "    out: list[object] = []\n>>>>>>> REPLACE\n```\n"
    )
    flow = flows(
        {
            "name": "fix-definitions",
            "repository": {
                "owner": "acme",
                "name": "headers",
                "files": {"pkg/headers.py": HEADERS, "pkg/reader.py": READER},
            },
            "pull_request": {
                "title": "Typed reader",
                "author": "alice",
                "head_branch": "typed",
                "files": {"pkg/reader.py": READER.replace("def read(lines):", "def read(lines: list[str]):")},
            },
            "collaborators": {"alice": "write"},
            "events": [{"wait": 0}],
            "model": {"replies": [{"name": "fix", "command": "fix", "reply": reply, "repeat": True}]},
        },
        SPARK_INDEX_WAIT_SECONDS="30",
    )
    flow.fix(flow.comment("/spark fix annotate out in pkg/reader.py", by="alice"))
    [request] = [r for r in flow.model.requests if "annotate out" in str(r.messages)]
    user = request.messages[-1]["content"]
    assert "File: pkg/headers.py (defines `parse_header`)" in user
    assert "def parse_header(line):\n    '''Split one header line.'''" in user
    assert fixed.replace("def read(lines):", "def read(lines: list[str]):") == flow.github.file_at(
        flow.repo, flow.head(), "pkg/reader.py"
    )
