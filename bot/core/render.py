"""What Spark posts: text that did not come from its own templates is made inert before it joins a template.

Model output, file names, exception messages and user text quoted back can hold anything. Posted raw they
could ping people (``@org/team``), show tracking images, carry raw HTML (``<details>Approved</details>``),
links to phishing pages, break out of the backticks they sit in, or forge one of Spark's hidden markers. So:

- ``prose(text)``: untrusted prose. ``<``, ``>`` and ``&`` become entities (no HTML, no marker can
  form); brackets, backslashes, backticks, tildes and emphasis are escaped (no link, image, fence or stray
  code span); ``@`` and an issue ``#`` get a zero-width space (no mention, no cross-reference), and
  ``://``, ``www.`` are broken the same way (no autolink: a URL is shown as text). Single-line code spans
  of the text are kept as code, re-fenced by ``code``.
- ``code(text)``: untrusted text shown as inline code (a file name): one line, in a backtick fence longer
  than any run inside it, so it cannot be closed early; an HTML comment opener is broken (no marker).
- ``fence(lines)``: the opening fence for a block of code, longer than any backtick run inside.
- ``outbound(text)``: the last step of every post: secrets the text may hold (a model echoing one) redacted;
  ``postable(code)`` says whether a suggestion or patch passes it unchanged (else it is not posted).
- ``permalink(...)``: the link to lines of a file at a commit on ``GITHUB_URL`` (quotes in answers, the
  review body's findings).
- ``scrubbed(text, secrets)``: the job's own secret values (redacted on the way in) removed by value, as
  written and as ``prose`` escapes them: the step before ``outbound`` (``bot/adapters/redacting.py``).

Pure: no I/O; ``tests/core/test_render.py`` checks the rules with GitHub's own Markdown renderer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bot.core.secrets import SecretValues, redact

ZWSP = "\u200b"
# Single-line code spans as CommonMark pairs them: a backtick run closed by a run of the same length.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)([^\n`](?:[^\n]*?[^\n`])?)(?<!`)\1(?!`)")
_ESCAPES = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "\\": "\\\\",
    "`": "\\`",
    "[": "\\[",
    "]": "\\]",
    "~": "\\~",
    "|": "\\|",
    "*": "\\*",
    "_": "\\_",
}
_SPECIAL = re.compile(r"[&<>\\`\[\]~|*_]")
# Autolinks (scheme://, www.), mentions and e-mail addresses (@), issue references (#12).
_LINKISH = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)|(?<=#)(?=\d)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029]")


def prose(text: str) -> str:
    """Return untrusted ``text`` as Markdown that renders as the same words with nothing live in it."""
    text = _CONTROL.sub(" ", text.replace("\r\n", "\n"))
    out: list[str] = []
    cursor = 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_escape(text[cursor : span.start()]))
        out.append(code(span.group(2)))
        cursor = span.end()
    out.append(_escape(text[cursor:]))
    return "".join(out)


def code(text: str) -> str:
    """Return ``text`` as one inline code span it cannot close early (newlines and controls become spaces)."""
    text = _CONTROL.sub(" ", text.replace("\n", " ").replace("\r", " ")) or " "
    text = text.replace("<!", "<" + ZWSP + "!")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    # A span that starts or ends with a backtick (or is all spaces) needs padding CommonMark strips again.
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(lines: Iterable[str]) -> str:
    """Return a backtick fence longer than any backtick run in ``lines`` (at least three)."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def outbound(text: str) -> str:
    """Return ``text`` with any secret it holds redacted: the last step before anything is posted."""
    return redact(text).text


def scrubbed(text: str, secrets: SecretValues) -> str:
    """Return ``text`` without any of the job's secret values, however a template rendered them."""
    return secrets.scrub(text, lambda value: (value, _escape(value), prose(value)))


def postable(code_text: str) -> bool:
    """Return whether code can be posted as a suggestion or patch exactly: ``outbound`` leaves it alone.

    Code ``outbound`` would redact would reach GitHub holding a placeholder, and a click on "Commit
    suggestion" (or ``git apply``) would commit it.
    """
    return outbound(code_text) == code_text


def _escape(text: str) -> str:
    escaped = _SPECIAL.sub(lambda m: _ESCAPES[m.group(0)], text)
    return _LINKISH.sub(ZWSP, escaped)


def permalink(repo: str, sha: str, path: str, start: int, end: int, web: str) -> str:
    """Return the permalink to lines ``start..end`` of ``path`` at ``sha`` on ``web`` (``GITHUB_URL``)."""
    lines = f"L{start}" if start == end else f"L{start}-L{end}"
    return f"{web.rstrip('/')}/{repo}/blob/{sha}/{_url_path(path)}#{lines}"


def _url_path(path: str) -> str:
    """Return ``path`` percent-encoded for a URL (slashes kept), as GitHub writes its blob links."""
    safe = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
    return "".join(ch if ch in safe else "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in path)
