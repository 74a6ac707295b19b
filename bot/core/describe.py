"""``/spark describe``: the request for a pull request's summary, and its marked section in the PR body.

The section sits between two hidden markers; everything outside them is the author's and is kept byte for
byte. A second run replaces only what is between the markers. The words of the request are in prompts.toml.
"""

from __future__ import annotations

from bot.core import markers
from bot.core.prompts import template
from bot.core.secrets import redact, redact_diff
from bot.core.types import Diff, FileDiff
from bot.core.window import estimate_tokens, quote

START = markers.tag("describe", "start")
END = markers.tag("describe", "end")
HEADING = "### Summary by Spark"
# The diff shown to the model is cut at this many tokens; the summary says which files it did not see.
DIFF_TOKENS = 24_000
# GitHub's body limit is 65,536 characters: the summary keeps well inside it, beside the author's text.
MAX_SUMMARY_CHARS = 12_000
# Words a model writes when it has nothing to say are not a summary.
EMPTY_ANSWERS = frozenset({"", "NO_CHANGES", "NO_FINDINGS"})


def author_text(body: str) -> str:
    """Return the PR body without Spark's section (what the author wrote), for the prompt."""
    before, section, after = _split(body)
    return before + after if section is not None else body


def with_summary(body: str, summary: str) -> str:
    """Return ``body`` with Spark's section holding ``summary``: replaced where it is, else appended.

    Everything outside the markers is kept byte for byte.
    """
    section = f"{START}\n{HEADING}\n\n{summary.strip()}\n{END}"
    before, old, after = _split(body)
    if old is not None:
        return before + section + after
    if not body.strip():
        return body + section
    return body + ("" if body.endswith("\n") else "\n") + "\n" + section


def summary_of(body: str) -> str | None:
    """Return the summary in Spark's section of ``body``, if it has one."""
    _, section, _ = _split(body)
    if section is None:
        return None
    return section.removeprefix(START).removesuffix(END).strip().removeprefix(HEADING).strip()


def clean_summary(answer: str) -> str | None:
    """Return the model's answer as a summary (markers taken out, trimmed), or None when it is empty."""
    text = answer.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text.strip("`").removeprefix("markdown").strip()
    # The answer must not close or open Spark's section itself, nor hide text in the author's part.
    text = text.replace(START, "").replace(END, "").strip()
    if text.upper() in EMPTY_ANSWERS:
        return None
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[:MAX_SUMMARY_CHARS].rsplit("\n", 1)[0] + "\n\n(summary cut to fit)"
    return text


def describe_messages(title: str, body: str, diff: Diff, callers: str = "") -> list[dict[str, str]]:
    """Return the messages asking for the summary: the PR's words and its diff, redacted, as data.

    ``callers``: code in other files that uses what the diff changes (``bot.core.crossref``).
    """
    shown, left_out = _diff_text(diff)
    parts = [template("describe", "request").template]
    if title.strip():
        parts.append(quote("pull request title", title))
    mine = author_text(body).strip()
    if mine:
        parts.append(quote("pull request description", mine))
    parts.append(quote("pull request diff", shown or "(no textual changes)"))
    if left_out:
        listed = ", ".join(left_out[:50])
        parts.append(template("describe", "left_out").substitute(files=listed))
    if callers:
        intro = template("describe", "callers").template
        parts.append(intro + "\n" + quote("code from other files", callers))
    return [
        {"role": "system", "content": template("describe", "system").template},
        {"role": "user", "content": redact("\n\n".join(parts)).text},
    ]


def _diff_text(diff: Diff) -> tuple[str, list[str]]:
    """Return the redacted diff as text within ``DIFF_TOKENS``, and the files that did not fit."""
    chunks: list[str] = []
    left_out: list[str] = []
    used = 0
    for file in diff.files:
        text = _file_text(file)
        cost = estimate_tokens(text)
        if used + cost > DIFF_TOKENS:
            left_out.append(file.path)
            continue
        chunks.append(text)
        used += cost
    return "\n".join(chunks), left_out


def _file_text(file: FileDiff) -> str:
    shown = redact_diff(file)
    head = f"--- {file.old_path or file.path}\n+++ {file.path} ({file.status})"
    if file.is_binary:
        return head + "\n(binary file)"
    lines = [head]
    for hunk in shown.hunks:
        lines.append(f"@@ -{hunk.old_start},{hunk.old_len} +{hunk.new_start},{hunk.new_len} @@")
        lines += [f"{line.kind.value}{line.text}" for line in hunk.lines]
    return "\n".join(lines)


def _split(body: str) -> tuple[str, str | None, str]:
    """Return the text before Spark's section, the section (markers included) or None, and the text after."""
    start = body.find(START)
    if start < 0:
        return body, None, ""
    end = body.find(END, start + len(START))
    if end < 0:
        return body, None, ""
    end += len(END)
    return body[:start], body[start:end], body[end:]
