"""Secret redaction before any text leaves for the model; markers keep the line count so line numbers hold.

Each redaction also returns the secret values it removed: a job keeps them (``SecretValues``) and removes
them again from everything it posts, whatever the model repeats (``bot/adapters/redacting.py``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from bot.core.types import DiffLine, FileDiff, Hunk, LineKind

MARKER = "[REDACTED:{kind}]"
# A value shorter than this is never looked for by value in posts ("true", "8080").
MIN_VALUE = 5
# What every placeholder starts with: a text holding more of them than the file it edits lost a secret.
PLACEHOLDER_PREFIX = "[REDACTED:"


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One redacted secret: its kind and 1-based line (never the secret itself)."""

    kind: str
    line: int


@dataclass(frozen=True, slots=True)
class Redaction:
    """Redacted text (same number of lines as the input) and what was removed: where, and the values worth
    looking for by value in what Spark posts (``values``; a secret file's harmless settings are not)."""

    text: str
    findings: tuple[SecretFinding, ...]
    values: tuple[str, ...] = ()

    @property
    def redacted(self) -> bool:
        """Return whether anything was removed."""
        return bool(self.findings)


# Tokens whose shape alone says "secret": vendor prefixes with enough random characters behind them.
_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("github-token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b")),
    ("github-token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[A-Z0-9]{16}\b")),
    ("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}")),
    (
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+"),
    ),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("model-api-key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("stripe-key", re.compile(r"\b(?:sk|rk)_live_[0-9A-Za-z]{20,}\b")),
)

# What each pattern above cannot match without (case as written): a text with none of them is not scanned.
_LITERALS: dict[re.Pattern[str], tuple[str, ...]] = dict(
    zip(
        (pattern for _, pattern in _TOKEN_PATTERNS),
        (
            ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
            ("github_pat_",),
            ("AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA"),
            ("xox",),
            ("https://hooks.slack.com/services/T",),
            ("eyJ",),
            ("sk-",),
            ("AIza",),
            ("_live_",),
        ),
        strict=True,
    )
)

_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]*?)PRIVATE KEY(?: BLOCK)?-----(?P<body>.*?)"
    r"(?:-----END (?P=label)PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{40,}")

# user:password@ in a URL; the password alone is replaced so the host stays readable.
_URL_CREDENTIALS = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@'\"\[\]{}]+:(?P<secret>[^\s/@'\"\[\]]+)@")

# NAME = value / NAME: value / "NAME": "value" where NAME says it is a credential.
_ASSIGNMENT = re.compile(
    r"(?P<name>api[_-]?key|apikey|secret|token|passw(?:or)?d|passwd|pwd|credentials?"
    r"|private[_-]?key|access[_-]?key|auth[_-]?(?:token|key|header))[A-Za-z0-9_-]*+['\"]?"
    r"[ \t]*(?::[ \t]*[A-Za-z_][\w.]*(?:\[[\w., |]*\])?[ \t]*)?(?:=>|:=|=|:)[ \t]*"
    r"(?:(?P<q>['\"])(?P<quoted>[^'\"\n]{1,400})(?P=q)|(?P<bare>[\w\-+/=.~@$%^*!?]{1,400}+)(?![(\[]))",
    re.IGNORECASE,
)
_CREDENTIAL_WORDS = ("key", "secret", "token", "passw", "pwd", "credential", "auth")
_PLACEHOLDER_VALUE = re.compile(
    r"^(?:x+|\*+|\.+|-+|<[^>]*>|\$\{?[\w.:-]+\}?|\{\{?[^}]*\}\}?|%\(?\w*\)?s|changeme|example\w*|your[\w-]*"
    r"|placeholder|redacted|dummy|test|none|null|true|false|secret|password|passwd|pass|pwd|token)$",
    re.IGNORECASE,
)
# Code, not credentials: dotted names, lower-case identifiers, words joined by separators.
_CODE_LIKE = re.compile(
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z_][a-z0-9_]*|_*[A-Za-z]+(?:[-_. /:]+[A-Za-z]+)*[-_. /:]*"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Files that are secrets as a whole: their values are redacted line by line, keys kept for readability.
_ENV_FILE = re.compile(r"(?:^|/)\.env(?:\.[\w.-]+)?$|(?:^|/)[\w.-]*\.env$")
_ENV_TEMPLATE = re.compile(r"\.(?:example|sample|template|dist|defaults?)$")
_KEY_FILE = re.compile(
    r"(?:^|/)(?:id_(?:rsa|dsa|ecdsa|ed25519)|\.netrc|\.pgpass|\.htpasswd|credentials)$"
    r"|\.(?:pem|key|p12|pfx|jks|keystore|asc)$"
)
_CONFIG_FILE = re.compile(r"\.(?:ya?ml|ini|cfg|conf|properties|toml|env\.\w+|json)$|(?:^|/)\.?\w*rc$")
_ENV_LINE = re.compile(r"^(?P<key>\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*[=:])")


