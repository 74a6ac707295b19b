"""Signed webhook deliveries, redelivery through the App API, and fault injection seen by PyGithub."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from github import Auth, Github, GithubException, RateLimitExceededException

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem

KEY = generate_private_key_pem()
SECRET = "It's a Secret to Everybody"


class Receiver:
    """A tiny webhook receiver that records what arrives and answers with a chosen status."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.status = 202
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers.items()), body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/api/github/webhooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    """A running receiver."""
    hook = Receiver()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


@pytest.fixture()
def gh(receiver: Receiver) -> Iterator[GitHubSandbox]:
    """A sandbox delivering to the receiver, with acme/app installed and PR #1 open."""
    with GitHubSandbox(webhook_url=receiver.url, webhook_secret=SECRET, private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", {"a.py": "x = 1\n"}, installation)
        sandbox.open_pull_request("acme/app", "feature", {"a.py": "x = 2\n"}, title="Bump x", author="dev")
        yield sandbox


def test_deliveries_are_signed_and_shaped_like_githubs(gh: GitHubSandbox, receiver: Receiver) -> None:
    gh.comment("acme/app", 1, "/spark fix use y", author="dev")
    gh.push("acme/app", "feature", {"a.py": "x = 3\n"}, author="dev")
    gh.wait_for_deliveries()
    events = [(h["X-GitHub-Event"], json.loads(b).get("action")) for h, b in receiver.received]
    assert events == [
        ("pull_request", "opened"),
        ("issue_comment", "created"),
        ("push", None),
        ("pull_request", "synchronize"),
    ]
    for headers, body in receiver.received:
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Hub-Signature-256"], expected)
        assert headers["User-Agent"].startswith("GitHub-Hookshot/")
        assert headers["Content-Type"] == "application/json"
        assert headers["X-GitHub-Hook-Installation-Target-ID"] == str(gh.app_id)
        uuid.UUID(headers["X-GitHub-Delivery"])
    assert len({h["X-GitHub-Delivery"] for h, _ in receiver.received}) == 4  # a fresh GUID each
    comment = json.loads(receiver.received[1][1])
    assert comment["issue"]["pull_request"]["url"].endswith("/repos/acme/app/pulls/1")
    assert comment["comment"]["body"] == "/spark fix use y"
    assert comment["installation"]["id"] == next(iter(gh.state.installations))
    assert comment["sender"]["login"] == "dev"
    sync = json.loads(receiver.received[3][1])
    assert sync["after"] == gh.head_sha("acme/app", 1) == sync["pull_request"]["head"]["sha"]


def test_failed_delivery_is_listed_and_redelivered_with_the_same_guid(
    gh: GitHubSandbox, receiver: Receiver
) -> None:
    gh.wait_for_deliveries()
    receiver.status = 503
    gh.comment("acme/app", 1, "/spark fix", author="dev")
    gh.wait_for_deliveries()
    receiver.status = 202
    integration = gh.integration()
    _, listed = integration.requester.requestJsonAndCheck(
        "GET", "/app/hook/deliveries", parameters={"per_page": 100}
    )
    failed = [d for d in listed if d["status_code"] >= 400]
    assert [(d["event"], d["action"], d["status_code"]) for d in failed] == [
        ("issue_comment", "created", 503)
    ]
    integration.requester.requestJsonAndCheck("POST", f"/app/hook/deliveries/{failed[0]['id']}/attempts")
    gh.wait_for_deliveries()
    first, again = receiver.received[-2], receiver.received[-1]
    assert first[0]["X-GitHub-Delivery"] == again[0]["X-GitHub-Delivery"] == failed[0]["guid"]
    assert first[1] == again[1]
    _, listed = integration.requester.requestJsonAndCheck("GET", "/app/hook/deliveries")
    assert listed[0]["redelivery"] is True
    assert listed[0]["status_code"] == 202


def test_deliveries_api_needs_the_app_jwt(gh: GitHubSandbox) -> None:
    client = gh.client(next(iter(gh.state.installations)))
    with pytest.raises(GithubException) as caught:
        client.requester.requestJsonAndCheck("GET", "/app/hook/deliveries")
    assert caught.value.status == 401


def test_webhooks_can_be_switched_off(gh: GitHubSandbox, receiver: Receiver) -> None:
    gh.wait_for_deliveries()
    gh.faults.webhooks_enabled = False
    gh.comment("acme/app", 1, "quiet", author="dev")
    gh.wait_for_deliveries()
    assert len(receiver.received) == 1


def test_secondary_rate_limit_retry_after_is_honoured_by_pygithub(gh: GitHubSandbox) -> None:
    client = gh.client(next(iter(gh.state.installations)))
    repo = client.get_repo("acme/app")
    gh.faults.secondary_rate_limit("GET", r"^/repos/acme/app/pulls/1$", retry_after=1)
    assert repo.get_pull(1).title == "Bump x"
    served = [(r.status, r.started) for r in gh.request_log if r.path == "/repos/acme/app/pulls/1"]
    assert [status for status, _ in served] == [403, 200]
    assert served[1][1] - served[0][1] >= 1.0  # PyGithub waited for Retry-After


def test_server_errors_are_retried_and_429_carries_retry_after(gh: GitHubSandbox) -> None:
    client = gh.client(next(iter(gh.state.installations)))
    repo = client.get_repo("acme/app")
    gh.faults.inject(502, "GET", r"/pulls/1/files$", times=2)
    assert [f.filename for f in repo.get_pull(1).get_files()] == ["a.py"]
    statuses = [r.status for r in gh.request_log if r.path.startswith("/repos/acme/app/pulls/1/files")]
    assert statuses == [502, 502, 200]
    gh.faults.inject(429, "POST", r"/issues/1/comments$", headers={"Retry-After": "0"})
    repo.get_pull(1).create_issue_comment("after a 429")
    assert [c["body"] for c in gh.issue_comments("acme/app", 1)] == ["after a 429"]


def test_primary_rate_limit_is_per_installation(gh: GitHubSandbox) -> None:
    gh.faults.rate_limit = 3
    auth = Auth.AppAuth(gh.app_id, gh.private_key_pem).get_installation_auth(
        next(iter(gh.state.installations))
    )
    client = Github(
        auth=auth, base_url=gh.url, retry=None, seconds_between_requests=0, seconds_between_writes=0
    )
    repo = client.get_repo("acme/app")
    repo.get_pull(1)
    assert client.rate_limiting[0] == 1  # remaining after two of three calls (the token mint is the App's)
    repo.get_pull(1)
    with pytest.raises(RateLimitExceededException) as caught:
        repo.get_pull(1)
    assert caught.value.data["message"].startswith("API rate limit exceeded for installation ID")
    assert (caught.value.headers or {}).get("x-ratelimit-remaining") == "0"


def test_added_latency_applies_to_every_call(gh: GitHubSandbox) -> None:
    gh.faults.latency = 0.05
    client = gh.client(next(iter(gh.state.installations)))
    client.get_repo("acme/app").get_pull(1)
    assert len(gh.request_log) == 3  # token, repo, pull
    assert all(r.duration >= 0.05 for r in gh.request_log)


def missing_keys(real: dict[str, Any], ours: dict[str, Any], path: str = "") -> list[str]:
    """Keys GitHub's example has (recursively, into objects both have) that our payload lacks."""
    missing = [f"{path}.{key}" for key in real if key not in ours]
    for key, value in real.items():
        if isinstance(value, dict) and isinstance(ours.get(key), dict):
            missing += missing_keys(value, ours[key], f"{path}.{key}")
    return missing


EXAMPLES = {
    ("pull_request", "opened"): "pull_request/opened.payload.json",
    ("pull_request", "synchronize"): "pull_request/synchronize.payload.json",
    ("pull_request", "closed"): "pull_request/closed.payload.json",
    ("issue_comment", "created"): "issue_comment/created.with-installation.payload.json",
    ("pull_request_review_comment", "created"): "pull_request_review_comment/created.payload.json",
    ("pull_request_review", "submitted"): "pull_request_review/submitted.payload.json",
    ("check_run", "requested_action"): "check_run/requested_action.payload.json",
}
# Fields of features the sandbox does not model (apps' check suites, deployments, review requests by teams).
NOT_MODELLED = {".check_run.check_suite", ".check_run.app", ".check_run.deployment"}


def test_payloads_have_every_field_of_githubs_examples(
    gh: GitHubSandbox, receiver: Receiver, shared_dir: Path
) -> None:
    client = gh.client(next(iter(gh.state.installations)))
    pr = client.get_repo("acme/app").get_pull(1)
    gh.comment("acme/app", 1, "hi", author="dev")
    gh.review_comment("acme/app", 1, "a.py", 1, "inline", author="dev")
    gh.push("acme/app", "feature", {"a.py": "x = 3\n"}, author="dev")
    run = client.get_repo("acme/app").create_check_run(name="Spark", head_sha=gh.head_sha("acme/app", 1))
    gh.request_check_run_action(run.id, "apply", author="dev")
    pr.edit(state="closed")
    gh.wait_for_deliveries()
    ours: dict[tuple[str, str], dict[str, Any]] = {}
    for headers, body in receiver.received:
        payload = json.loads(body)
        ours.setdefault((headers["X-GitHub-Event"], payload.get("action")), payload)
    for key, example in EXAMPLES.items():
        real = json.loads((shared_dir / "github/webhooks" / example).read_text())
        missing = [m for m in missing_keys(real, ours[key]) if not any(m.startswith(n) for n in NOT_MODELLED)]
        assert missing == [], f"{key}: {missing}"


def test_an_app_receives_only_the_events_its_manifest_subscribes_to(receiver: Receiver) -> None:
    # An App is sent the events it subscribed to, nothing else:
    # https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest
    # https://docs.github.com/webhooks/using-webhooks/creating-webhooks-for-a-github-app
    with GitHubSandbox(webhook_url=receiver.url, webhook_secret=SECRET, private_key_pem=KEY) as sandbox:
        manifest = {
            "url": "http://spark.example",
            "hook_attributes": {"url": receiver.url},
            "redirect_url": "http://spark.example/setup/callback",
            "default_events": ["pull_request", "issue_comment"],
        }
        confirmed = requests.post(
            f"{sandbox.url}/settings/apps/new/confirm",
            data={"manifest": json.dumps(manifest)},
            allow_redirects=False,
        )
        code = confirmed.headers["Location"].split("code=")[1].split("&")[0]
        app = requests.post(f"{sandbox.url}/app-manifests/{code}/conversions").json()
        assert app["events"] == ["pull_request", "issue_comment"]
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", {"a.py": "x = 1\n"}, installation)
        number = sandbox.open_pull_request("acme/app", "feature", {"a.py": "x = 2\n"}, author="dev")
        sandbox.review_comment("acme/app", number, "a.py", 1, "why?", author="dev")
        sandbox.push("acme/app", "feature", {"a.py": "x = 3\n"}, author="dev")
        sandbox.comment("acme/app", number, "hello", author="dev")
        sandbox.wait_for_deliveries()
    received = [(h["X-GitHub-Event"], json.loads(b).get("action")) for h, b in receiver.received]
    # No pull_request_review, pull_request_review_comment or push: the App did not subscribe to them.
    assert received == [
        ("pull_request", "opened"),
        ("pull_request", "synchronize"),
        ("issue_comment", "created"),
    ]


def test_a_check_run_on_a_forks_head_lists_no_pull_request(gh: GitHubSandbox, receiver: Receiver) -> None:
    # "The Checks API only looks for pushes in the repository where the check suite or check run were created.
    # Pushes to a branch in a forked repository are not detected and return an empty pull_requests array"
    # (https://docs.github.com/rest/checks/runs).
    forked = gh.open_pull_request("acme/app", "patch", {"a.py": "x = 9\n"}, author="eve", fork_owner="eve")
    repo = gh.client(next(iter(gh.state.installations))).get_repo("acme/app")
    same = repo.create_check_run(name="Spark", head_sha=gh.head_sha("acme/app", 1))
    fork = repo.create_check_run(name="Spark", head_sha=gh.head_sha("acme/app", forked))
    assert [p.number for p in same.pull_requests] == [1]
    assert fork.pull_requests == []
    gh.rerequest_check_run(same.id, author="dev")
    gh.rerequest_check_run(fork.id, author="dev")
    gh.wait_for_deliveries()
    runs = [json.loads(b)["check_run"] for h, b in receiver.received if h["X-GitHub-Event"] == "check_run"]
    assert [[p["number"] for p in run["pull_requests"]] for run in runs] == [[1], []]
