"""Reading a job log as it streams: framing removed, the failing step's tail and the lines around errors kept,
memory bounded whatever the log's size."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.ci_failures import Failure, locate, parse_failures, repo_path, tool_of
from bot.core.ci_log import LogReader, clean_lines, read_log

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "ci_logs"
STAMP = "2026-11-28T17:02:11.1234567Z "


def _log(*lines: str, first: bool = False) -> bytes:
    """Job-log lines; the first chunk of a log starts with a byte-order mark."""
    return (("\ufeff" if first else "") + "".join(STAMP + line + "\n" for line in lines)).encode()


def test_timestamps_colours_and_the_byte_order_mark_are_removed() -> None:
    excerpt = read_log(
        [
            _log(
                "##[group]Run ruff check .",
                "\x1b[1mF401\x1b[0m unused",
                "##[error]Process completed",
                first=True,
            )
        ]
    )
    assert [line.text for line in excerpt.lines] == ["Run ruff check .", "F401 unused", "Process completed"]
    assert [line.kind for line in excerpt.lines] == ["group", "", "error"]
    assert excerpt.failing_steps == ("ruff check .",)


def test_only_the_failing_step_is_kept() -> None:
    excerpt = read_log(
        context=1,
        chunks=[
            _log(
                "##[group]Run actions/checkout@v4",
                "checked out",
                "##[group]Run pytest",
                "tests/x.py:3: AssertionError",
                "##[error]Process completed with exit code 1.",
                "##[group]Run echo done",
                "done",
            )
        ],
    )
    assert "checked out" not in [line.text for line in excerpt.lines]
    assert "done" not in [line.text for line in excerpt.lines]
    assert [line.step for line in excerpt.tail(2)] == ["pytest", "pytest"]
    assert excerpt.errors[0].number == 5


def test_a_log_split_anywhere_reads_the_same() -> None:
    data = (LOGS / "pytest.log").read_bytes()
    whole = read_log([data])
    for size in (1, 7, 64, 4096):
        assert read_log([data[i : i + size] for i in range(0, len(data), size)]) == whole


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len((LOGS / "jest.log").read_bytes())), max_size=8))
def test_any_chunking_of_a_real_log_gives_the_same_failures(cuts: list[int]) -> None:
    data = (LOGS / "jest.log").read_bytes()
    edges = [0, *sorted(cuts), len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(edges)]
    assert parse_failures(read_log(chunks).lines) == parse_failures(read_log([data]).lines)


def test_a_huge_step_keeps_its_tail_and_the_lines_around_an_early_error() -> None:
    reader = LogReader(step_tail=100, context=5)
    reader.feed(_log("##[group]Run make", "src/early.c:3: error: boom"))
    noise = _log(*(f"compiling unit {n}" for n in range(1000)))
    for _ in range(200):  # 200,000 lines
        reader.feed(noise)
    reader.feed(_log("##[error]Process completed with exit code 2."))
    excerpt = reader.finish()
    assert excerpt.total_lines == 200_003
    assert excerpt.truncated
    assert len(excerpt.lines) <= 100 + 2 * 5 + 2
    texts = [line.text for line in excerpt.lines]
    assert "src/early.c:3: error: boom" not in texts  # no ##[error] near it: only the tail is kept
    assert texts[-1] == "Process completed with exit code 2."


def test_an_annotated_error_keeps_its_context_even_far_from_the_tail() -> None:
    reader = LogReader(step_tail=50, context=3)
    lines = ["##[group]Run ruff check --output-format=github ."]
    lines += [f"line {n}" for n in range(10)]
    lines += ["##[error]src/a.py:4:1: F401 unused", "after 1", "after 2", "after 3", "after 4"]
    lines += [f"filler {n}" for n in range(500)]
    lines += ["##[error]Process completed with exit code 1."]
    reader.feed(_log(*lines))
    excerpt = reader.finish()
    texts = [line.text for line in excerpt.lines]
    assert texts[:7] == [
        "line 7",
        "line 8",
        "line 9",
        "src/a.py:4:1: F401 unused",
        "after 1",
        "after 2",
        "after 3",
    ]
    assert texts[7:] == [f"filler {n}" for n in range(451, 500)] + ["Process completed with exit code 1."]
    assert "after 4" not in texts
    assert [(f.path, f.line) for f in parse_failures(excerpt.lines)] == [("src/a.py", 4)]


def test_an_endless_line_is_cut_not_held() -> None:
    reader = LogReader(max_line=1000)
    reader.feed(_log("##[group]Run build"))
    for _ in range(1000):
        reader.feed(b"x" * 10_000)  # 10 MB without a newline
    reader.feed(b"\n" + _log("##[error]Process completed with exit code 1."))
    excerpt = reader.finish()
    assert excerpt.truncated
    assert max(len(line.text) for line in excerpt.lines) <= 1000
    assert excerpt.total_bytes > 10_000_000


def test_a_log_no_parser_understands_still_has_its_error_tail() -> None:
    excerpt = read_log(
        [
            _log(
                "##[group]Run ./build.sh",
                "Segmentation fault (core dumped)",
                "##[error]Process completed with exit code 139.",
            )
        ]
    )
    assert parse_failures(excerpt.lines) == []
    assert [line.text for line in excerpt.tail(2)] == [
        "Segmentation fault (core dumped)",
        "Process completed with exit code 139.",
    ]


def test_repository_paths() -> None:
    assert repo_path("/home/runner/work/shop/shop/src/a.py") == "src/a.py"
    assert repo_path("./src/lib.rs") == "src/lib.rs"
    assert repo_path("D:\\a\\shop\\shop\\src\\a.ts") == "src/a.ts"
    assert repo_path("/opt/hostedtoolcache/Python/3.12/x64/lib/python3.12/json/decoder.py") is None
    assert repo_path("node_modules/jest-runtime/build/index.js") is None
    assert repo_path("<frozen importlib._bootstrap>") is None
    assert repo_path("/rustc/abc/library/core/src/panicking.rs") is None
    assert repo_path("https://example.com/x.html") is None
    assert repo_path("Makefile") is None


def test_the_tool_is_read_from_the_step() -> None:
    assert tool_of("ruff check --output-format=github .", "lint") == "ruff"
    assert tool_of("python -m pytest -x", "lint") == "pytest"
    assert tool_of("npx vitest run", "jest") == "vitest"
    assert tool_of("cargo test --all", "rustc") == "cargo test"
    assert tool_of("make check", "lint") == "lint"


def test_warnings_and_notes_are_not_failures() -> None:
    lines = clean_lines(
        "src/a.py:3: note: Revealed type is int\nsrc/a.py:4: error: Name x is not defined\n"
        "src/b.py:1:1: warning: deprecated\n"
    )
    excerpt = read_log([_log("##[group]Run mypy .", *lines, "##[error]Process completed with exit code 1.")])
    assert [(f.path, f.line, f.message) for f in parse_failures(excerpt.lines)] == [
        ("src/a.py", 4, "Name x is not defined")
    ]


def test_a_bare_name_is_located_in_its_package() -> None:
    failure = Failure("go test", "price_test.go", 7, "bad", scope="example.com/shop/testme")
    assert locate(failure, ["a/price_test.go", "testme/price_test.go"]) == "testme/price_test.go"
    assert locate(failure, ["testme/price_test.go"]) == "testme/price_test.go"
    assert (
        locate(Failure("go test", "price_test.go", 7, "bad"), ["a/price_test.go", "b/price_test.go"]) is None
    )
