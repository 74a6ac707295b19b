"""The session's shape: bounded and trimmed, one entry per command, and the history a follow-up fix reads."""

from __future__ import annotations

from bot.core.session import (
    COMMITTED,
    MAX_DIFF_CHARS,
    MAX_ENTRIES,
    MAX_TEXT_CHARS,
    RUNNING,
    SUPERSEDED,
    UNDONE,
    Entry,
    Session,
    history_text,
    superseded_by,
)


def fix(n: int, text: str = "", **fields: object) -> Entry:
    return Entry(id=f"fix-{n}", command="fix", author="alice", text=text, order=n, **fields)  # type: ignore[arg-type]


def test_recording_an_id_again_replaces_its_entry_in_place() -> None:
    session = Session().with_entry(fix(1, "rename x")).with_entry(fix(2, "and y"))
    session = session.with_entry(fix(1, "rename x", outcome=COMMITTED, sha="a" * 40))
    assert [e.id for e in session.entries] == ["fix-1", "fix-2"]
    entry = session.get("fix-1")
    assert entry is not None and entry.outcome == COMMITTED


def test_the_session_keeps_the_last_entries_only() -> None:
    session = Session()
    for n in range(MAX_ENTRIES + 5):
        session = session.with_entry(fix(n))
    assert len(session.entries) == MAX_ENTRIES
    assert session.entries[0].id == "fix-5" and session.entries[-1].id == f"fix-{MAX_ENTRIES + 4}"


def test_each_entry_is_trimmed() -> None:
    entry = fix(1, "x" * (MAX_TEXT_CHARS * 3), diff="d" * (MAX_DIFF_CHARS * 3), answer="a" * 10**5)
    [kept] = Session().with_entry(entry).entries
    assert len(kept.text) == MAX_TEXT_CHARS and kept.text.endswith("[... trimmed]")
    assert len(kept.diff) == MAX_DIFF_CHARS and len(kept.answer) == MAX_TEXT_CHARS


def test_json_round_trip_and_unreadable_documents() -> None:
    session = Session().with_entry(fix(1, "a", files=("src/x.py",), sha="b" * 40, outcome=COMMITTED))
    assert Session.from_json(session.to_json()) == session
    assert Session.from_json(session.to_json().encode()) == session
    assert Session.from_json(None) == Session() == Session.from_json("{not json")
    assert Session.from_json('{"a": 1}') == Session()
    assert Entry.from_dict({**fix(3).as_dict(), "from_a_newer_version": 1}) == fix(3)


def test_last_commit_is_the_newest_fix_or_undo_that_committed() -> None:
    session = Session().with_entry(fix(1, sha="1" * 40, outcome=COMMITTED)).with_entry(fix(2))
    last = session.last_commit()
    assert last is not None and last.id == "fix-1"
    undo = Entry(id="undo-3", command="undo", author="bob", sha="3" * 40, outcome=COMMITTED, target="fix-1")
    last = session.with_entry(undo).last_commit()
    assert last is not None and last.id == "undo-3"
    assert Session().last_commit() is None


def test_history_shows_the_last_fix_with_its_words_and_diff() -> None:
    diff = "--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-old_name = 1\n+new_name = 1\n"
    first = fix(1, "rename old_name", files=("src/x.py",), diff=diff, sha="c" * 40, outcome=COMMITTED)
    follow = fix(2, "keep the old name")
    session = Session().with_entry(first).with_entry(follow)
    text = history_text(session, follow)
    assert "rename old_name" in text and "+new_name = 1" in text and "commit ccccccc" in text
    assert "src/x.py" in text and "keep the old name" not in text
    # The first fix itself sees nothing before it.
    assert history_text(session, first) == ""


def test_an_undone_fix_is_shown_as_undone() -> None:
    first = fix(1, "rename", sha="c" * 40, outcome=UNDONE, files=("a.py",))
    undo = Entry(id="undo-2", command="undo", author="bob", sha="d" * 40, outcome=COMMITTED, target="fix-1")
    follow = fix(3, "do it in the caller instead")
    text = history_text(Session((first, undo, follow)), follow)
    assert "later undone" in text and "undid that fix" in text


def test_a_newer_fix_carries_the_words_of_the_fixes_it_superseded() -> None:
    committed = fix(1, "first", sha="e" * 40, outcome=COMMITTED)
    running = fix(2, "use a dict here")
    superseded = fix(3, "and name it cache", outcome=SUPERSEDED)
    newest = fix(4, "no, a list")
    session = Session((committed, running, superseded, newest))
    assert [e.id for e in superseded_by(session, newest)] == ["fix-2", "fix-3"]
    text = history_text(session, newest)
    assert "use a dict here" in text and "and name it cache" in text and "replaced" in text
    # Words that led to a commit are shown with it, never as superseded.
    assert superseded_by(Session((running, committed, newest)), newest) == []
    # A fix that failed on its own is not carried forward.
    failed = fix(2, "nonsense", outcome="failed")
    assert superseded_by(Session((failed, newest)), newest) == []
    # A fix is superseded only by a newer one (a re-run of an old job sees no newer one's words).
    assert superseded_by(Session((running, newest)), fix(2)) == []
    assert running.outcome == RUNNING


def test_a_question_is_shown_the_session_but_never_a_running_fix_as_replaced() -> None:
    committed = fix(1, "rename x", sha="e" * 40, outcome=COMMITTED, files=("a.py",), diff="-x\n+y")
    running = fix(2, "and y too")
    question = Entry(id="ask-3", command="ask", author="carol", text="why y?", order=3)
    text = history_text(Session((committed, running, question)), question)
    assert "rename x" in text and "-x\n+y" in text and "The question may be about any of it" in text
    assert "replaced" not in text and "and y too" not in text
    assert "refine or correct" in history_text(Session((committed, fix(4))), fix(4))


def test_answers_are_history_too() -> None:
    ask = Entry(id="ask-1", command="ask", author="carol", text="why?", answer="because", outcome="answered")
    follow = fix(2, "do what you said")
    text = history_text(Session((ask, follow)), follow)
    assert "why?" in text and "because" in text


def test_thread_replies_and_summaries_are_named_for_what_they_were() -> None:
    reply = Entry(
        id="reply-1", command="reply", author="dan", text="is this a bug?", answer="yes", outcome="answered"
    )
    summary = Entry(id="describe-2", command="describe", author="alice", answer="Adds x.", outcome="answered")
    follow = fix(3, "fix it")
    text = history_text(Session((reply, summary, follow)), follow)
    assert "dan wrote to Spark in a review thread" in text and "/spark describe" in text
