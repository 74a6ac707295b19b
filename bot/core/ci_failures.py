"""Failures in a CI log as (tool, file, line, message): one reader per tool's format, then a generic one."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from bot.core.ci_log import LogLine


@dataclass(frozen=True, slots=True)
class Failure:
    """One thing a check blamed: where to fix it and what the tool said."""

    tool: str
    path: str  # relative to the repository, or a bare file name the log gave (go test)
    line: int | None
    message: str
    column: int | None = None
    via: str | None = None  # the test a traceback started in, when it ends in another file
    test: str | None = None
    scope: str | None = None  # a package the bare path belongs to (go test), to tell same-named files apart
    log_line: int = 0  # the number of the log line that named it

    @property
    def where(self) -> str:
        """``path:line`` (or the path alone)."""
        return f"{self.path}:{self.line}" if self.line else self.path


# Where a runner checks the repository out; what follows it is the path in the repository.
_WORKSPACE = re.compile(
    r"^(?:/home/runner/work/[^/]+/[^/]+/|/__w/[^/]+/[^/]+/|/github/workspace/|/Users/runner/work/[^/]+/[^/]+/"
    r"|[A-Za-z]:/a/[^/]+/[^/]+/)"
)
# Paths that are never the repository's own files: toolchains, installed packages, generated frames.
_FOREIGN = re.compile(
    r"(?:^|/)(?:site-packages|dist-packages|node_modules|\.cargo|\.rustup|hostedtoolcache|go/pkg/mod|\.venv|venv)/"
    r"|^<|^\.\./|^/rustc/|^internal/|^node:"
)
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_PATH = r"[^\s:()'\"<>|]+\.[A-Za-z0-9]{1,10}"


def repo_path(raw: str) -> str | None:
    """The repository path a log's path names, or ``None`` for a file outside the repository."""
    path = raw.strip().strip("'\"").replace("\\", "/")
    path = _WORKSPACE.sub("", path, count=1)
    while path.startswith("./"):
        path = path[2:]
    if not path or path.startswith("/") or _FOREIGN.search(path) or not _EXTENSION.search(path):
        return None
    if re.match(r"^[A-Za-z]:/", path) or "://" in path:
        return None
    return path


_TOOLS = (
    ("cargo test", "cargo test"),
    ("cargo clippy", "clippy"),
    ("cargo", "cargo"),
    ("go vet", "go vet"),
    ("go test", "go test"),
    ("go build", "go"),
    ("golangci-lint", "golangci-lint"),
    ("ruff", "ruff"),
    ("flake8", "flake8"),
    ("pylint", "pylint"),
    ("mypy", "mypy"),
    ("pyright", "pyright"),
    ("pytest", "pytest"),
    ("unittest", "unittest"),
    ("eslint", "eslint"),
    ("tsc", "tsc"),
    ("vitest", "vitest"),
    ("jest", "jest"),
)


def tool_of(step: str, default: str) -> str:
    """The tool a step ran, read from its command (``Run ruff check .`` is ruff), else ``default``."""
    lowered = step.lower()
    for needle, name in _TOOLS:
        if re.search(rf"(?:^|[\s/]){re.escape(needle)}(?:$|[\s.@])", lowered):
            return name
    return default


Parser = Callable[[Sequence[LogLine], set[int]], list[Failure]]

# ---- Python: pytest's sections and summary, tracebacks (unittest, scripts) ----

_PYTEST_BANNER = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_PYTEST_TITLE = re.compile(r"^_{3,} (?P<title>.+?) _{3,}$")
_PYTEST_END = re.compile(r"^=+ .* =+$|^=+$")
_PYTEST_LOCATION = re.compile(rf"^(?P<path>{_PATH}):(?P<line>\d+): ?(?P<rest>.*)$")
_PY_FILE = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)\b|assert\b|Failed\b)"
)
_PYTEST_SUMMARY = re.compile(
    rf"^(?P<kind>FAILED|ERROR) (?P<path>{_PATH})(?:::(?P<test>\S+))?(?: - (?P<msg>.*))?$"
)


def _frames_failure(
    tool: str, frames: list[tuple[str, int]], message: str, test: str | None, log_line: int
) -> Failure | None:
    """The failure at the deepest frame inside the repository; ``via`` the test file it started in."""
    inside = [(path, line) for raw, line in frames if (path := repo_path(raw)) is not None]
    if not inside:
        return None
    path, line = inside[-1]
    origin = inside[0][0]
    return Failure(
        tool, path, line, message, via=origin if origin != path else None, test=test, log_line=log_line
    )


