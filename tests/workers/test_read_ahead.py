"""What a flow reads ahead at the head last seen is read once, whichever of its callers asks first."""

from __future__ import annotations

import threading
from collections import Counter

from bot.adapters.github_port import PullInfo
from workers.flows.read_ahead import ReadAhead
from workers.memory.last_seen import Seen

HEAD = "a" * 40
MOVED = "c" * 40
SEEN = Seen(head_sha=HEAD, base_repo="acme/shop", base_ref="main")


def pull(head: str = HEAD) -> PullInfo:
    """Return the pull request at ``head``."""
    return PullInfo(
        1, "t", "", "open", False, "alice", head, "f", "acme/shop", "b" * 40, "main", "acme/shop", True
    )


class Reader:
    """Counts the reads of each (head, path); each read is still under way until ``release``."""

    def __init__(self) -> None:
        self.reads: Counter[tuple[str, str]] = Counter()
        self.release = threading.Event()

    def __call__(self, repo: str, sha: str, path: str) -> str:
        self.reads[(sha, path)] += 1
        self.release.wait(5)
        return f"{path} at {sha[:1]}"


def test_a_path_the_flow_reads_and_the_annotations_then_name_is_read_once() -> None:
    """The fix asks for a file it did not read ahead, then the CI job's annotations name it: one read."""
    reader = Reader()
    ahead = ReadAhead(SEEN, reader)
    first = ahead.file(pull(), "src/b.py")
    ahead.start_more(pull(), ["src/b.py", "src/a.py"])
    again = ahead.file(pull(), "src/b.py")
    reader.release.set()
    assert first.result() == again.result() == "src/b.py at a"
    assert reader.reads == {(HEAD, "src/b.py"): 1, (HEAD, "src/a.py"): 1}


def test_a_read_at_another_head_is_never_kept_as_the_head_seen() -> None:
    reader = Reader()
    ahead = ReadAhead(SEEN, reader)
    reader.release.set()
    assert ahead.file(pull(MOVED), "src/b.py").result() == "src/b.py at c"
    assert ahead.held(pull(MOVED)) == {} and "src/b.py" not in ahead.held(pull())
    assert ahead.file(pull(), "src/b.py").result() == "src/b.py at a"
    assert reader.reads == {(MOVED, "src/b.py"): 1, (HEAD, "src/b.py"): 1}
