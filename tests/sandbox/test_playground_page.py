"""The local GitHub's pages for people: a pull request (no sign-in) and its comment box, a commit, a file."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import orjson
import pytest

from sandbox.github import GitHubSandbox
from sandbox.github.pages import markdown
from sandbox.github.service import CommentSpec

REPO = "acme/app"
BASE = {"calc.py": "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n"}
HEAD = {"calc.py": BASE["calc.py"] + "\n\ndef total(xs):\n    return sum(xs)\n"}


class Answer:
    """An HTTP answer: status, headers, text."""

    def __init__(self, status: int, headers: dict[str, str], text: str) -> None:
        self.status, self.headers, self.text = status, headers, text


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def http(url: str, form: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Answer:
    """GET (or POST ``form``) without credentials and without following redirects."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, headers=headers or {})
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as answer:
            return Answer(answer.status, dict(answer.headers), answer.read().decode())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, dict(exc.headers), exc.read().decode())


@pytest.fixture()
def gh(private_key: str) -> Iterator[GitHubSandbox]:
    with GitHubSandbox(private_key_pem=private_key) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo(REPO, BASE, installation)
        sandbox.add_collaborator(REPO, "alice", "write")
        sandbox.open_pull_request(
            REPO, "total", HEAD, title="Add total", body="Adds `total`.", author="alice"
        )
        yield sandbox


def page_url(gh: GitHubSandbox) -> str:
    return str(gh.pull(REPO, 1)["html_url"])


def test_the_pull_requests_html_url_opens_its_page_without_credentials(gh: GitHubSandbox) -> None:
    answer = http(page_url(gh))
    assert answer.status == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/html")
    assert "<title>Add total · acme/app#1</title>" in answer.text
    assert "<code>total</code>" in answer.text  # the description, rendered
    assert 'id="commit-' in answer.text and "+def total(xs):" in answer.text
    # The API itself still wants credentials, as GitHub's does.
    assert http(f"{gh.url}/repos/{REPO}/pulls/1").status == 401


def test_comments_render_as_github_renders_them_and_nothing_in_them_runs(gh: GitHubSandbox) -> None:
    gh.comment(
        REPO,
        1,
        "**bold**\nnext line\n<details><summary>Patch</summary>\n\n- [ ] task\n</details>\n"
        '<img src="x.png" onerror="alert(1)"><script>alert(2)</script>\n<sub>12 ms</sub>',
        author="alice",
    )
    answer = http(page_url(gh))
    body = answer.text[answer.text.index('id="live"') :]
    assert "<strong>bold</strong><br>\nnext line" in body  # a comment's newline is a line break on GitHub
    assert "<details><summary>Patch</summary>" in body and "<sub>12 ms</sub>" in body
    assert '<input type="checkbox" disabled="">' in body
    assert "onerror" not in body and "<script>alert" not in body
    # The page's own poll is the only script that may run: by a nonce fresh for each answer.
    policy = answer.headers["Content-Security-Policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", policy)
    assert nonce is not None and f'<script nonce="{nonce.group(1)}">' in answer.text
    assert answer.text.count("<script") == 1


def test_markdown_is_githubs() -> None:
    assert markdown("| a |\n|---|\n| b |").startswith("<table>")
    assert markdown("~~gone~~") == "<p><del>gone</del></p>\n"
    assert markdown("see https://example.com") == (
        '<p>see <a href="https://example.com">https://example.com</a></p>\n'
    )
    assert 'href="javascript' not in markdown("[x](javascript:alert(1))")


def test_a_suggestion_shows_as_the_change_it_suggests(gh: GitHubSandbox) -> None:
    comment = gh.review_comment(REPO, 1, "calc.py", 6, "Simpler:\n```suggestion\n    return sum(xs) + 0\n```")
    body = http(page_url(gh)).text
    assert f'id="discussion_r{comment}"' in body
    change = body[body.index("Suggested change") :]
    removed = change.index('class="del">-    return sum(xs)<')
    assert removed < change.index('class="add">+    return sum(xs) + 0<')


def test_the_form_comments_as_the_chosen_user_and_github_delivers_it(gh: GitHubSandbox) -> None:
    answer = http(f"{page_url(gh)}/comments", {"as": "bob", "body": "/spark ask what does total do?"})
    assert answer.status == 303
    [made] = gh.issue_comments(REPO, 1)
    assert answer.headers["Location"] == f"/acme/app/pull/1?as=bob#issuecomment-{made['id']}"
    assert (made["user"]["login"], made["body"]) == ("bob", "/spark ask what does total do?")
    [delivery] = [d for d in gh.wait_for_deliveries() if d.event == "issue_comment"]
    payload = orjson.loads(delivery.body)
    assert payload["sender"]["login"] == "bob" and payload["comment"]["id"] == made["id"]
    again = http(f"{page_url(gh)}?as=bob").text  # where the browser is sent: bob stays the one commenting
    assert f'id="issuecomment-{made["id"]}"' in again and 'id="as" list="users" value="bob"' in again