def _pytest(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    tested: set[str] = set()
    index = 0
    in_report = False
    while index < len(lines):
        text = lines[index].text
        if _PYTEST_BANNER.match(text):
            in_report = True
            claimed.add(index)
            index += 1
            continue
        title = _PYTEST_TITLE.match(text) if in_report else None
        if title is None:
            if in_report and _PYTEST_END.match(text):
                in_report = False
            index += 1
            continue
        start = index
        index += 1
        while index < len(lines) and not _PYTEST_TITLE.match(lines[index].text):
            if _PYTEST_END.match(lines[index].text):
                break
            index += 1
        section = lines[start:index]
        claimed.update(range(start, index))
        frames: list[tuple[str, int]] = []
        raised: list[str] = []
        for line in section[1:]:
            location = _PYTEST_LOCATION.match(line.text)
            if location:
                frames.append((location["path"], int(location["line"])))
            elif line.text.startswith("E "):
                said = line.text[1:].strip()
                inner = _PY_FILE.search(said)
                if inner:  # a SyntaxError while importing: the file that does not parse
                    frames.append((inner["path"], int(inner["line"])))
                raised.append(said)
        name = title["title"]
        collecting = name.removeprefix("ERROR collecting ").strip()
        test = name if not name.startswith("ERROR collecting") else collecting
        if name.startswith("ERROR collecting") and not frames:
            frames.append((collecting, 0))
        message = next((said for said in raised if _EXCEPTION.match(said)), raised[0] if raised else name)
        tool = tool_of(lines[start].step, "pytest")
        failure = _frames_failure(tool, frames, message, test, lines[start].number)
        if failure is not None:
            failures.append(replace(failure, line=failure.line or None))
            tested.add(test.split("[")[0].split("::")[-1])
    for index, line in enumerate(lines):
        summary = _PYTEST_SUMMARY.match(line.text)
        if summary is None:
            continue
        test = summary["test"] or summary["path"]
        named = test.split("[")[0].split("::")[-1]
        if summary["test"] is not None or summary["kind"] == "ERROR":
            claimed.add(index)
        if named in tested or (summary["kind"] == "ERROR" and summary["path"] in tested):
            continue
        path = repo_path(summary["path"])
        if path is not None and summary["test"] is not None:
            tested.add(named)
            failures.append(
                Failure(
                    tool_of(line.step, "pytest"),
                    path,
                    None,
                    summary["msg"] or test,
                    test=test,
                    log_line=line.number,
                )
            )
    return failures


_TRACEBACK = "Traceback (most recent call last):"
_UNITTEST_TEST = re.compile(r"^(?:FAIL|ERROR): (?P<test>\S+)")


def _python_traceback(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    test: str | None = None
    index = 0
    while index < len(lines):
        text = lines[index].text
        named = _UNITTEST_TEST.match(text)
        if named:
            test = named["test"]
        if text.strip() != _TRACEBACK or index in claimed:
            index += 1
            continue
        start = index
        indent = len(text) - len(text.lstrip())
        frames: list[tuple[str, int]] = []
        index += 1
        message = ""
        while index < len(lines):
            current = lines[index].text
            frame = _PY_FILE.search(current)
            if frame:
                frames.append((frame["path"], int(frame["line"])))
            elif current.strip() and len(current) - len(current.lstrip()) <= indent:
                message = current.strip()
                break
            index += 1
        claimed.update(range(start, index + 1))
        tool = tool_of(lines[start].step, "unittest" if test else "python")
        failure = _frames_failure(tool, frames, message, test, lines[start].number)
        if failure is not None:
            failures.append(failure)
        test = None
        index += 1
    return failures


# ---- compilers and linters with a located block: rustc/cargo and ruff's full format (" --> path:l:c") ----

_ARROW = re.compile(rf"^\s*--> (?P<path>{_PATH}):(?P<line>\d+):(?P<col>\d+)$")
_HEADER = re.compile(r"^(?P<head>\S.*)$")
_PANIC = re.compile(rf"panicked at (?P<path>{_PATH}):(?P<line>\d+):(?P<col>\d+):?$")
_THREAD = re.compile(r"^thread '(?P<test>[^']+)'")


def _arrow(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    for index, line in enumerate(lines):
        arrow = _ARROW.match(line.text)
        if arrow:
            header = next(
                (
                    lines[back].text
                    for back in range(index - 1, max(index - 4, -1), -1)
                    if _HEADER.match(lines[back].text)
                ),
                "",
            )
            claimed.add(index)
            path = repo_path(arrow["path"])
            if path is None or header.startswith(("warning", "note", "help")):
                continue
            failures.append(
                Failure(
                    tool_of(line.step, "rustc"),
                    path,
                    int(arrow["line"]),
                    header,
                    column=int(arrow["col"]),
                    log_line=line.number,
                )
            )
            continue
        panic = _PANIC.search(line.text)
        if panic and (path := repo_path(panic["path"])) is not None:
            claimed.add(index)
            thread = _THREAD.match(line.text)
            said = lines[index + 1].text.strip() if index + 1 < len(lines) else "panicked"
            failures.append(
                Failure(
                    tool_of(line.step, "cargo test"),
                    path,
                    int(panic["line"]),
                    said,
                    column=int(panic["col"]),
                    test=thread["test"] if thread else None,
                    log_line=line.number,
                )
            )
    return failures


# ---- eslint's stylish report (a file, then "line:col  error  message  rule") ----

_ESLINT_FILE = re.compile(rf"^(?P<path>/?{_PATH})$")
_ESLINT_ROW = re.compile(
    r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<level>error|warning)\s+(?P<msg>.+?)(?:\s{2,}(?P<rule>\S+))?$"
)


def _eslint(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    current: str | None = None
    for index, line in enumerate(lines):
        header = _ESLINT_FILE.match(line.text)
        if header:
            current = header["path"]
            continue
        row = _ESLINT_ROW.match(line.text) if current is not None else None
        if row is None:
            if line.text.strip() == "":
                current = None
            continue
        claimed.add(index)
        path = repo_path(current or "")
        if path is None or row["level"] != "error":
            continue
        rule = f" ({row['rule']})" if row["rule"] else ""
        failures.append(
            Failure(
                tool_of(line.step, "eslint"),
                path,
                int(row["line"]),
                row["msg"] + rule,
                column=int(row["col"]),
                log_line=line.number,
            )
        )
    return failures


# ---- "path:l:c - error ..." (pyright, tsc --pretty) and "path(l,c): error TSnnnn: ..." (tsc) ----

_DASH = re.compile(
    rf"^\s*(?P<path>/?{_PATH}):(?P<line>\d+):(?P<col>\d+) - (?P<level>error|warning|information|info)"
    r"(?P<msg>.*)$"
)
_PAREN = re.compile(
    rf"^(?P<path>/?{_PATH})\((?P<line>\d+),(?P<col>\d+)\): (?P<level>error|warning)(?P<msg>.*)$"
)


def _dash(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    for index, line in enumerate(lines):
        match = _DASH.match(line.text) or _PAREN.match(line.text)
        if match is None:
            continue
        claimed.add(index)
        path = repo_path(match["path"])
        if path is None or match["level"] != "error":
            continue
        message = match["msg"].lstrip(":").strip()
        default = "tsc" if message.startswith("TS") else "pyright"
        failures.append(
            Failure(
                tool_of(line.step, default),
                path,
                int(match["line"]),
                message,
                column=int(match["col"]),
                log_line=line.number,
            )
        )
    return failures


# ---- jest and vitest: a failing test's header, its message, then its stack (innermost first) ----

_JEST_TEST = re.compile(r"^\s*● (?P<name>.+)$")
_VITEST_TEST = re.compile(rf"^\s*FAIL\s+(?P<file>{_PATH}) > (?P<name>.+)$")
_JS_FRAME = re.compile(
    rf"^\s*(?:at (?:.*? \()?|❯ (?:\S+ )?)(?:file://)?(?P<path>/?{_PATH}):(?P<line>\d+):(?P<col>\d+)\)?$"
)
_JS_END = re.compile(r"^\s*(?:FAIL|PASS)\s|^\s*(?:Test Suites|Test Files|Tests):|^\s*⎯{3,}|^\s*● ")


def _js_tests(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    index = 0
    while index < len(lines):
        header = _JEST_TEST.match(lines[index].text) or _VITEST_TEST.match(lines[index].text)
        if header is None:
            index += 1
            continue
        start = index
        index += 1
        frames: list[tuple[str, int]] = []
        message = ""
        while index < len(lines) and not _JS_END.match(lines[index].text):
            text = lines[index].text
            frame = _JS_FRAME.match(text)
            if frame:
                frames.append((frame["path"], int(frame["line"])))
            elif not message and text.strip() and not re.match(r"^\s*>?\s*\d*\s*\|", text):
                message = text.strip()
            index += 1
        claimed.update(range(start, index))
        tool = tool_of(lines[start].step, "vitest" if header.re is _VITEST_TEST else "jest")
        # A JavaScript stack lists the innermost frame first.
        failure = _frames_failure(tool, frames[::-1], message, header["name"], lines[start].number)
        if failure is not None:
            failures.append(failure)
    return failures


# ---- go test: "    file_test.go:7: message" under a failing test, and a panic's goroutine frames ----

_GO_TEST_LINE = re.compile(r"^\s{4,}(?P<path>[\w.-]+\.go):(?P<line>\d+): (?P<msg>.*)$")
_GO_FAIL_TEST = re.compile(r"^\s*--- FAIL: (?P<test>\S+)")
_GO_PACKAGE = re.compile(r"^(?:FAIL|ok)\s+(?P<package>\S+)")
_GO_PANIC = re.compile(r"^panic: (?P<msg>.*)$")
_GO_FRAME = re.compile(r"^\t(?P<path>\S+\.go):(?P<line>\d+)(?: \+0x[0-9a-f]+)?$")


def _go_test(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    pending: list[int] = []  # failures waiting for their package's FAIL line
    test: str | None = None
    index = 0
    while index < len(lines):
        text = lines[index].text
        failing = _GO_FAIL_TEST.match(text)
        if failing:
            test = failing["test"]
        package = _GO_PACKAGE.match(text)
        if package:
            for waiting in pending:
                failures[waiting] = replace(failures[waiting], scope=package["package"])
            pending = []
        said = _GO_TEST_LINE.match(text)
        if said:
            claimed.add(index)
            pending.append(len(failures))
            failures.append(
                Failure(
                    tool_of(lines[index].step, "go test"),
                    said["path"],
                    int(said["line"]),
                    said["msg"],
                    test=test,
                    log_line=lines[index].number,
                )
            )
        panic = _GO_PANIC.match(text)
        if panic:
            start = index
            frames: list[tuple[str, int]] = []
            index += 1
            while index < len(lines) and not _GO_PACKAGE.match(lines[index].text):
                frame = _GO_FRAME.match(lines[index].text)
                if frame:
                    frames.append((frame["path"], int(frame["line"])))
                index += 1
            claimed.update(range(start, index))
            # Go prints the innermost frame first.
            failure = _frames_failure(
                tool_of(lines[start].step, "go test"), frames[::-1], panic["msg"], test, lines[start].number
            )
            if failure is not None:
                failures.append(failure)
            continue
        index += 1
    return failures


# ---- the generic reader: "path:line[:col]: message" (ruff, flake8, pylint, mypy, go build and vet, ...) ----

_GENERIC = re.compile(rf"^\s*(?P<path>/?{_PATH}):(?P<line>\d+)(?::(?P<col>\d+))?:? (?P<msg>\S.*)$")
_NOT_A_FAILURE = re.compile(r"^(?:note|warning|info|information|hint|help)\b:?", re.IGNORECASE)


def _generic(lines: Sequence[LogLine], claimed: set[int]) -> list[Failure]:
    failures: list[Failure] = []
    for index, line in enumerate(lines):
        if index in claimed or line.kind in ("group", "command", "debug"):
            continue
        match = _GENERIC.match(line.text)
        if match is None or _NOT_A_FAILURE.match(match["msg"]):
            continue
        path = repo_path(match["path"])
        if path is None:
            continue
        message = re.sub(r"^error:\s*", "", match["msg"]).strip()
        failures.append(
            Failure(
                tool_of(line.step, "lint"),
                path,
                int(match["line"]),
                message,
                column=int(match["col"]) if match["col"] else None,
                log_line=line.number,
            )
        )
    return failures


# Specific readers first: each claims the lines it understood, so the generic one does not read them again.
PARSERS: tuple[Parser, ...] = (
    _pytest,
    _python_traceback,
    _arrow,
    _eslint,
    _dash,
    _js_tests,
    _go_test,
    _generic,
)


def parse_failures(lines: Sequence[LogLine]) -> list[Failure]:
    """Every failure the log's lines blame, in log order, each once."""
    claimed: set[int] = set()
    found: list[Failure] = []
    for parser in PARSERS:
        found += parser(lines, claimed)
    unique = {(f.tool, f.path, f.line, f.column, f.message): f for f in found}
    return sorted(unique.values(), key=lambda failure: failure.log_line)


def locate(failure: Failure, files: Collection[str]) -> str | None:
    """The repository file a failure names: its path, or the one file ending with it (a bare name)."""
    if failure.path in files:
        return failure.path
    suffix = "/" + failure.path
    matches = [path for path in files if path.endswith(suffix)]
    if len(matches) > 1 and failure.scope:
        matches = [path for path in matches if failure.scope.endswith("/" + path.rsplit("/", 1)[0])]
    return matches[0] if len(matches) == 1 else None
