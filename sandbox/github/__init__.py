"""A local GitHub speaking REST and GraphQL wire formats, for tests, the demo and benchmarks.

Typical use (the real PyGithub client only needs ``base_url``)::

    with GitHubSandbox(webhook_url="http://127.0.0.1:8000/api/github/webhooks") as gh:
        installation = gh.create_installation("acme")
        gh.create_repo("acme/app", {"app.py": "x = 1\\n"}, installation)
        number = gh.open_pull_request("acme/app", "fix", {"app.py": "x = 2\\n"}, author="dev")
        gh.comment("acme/app", number, "/spark fix use y", author="dev")   # fires issue_comment
        gh.wait_for_deliveries()
        github = gh.client(installation)          # or Auth.AppAuth(gh.app_id, gh.private_key_pem)
        gh.faults.latency = 0.06                  # every call 60 ms slower
        gh.faults.secondary_rate_limit("GET", r"/pulls/\\d+$", retry_after=1)
        gh.commits("acme/app", "fix")             # what the bot did: sha, message, author, verified
        gh.push("acme/app", "fix", {"link.py": Symlink("app.py"), "lib": Submodule(url, sha)})

GitHub's documented rules apply: the contents API's size tiers, symlinks and submodules, diffs computed by git
with GitHub's diff limits (406, patches left out, 3,000 listed files), check runs on a fork's head without
pull requests, and webhooks only for the events the App subscribed to (``events=``, or its manifest).

Layout: ``state`` (git objects, repos, PRs, comments), ``service`` (GitHub's rules and the webhooks each
change fires), ``server`` (auth, limits, faults) with ``routes`` (one blueprint per API area, the App
Manifest flow among them) and ``shapes`` (REST JSON), ``graphql``, ``auth`` (App JWT, installation tokens),
``webhooks`` (signed deliveries), ``faults``, ``sandbox`` (this handle).
"""

from sandbox.github.sandbox import GitHubSandbox
from sandbox.github.state import Submodule, Symlink

__all__ = ["GitHubSandbox", "Submodule", "Symlink"]