def test_the_command_line_gets_the_comment_or_the_reason(gh: GitHubSandbox) -> None:
    as_json = {"Accept": "application/json"}
    made = http(f"{page_url(gh)}/comments", {"as": "carol", "body": "hello"}, as_json)
    assert made.status == 201 and orjson.loads(made.text)["user"]["login"] == "carol"
    # Without `as`, the pull request's author comments.
    made = http(f"{page_url(gh)}/comments", {"body": "hi"}, as_json)
    assert orjson.loads(made.text)["user"]["login"] == "alice"
    for login in ("spark[bot]", "-bob", "a b", ""):
        refused = http(f"{page_url(gh)}/comments", {"as": login, "body": "x"}, as_json)
        expected = 201 if login == "" else 422
        assert refused.status == expected, (login, refused.text)
    refused = http(f"{page_url(gh)}/comments", {"as": "bob", "body": "  "}, as_json)
    assert refused.status == 422 and "needs some text" in orjson.loads(refused.text)["message"]
    missing = http(f"{gh.url}/acme/app/pull/9/comments", {"as": "bob", "body": "x"}, as_json)
    assert missing.status == 404
    assert [c["user"]["login"] for c in gh.issue_comments(REPO, 1)] == ["carol", "alice", "alice"]


def test_a_refused_form_shows_the_reason_and_keeps_the_text(gh: GitHubSandbox) -> None:
    answer = http(f"{page_url(gh)}/comments", {"as": "spark[bot]", "body": "/spark fix it"})
    assert answer.status == 422
    assert "is the App" in answer.text and ">/spark fix it</textarea>" in answer.text
    assert gh.issue_comments(REPO, 1) == []


def test_another_site_cannot_post_through_a_visitors_browser(gh: GitHubSandbox) -> None:
    answer = http(f"{page_url(gh)}/comments", {"as": "bob", "body": "x"}, {"Origin": "https://evil.example"})
    assert answer.status == 403 and gh.issue_comments(REPO, 1) == []
    same = http(f"{page_url(gh)}/comments", {"as": "bob", "body": "x"}, {"Origin": gh.url})
    assert same.status == 303


def test_a_reply_in_a_review_thread(gh: GitHubSandbox) -> None:
    root = gh.review_comment(REPO, 1, "calc.py", 6, "Why total?", author="alice")
    answer = http(f"{page_url(gh)}/comments", {"as": "bob", "body": "won't fix", "in_reply_to": str(root)})
    assert answer.status == 303 and "#discussion_r" in answer.headers["Location"]
    reply = gh.review_comments(REPO, 1)[-1]
    assert (reply["in_reply_to_id"], reply["user"]["login"], reply["body"]) == (root, "bob", "won't fix")
    events = [d.event for d in gh.wait_for_deliveries()]
    assert events.count("pull_request_review_comment") == 2


def test_the_commit_and_file_links_spark_writes_open(gh: GitHubSandbox) -> None:
    head = gh.head_sha(REPO, 1)
    commit = http(f"{gh.url}/{REPO}/commit/{head}")
    assert commit.status == 200 and "+def total(xs):" in commit.text
    blob = http(f"{gh.url}/{REPO}/blob/{head}/calc.py#L5-L6")
    assert blob.status == 200 and '<tr id="L5"><td class="n">5</td><td>def total(xs):</td></tr>' in blob.text
    assert http(f"{gh.url}/{REPO}/blob/{head}/nope.py").status == 404


def delivered(gh: GitHubSandbox) -> list[tuple[str, str, str]]:
    """Return (event, action, sender) of every delivery so far."""
    out = []
    for delivery in gh.wait_for_deliveries():
        payload = orjson.loads(delivery.body)
        out.append((delivery.event, str(payload.get("action", "")), payload["sender"]["login"]))
    return out


def test_commit_suggestion_pushes_it_as_a_person_with_write_access(gh: GitHubSandbox) -> None:
    comment = gh.review_comment(REPO, 1, "calc.py", 6, "```suggestion\n    return sum(xs) + 0\n```")
    button = f'action="/acme/app/pull/1/suggestions/{comment}"'
    assert button in http(page_url(gh)).text
    refused = http(f"{page_url(gh)}/suggestions/{comment}", {"as": "bob"})
    assert refused.status == 403 and "bob has no write access to acme/app" in refused.text
    before = gh.head_sha(REPO, 1)
    done = http(f"{page_url(gh)}/suggestions/{comment}", {"as": "alice"})
    head = gh.head_sha(REPO, 1)
    assert done.status == 303 and head != before
    assert done.headers["Location"] == f"/acme/app/pull/1?as=alice#commit-{head[:7]}"
    assert gh.file_at(REPO, head, "calc.py") == HEAD["calc.py"].replace("sum(xs)\n", "sum(xs) + 0\n")
    assert gh.commits(REPO, "total")[0]["author"] == "alice"
    assert ("pull_request", "synchronize", "alice") in delivered(gh)
    # Outdated now: no button, and pressing it anyway gets GitHub's reason.
    assert button not in http(page_url(gh)).text
    again = http(f"{page_url(gh)}/suggestions/{comment}", {"as": "alice"})
    assert again.status == 422 and "Outdated suggestions cannot be applied." in again.text