def _entropy(value: str) -> float:
    """Return the Shannon entropy of ``value`` in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_secret(value: str, name: str, *, bare: bool, config: bool) -> bool:
    """Return whether an assigned literal looks like a real credential rather than code or a placeholder."""
    if len(value) < 8 or _PLACEHOLDER_VALUE.match(value) or _CODE_LIKE.fullmatch(value):
        return False
    # Outside config files an unquoted identifier is a name or a type annotation, not a value.
    if bare and not config and _IDENTIFIER.fullmatch(value):
        return False
    if any(c.isspace() for c in value) or value.startswith(("http://", "https://", "/", "./", "$", "{", "%")):
        return False
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[^A-Za-z0-9]"))
    # Passwords are chosen by people and carry less entropy than generated keys.
    threshold = 2.5 if re.search(r"passw|pwd", name, re.IGNORECASE) else 3.0
    return _entropy(value) >= threshold and (classes >= 3 or (classes >= 2 and len(value) >= 20))


def _line_of(text: str, offset: int) -> int:
    """Return the 1-based line of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


# A keep function names what to redact in a match: (kind, group), with group "" for the whole match.
_Keep = Callable[[re.Match[str]], tuple[str, str] | None]


def _redact_group(
    text: str,
    pattern: re.Pattern[str],
    findings: list[SecretFinding],
    keep: _Keep,
    line: int = 0,
    values: list[str] | None = None,
) -> str:
    """Replace what ``keep`` names in each match by a marker (newlines kept); ``line`` offsets the lines.

    Each removed value is added to ``values``.
    """

    def substitute(match: re.Match[str]) -> str:
        chosen = keep(match)
        if chosen is None:
            return match.group(0)
        kind, group = chosen
        findings.append(SecretFinding(kind, line + _line_of(text, match.start())))
        if values is not None:
            values.append(match.group(group or 0))
        if not group:
            return MARKER.format(kind=kind) + "\n" * match.group(0).count("\n")
        start, end = match.start(group) - match.start(), match.end(group) - match.start()
        whole = match.group(0)
        return whole[:start] + MARKER.format(kind=kind) + whole[end:]

    return pattern.sub(substitute, text)


def _whole(kind: str) -> _Keep:
    """Return a keep function redacting whole matches as ``kind``."""

    def keep(_: re.Match[str]) -> tuple[str, str]:
        return (kind, "")

    return keep


def _key_body(match: re.Match[str]) -> tuple[str, str] | None:
    """Return "" (redact all) when a PEM block holds key material, not just a header named in code."""
    body = re.sub(r"\s|\\n", "", match.group("body"))
    return ("private-key", "") if _BASE64_RUN.search(body) else None


def _url_secret(match: re.Match[str]) -> tuple[str, str] | None:
    """Return the password group unless it is a placeholder or a template variable."""
    secret = match.group("secret")
    if len(secret) < 4 or _PLACEHOLDER_VALUE.match(secret) or secret.startswith(("$", "{", "%", "<")):
        return None
    return ("password", "secret")


