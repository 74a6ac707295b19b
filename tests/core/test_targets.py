"""Which files ``/spark fix`` edits: every file the user named (in the diff or not), else the best match."""

from __future__ import annotations

import pytest

from bot.core.diff import format_patch, parse_diff
from bot.core.targets import (
    MAX_TARGETS,
    Mention,
    TargetChoice,
    choose_targets,
    left_out_note,
    likely_targets,
    mentioned_files,
    named_paths,
    refusal_message,
    target_notes,
)


def _diff(*files: tuple[str, str, str]) -> str:
    return "".join(format_patch(path, before, after) for path, before, after in files)


PR_DIFF = parse_diff(
    _diff(
        ("app/calc.py", "def total(items):\n    return 0\n", "def total(items):\n    return sum(items)\n"),
        ("app/util.py", "x = 1\n", "x = 2\nname = 'grid'\n"),
        (".github/workflows/ci.yml", "on: push\n", "on: [push]\n"),
        ("docs/notes.md", "a\n", "a\nb\n"),
    )
)
TREE = [
    "app/calc.py",
    "app/util.py",
    "app/http.py",
    "app/__init__.py",
    "pkg/__init__.py",
    "docs/conf.py",
    "docs/notes.md",
    "setup.py",
    ".github/workflows/ci.yml",
    "vendor/blob.bin",
]


def targets(instruction: str, **kwargs: object) -> tuple[str, ...]:
    choice = choose_targets(instruction, PR_DIFF, tree=TREE, **kwargs)  # type: ignore[arg-type]
    assert choice.refused == (), choice.refused
    return choice.paths


@pytest.mark.parametrize(
    ("instruction", "written"),
    [
        ("fix app/http.py: handle the timeout", ["app/http.py"]),
        ("conf.py __init__.py setup.py: tidy", ["conf.py", "__init__.py", "setup.py"]),
        ("in `src\\app\\util.py` please", ["src/app/util.py"]),
        ("see ./app/calc.py:42 and app/util.py#L3-L9.", ["app/calc.py", "app/util.py"]),
        ("the Makefile target", ["Makefile"]),
        ("`data/model.onnx` is stale", ["data/model.onnx"]),
        ("../../etc/passwd", ["../../etc/passwd"]),
        ("/etc/passwd", ["/etc/passwd"]),
        # Not file names: calls, dotted names, URLs, tools named like files, versions.
        ("use response.json() and os.path.join, see https://x.io/a.py", []),
        ("it breaks on Node.js 1.2 e.g. here", []),
    ],
)
def test_mentioned_files(instruction: str, written: list[str]) -> None:
    assert [m.path for m in mentioned_files(instruction)] == written


def test_named_file_outside_the_diff_is_the_target() -> None:
    assert targets("fix app/http.py: handle the timeout") == ("app/http.py",)


def test_every_bare_name_resolves_against_the_tree() -> None:
    # docs/conf.py and setup.py are not in the diff; __init__.py is ambiguous in the tree but not in the diff.
    diff = parse_diff(PR_DIFF_TEXT_WITH_PKG)
    choice = choose_targets("conf.py __init__.py setup.py: tidy", diff, tree=TREE)
    assert choice.paths == ("docs/conf.py", "pkg/__init__.py", "setup.py") and choice.refused == ()


PR_DIFF_TEXT_WITH_PKG = _diff(("pkg/__init__.py", "", "x = 1\n"))


def test_names_not_in_the_diff_wait_for_the_tree() -> None:
    choice = choose_targets("fix app/calc.py and conf.py", PR_DIFF)
    assert choice.paths == ("app/calc.py",) and choice.unresolved == (Mention("conf.py", "conf.py"),)


def test_missing_file_is_refused_with_the_closest_paths() -> None:
    choice = choose_targets("fix app/htpp.py", PR_DIFF, tree=TREE)
    assert choice.paths == ()
    [refused] = choice.refused
    assert refused.written == "app/htpp.py" and "`app/http.py`" in refused.reason
    message = refusal_message(choice)
    assert "`app/htpp.py`" in message and "not asked" in message


