"""The context from other files a request needs: who references what the change touches, and what it uses.

From the diff and the index of the head (and of the base, for definitions the change removed or renamed):

- for each definition the change adds, changes, renames or removes, the places in *other* files that
  reference it, each shown inside its enclosing definition (or a few lines around when that is long);
- for each name the change's added lines use that another file defines, that definition's signature and its
  first lines (the docstring, usually).

Snippets are ranked: first the references on lines that also name what the change took out of the
definition (a dropped keyword of its signature, a type or function its body no longer uses), and the calls
passing a number of arguments the new signature no longer accepts (:mod:`bot.core.calls`): those lines
break; then per name, in turns, one reference per file before a second of any, files ordered product code
before tests, the surest first (a file importing the changed module, or in its Go package:
:mod:`bot.core.imports`), then the same directory; a file whose imports show its name means something else (it
imports neither that module nor a package holding it, or defines the name itself) comes last. Definitions of
used names follow (or lead, for a fix). Snippets are merged per file, redacted as the files under review are,
and added while they fit the token share; code is verbatim under ``[lines a-b]`` headers, never
line-numbered. Every name with references left out gets a note saying how many were shown.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from bot.core import calls, imports
from bot.core.secrets import redact_file
from bot.core.symbols import Definition, FileSymbols
from bot.core.types import FileDiff, LineKind
from bot.core.window import Span, estimate_tokens, file_lines, merge_spans

# The share of a request's code budget given to context from other files, capped per task: a review request
# grows by at most REVIEW_TOKENS, a fix (whose file is usually shown whole) by at most FIX_TOKENS.
SHARE = 0.25
REVIEW_TOKENS = 2000
FIX_TOKENS = 3000
# A reference is shown with its enclosing definition: whole when that is this short, else its signature line
# and REFERENCE_CONTEXT lines either side of the reference.
MAX_ENCLOSING_LINES = 8
REFERENCE_CONTEXT = 2
# How a definition was touched, the callers of the first kinds first: they are the ones a change can break.
_PRIORITY = {"removed": 0, "signature changed": 0, "asked about": 0, "added": 1, "body changed": 2}
# Constructors are called by their class's name: a changed constructor changes how its class is called.
_CONSTRUCTORS = frozenset({"__init__", "__new__", "constructor", "initialize"})
# A definition of a used name: its signature and this many lines after it (the docstring, usually).
DEFINITION_LINES = 6
# Names looked up per request at most (the diff's most specific ones: longest first).
MAX_NAMES = 40
# A name defined in more files than this is too generic to show (``get``, ``run``).
MAX_DEFINING_FILES = 3
# A name referenced from more files than this is sampled across them (ranked), never read whole.
MAX_REFERENCING_FILES = 60
_TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|spec|testdata)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$", re.IGNORECASE
)


class CodeIndex(Protocol):
    """What choosing context reads from a commit's index (``bot.index.lookup.RepoIndex`` implements it)."""

    def paths_naming(self, names: Iterable[str], *, defines: bool | None = None) -> dict[str, list[str]]:
        """Return, per name, the indexed paths that define or reference it."""
        ...

    def symbols(self, paths: Iterable[str]) -> dict[str, FileSymbols]:
        """Return the symbols of the indexed ``paths``."""
        ...

    def texts(self, paths: Iterable[str]) -> dict[str, str]:
        """Return the texts of the indexed ``paths``."""
        ...


@dataclass(frozen=True, slots=True)
class Touched:
    """What a change touches: names it defines or changes (with the kind), and names its added lines use."""

    changed: dict[str, str]  # name -> "added", "changed" or "removed"
    used: tuple[str, ...]
    # Per changed name, the names its definition's removed lines used that its new lines no longer do (a
    # renamed type, a dropped keyword): a reference on a line naming one of them is one the change breaks.
    # Those of its heading (the signature) count as they are; those of its body only where the repository
    # defines them (a type, a function: not a local variable whose name other code happens to use too).
    gone: Mapping[str, frozenset[str]] = field(default_factory=dict)
    gone_body: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Per changed name whose signature now takes another number of positional arguments, what it takes: a call
    # passing a number it no longer accepts is broken (``bot.core.calls``).
    arity: Mapping[str, calls.Arity] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snippet:
    """One window of another file: why it is shown (a reference to, or the definition of, ``name``)."""

    path: str
    spans: tuple[Span, ...]
    name: str
    reason: str  # "reference" or "definition"