def _assigned_secret(config: bool) -> _Keep:
    """Return a chooser of the value group when the assigned value looks like a real credential."""

    def choose(match: re.Match[str]) -> tuple[str, str] | None:
        group = "quoted" if match.group("quoted") is not None else "bare"
        value = match.group(group)
        if "[REDACTED:" in value or not _looks_secret(
            value, match.group("name"), bare=group == "bare", config=config
        ):
            return None
        return ("secret", group)

    return choose


def redact(text: str, *, config: bool = False) -> Redaction:
    """Replace private keys, vendor tokens, credential URLs and high-entropy credential assignments.

    ``config`` marks a configuration file (YAML, INI, properties), where unquoted values are literals.
    """
    findings: list[SecretFinding] = []
    values: list[str] = []
    out = (
        _redact_group(text, _PRIVATE_KEY, findings, _key_body, values=values)
        if "PRIVATE KEY" in text
        else text
    )
    for kind, pattern in _TOKEN_PATTERNS:
        # A text holding none of the literals a pattern needs is not scanned with it (same answer, faster).
        if any(literal in out for literal in _LITERALS[pattern]):
            out = _redact_group(out, pattern, findings, _whole(kind), values=values)
    # URLs and assignments are tried only on lines that could hold one (the patterns are slow everywhere).
    lines = out.split("\n")
    chooser = _assigned_secret(config)
    for n, line in enumerate(lines):
        if "://" in line and "@" in line:
            line = lines[n] = _redact_group(
                line, _URL_CREDENTIALS, findings, _url_secret, line=n, values=values
            )
        lowered = line.lower()
        if any(word in lowered for word in _CREDENTIAL_WORDS):
            lines[n] = _redact_group(line, _ASSIGNMENT, findings, chooser, line=n, values=values)
    findings.sort(key=lambda f: f.line)
    return Redaction("\n".join(lines), tuple(findings), tuple(dict.fromkeys(values)))


def is_secret_file(path: str) -> bool:
    """Return whether ``path`` is a file that is secret as a whole (``.env``, key stores, netrc)."""
    if _ENV_FILE.search(path):
        return not _ENV_TEMPLATE.search(path)
    return bool(_KEY_FILE.search(path))


def redact_file(path: str, text: str) -> Redaction:
    """Redact a file's text: ``.env``-like and key files wholesale (keys kept), others by :func:`redact`."""
    if not is_secret_file(path):
        return redact(text, config=bool(_CONFIG_FILE.search(path)))
    findings: list[SecretFinding] = []
    values: list[str] = []
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        findings.append(SecretFinding("secret-file", n + 1))
        key = _ENV_LINE.match(line)
        ending = "\r" if line.endswith("\r") else ""
        lines[n] = (key.group("key") if key else "") + MARKER.format(kind="secret-file") + ending
        values += _file_values(key.group("key") if key else "", line[key.end() if key else 0 :])
    return Redaction("\n".join(lines), tuple(findings), tuple(dict.fromkeys(values)))


def _plain_word(value: str) -> bool:
    """Return whether ``value`` is a plain word ("github", "Admin", "PROD"): looked for by value in posts, it
    would blank out ordinary prose."""
    return value.isalpha() and (value.islower() or value.isupper() or value.istitle())


def _file_values(key: str, value: str) -> list[str]:
    """Return the values of one line of a secret file worth removing from posts by value.

    The whole file is hidden from the model, but only a credential is looked for in posts: a value under a
    credential's name that is no plain word (``DB_PASSWORD=hunter2``, not ``AUTH_PROVIDER=github``), one that
    looks like a credential, or what the patterns find inside it (a URL's password). ``DEBUG=true`` or
    ``ENV=production`` would blank out ordinary words.
    """
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    if len(value) < MIN_VALUE or _PLACEHOLDER_VALUE.match(value) or value.startswith(("$", "{", "%", "<")):
        return []
    name = key.strip().rstrip("=:").strip()
    if "://" in value:
        return list(redact(value, config=True).values)  # an address: only a password inside it is secret
    credential = any(word in name.lower() for word in _CREDENTIAL_WORDS) and not _plain_word(value)
    if credential or _looks_secret(value, name, bare=False, config=True):
        return [value]
    return list(redact(value, config=True).values)


