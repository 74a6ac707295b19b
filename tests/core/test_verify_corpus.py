"""Verification of edits (issue 14, section 5): only problems an edit adds count, and the reply says plainly
what could not be checked. Files and answers are our own, shaped after public reports named per case."""

from __future__ import annotations

from bot.core.fixes import check_notes, judge_answers
from bot.core.verify import verify


def sr(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


PY2 = 'import sys\n\n\ndef main(args):\n    print "hello", args\n    return len(args)\n'


def test_python2_file_edit_that_drops_a_paren_is_refused() -> None:
    """A Python 2 file never compiled before; an edit adding a syntax error is still refused (tree-sitter
    error nodes compared before and after)."""
    broken = judge_answers("old.py", PY2, PY2, [sr("    return len(args)\n", "    return len(args\n")])
    assert not broken.ok and broken.text is None
    assert "adds syntax errors" in broken.errors[0]
    fine = judge_answers("old.py", PY2, PY2, [sr("    return len(args)\n", "    return len(args) + 1\n")])
    assert fine.ok and fine.notes and "did not parse before" in fine.notes[0]


TSCONFIG = '{\n  // compiler options\n  "compilerOptions": {\n    "strict": true,\n  },\n}\n'


def test_json_with_comments_is_parsed_as_such() -> None:
    """A tsconfig.json with comments and trailing commas (json.loads rejects it): a dropped closing brace is
    refused, a good edit goes through."""
    dropped = judge_answers(
        "tsconfig.json", TSCONFIG, TSCONFIG, [sr('    "strict": true,\n  },\n', '    "strict": false,\n')]
    )
    assert not dropped.ok and "adds syntax errors" in dropped.errors[0]
    good = judge_answers(
        "tsconfig.json", TSCONFIG, TSCONFIG, [sr('    "strict": true,\n', '    "strict": false,\n')]
    )
    assert good.ok and good.text is not None and '"strict": false' in good.text


def test_a_stray_fence_in_a_broken_javascript_file_is_refused() -> None:
    """A JavaScript file with an existing error; the edit adds another (a Markdown fence line)."""
    before = "function a() {\n  return 1\n}\nconst x = ;\n"
    after = before.replace("  return 1\n", "  return 1\n```\n")
    assert not verify("a.js", after, before=before).ok
    assert verify("a.js", before.replace("return 1", "return 2"), before=before).ok


HELPERS = "def _norm(x):\n    return x.strip()\n\n\ndef load(x):\n    return _norm(x)\n"


def test_python_edit_that_leaves_a_name_undefined_is_refused_with_the_name() -> None:
    """A removed helper that is still called, and a half-done rename (pyflakes names them); the retry prompt
    carries the names (google-gemini/gemini-cli #4037 reports code silently removed by edits)."""
    removed = judge_answers("m.py", HELPERS, HELPERS, [sr("def _norm(x):\n    return x.strip()\n\n\n", "")])
    assert not removed.ok and "_norm" in removed.errors[0]
    renamed = judge_answers("m.py", HELPERS, HELPERS, [sr("def _norm(x):\n", "def _normalise(x):\n")])
    assert not renamed.ok and "_norm" in renamed.errors[0]


def test_only_new_undefined_names_count() -> None:
    """A name the file already left undefined is the author's business, not the edit's."""
    original = "def f():\n    return missing_helper()\n\n\ndef g():\n    return 1\n"
    attempt = judge_answers("m.py", original, original, [sr("    return 1\n", "    return 2\n")])
    assert attempt.ok


def test_the_reply_says_what_could_not_be_checked() -> None:
    """No parser for the file's type, or it did not parse before: the note reaches the reply."""
    readme = "# Title\n\nSome text.\n"
    attempt = judge_answers("README.md", readme, readme, [sr("Some text.\n", "Some better text.\n")])
    assert attempt.ok and attempt.notes == ("no parser for 'README.md'; not checked",)
    broken_yaml = "a: [1, 2\nb: 3\n"
    yaml_attempt = judge_answers("c.yml", broken_yaml, broken_yaml, [sr("b: 3\n", "b: 4\n")])
    assert yaml_attempt.ok and "not checked: it did not parse before" in yaml_attempt.notes[0]
    notes = check_notes({"README.md": attempt, "c.yml": yaml_attempt})
    assert notes[0] == "Check of `README.md`: no parser for 'README.md'; not checked"
    assert notes[1].startswith("Check of `c.yml`: not checked: it did not parse before the edit either")
