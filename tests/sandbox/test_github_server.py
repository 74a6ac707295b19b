"""The sandbox's HTTP server: its Flask app is built before the first request, not by the first requests."""

from __future__ import annotations

import subprocess
import sys
import textwrap

FIRST_REQUESTS = textwrap.dedent(
    """
    import collections, threading, requests
    from sandbox.github import GitHubSandbox
    from sandbox.github import server

    with GitHubSandbox() as gh:
        assert server._APP, "the app is built by start(), before any request"
        installation = gh.create_installation("acme")
        gh.create_repo("acme/r", {"a.py": "x = 1\\n"}, installation_id=installation)
        token = gh.auth.mint(installation).token
        statuses = collections.Counter()
        barrier = threading.Barrier(16)
        paths = ["/repos/acme/r/contents/a.py", "/repos/acme/r", "/repos/acme/r/commits/main"]
        paths.append("/repos/acme/r/git/trees/main")

        def first(i):
            barrier.wait()
            answer = requests.get(gh.url + paths[i % 4], headers={"Authorization": "token " + token})
            statuses[answer.status_code] += 1

        threads = [threading.Thread(target=first, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(dict(statuses))
    """
)


def test_first_parallel_requests_of_a_fresh_process_all_succeed() -> None:
    # A fresh interpreter: the process-wide app does not exist yet when the sandbox starts.
    done = subprocess.run(
        [sys.executable, "-c", FIRST_REQUESTS], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{200: 16}"
