"""``/spark fix`` edits the files the user named, in the diff or not, or nothing, with the reason.

Each story runs ``run_fix`` in process against the local GitHub and model on a small repository whose pull
request touches one file, while the user names others.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.flows.conftest import Flow, StartFlow

REPO = "acme/shop"
FILES = {
    "src/shop/cart.py": "def total(items):\n    return sum(items)\n",
    "src/shop/http.py": "def get(url):\n    return fetch(url)\n",
    "src/shop/__init__.py": "",
    "src/shop/extra/__init__.py": "",
    "docs/conf.py": "project = 'shop'\n",
    "setup.py": "from setuptools import setup\n\nsetup(name='shop')\n",
    ".github/workflows/ci.yml": "on: push\n",
    ".github/spark.yml": "review:\n  auto: false\n",
}
# The pull request changes only the cart.
HEAD = {"src/shop/cart.py": "def total(items):\n    return sum(items) + 0\n"}


def block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def scenario(
    body: str | list[str],
    replies: list[dict[str, Any]],
    *,
    head: dict[str, str] | None = None,
    fork: bool = False,
    config: str | None = None,
    thread: dict[str, Any] | None = None,
) -> str:
    pull_request: dict[str, Any] = {
        "title": "Cart total",
        "author": "alice",
        "head_branch": "cart",
        "files": head or HEAD,
    }
    if fork:
        pull_request["fork"] = {"owner": "dana", "maintainer_can_modify": False}
    document = {
        "name": "fix-targets",
        "repository": {
            "owner": "acme",
            "name": "shop",
            "files": FILES if config is None else {**FILES, ".github/spark.yml": config},
        },
        "pull_request": pull_request,
        "collaborators": {"alice": "write"},
        "events": [
            {"comment": {"by": "alice", "body": b}} for b in ([body] if isinstance(body, str) else body)
        ]
        if thread is None
        else [{"review_comment": {"by": "alice", "body": body, **thread}}],
        "model": {"speed": {"ttft_ms": 5, "tokens_per_second": 50000}, "replies": replies},
    }
    return yaml.safe_dump(document, sort_keys=False)


def run(flow: Flow) -> dict[str, Any]:
    return flow.run_all()


def reply_of(outcome: dict[str, Any]) -> str:
    [reply] = [c["body"] for c in outcome["comments"] if c["by_app"]]
    return str(reply)


def model_paths(flow: Flow) -> list[str | None]:
    assert flow.model is not None
    return [r.script for r in flow.model.requests]


HTTP_FIX = block("src/shop/http.py", "    return fetch(url)\n", "    return fetch(url, timeout=10)\n")


def test_named_file_outside_the_diff_is_fixed_not_a_file_of_the_diff(flows: StartFlow) -> None:
    replies = [
        {"name": "http", "path": "src/shop/http.py", "command": "fix", "reply": HTTP_FIX},
        {"name": "cart", "path": "src/shop/cart.py", "command": "fix", "reply": "NO_CHANGES"},
    ]
    flow = flows(scenario("/spark fix src/shop/http.py: handle the timeout", replies))
    outcome = run(flow)
    [commit] = outcome["new_commits"]
    assert "+    return fetch(url, timeout=10)" in commit["diff"] and "cart.py" not in commit["diff"]
    assert outcome["files"]["head"]["src/shop/cart.py"] == HEAD["src/shop/cart.py"]
    assert model_paths(flow) == ["http"]
    assert "Pushed a fix" in reply_of(outcome) and "`src/shop/http.py` (+1 −1)" in reply_of(outcome)


def test_every_bare_name_is_a_target(flows: StartFlow) -> None:
    replies = [
        {
            "name": "conf",
            "path": "docs/conf.py",
            "command": "fix",
            "reply": block("docs/conf.py", "project = 'shop'\n", "project = 'Shop'\n"),
        },
        {
            "name": "init",
            "path": "src/shop/__init__.py",
            "command": "fix",
            "reply": block("src/shop/__init__.py", "", "__version__ = '1.0'\n"),
        },
        {
            "name": "setup",
            "path": "setup.py",
            "command": "fix",
            "reply": block("setup.py", "setup(name='shop')\n", "setup(name='shop', version='1.0')\n"),
        },
    ]
    # The PR touches src/shop/__init__.py, so the bare name means that one, not src/shop/extra/__init__.py.
    head = {**HEAD, "src/shop/__init__.py": "# the shop\n"}
    replies[1]["reply"] = block("src/shop/__init__.py", "# the shop\n", "# the shop\n__version__ = '1.0'\n")
    flow = flows(scenario("/spark fix conf.py __init__.py setup.py: set the version", replies, head=head))
    outcome = run(flow)
    [commit] = outcome["new_commits"]
    files = outcome["files"]["head"]
    assert files["docs/conf.py"] == "project = 'Shop'\n"
    assert files["src/shop/__init__.py"].endswith("__version__ = '1.0'\n")
    assert "version='1.0'" in files["setup.py"]
    assert sorted(model_paths(flow)) == ["conf", "init", "setup"]
    assert commit["verified"]


def test_missing_named_file_gets_the_closest_paths_and_no_model_call(flows: StartFlow) -> None:
    flow = flows(scenario("/spark fix src/shop/htpp.py: handle the timeout", []))
    outcome = run(flow)
    assert outcome["new_commits"] == [] and model_paths(flow) == []
    reply = reply_of(outcome)
    assert "`src/shop/htpp.py`" in reply and "closest: `src/shop/http.py`" in reply
    assert "Nothing was changed" in reply


def test_forbidden_named_targets_are_refused_with_the_reason(flows: StartFlow) -> None:
    # Today each of these silently becomes the diff's own file (the best match).
    cart = block("src/shop/cart.py", "    return sum(items) + 0\n", "    return sum(items)\n")
    replies = [{"name": "cart", "command": "fix", "reply": cart, "repeat": True}]
    bodies = [
        "/spark fix .github/workflows/ci.yml: run on pull requests",
        "/spark fix ../../etc/passwd: add a user",
    ]
    flow = flows(scenario(bodies, replies))
    outcome = run(flow)
    assert outcome["new_commits"] == [] and model_paths(flow) == []
    workflow, passwd = [c["body"] for c in outcome["comments"] if c["by_app"]]
    assert "`.github/workflows/ci.yml`" in workflow and "GitHub Actions workflow" in workflow
    assert "`../../etc/passwd`" in passwd and "outside the repository" in passwd


def test_fork_without_edits_gets_a_file_outside_the_diff_as_a_patch(flows: StartFlow) -> None:
    replies = [{"name": "http", "path": "src/shop/http.py", "command": "fix", "reply": HTTP_FIX}]
    flow = flows(scenario("/spark fix src/shop/http.py: handle the timeout", replies, fork=True))
    outcome = run(flow)
    assert outcome["new_commits"] == [] and outcome["reviews"] == []
    reply = reply_of(outcome)
    assert "```diff\n--- a/src/shop/http.py\n+++ b/src/shop/http.py\n" in reply
    assert "-    return fetch(url)\n+    return fetch(url, timeout=10)\n" in reply


def test_over_the_limit_the_reply_names_the_files_left_out(flows: StartFlow) -> None:
    names = "src/shop/http.py src/shop/cart.py docs/conf.py setup.py src/shop/extra/__init__.py"
    replies = [{"name": "any", "command": "fix", "reply": "NO_CHANGES", "repeat": True}]
    flow = flows(scenario(f"/spark fix {names}: tidy", replies))
    outcome = run(flow)
    assert len(model_paths(flow)) == 4
    assert "left out: `src/shop/extra/__init__.py`" in reply_of(outcome)


def test_named_file_the_config_excludes_is_refused(flows: StartFlow) -> None:
    config = "review:\n  auto: false\n  paths:\n    exclude: ['docs/**']\n"
    flow = flows(scenario("/spark fix docs/conf.py: capitalise the name", [], config=config))
    outcome = run(flow)
    assert outcome["new_commits"] == [] and model_paths(flow) == []
    assert "excluded by `review.paths`" in reply_of(outcome)


def test_thread_fix_also_edits_a_file_named_in_the_thread(flows: StartFlow) -> None:
    cart = block("src/shop/cart.py", "    return sum(items) + 0\n", "    return sum(items)\n")
    replies = [
        {"name": "cart", "path": "src/shop/cart.py", "command": "fix", "reply": cart},
        {"name": "http", "path": "src/shop/http.py", "command": "fix", "reply": HTTP_FIX},
    ]
    body = "/spark fix drop the + 0, and src/shop/http.py needs a timeout"
    flow = flows(scenario(body, replies, thread={"path": "src/shop/cart.py", "line": 2}))
    outcome = run(flow)
    [commit] = outcome["new_commits"]
    assert "+    return sum(items)\n" in commit["diff"] and "timeout=10" in commit["diff"]
    assert sorted(model_paths(flow)) == ["cart", "http"]


def test_words_that_are_not_files_do_not_veto_and_the_reply_names_them(flows: StartFlow) -> None:
    """URL paths with anchors are no file names; a name that matches no file is said, not obeyed."""
    replies = [{"name": "http", "path": "src/shop/http.py", "command": "fix", "reply": HTTP_FIX}]
    body = "/spark fix src/shop/http.py: point /guide/#timeouts at /guide/http/#timeouts, drop helpers.py"
    flow = flows(scenario(body, replies))
    outcome = run(flow)
    [commit] = outcome["new_commits"]
    assert "+    return fetch(url, timeout=10)" in commit["diff"] and model_paths(flow) == ["http"]
    reply = reply_of(outcome)
    assert "Pushed a fix" in reply and "`helpers.py`: no such file at the pull request's head" in reply
    assert "guide" not in reply


def test_an_extensionless_file_of_the_repository_named_is_a_target(flows: StartFlow) -> None:
    """``CHANGES`` is on the base branch, not in the pull request: it is fixed with the file beside it,
    or the reply says it was not changed; never a commit presented as the whole request without it."""
    files = {**FILES, "CHANGES": "Version 1.0\n-----------\n"}
    cart = block("src/shop/cart.py", "    return sum(items) + 0\n", "    return sum(items)\n")
    changes = block("CHANGES", "Version 1.0\n", "Version 1.0\n\n- The cart total no longer adds 0.\n")
    replies = [
        {"name": "cart", "path": "src/shop/cart.py", "command": "fix", "reply": cart},
        {"name": "changes", "path": "CHANGES", "command": "fix", "reply": changes},
    ]
    document = yaml.safe_load(scenario("/spark fix CHANGES cart.py: drop the + 0, note it", replies))
    document["repository"]["files"] = files
    flow = flows(yaml.safe_dump(document, sort_keys=False))
    outcome = run(flow)
    [commit] = outcome["new_commits"]
    assert sorted(model_paths(flow)) == ["cart", "changes"]
    assert "The cart total no longer adds 0." in outcome["files"]["head"]["CHANGES"]
    assert "`CHANGES` (+2 −0)" in reply_of(outcome) and "cart.py" in commit["diff"]