def test_ambiguous_bare_name_is_refused_with_the_candidates() -> None:
    choice = choose_targets("fix __init__.py", PR_DIFF, tree=TREE)
    [refused] = choice.refused
    assert "`app/__init__.py`" in refused.reason and "`pkg/__init__.py`" in refused.reason


@pytest.mark.parametrize(
    ("instruction", "why"),
    [
        ("/spark fix .github/workflows/ci.yml", "workflow"),
        ("fix ci.yml please", "workflow"),
        ("fix ../../etc/passwd", "outside the repository"),
        ("fix /etc/passwd", "absolute"),
        ("fix vendor/blob.bin", "binary"),
    ],
)
def test_forbidden_named_target_is_refused_never_swapped(instruction: str, why: str) -> None:
    diff = parse_diff(
        _diff(("app/calc.py", "a = 1\n", "a = 2\n"))
        + "diff --git a/vendor/blob.bin b/vendor/blob.bin\nindex 1111111..2222222 100644\n"
        "Binary files a/vendor/blob.bin and b/vendor/blob.bin differ\n"
    )
    choice = choose_targets(instruction, diff, tree=TREE)
    assert choice.paths == () and len(choice.refused) == 1 and why in choice.refused[0].reason


def test_config_exclusion_refuses_a_named_file_and_skips_a_best_match() -> None:
    def selects(path: str) -> bool:
        return not path.startswith("docs/")

    refused = choose_targets("fix docs/conf.py", PR_DIFF, tree=TREE, selects=selects).refused
    assert len(refused) == 1 and "excluded" in refused[0].reason
    assert choose_targets("the notes need a line b", PR_DIFF, selects=selects).paths != ("docs/notes.md",)


def test_thread_path_first_then_named_files() -> None:
    assert targets("also app/http.py", thread_path="app/util.py") == ("app/util.py", "app/http.py")
    refused = choose_targets("fix", PR_DIFF, thread_path=".github/workflows/ci.yml").refused
    assert len(refused) == 1 and "workflow" in refused[0].reason


def test_over_the_limit_the_named_files_left_out_are_said() -> None:
    names = "app/calc.py app/util.py app/http.py docs/conf.py setup.py docs/notes.md"
    choice = choose_targets(names, PR_DIFF, tree=TREE)
    assert len(choice.paths) == MAX_TARGETS
    assert choice.left_out == ("setup.py", "docs/notes.md")
    assert "`setup.py`, `docs/notes.md`" in left_out_note(choice)


def test_unnamed_picks_the_file_the_words_point_at() -> None:
    assert targets("the grid name is wrong") == ("app/util.py",)
    assert targets("total is computed wrongly") == ("app/calc.py",)


def test_deleted_file_named_is_missing_not_swapped() -> None:
    deletion = (
        "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\nindex 1111111..0000000\n"
        "--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
    )
    diff = parse_diff(deletion + _diff(("kept.py", "y = 1\n", "y = 2\n")))
    choice = choose_targets("fix gone.py", diff, tree=["kept.py"])
    assert choice.paths == () and "no such file" in choice.refused[0].reason
    assert choose_targets("fix it", diff).paths == ("kept.py",)


def test_truncated_tree_takes_the_path_as_spelled() -> None:
    choice = choose_targets("fix lib/deep/x.py", PR_DIFF, tree=TREE, tree_complete=False)
    assert choice.paths == ("lib/deep/x.py",)


def test_refusal_renders_each_path_once_and_inert() -> None:
    choice = choose_targets("fix ../my_dir/x_y.py and nope_file.py", PR_DIFF, tree=["a/nope_fil.py"])
    message = refusal_message(choice)
    assert "- `nope_file.py`: no such file at the pull request's head; closest: `a/nope_fil.py`" in message
    assert "'../my\\_dir/x\\_y.py' has empty" in message and "\\\\" not in message


