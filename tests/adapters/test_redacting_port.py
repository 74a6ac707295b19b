"""A job's port removes, by value, every secret the core redacted from what the job read, from every post.

The real PyGithub client runs against the local GitHub; the pull request removes a password from ``.env``
and adds a session secret, a file the job reads holds a password, and a reviewer's comment quotes a token.
Each channel then posts text repeating all four (as a model would), plainly and as Markdown escapes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from bot.adapters.github_app import GitHubApp
from bot.adapters.redacting import RedactingPort
from bot.core.anchors import read_suggestion
from bot.core.render import prose
from bot.core.types import ReviewComment
from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem

REPO = "octo/vault"
REMOVED = "hunter2"  # the old password, on the diff's removed side
ADDED = "Kp4_zR7-wQ2x"  # a secret the pull request adds
READ = "Vx8#mQ2!pL9"  # in a file the job reads whole
QUOTED = "Jd93-kLq0+Zx8Rw"  # in a reviewer's comment
HEARD = "Tq7-Lm2_Rx9z"  # in the comment that asked
PLANTED = (REMOVED, ADDED, READ, QUOTED, HEARD)
BASE = {
    ".env": f"DB_PASSWORD={REMOVED}\nDEBUG=true\nAPP_ENV=production\n",
    "settings.py": f'DATABASE = {{"password": "{READ}"}}\n',
    "app.py": "print('hi')\n",
}
HEAD = {".env": f"DB_PASSWORD=${{DB_PASSWORD}}\nDEBUG=true\nAPP_ENV=production\nSESSION_SECRET={ADDED}\n"}
# What a model might write: each value plainly, in a code span, and in prose (Markdown-escaped).
ECHO = " ".join(f"{v} `{v}` {prose(v + ' is it')}" for v in PLANTED) + " DEBUG=true on production"


@dataclass
class World:
    sandbox: GitHubSandbox
    port: RedactingPort
    number: int


@pytest.fixture(scope="module")
def app_key() -> str:
    return generate_private_key_pem()


@pytest.fixture()
def world(app_key: str) -> Iterator[World]:
    with GitHubSandbox(private_key_pem=app_key) as sandbox:
        installation_id = sandbox.create_installation("octo")
        sandbox.create_repo(REPO, dict(BASE), installation_id=installation_id)
        number = sandbox.open_pull_request(REPO, "rotate", dict(HEAD), title="Rotate the password")
        sandbox.review_comment(REPO, number, ".env", 4, f'staging uses token: "{QUOTED}"', author="rev")
        app = GitHubApp(sandbox.app_id, sandbox.private_key_pem, base_url=sandbox.url)
        port = RedactingPort(app.installation(installation_id), heard=f"/spark fix password = '{HEARD}'")
        # What a job reads: the pull request, its diff, a file, the review comments.
        pull = port.pull(REPO, number)
        port.pull_diff(REPO, number)
        port.file_text(REPO, "settings.py", pull.base_sha)
        port.review_comments(REPO, number)
        yield World(sandbox, port, number)
        app.close()


def clean(text: str) -> None:
    """Assert no planted value is in ``text`` in any form, the markers stand in, and words survive."""
    assert not [v for v in PLANTED if v in text or prose(v) in text], text
    assert text.count("[REDACTED:") >= len(PLANTED)
    assert "DEBUG=true on production" in text


def test_the_values_learned_are_the_planted_ones_and_not_ordinary_settings(world: World) -> None:
    secrets = world.port.learned()
    assert all(v in secrets for v in PLANTED)
    assert "true" not in secrets and "production" not in secrets and len(secrets) == len(PLANTED)


def test_conversation_comment_and_its_edit(world: World) -> None:
    world.port.comment(REPO, world.number, ECHO)
    world.port.upsert_comment(REPO, world.number, "k1", ECHO)
    bodies = [c["body"] for c in world.sandbox.issue_comments(REPO, world.number)]
    assert len(bodies) == 2
    for body in bodies:
        clean(body)


def test_reply_in_a_review_thread(world: World) -> None:
    [thread] = world.sandbox.review_comments(REPO, world.number)
    world.port.reply_to_review_comment(REPO, world.number, thread["id"], ECHO)
    reply = world.sandbox.review_comments(REPO, world.number)[-1]
    assert reply["in_reply_to_id"] == thread["id"]
    clean(reply["body"])


def test_review_body_and_inline_comments(world: World) -> None:
    head = world.sandbox.head_sha(REPO, world.number)
    comment = ReviewComment(".env", 4, f"The old password {REMOVED} was committed. {ECHO}")
    world.port.review(REPO, world.number, commit_sha=head, body=ECHO, comments=[comment])
    review = world.sandbox.reviews(REPO, world.number)[-1]
    clean(review["body"])
    [inline] = review["comments"]
    clean(inline["body"])


def test_a_suggestion_holding_a_value_is_posted_as_plain_code_never_committable(world: World) -> None:
    """Committing a suggestion that shows a placeholder would write the placeholder into the file."""
    head = world.sandbox.head_sha(REPO, world.number)
    body = f"Keep it quoted.\n\n```suggestion\nSESSION_SECRET='{ADDED}'\n```"
    world.port.review(REPO, world.number, commit_sha=head, body="", comments=[ReviewComment(".env", 4, body)])
    [inline] = world.sandbox.reviews(REPO, world.number)[-1]["comments"]
    assert ADDED not in inline["body"] and read_suggestion(inline["body"]) is None
    assert (
        "```\nSESSION_SECRET='[REDACTED:secret]'\n```" in inline["body"]
        and "not as a suggestion" in inline["body"]
    )
    plain = "```suggestion\nDEBUG=false\n```"
    world.port.review(
        REPO, world.number, commit_sha=head, body="", comments=[ReviewComment(".env", 2, plain)]
    )
    assert read_suggestion(world.sandbox.reviews(REPO, world.number)[-1]["comments"][0]["body"]) == [
        "DEBUG=false"
    ]


def test_check_run_text(world: World) -> None:
    head = world.sandbox.head_sha(REPO, world.number)
    output = {"title": f"found {REMOVED}", "summary": ECHO, "text": ECHO}
    run_id = world.port.create_check_run(REPO, head, "Spark", output=output)
    world.port.update_check_run(REPO, run_id, status="completed", conclusion="neutral", output=output)
    [run] = world.sandbox.check_runs(REPO, head)
    assert REMOVED not in run["output"]["title"]
    clean(run["output"]["summary"])
    clean(run["output"]["text"])


def test_commit_message(world: World) -> None:
    pull = world.port.pull(REPO, world.number)
    world.port.commit_on_branch(
        REPO,
        pull.head_ref,
        expected_head=pull.head_sha,
        headline=f"Drop {REMOVED}",
        body=ECHO,
        additions={"app.py": b"print('hello')\n"},
    )
    [latest, *_] = world.sandbox.commits(REPO, pull.head_ref)
    assert REMOVED not in latest["message"].splitlines()[0]
    clean(latest["message"])


def test_description_section(world: World) -> None:
    world.port.edit_pull_body(REPO, world.number, f"## Summary\n\n{ECHO}")
    clean(world.sandbox.pull(REPO, world.number)["body"])