def redact_diff(file: FileDiff) -> FileDiff:
    """Return ``file`` with both sides of every hunk redacted by the file's rules (:func:`redact_file`).

    Removed lines are redacted as lines of the old file (its path's rules: a ``.env`` file's old password is
    as secret as its new one), added and context lines as lines of the new file, and each hunk's section
    header (a line of the file git quotes after ``@@``) too.
    """
    return _redacted_diff(file, [])


def diff_values(file: FileDiff) -> tuple[str, ...]:
    """Return the secret values :func:`redact_diff` removes from ``file`` (either side, section headers)."""
    values: list[str] = []
    _redacted_diff(file, values)
    return tuple(dict.fromkeys(values))


def _redacted_diff(file: FileDiff, values: list[str]) -> FileDiff:
    old_path, new_path = file.old_path or file.path, file.path
    return replace(file, hunks=tuple(_redact_hunk(h, old_path, new_path, values) for h in file.hunks))


def _redact_hunk(hunk: Hunk, old_path: str, new_path: str, values: list[str]) -> Hunk:
    old = [dl for dl in hunk.lines if dl.kind is not LineKind.ADDED]
    new = [dl for dl in hunk.lines if dl.kind is not LineKind.REMOVED]
    shown_old, shown_new = _redact_side(old_path, old, values), _redact_side(new_path, new, values)

    def shown(line: DiffLine) -> str:
        before, after = shown_old.get(id(line), line.text), shown_new.get(id(line), line.text)
        # A context line is on both sides: if either side's rules hide it, it stays hidden.
        return before if before != line.text else after

    section = hunk.section
    if section:
        redacted = redact_file(new_path, section)
        section = redacted.text
        values.extend(redacted.values)
    return replace(hunk, section=section, lines=tuple(replace(dl, text=shown(dl)) for dl in hunk.lines))


def _redact_side(path: str, lines: list[DiffLine], values: list[str]) -> dict[int, str]:
    """Return the redacted text of one side's lines, by ``id`` of each line (redaction keeps the count)."""
    if not lines:
        return {}
    redacted = redact_file(path, "\n".join(dl.text for dl in lines))
    shown = redacted.text.split("\n")
    if len(shown) != len(lines):  # a line holding a line break of its own: redact line by line
        each = [redact_file(path, dl.text) for dl in lines]
        shown = [r.text for r in each]
        values.extend(v for r in each for v in r.values)
    else:
        values.extend(redacted.values)
    return dict(zip(map(id, lines), shown, strict=True))


class SecretValues:
    """The secret values one job redacted on the way in, to remove by value from everything it posts.

    Pure: the job adds each redaction's ``values`` (``add``) and scrubs its posts (``scrub``). Values shorter
    than ``MIN_VALUE`` and plain words (a URL's password "admin") are not kept: they would blank out prose.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, values: Iterable[str]) -> None:
        """Keep ``values`` (each stripped; short ones and plain words dropped)."""
        kept = (v.strip() for v in values)
        self._values.update(v for v in kept if len(v) >= MIN_VALUE and not _plain_word(v))

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def scrub(self, text: str, forms: Callable[[str], Iterable[str]] = lambda v: (v,)) -> str:
        """Return ``text`` with every kept value, in each of its ``forms`` (as written, as Markdown escapes
        it), replaced by a marker; longer values first, so a value inside another goes with it."""
        if not self._values or not text:
            return text
        marker = MARKER.format(kind="secret")
        for value in sorted(self._values, key=len, reverse=True):
            for form in dict.fromkeys(forms(value)):
                if form and form in text:
                    text = text.replace(form, marker)
        return text