@dataclass(frozen=True, slots=True)
class CrossContext:
    """The rendered context, its tokens, the coverage notes, and which lines of which files it shows."""

    text: str
    tokens: int
    notes: tuple[str, ...]
    shown: dict[str, tuple[Span, ...]] = field(default_factory=dict)
    references: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (shown, found)
    # The secret values redacted from what it shows: the job removes them by value from what it posts.
    secret_values: frozenset[str] = frozenset()
    # The lines shown, by path and line number, as the model saw them (redacted).
    lines: Mapping[str, Mapping[int, str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Return whether there is nothing to show."""
        return not self.text


NO_CONTEXT = CrossContext("", 0, ())


def context_budget(code_budget: int, cap: int) -> int:
    """Return the tokens other files' context may take of a request whose code budget is ``code_budget``."""
    return max(0, min(cap, int(code_budget * SHARE)))


_CODE_SPAN = re.compile(r"`([^`\n]{1,100})`")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CODE_LIKE = re.compile(
    r"\b[A-Za-z_]*(?:_[A-Za-z0-9_]*|[a-z][A-Z][A-Za-z0-9_]*|\(\))"  # snake_case, camelCase, call()
    r"|\b[A-Z][a-z]+[A-Za-z0-9]*\b"  # Capitalised
)


def asked(question: str) -> tuple[str, ...]:
    """Return the names a question may be about: identifiers in backticks, code-like words (``parse_header``,
    ``parseHeader``, ``run()``) and capitalised ones (``Settings``), in the order asked; the caller keeps
    those the repository defines."""
    names: dict[str, None] = {}
    for span in _CODE_SPAN.findall(question):
        names.update(dict.fromkeys(n for n in _IDENTIFIER.findall(span) if len(n) > 1))
    for word in _CODE_LIKE.findall(_CODE_SPAN.sub(" ", question)):
        name = word.removesuffix("()")
        if len(name) > 1 and _IDENTIFIER.fullmatch(name):
            names[name] = None
    return tuple(names)


def about(names: Sequence[str]) -> Touched:
    """Return what a question about ``names`` touches: their uses and their definitions, both shown."""
    return Touched(dict.fromkeys(names, "asked about"), tuple(names))


def touched(
    files: Sequence[FileDiff], head: Mapping[str, FileSymbols], base: Mapping[str, FileSymbols]
) -> Touched:
    """Return the definitions ``files`` change (``head``, ``base``: their symbols by path), the names used."""
    changed: dict[str, str] = {}
    used: dict[str, None] = {}
    gone: dict[str, set[str]] = {}
    gone_body: dict[str, set[str]] = {}
    arity: dict[str, calls.Arity] = {}
    for file in files:
        added = {dl.new_no for h in file.hunks for dl in h.lines if dl.kind is LineKind.ADDED and dl.new_no}
        removed = {
            dl.old_no for h in file.hunks for dl in h.lines if dl.kind is LineKind.REMOVED and dl.old_no
        }
        now, before = head.get(file.path), base.get(file.old_path or file.path)
        before_names = {d.name for d in before.definitions} if before else set()
        now_names = {d.name for d in now.definitions} if now else set()
        if now is not None:
            for d in now.definitions:
                if any(d.start <= n <= d.end for n in added) and _touches_itself(d, added, now):
                    name = _called_as(d, now)
                    heading = range(d.start, d.start + d.signature.count("\n") + 1)
                    how = "signature changed" if any(n in added for n in heading) else "body changed"
                    if name and (name not in changed or _PRIORITY[how] < _PRIORITY[changed[name]]):
                        changed[name] = how if name in before_names else "added"
                    if name and how == "signature changed" and before is not None:
                        took = _arity_change(d, now, before)
                        if took is not None:
                            arity[name] = took
            for name, lines in now.references.items():
                if name not in now_names and any(n in added for n in lines):
                    used[name] = None
        if before is not None:
            for d in before.definitions:
                if d.name not in now_names and any(d.start <= n <= d.end for n in removed):
                    name = _called_as(d, before)
                    if name:
                        changed[name] = "removed" if name == d.name else "signature changed"
            took_heading, took_body = _gone(before, now, removed, added)
            for name, names in took_heading.items():
                gone.setdefault(name, set()).update(names)
            for name, names in took_body.items():
                gone_body.setdefault(name, set()).update(names)
    ranked = sorted(used, key=lambda n: (-len(n), n))[:MAX_NAMES]
    return Touched(
        changed,
        tuple(n for n in ranked if n not in changed),
        {name: frozenset(names) for name, names in gone.items() if name in changed},
        {name: frozenset(names) for name, names in gone_body.items() if name in changed},
        arity,
    )


def _arity_change(d: Definition, now: FileSymbols, before: FileSymbols) -> calls.Arity | None:
    """Return the positional arguments ``d`` accepts now, when that differs from what its one namesake in
    ``before`` accepted (else None: no call breaks for its count, or which definition a call means is unsure:
    the file defines the name more than once)."""
    old = [o for o in before.definitions if o.name == d.name]
    if len(old) != 1 or old[0].kind != d.kind or sum(o.name == d.name for o in now.definitions) != 1:
        return None
    if d.kind not in ("function", "method"):
        return None  # a class's heading lists its bases, not what it is called with
    method = d.kind == "method" or d.name in _CONSTRUCTORS
    takes = calls.accepts(d.signature, now.language, method=method)
    took = calls.accepts(old[0].signature, now.language, method=method)
    return takes if takes is not None and took is not None and takes != took else None


def _gone(
    before: FileSymbols, now: FileSymbols | None, removed: set[int], added: set[int]
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Return, per definition (by the name it is called by), the names its removed lines used that no added
    line of the file uses (what the change took out of it): those of its heading, and those of its body."""
    still = {n for n, lines in now.references.items() if any(x in added for x in lines)} if now else set()
    heading: dict[str, set[str]] = {}
    body: dict[str, set[str]] = {}
    for name, lines in before.references.items():
        if name in still:
            continue
        for line in lines:
            holder = before.enclosing(line) if line in removed else None
            called = _called_as(holder, before) if holder is not None else ""
            if holder is None or not called or name in (called, holder.name):
                continue
            head = line < holder.start + holder.signature.count("\n") + 1
            (heading if head else body).setdefault(called, set()).add(name)
    return heading, body


def _called_as(d: Definition, symbols: FileSymbols) -> str:
    """Return the name other files use ``d`` by: a constructor's class; "" for other special methods."""
    if d.name in _CONSTRUCTORS:
        classes = [
            o for o in symbols.definitions if o.kind == "class" and o.start < d.start and d.end <= o.end
        ]
        return max(classes, key=lambda o: o.start).name if classes else ""
    return "" if d.name.startswith("__") and d.name.endswith("__") else d.name


def _touches_itself(d: Definition, added: set[int], symbols: FileSymbols) -> bool:
    """Return whether the change touches ``d`` itself, not only a definition nested inside it."""
    inner = [o for o in symbols.definitions if o is not d and d.start <= o.start and o.end <= d.end]
    return any(not any(o.start <= n <= o.end for o in inner) for n in added if d.start <= n <= d.end)


def choose(
    files: Sequence[FileDiff],
    what: Touched,
    index: CodeIndex,
    budget: int,
    *,
    references_first: bool = True,
) -> CrossContext:
    """Return the context from other files for a change to ``files``, within ``budget`` tokens."""
    if budget <= 0 or not (what.changed or what.used):
        return NO_CONTEXT
    own = {f.path for f in files} | {f.old_path for f in files if f.old_path}
    near = {posixpath.dirname(p) for p in own}
    referencing = index.paths_naming(what.changed) if what.changed else {}
    defining = index.paths_naming(what.used, defines=True) if what.used else {}
    candidates: set[str] = set()
    for name in what.changed:
        candidates.update(_rank_paths(referencing.get(name, []), own, near)[:MAX_REFERENCING_FILES])
    for name in what.used:
        paths = [p for p in defining.get(name, []) if p not in own]
        if 0 < len(paths) <= MAX_DEFINING_FILES:
            candidates.update(paths)
    symbols = index.symbols(candidates)
    texts = index.texts(candidates | own)
    # Whether each candidate imports the changed file's module: then its uses of a name surely mean it.
    mine = [p for p in sorted(own) if p in texts]
    evidence = {
        p: min((imports.evidence(p, texts[p], o, texts[o]) for o in mine), default=imports.UNKNOWN)
        for p in candidates
        if p in texts and p not in own
    }
    # A name many files define (``run``, ``get``) says little about which of them a reference means: such
    # names come after the specific ones.
    defined = index.paths_naming(what.changed, defines=True) if what.changed else {}
    # What the change took out of a body counts where the repository defines it (a type, not a local).
    body = {g for names in what.gone_body.values() for g in names}
    known = index.paths_naming(body, defines=True) if body else {}
    took = {
        name: what.gone.get(name, frozenset()) | {g for g in what.gone_body.get(name, ()) if g in known}
        for name in what.changed
    }
    references = _reference_snippets(what, referencing, symbols, own, near, defined, evidence, took, texts)
    definitions = _definition_snippets(what, defining, symbols, own)
    ranked = [*references, *definitions] if references_first else [*definitions, *references]
    # Every reference line of each changed name in another file, counted whether shown or not.
    found = {
        name: [(p, n) for p in referencing.get(name, []) if p not in own for n in _lines(symbols, p, name)]
        for name in what.changed
    }
    return _fit(ranked, {p: texts[p] for p in {s.path for s in ranked} if p in texts}, budget, found, what)


def _lines(symbols: Mapping[str, FileSymbols], path: str, name: str) -> tuple[int, ...]:
    found = symbols.get(path)
    return found.references.get(name, ()) if found else ()


def _rank_paths(paths: Iterable[str], own: set[str], near: set[str]) -> list[str]:
    """Order paths: other files only; same directory first, product code before tests, then by path."""
    return sorted(
        (p for p in paths if p not in own),
        key=lambda p: (bool(_TEST_PATH.search(p)), posixpath.dirname(p) not in near, p),
    )


def _reference_snippets(
    what: Touched,
    referencing: Mapping[str, list[str]],
    symbols: Mapping[str, FileSymbols],
    own: set[str],
    near: set[str],
    defined: Mapping[str, list[str]],
    evidence: Mapping[str, int],
    took_out: Mapping[str, frozenset[str]],
    texts: Mapping[str, str],
) -> list[Snippet]:
    """Per changed name, its references as windows, sampled round-robin across its ranked files; first,
    those on lines that also name what the change took out of the definition (``Touched.gone``)."""
    per_name: list[tuple[tuple[int, int, int], list[Snippet]]] = []
    strong: list[tuple[tuple[int, int, bool, bool, str, int], Snippet]] = []
    for name in what.changed:
        took = took_out.get(name, frozenset())
        per_file: list[tuple[tuple[bool, bool, int, bool, str], list[Snippet]]] = []
        total = 0
        for path in _rank_paths(referencing.get(name, []), own, near)[:MAX_REFERENCING_FILES]:
            found = symbols.get(path)
            if found is None:
                continue
            lines = found.references.get(name, ())
            level = evidence.get(path, imports.UNKNOWN)
            if level > imports.IMPORTS and found.defines(name):
                level = imports.ELSEWHERE  # its own definition, most likely
            test, far = bool(_TEST_PATH.search(path)), posixpath.dirname(path) not in near
            # Files whose imports say the name means something else last; else product code before tests,
            # then the surest (importing the changed module), then the same directory.
            key = (level == imports.ELSEWHERE, test, level, far, path)
            total += len(lines) if level < imports.ELSEWHERE else 0
            # A line that also names what the change took out (the old type, a dropped keyword) is broken, and
            # so is a call passing a number of arguments the new signature no longer takes (where the file's
            # imports do not say the name is another's).
            breaks = {n for g in took for n in found.references.get(g, ()) if n in lines}
            accepts = what.arity.get(name)
            if accepts is not None and level < imports.ELSEWHERE and path in texts:
                rows = file_lines(texts[path])
                breaks |= {
                    n
                    for n in lines
                    if n <= len(rows)
                    and any(calls.breaks(accepts, c) for c in calls.passes(rows[n - 1], name))
                }
            priority = _PRIORITY.get(what.changed[name], 1)
            strong += [
                ((priority, level, test, far, path, n), _reference(found, path, n, name)) for n in breaks
            ]
            # Uses inside a definition before top-level ones (imports, mostly): they show how it is called.
            ordered = sorted((n for n in lines if n not in breaks), key=lambda n: found.enclosing(n) is None)
            per_file.append((key, [_reference(found, path, n, name) for n in ordered]))
        per_file.sort(key=lambda item: item[0])
        # One window per file before a second of any: a sample across files, not the top of one.
        depth = max((len(s) for _, s in per_file), default=0)
        snippets = [snippets[i] for i in range(depth) for _, snippets in per_file if i < len(snippets)]
        per_name.append(((_PRIORITY.get(what.changed[name], 1), len(defined.get(name, ())), total), snippets))
    # Names take turns: those whose callers a change can break first (removed, signature changed), then the
    # most specific (defined in fewest files, then fewest references): a type used in hundreds of places
    # does not crowd out a function with four callers, and each shows a sample.
    per_name.sort(key=lambda item: item[0])
    ordered_names = [snippets for _, snippets in per_name]
    depth = max((len(s) for s in ordered_names), default=0)
    strong.sort(key=lambda item: item[0])
    return [s for _, s in strong] + [
        snippets[i] for i in range(depth) for snippets in ordered_names if i < len(snippets)
    ]


def _reference(symbols: FileSymbols, path: str, line: int, name: str) -> Snippet:
    return Snippet(path, _reference_spans(symbols, line), name, "reference")


def _reference_spans(symbols: FileSymbols, line: int) -> tuple[Span, ...]:
    """Return the windows showing a reference: its enclosing definition whole when short, else that
    definition's first line and the lines around the reference."""
    enclosing = symbols.enclosing(line)
    around = (max(1, line - REFERENCE_CONTEXT), line + REFERENCE_CONTEXT)
    if enclosing is None:
        return (around,)
    if enclosing.end - enclosing.start < MAX_ENCLOSING_LINES:
        return ((enclosing.start, enclosing.end),)
    return tuple(
        merge_spans([(enclosing.start, enclosing.start), (max(around[0], enclosing.start), around[1])])
    )


def _definition_snippets(
    what: Touched, defining: Mapping[str, list[str]], symbols: Mapping[str, FileSymbols], own: set[str]
) -> list[Snippet]:
    out: list[Snippet] = []
    for name in what.used:
        paths = [p for p in defining.get(name, []) if p not in own]
        if not 0 < len(paths) <= MAX_DEFINING_FILES:
            continue
        for path in paths:
            found = symbols.get(path)
            for d in found.definitions if found else ():
                if d.name == name:
                    head = d.signature.count("\n") + 1
                    out.append(
                        Snippet(
                            path,
                            ((d.start, min(d.end, d.start + head + DEFINITION_LINES - 1)),),
                            name,
                            "definition",
                        )
                    )
    return out


def _fit(
    ranked: Sequence[Snippet],
    texts: Mapping[str, str],
    budget: int,
    found: Mapping[str, list[tuple[str, int]]],
    what: Touched,
) -> CrossContext:
    """Add snippets in rank order while the rendering fits ``budget``; note what was left out."""
    lines = {path: _Redacted(path, text) for path, text in texts.items()}
    chosen: dict[str, list[Span]] = {}
    labels: dict[str, dict[str, None]] = {}
    parts: dict[str, str] = {}  # each file's rendering; the whole is their join in path order
    size = 0  # the tokens of that join
    left_defs: list[str] = []
    for snippet in ranked:
        source = lines.get(snippet.path)
        if source is None:
            continue
        spans = [(a, min(b, len(source.raw))) for a, b in snippet.spans if a <= len(source.raw)]
        if not spans:
            continue
        path = snippet.path
        merged = merge_spans([*chosen.get(path, []), *spans])
        file_labels = {**labels.get(path, {}), _label(snippet): None}
        # Measured unredacted first (redaction costs more than a measure and rarely changes the size).
        added = _render_file(path, spans, {}, source, raw=True)
        if size + estimate_tokens(added) - 8 > budget:
            tokens = size + estimate_tokens(added)
        else:
            for span in spans:
                source.redact(span)
            trial = {**parts, path: _render_file(path, merged, file_labels, source)}
            tokens = estimate_tokens("\n".join(trial[p] for p in sorted(trial)))
        if tokens > budget:
            if snippet.reason == "definition":
                left_defs.append(snippet.name)
            continue
        chosen[path], labels[path], parts, size = merged, file_labels, trial, tokens
    text = "\n".join(parts[p] for p in sorted(parts))
    counts = {
        name: (sum(any(a <= n <= b for a, b in chosen.get(p, ())) for p, n in refs), len(refs))
        for name, refs in found.items()
    }
    notes = [
        f"`{name}` ({what.changed[name]}): {shown} of {total} references in other files shown; "
        f"{total - shown} left out for the budget"
        for name, (shown, total) in counts.items()
        if shown < total
    ]
    notes += [f"`{name}`: its definition was left out for the budget" for name in dict.fromkeys(left_defs)]
    shown_spans = {path: tuple(spans) for path, spans in chosen.items()}
    values = frozenset(v for path in chosen for v in lines[path].values)
    shown_lines = {
        path: {n: lines[path].lines[n] for a, b in spans for n in range(a, b + 1)}
        for path, spans in chosen.items()
    }
    return CrossContext(text, estimate_tokens(text), tuple(notes), shown_spans, counts, values, shown_lines)


@dataclass(frozen=True, slots=True)
class Located:
    """Lines of another file the context showed: where a finding about them points, and their code."""

    path: str
    start: int
    end: int
    code: str


def shown_at(context: CrossContext, path: str, start: int, end: int) -> Located | None:
    """Return the lines ``start..end`` of ``path`` (as a model named them) if ``context`` showed them.

    ``path`` may be a trailing part of a shown path when only one ends so. The start must be a line shown;
    the end is kept within the window holding it. None when the context never showed that line.
    """
    paths = [path] if path in context.shown else [p for p in context.shown if p.endswith("/" + path)]
    if len(paths) != 1:
        return None
    found = paths[0]
    window = next(((a, b) for a, b in context.shown[found] if a <= start <= b), None)
    if window is None:
        return None
    end = min(max(start, end), window[1])
    rows = context.lines.get(found, {})
    return Located(found, start, end, "\n".join(rows.get(n, "") for n in range(start, end + 1)))


def _label(snippet: Snippet) -> str:
    return f"references `{snippet.name}`" if snippet.reason == "reference" else f"defines `{snippet.name}`"


class _Redacted:
    """A file's lines redacted by the rules of the files under review (``redact_file``), window by window.

    Tokens, credential URLs and assignments are found line by line, so a window redacts as the whole file
    would; a file holding a private key block (which spans lines) is redacted whole at once.
    """

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.lines: dict[int, str] = {}
        self.values: set[str] = set()  # the secret values redacted so far
        if "-----BEGIN" in text:
            whole = redact_file(path, text)
            self.lines = dict(enumerate(file_lines(whole.text), start=1))
            self.values.update(whole.values)

    @cached_property
    def raw(self) -> list[str]:
        """Return the file's lines as they are (split when first needed: most files are never shown)."""
        return file_lines(self.text)

    def redact(self, span: Span) -> None:
        """Redact the lines of ``span`` not redacted yet."""
        start, end = span
        if all(n in self.lines for n in range(start, end + 1)):
            return
        redacted = redact_file(self.path, "\n".join(self.raw[start - 1 : end]))
        self.values.update(redacted.values)
        shown = redacted.text.split("\n")
        self.lines.update(zip(range(start, end + 1), shown, strict=False))

    def span(self, start: int, end: int) -> list[str]:
        """Return the redacted lines ``start..end`` (redacted first)."""
        return [self.lines[n] for n in range(start, end + 1)]


def _render_file(
    path: str, spans: Sequence[Span], labels: Mapping[str, None], lines: _Redacted, *, raw: bool = False
) -> str:
    out = [f"File: {path} ({', '.join(labels)})"]
    for start, end in spans:
        out.append(f"[lines {start}-{end}]" if start != end else f"[line {start}]")
        out.extend(lines.raw[start - 1 : end] if raw else lines.span(start, end))
    return "\n".join(out)
