"""Which files ``/spark fix`` edits: the files the user named (in the repository), else a best match.

A file the instruction names is a target whether or not the pull request changed it, as long as it exists at
the head and the path rules allow it. When the user named files, Spark edits those or nothing: a name that
resolves to a file Spark may not edit is refused with the reason before any model call, never swapped for
another file. A word that does not name one file (no such file at the head, a path outside the repository, a
bare name of several files) does not veto a request that names a file Spark can fix: the reply says it was not
taken for a file; when no name resolves, the request is refused with the reasons and the closest paths.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from bot.core.policy import check_target_path
from bot.core.render import code, prose
from bot.core.types import Diff, FileStatus

# Spark fixes one file per model call; an instruction naming more files fans out, up to this many.
MAX_TARGETS = 4
CLOSEST = 3

# What a word must look like to be taken for a file name when it is not a path of the pull request: a known
# source or text extension ("conf.py"), a file name that has none ("Makefile"), or explicit path syntax.
_EXTENSIONS = frozenset(
    (
        "py", "pyi", "pyx", "pxd", "ipynb", "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts", "vue",
        "svelte", "go", "rs", "java", "kt", "kts", "scala", "groovy", "gradle", "rb", "rake", "php", "c",
        "h", "cc", "cpp", "cxx", "hh", "hpp", "hxx", "m", "mm", "cs", "fs", "swift", "dart", "lua", "pl",
        "pm", "r", "jl", "ex", "exs", "erl", "hrl", "clj", "cljs", "elm", "hs", "ml", "mli", "sh", "bash",
        "zsh", "fish", "ps1", "bat", "cmd", "sql", "graphql", "proto", "thrift", "html", "htm", "css",
        "scss", "sass", "less", "xml", "xsl", "svg", "json", "jsonc", "json5", "yml", "yaml", "toml",
        "ini", "cfg", "conf", "env", "properties", "lock", "md", "mdx", "rst", "txt", "adoc", "tex",
        "csv", "tsv", "tf", "tfvars", "hcl", "nix", "dockerfile", "mk", "cmake", "in", "tmpl", "j2",
        "jinja", "jinja2", "mustache", "hbs", "ejs", "erb", "twig",
    )
)  # fmt: skip
_BARE_NAMES = frozenset(
    (
        "Makefile", "GNUmakefile", "Dockerfile", "Containerfile", "Gemfile", "Rakefile", "Procfile",
        "Jenkinsfile", "Vagrantfile", "Brewfile", "Justfile", "LICENSE", "README", "CODEOWNERS",
        "CHANGELOG",
    )
)  # fmt: skip
# Dotfiles named like an extension: other ".html", ".svg" in prose are extensions (a repository's dotfile
# of that name is still found: see _FILE_WORD).
_DOTFILES = frozenset((".env",))
# Names of tools and libraries that look like file names in prose ("breaks on Node.js").
_NOT_FILES = frozenset(
    (
        "node.js", "vue.js", "next.js", "nuxt.js", "react.js", "angular.js", "ember.js", "backbone.js",
        "express.js", "nest.js", "three.js", "chart.js", "d3.js", "p5.js", "alpine.js", "solid.js",
        "socket.io",
    )
)  # fmt: skip
# A name in backticks or quotes (taken whole, spaces and all), or a word separated by spaces, commas,
# parentheses or quotes (a backslash-escaped space, ``my\\ notes.py``, stays in the word).
_WORD = re.compile(
    r"`([^`\n]+)`|(?<![\w\\])\"([^\"\n]+)\"(?!\w)|(?<![\w\\])'([^'\n]+)'(?!\w)"
    r"|((?:\\ |[^\s`,;()\[\]{}<>\"'])+)"
)
# Trailing punctuation of prose ("fix setup.py."), a line suffix ("app.py:42"); an anchor goes first.
_TRAILING = re.compile(r"(?::L?\d+(?:[-:]L?\d+)?)?[.:!?]*$")
# Version strings ("1.2.3", "v2.0.rc1") are no file names, whatever their last part.
_VERSION = re.compile(r"v?\d+(?:\.\d+)+(?:[.-]?[A-Za-z]+\d*)?", re.IGNORECASE)
# Extensionless names that are files only if the repository has them (looked up in its tree, which costs a
# call, so only names that are such files by convention): upper-case names ("CHANGES", "AUTHORS"), "...file"
# names ("Procfile"), dotfiles (".flake8"), and paths ("bin/release") in backticks or quotes or under a
# directory the pull request touches.
_CONVENTIONAL = frozenset(
    (
        "CHANGES", "CHANGELOG", "HISTORY", "NEWS", "AUTHORS", "CONTRIBUTORS", "MAINTAINERS", "OWNERS",
        "LICENSE", "LICENCE", "COPYING", "NOTICE", "PATENTS", "README", "INSTALL", "VERSION", "THANKS",
        "SECURITY", "CREDITS", "RELEASE", "UPGRADING",
    )
)  # fmt: skip
_FILE_WORD = re.compile(r"[A-Z][a-z]*file|\.[\w-][\w.-]*")
_PATH_WORD = re.compile(r"[\w.-]+(?:/[\w.-]+)+")


@dataclass(frozen=True, slots=True)
class Mention:
    """A file the instruction names: as the user wrote it and as a repository-relative path."""

    written: str
    path: str
    # A word that is a file name only if the repository has a file of that name ("CHANGES").
    maybe: bool = False
    # A quoted phrase's own names ("NameError in utils.py"), tried when the phrase as a whole is no file.
    inside: tuple[Mention, ...] = ()


@dataclass(frozen=True, slots=True)
class Refused:
    """A named file that cannot be a target, and why (words, paths in code spans; the reply renders it)."""

    written: str
    reason: str


@dataclass(frozen=True, slots=True)
class TargetChoice:
    """The files to fix, the named files refused or left out, the names that need the repository tree, and the
    words that looked like file names but were not taken for files (``not_files``, said in the reply)."""

    paths: tuple[str, ...] = ()
    refused: tuple[Refused, ...] = ()
    left_out: tuple[str, ...] = ()
    unresolved: tuple[Mention, ...] = ()
    named: bool = False
    not_files: tuple[Refused, ...] = ()


def mentioned_files(instruction: str, known: Collection[str] = (), *, maybe: bool = False) -> list[Mention]:
    """Return the files ``instruction`` names, in order, once each (paths, bare names, in backticks or not).

    A word in ``known`` (the pull request's paths) is a file name whatever it looks like. URLs, URL paths
    and anchors (``/guide/#x``), issue references, globs, versions and dotted names in code are not. With
    ``maybe``, extensionless words that name a file only if the repository has it are returned as such.
    """
    found: dict[str, Mention] = {}
    for match in _WORD.finditer(instruction):
        quoted = next((g for g in match.groups()[:3] if g is not None), None)
        raw = (quoted if quoted is not None else match.group(4)).strip()
        end = match.end()
        if not raw or "://" in raw or "@" in raw or instruction[end : end + 1] == "(" or raw.endswith(")"):
            continue  # a URL, an address or a call ("response.json()")
        if quoted is None:
            raw = raw.replace("\\ ", " ")
        path, _, anchor = raw.replace("\\", "/").partition("#")
        if anchor and not re.fullmatch(r"L\d+(?:-L\d+)?", anchor) and (not path or path.endswith("/")):
            continue  # an anchor or a URL path with one ("/guide/#intro"), an issue reference ("#12")
        path = _TRAILING.sub("", path)
        while path.startswith("./"):
            path = path[2:]
        if not path or any(c in path for c in "*?") or path.endswith("/"):
            continue  # a glob ("src/**/*.py"), a directory or URL path ("/guide/clients/")
        inside = tuple(mentioned_files(raw, known, maybe=maybe)) if quoted and " " in raw else ()
        if path in known or _looks_like_file(path, quoted=quoted is not None):
            found.setdefault(path, Mention(raw, path, inside=inside))
        elif maybe and _maybe_file(path, quoted is not None, known):
            found.setdefault(path, Mention(raw, path, maybe=True, inside=inside))
        else:
            for mention in inside:
                found.setdefault(mention.path, mention)
    return list(found.values())


def _maybe_file(path: str, quoted: bool, known: Collection[str]) -> bool:
    """Return whether an extensionless ``path`` is worth looking up in the repository's tree."""
    if path.startswith(("/", "~")):
        return False
    if path in _CONVENTIONAL or (_FILE_WORD.fullmatch(path) and path.lstrip(".").lower() not in _EXTENSIONS):
        return True
    if _PATH_WORD.fullmatch(path):
        top = path.split("/", 1)[0]
        return quoted or any(p.startswith(top + "/") for p in known)
    return False


def _looks_like_file(path: str, *, quoted: bool) -> bool:
    if path.startswith("../") or ".." in path.split("/") or (path[0] in "/~" and "/" in path[1:]):
        return True  # explicit path syntax ("../x", "/etc/passwd", "~/x"), refused as outside the repository
    name = path.rsplit("/", 1)[-1]
    if not quoted and name.lower() in _NOT_FILES:
        return False
    if name in _BARE_NAMES:
        return True
    if _VERSION.fullmatch(name):
        return False
    stem, dot, extension = name.rpartition(".")
    if not dot or not extension:
        return False
    if extension.lower() in _EXTENSIONS and (stem or name.lower() in _DOTFILES):
        return True
    # An unknown extension counts in backticks with a directory ("`data/model.onnx`").
    return quoted and "/" in path and bool(stem)


def choose_targets(
    instruction: str,
    diff: Diff,
    *,
    thread_path: str | None = None,
    tree: Collection[str] | None = None,
    tree_complete: bool = True,
    selects: Callable[[str], bool] | None = None,
) -> TargetChoice:
    """Return the files to fix: the thread's file and the files the instruction names, else the best match.

    ``tree`` holds every file path at the head; without it, names not found among the diff's files are
    returned as ``unresolved`` (the caller fetches the tree and asks again); a name missing from a tree that
    GitHub truncated is taken as the path it spells (reading it at the head decides). ``selects`` is the
    repository config's path filter. Deleted files, binary files and refused paths are never targets.
    """
    mentions = mentioned_files(instruction, {f.path for f in diff.files}, maybe=True)
    if thread_path is not None:
        mentions = [Mention(thread_path, thread_path), *(m for m in mentions if m.path != thread_path)]
    if mentions:
        choice = _resolve(mentions, diff, tree, tree_complete, selects)
        if choice.named:
            return choice
    candidates = [
        f.path
        for f in diff.files
        if f.status is not FileStatus.DELETED
        and not f.is_binary
        and check_target_path(f.path) is None
        and (selects is None or selects(f.path))
    ]
    if not candidates:
        return TargetChoice()
    words = {w.lower() for w in _SCORE_WORD.findall(instruction)} - _STOPWORDS

    def score(path: str) -> tuple[int, int, str]:
        file_diff = diff.file(path)
        assert file_diff is not None
        text = " ".join(dl.text for h in file_diff.hunks for dl in h.lines).lower()
        mentions = sum(1 for w in words if w in text or w in path.lower())
        return (mentions, len(file_diff.added_lines), path)

    return TargetChoice((max(candidates, key=score),))


def named_paths(text: str, paths: Collection[str]) -> list[str]:
    """Return the files ``text`` names, a bare name or tail as the one path of ``paths`` it ends, if one."""
    named = []
    for mention in mentioned_files(text, set(paths)):
        found = _find(mention.path, paths)
        named.append(found[0] if len(found) == 1 else mention.path)
    return list(dict.fromkeys(named))


def likely_targets(instruction: str, paths: Collection[str], thread_path: str | None = None) -> list[str]:
    """Return the files a fix will likely target, guessed before its diff is read from the ``paths`` it last
    changed: the thread's file and the files ``instruction`` names (at most ``MAX_TARGETS``); else each path,
    when there are no more than that (beyond it, the best match is anyone's guess).
    """
    named = named_paths(instruction, paths)
    if thread_path or named:
        wanted = [p for p in [thread_path, *named] if p and check_target_path(p) is None]
        return list(dict.fromkeys(wanted))[:MAX_TARGETS]
    return list(paths) if len(paths) <= MAX_TARGETS else []


def _resolve(
    mentions: Sequence[Mention],
    diff: Diff,
    tree: Collection[str] | None,
    tree_complete: bool,
    selects: Callable[[str], bool] | None,
) -> TargetChoice:
    """Resolve the named files; a choice with ``named`` False when every name was a word that is no file."""
    live = [f.path for f in diff.files if f.status is not FileStatus.DELETED]
    binary = {f.path for f in diff.files if f.is_binary}
    paths: list[str] = []
    # Each failed name, and whether it vetoes the request (a file that exists but may not be edited) or not
    # (a word that is no file of the repository, missing or outside it, or a bare name of several files).
    failed: list[tuple[Refused, bool]] = []
    unresolved: list[Mention] = []
    pending = list(mentions)
    while pending:
        mention = pending.pop(0)
        reason = check_target_path(mention.path)
        if reason is not None:
            outside = mention.path.startswith(("/", "~")) or ".." in mention.path.split("/")
            if not mention.maybe:
                failed.append((Refused(mention.path, _why_not(reason)), not outside))
            continue
        found = _find(mention.path, live)
        if not found and tree is not None:
            guess = not (tree_complete or mention.maybe or mention.inside)
            found = _find(mention.path, tree) or ([mention.path] if guess else [])
        if not found:
            if tree is None:
                unresolved.append(mention)
            elif mention.inside:
                pending[:0] = mention.inside  # a quoted phrase that is no file: the names in it
            elif not mention.maybe:
                failed.append((Refused(mention.path, _missing(mention.path, tree)), False))
            continue
        if len(found) > 1:
            if not mention.maybe:
                listed = ", ".join(code(p) for p in found[: CLOSEST + 2])
                failed.append(
                    (Refused(mention.path, f"names several files ({listed}); give the full path"), False)
                )
            continue
        [path] = found
        reason = _path_refusal(path, binary, selects)
        if reason is not None:
            failed.append((Refused(mention.path, reason), True))
        elif path not in paths:
            paths.append(path)
    names = tuple(r for r, _ in failed)
    if not paths and not failed and not unresolved:
        return TargetChoice()  # only words that name no file: the best match decides
    if any(veto for _, veto in failed) or not (paths or unresolved):
        return TargetChoice(refused=names, unresolved=tuple(unresolved), named=True)
    return TargetChoice(
        tuple(paths[:MAX_TARGETS]),
        (),
        tuple(paths[MAX_TARGETS:]),
        tuple(unresolved),
        named=True,
        not_files=tuple(r for r in names if not _spells(r.written, paths)),
    )


def _spells(name: str, paths: Sequence[str]) -> bool:
    """Return whether ``name`` is a target's name written loosely ("README" for ``README.md``)."""
    base = name.rsplit("/", 1)[-1].lower()
    return any(p.rsplit("/", 1)[-1].lower().startswith(base) for p in paths)


def _path_refusal(path: str, binary: Collection[str], selects: Callable[[str], bool] | None) -> str | None:
    """Return why the resolved ``path`` may not be edited (the same rules as for any target), else None."""
    reason = check_target_path(path)
    if reason is not None:
        return _why_not(reason)
    if path in binary:
        return f"{code(path)} is a binary file"
    if selects is not None and not selects(path):
        return f"{code(path)} is excluded by `review.paths` in `.github/spark.yml`"
    return None


def _find(name: str, paths: Collection[str]) -> list[str]:
    """Return the paths ``name`` denotes: itself, else every path it is the trailing part of."""
    if name in paths:
        return [name]
    suffix = "/" + name
    return sorted(p for p in paths if p.endswith(suffix))


def _missing(name: str, tree: Collection[str]) -> str:
    base = name.rsplit("/", 1)[-1]
    by_name = {p.rsplit("/", 1)[-1]: p for p in sorted(tree)}
    closest = difflib.get_close_matches(name, list(tree), n=CLOSEST, cutoff=0.6)
    closest += [by_name[b] for b in difflib.get_close_matches(base, list(by_name), n=CLOSEST, cutoff=0.6)]
    unique = list(dict.fromkeys(closest))[:CLOSEST]
    hint = f"; closest: {', '.join(code(p) for p in unique)}" if unique else ""
    return f"no such file at the pull request's head{hint}"


def _why_not(reason: str) -> str:
    return reason[0].lower() + reason[1:] if reason else reason


def refusal_message(choice: TargetChoice) -> str:
    """Return the reply for named files that cannot be fixed: each name and why; nothing was changed."""
    lines = "\n".join(f"- {code(r.written)}: {prose(r.reason)}" for r in choice.refused)
    return (
        f"I can't fix the {'file' if len(choice.refused) == 1 else 'files'} you named:\n\n{lines}\n\n"
        "Nothing was changed and the model was not asked. Name the file by its path in the repository and "
        "comment `/spark fix` again."
    )


def left_out_note(choice: TargetChoice) -> str:
    """Return the note on named files over the limit (empty when none were left out)."""
    if not choice.left_out:
        return ""
    names = ", ".join(code(p) for p in choice.left_out)
    return f"Spark fixes up to {MAX_TARGETS} files per request; left out: {names}. Ask again for those."


def target_notes(choice: TargetChoice) -> list[str]:
    """Return the reply's notes on the names of a request that were not fixed: over the limit, or no files."""
    notes = [left_out_note(choice)] if choice.left_out else []
    if choice.not_files:
        lines = "\n".join(f"- {code(r.written)}: {prose(r.reason)}" for r in choice.not_files)
        notes.append(f"I did not take these names for files, so I did not edit them:\n\n{lines}")
    return notes


_SCORE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOPWORDS = frozenset(
    (
        "the", "and", "for", "this", "that", "with", "from", "into", "please", "fix",
        "make", "use", "add", "remove", "change", "should", "would", "could", "spark",
    )
)  # fmt: skip