def test_a_check_runs_buttons_fire_its_requested_action_and_re_run(gh: GitHubSandbox) -> None:
    repo = gh.state.repo(REPO)
    action = {"label": "Apply safe fixes", "description": "One commit", "identifier": "apply-safe-fixes"}
    head = gh.head_sha(REPO, 1)
    run = gh.github.create_check_run(
        repo, {"name": "Spark", "head_sha": head, "conclusion": "neutral", "actions": [action]}
    )
    page = http(page_url(gh)).text
    assert page.count(f'action="/acme/app/pull/1/checks/{run.id}"') == 2  # its action, and Re-run
    checks = f"{page_url(gh)}/checks/{run.id}"
    assert http(checks, {"as": "alice", "action": "apply-safe-fixes"}).status == 303
    assert http(checks, {"as": "alice", "action": "rerequest"}).status == 303
    assert http(checks, {"as": "alice", "action": "deploy"}).status == 422
    assert http(checks, {"as": "bob", "action": "apply-safe-fixes"}).status == 403
    fired = [d for d in delivered(gh) if d[0] == "check_run"]
    assert fired == [("check_run", "requested_action", "alice"), ("check_run", "rerequested", "alice")]
    [requested] = [d for d in gh.deliveries if d.event == "check_run"][:1]
    assert orjson.loads(requested.body)["requested_action"] == {"identifier": "apply-safe-fixes"}


def test_a_comment_on_a_line_of_the_diff_starts_a_review_thread(gh: GitHubSandbox) -> None:
    page = http(page_url(gh)).text
    # The diff shows each line's old and new numbers, to say which line a comment is on.
    assert '<span class="n">        5 </span>+def total(xs):' in page
    form = {"as": "bob", "body": "/spark fix name it sum_of", "path": "calc.py", "line": "5"}
    answer = http(f"{page_url(gh)}/comments", form, {"Accept": "application/json"})
    assert answer.status == 201, answer.text
    made = orjson.loads(answer.text)
    assert (made["path"], made["line"], made["side"], made["user"]["login"]) == ("calc.py", 5, "RIGHT", "bob")
    assert ("pull_request_review_comment", "created", "bob") in delivered(gh)
    # GitHub's placement rules: a line outside the diff is refused with its reason.
    off = http(f"{page_url(gh)}/comments", {**form, "line": "99"}, {"Accept": "application/json"})
    assert off.status == 422 and "must be part of the diff" in off.text
    bad = http(f"{page_url(gh)}/comments", {**form, "line": "x"})
    assert bad.status == 422 and "line must be a positive number" in bad.text


def test_thumbs_on_a_comment_react_as_the_person(gh: GitHubSandbox) -> None:
    said = gh.comment(REPO, 1, "Looks off.", author="spark[bot]")
    inline = gh.review_comment(REPO, 1, "calc.py", 6, "Why?", author="spark[bot]")
    assert http(f"{page_url(gh)}/reactions/{said}", {"as": "bob", "content": "-1"}).status == 303
    assert http(f"{page_url(gh)}/reactions/{inline}", {"as": "bob", "content": "-1"}).status == 303
    assert gh.reactions(said) == [("-1", "bob")] and gh.reactions(inline) == [("-1", "bob")]
    assert 'data-reaction="-1">👎 1</span>' in http(page_url(gh)).text
    assert http(f"{page_url(gh)}/reactions/{said}", {"as": "bob", "content": "meh"}).status == 422
    assert http(f"{page_url(gh)}/reactions/99999", {"as": "bob", "content": "+1"}).status == 404


def test_the_conversation_as_the_comment_verb_watches_it(gh: GitHubSandbox) -> None:
    asked = gh.comment(REPO, 1, "/spark review", author="alice")
    pr = gh.state.pull(REPO, 1)
    spec = CommentSpec("calc.py", "Guard it.", 6)
    gh.github.create_review(pr, "One finding.", "COMMENT", None, [spec], "spark[bot]")
    gh.github.create_review(pr, "draft", "PENDING", None, [CommentSpec("calc.py", "hidden", 5)], "bob")
    answer = http(f"{page_url(gh)}/comments?since={asked}", headers={"Accept": "application/json"})
    items = orjson.loads(answer.text)
    assert [(i["kind"], i["user"]["login"], i["body"]) for i in items] == [
        ("review", "spark[bot]", "One finding."),
        ("review_comment", "spark[bot]", "Guard it."),
    ]
    assert (
        len(orjson.loads(http(f"{page_url(gh)}/comments", headers={"Accept": "application/json"}).text)) == 3
    )