@pytest.mark.parametrize(
    ("instruction", "paths", "thread_path", "guess"),
    [
        # Named files, resolved against the paths last changed (a bare name to its path), then as spelled.
        ("fix the mean in calc.py", ["src/calc.py", "README.md"], None, ["src/calc.py"]),
        ("rename x in `lib/util.py`", ["src/calc.py"], None, ["lib/util.py"]),
        # A thread's file first; a refused path (a workflow) is never read ahead.
        ("and in .github/workflows/ci.yml", ["a.py"], "b.py", ["b.py"]),
        # Nothing named: each changed path while there are few, none when the best match is anyone's guess.
        ("divide by the right count", ["a.py", "b.py"], None, ["a.py", "b.py"]),
        ("divide by the right count", [f"m{n}.py" for n in range(MAX_TARGETS + 1)], None, []),
        # Never more than a fix takes.
        (" ".join(f"f{n}.py" for n in range(9)), [], None, [f"f{n}.py" for n in range(MAX_TARGETS)]),
    ],
)
def test_likely_targets_are_guessed_from_the_paths_last_changed(
    instruction: str, paths: list[str], thread_path: str | None, guess: list[str]
) -> None:
    assert likely_targets(instruction, paths, thread_path) == guess


def test_named_paths_resolve_a_bare_name_to_the_one_path_it_ends() -> None:
    paths = ["src/calc.py", "lib/a/util.py", "lib/b/util.py"]
    assert named_paths("why does calc.py divide? see `src/calc.py`", paths) == ["src/calc.py"]
    # Two paths end in util.py: the name stays as written (reading it decides); a path outside stays too.
    assert named_paths("and util.py, docs/guide.md", paths) == ["util.py", "docs/guide.md"]


# ---------------------------------------------------------------------------------------------------------
# Words are not file names unless they name a file (issue 29)

CLIENT_TREE = [
    "src/client.py",
    "MANIFEST.in",
    "CHANGES",
    "Procfile",
    "app/sessions.py",
    "docs/my notes.py",
    "docs/notes.md",
    ".flake8",
]
CLIENT_DIFF = parse_diff(_diff(("app/sessions.py", "a = 1\n", "a = 2\n")))


def _choose(instruction: str, tree: list[str] = CLIENT_TREE) -> TargetChoice:
    return choose_targets(instruction, CLIENT_DIFF, tree=tree)


@pytest.mark.parametrize(
    "instruction",
    [
        "src/client.py: point the /guide/#<anchor> links at /guide/clients/#<anchor>",
        "src/client.py: see #123 and /guide/, move os.path and `flask.json.tag` calls to flask.json",
        "src/client.py: match *.py and src/**/*.ts, as in 1.2.3 and v2.0.1",
        "src/client.py: the handler at /api/v1/users answers 500",
        "src/client.py: add .svg and .html to the autoescaped extensions",
    ],
)
def test_urls_anchors_references_modules_globs_and_versions_do_not_veto_a_named_file(
    instruction: str,
) -> None:
    choice = _choose(instruction)
    assert choice.paths == ("src/client.py",) and choice.refused == (), choice


def test_a_name_that_matches_no_file_does_not_veto_a_clear_target_and_the_reply_says_so() -> None:
    choice = choose_targets("MANIFEST.in: stop shipping helpers.py", CLIENT_DIFF, tree=CLIENT_TREE)
    assert choice.paths == ("MANIFEST.in",) and choice.refused == ()
    [word] = choice.not_files
    assert word.written == "helpers.py" and "no such file" in word.reason
    [note] = target_notes(choice)
    assert "`helpers.py`: no such file at the pull request's head" in note and "did not edit" in note
    # With no name that resolves, today's refusal with the closest paths stands.
    alone = choose_targets("fix sesions.py and helpers.py", CLIENT_DIFF, tree=CLIENT_TREE)
    assert alone.paths == () and [r.written for r in alone.refused] == ["sesions.py", "helpers.py"]
    assert "`app/sessions.py`" in alone.refused[0].reason
    # A file Spark may not edit still refuses the whole request: it is a file the user named.
    veto = choose_targets("fix MANIFEST.in and .github/workflows/ci.yml", CLIENT_DIFF, tree=CLIENT_TREE)
    assert veto.paths == () and "workflow" in veto.refused[0].reason


def test_extensionless_files_of_the_repository_are_file_names() -> None:
    early = choose_targets("CHANGES app/sessions.py: note the fix", CLIENT_DIFF)
    assert early.paths == ("app/sessions.py",) and [m.path for m in early.unresolved] == ["CHANGES"]
    choice = _choose("CHANGES app/sessions.py: note the fix")
    assert choice.paths == ("CHANGES", "app/sessions.py") and choice.not_files == ()
    assert _choose("the Procfile and .flake8 need a worker").paths == ("Procfile", ".flake8")
    # Upper-case words that name no file are words: the best match decides, nothing is refused or noted.
    words = choose_targets("HTTP errors: retry TODO", CLIENT_DIFF, tree=CLIENT_TREE)
    assert words.paths == ("app/sessions.py",) and words.refused == () and words.not_files == ()


@pytest.mark.parametrize(
    "instruction",
    [
        "fix `docs/my notes.py`: rename x",
        'fix "docs/my notes.py": rename x',
        "fix 'docs/my notes.py': rename x",
        "fix docs/my\\ notes.py: rename x",
    ],
)
def test_a_file_name_with_spaces_is_taken_whole_in_backticks_quotes_or_escaped(instruction: str) -> None:
    choice = _choose(instruction)
    assert choice.paths == ("docs/my notes.py",) and choice.refused == (), choice


def test_a_quoted_phrase_that_is_no_file_gives_the_names_inside_it() -> None:
    """Taken whole first; when the phrase names no file, the names in it count as if unquoted."""
    choice = _choose('fix the "NameError in sessions.py" and `docs/my notes.py`')
    assert choice.paths == ("app/sessions.py", "docs/my notes.py") and choice.not_files == ()
    assert _choose("fix 'rename the helper'").paths == ("app/sessions.py",)


def test_apostrophes_do_not_pair_into_quotes() -> None:
    assert [m.path for m in mentioned_files("don't touch 'app.py' it's fine")] == ["app.py"]
    assert [m.path for m in mentioned_files("see docs/guide.md#install")] == ["docs/guide.md"]


def test_a_target_written_loosely_elsewhere_in_the_request_is_not_noted() -> None:
    tree = ["README.md", "Pipfile.lock", "docs/notes.md"]
    choice = choose_targets("README.md: fix a typo in README, see pipfile.lock", CLIENT_DIFF, tree=tree)
    assert choice.paths == ("README.md",) and [r.written for r in choice.not_files] == ["pipfile.lock"]


def test_a_bare_name_of_several_files_beside_a_clear_target_is_noted_not_a_veto() -> None:
    choice = choose_targets("fix setup.py: import __init__.py lazily", PR_DIFF, tree=TREE)
    assert choice.paths == ("setup.py",) and choice.refused == ()
    [word] = choice.not_files
    assert word.written == "__init__.py" and "`app/__init__.py`" in word.reason


def test_ordinary_words_and_code_spans_cost_no_tree_lookup() -> None:
    """Only names that are extensionless files by convention are looked up in the repository's tree."""
    early = choose_targets("rename `foo` to `bar`, and/or HTTP TODO in app/sessions.py", CLIENT_DIFF)
    assert early.paths == ("app/sessions.py",) and early.unresolved == ()
    lookups = choose_targets("`bin/release`, app/run, LICENSE and .flake8", CLIENT_DIFF).unresolved
    assert [m.path for m in lookups] == ["bin/release", "app/run", "LICENSE", ".flake8"]
