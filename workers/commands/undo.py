"""``/spark undo``: revert Spark's last commit on the branch, only while the branch's head is still it.

Spark's last commit is a fix or the applied suggestions of "Apply safe fixes" (both are in the session). The
revert is one commit made like a fix (``createCommitOnBranch`` with ``expectedHeadOid`` = that commit), whose
files are those of its parent for every file it changed, so it is the parent's tree. When someone pushed
since, nothing is committed and the reply names who pushed which commit. A re-run (a worker died) finds its
own commit at the head through its trailer and replies once.
"""

from __future__ import annotations

from bot.adapters.github_port import BranchMoved, CommitInfo, Committed, PullInfo, PushRefused
from bot.core import policy
from bot.core.fixes import commit_message
from bot.core.render import code, prose
from bot.core.session import COMMITTED, UNDONE, Entry, Session, entry_id
from bot.core.wording import plural
from bot.refs import CommandRef
from workers.commands.command import Command, cancellable
from workers.context import JobContext
from workers.flows.parallel import submit
from workers.flows.pushes import refused_reason
from workers.flows.repo_config import load_repo_config
from workers.memory import own_commits
from workers.memory import session as sessions
from workers.reply import Reply

HELP = (
    "`/spark undo`: revert Spark's last commit on the branch (a fix, or applied suggestions), if nobody "
    "pushed since (needs the permission `/spark fix` needs)"
)

# At most this many commits are named when the branch moved since Spark's fix.
MOVED_LISTED = 5


def run_undo(ctx: JobContext, command: CommandRef) -> str:
    """Run ``/spark undo``; return what happened (undone, refused, moved, nothing, already done)."""
    gh, repo = ctx.github, ctx.repo
    eyes = submit(gh.react, repo, command.comment_id, "eyes", review_comment=command.kind == "review_comment")
    permission = submit(gh.permission, repo, command.author)
    pull = gh.pull(repo, ctx.pr.number)
    config = load_repo_config(gh, pull.base_repo, pull.base_ref).config
    level = permission.result()
    eyes.result()
    if not policy.permits(level, config.fix_permission):
        return _reply(
            ctx,
            command,
            f"Sorry @{command.author}, `/spark undo` needs {config.fix_permission} permission on this "
            f"repository, as `/spark fix` does (you have {level}). Ask a maintainer to run it.",
            "refused",
        )
    if pull.state != "open":
        return _reply(
            ctx,
            command,
            "This pull request is closed, so I did not undo anything. Reopen it and comment "
            "`/spark undo` again if you still want my last commit reverted.",
            "nothing",
        )
    ctx.cancel.claim(by=command.author)
    session = sessions.load(ctx.redis, ctx.pr.key)
    mine = entry_id("undo", command.comment_id)
    done = session.get(mine)
    if done is not None and done.sha:
        url = gh.commit(pull.base_repo, done.sha).html_url
        return _reply(ctx, command, _undone_text(session, done, url), "already done")
    last = session.last_commit()
    if last is None or last.command == "undo":
        what = "" if last is None else f" (my last commit here, {_short(last.sha)}, was itself an undo)"
        return _reply(
            ctx, command, f"There is no commit of mine to undo on this pull request{what}.", "nothing"
        )
    if pull.head_sha != last.sha:
        head = gh.commit(pull.base_repo, pull.head_sha)
        if Reply(ctx, command, "undo").url in head.message:
            # An earlier run of this job committed the undo and died before recording it.
            session = _recorded(ctx, command, last, pull.head_sha)
            undo = session.get(mine)
            assert undo is not None
            return _reply(ctx, command, _undone_text(session, undo, head.html_url), "already done")
        moved = gh.commits_between(pull.base_repo, last.sha, pull.head_sha)
        return _reply(ctx, command, _moved_text(last, moved, pull), "moved")
    why = policy.push_refusal(pull)
    if why is not None:
        return _reply(ctx, command, f"I did not undo {_short(last.sha)}: I {why}.", "refused")
    return _revert(ctx, command, pull, last, session)


def _revert(ctx: JobContext, command: CommandRef, pull: PullInfo, fix: Entry, session: Session) -> str:
    gh = ctx.github
    info = gh.commit(pull.base_repo, fix.sha)
    if not info.parents:
        return _reply(
            ctx,
            command,
            f"I cannot undo {_short(fix.sha)}: it has no parent commit to restore. Revert it by hand.",
            "nothing",
        )
    parent = info.parents[0]
    paths = sorted(set(info.files) | set(fix.files))
    texts = {path: submit(gh.file_text, pull.base_repo, path, parent) for path in paths}
    additions: dict[str, bytes] = {}
    deletions: list[str] = []
    for path, future in texts.items():
        text = future.result()
        if text is None:
            deletions.append(path)
        else:
            additions[path] = text.encode("utf-8", "surrogateescape")
    ctx.cancel.check()
    headline, body = commit_message(
        f"Undo: {fix.text or 'the fix'}",
        command.author,
        Reply(ctx, command, "undo").url,
        paths,
        command="undo",
    )
    body += f"\nSpark-Reverts: {fix.sha}"
    with ctx.timings.span("commit"), own_commits.committing(ctx.redis, ctx.pr.key):
        result = gh.commit_on_branch(
            pull.head_repo,
            pull.head_ref,
            expected_head=fix.sha,
            headline=headline,
            body=body,
            additions=additions,
            deletions=deletions,
        )
        if isinstance(result, Committed):
            own_commits.made(ctx.redis, ctx.pr.key, pull, result.oid, paths)
    if isinstance(result, PushRefused):
        return _reply(
            ctx, command, f"I did not undo {_short(fix.sha)}: I {refused_reason(result, pull)}.", "refused"
        )
    if isinstance(result, BranchMoved):
        fresh = gh.pull(ctx.repo, ctx.pr.number)
        moved = gh.commits_between(pull.base_repo, fix.sha, fresh.head_sha)
        return _reply(ctx, command, _moved_text(fix, moved, fresh), "moved")
    session = _recorded(ctx, command, fix, result.oid)
    undo = session.get(entry_id("undo", command.comment_id))
    assert undo is not None
    return _reply(ctx, command, _undone_text(session, undo, result.url), "undone", rocket=True)


def _recorded(ctx: JobContext, command: CommandRef, fix: Entry, oid: str) -> Session:
    """Record the undo in the session: the fix is undone, the undo is Spark's newest commit."""
    sessions.update(ctx.redis, ctx.pr.key, fix.id, outcome=UNDONE)
    undo = Entry(
        id=entry_id("undo", command.comment_id),
        command="undo",
        author=command.author,
        outcome=COMMITTED,
        order=command.comment_id,
        files=fix.files,
        sha=oid,
        parent=fix.sha,
        target=fix.id,
    )
    return sessions.record(ctx.redis, ctx.pr.key, undo)


def _undone_text(session: Session, undo: Entry, url: str) -> str:
    fix = session.get(undo.target)
    what = f" ({prose(fix.text)})" if fix is not None and fix.text else ""
    files = ", ".join(code(p) for p in undo.files)
    where = url or _short(undo.sha)
    restored = f" {files} {'is' if len(undo.files) == 1 else 'are'} as before it." if files else ""
    return (
        f"Undid my commit {_short(undo.parent)}{what} in {where}.{restored} "
        "Comment `/spark fix` with new instructions to try again."
    )


def _moved_text(fix: Entry, moved: list[CommitInfo], pull: PullInfo) -> str:
    """Say that the branch moved since Spark's fix, and who pushed which commit since (the newest few)."""
    lines = [f"- {_short(c.sha)} by {c.author or 'someone'}: {prose(_headline(c))}" for c in moved]
    if len(lines) > MOVED_LISTED:
        hidden = len(lines) - MOVED_LISTED
        lines = [f"- {plural(hidden, 'earlier commit')}", *lines[-MOVED_LISTED:]]
    pushed = "Pushed since:\n" + "\n".join(lines) + "\n\n" if lines else ""
    return (
        f"I did not undo my commit {_short(fix.sha)}: the branch {code(pull.head_ref)} moved since, and "
        f"its head is now {_short(pull.head_sha)}.\n\n{pushed}Revert it by hand, or ask `/spark fix` for "
        "the change you want on top of the new head."
    )


def _headline(commit: CommitInfo) -> str:
    return commit.message.splitlines()[0] if commit.message else "(no message)"


def _reply(ctx: JobContext, command: CommandRef, text: str, outcome: str, rocket: bool = False) -> str:
    """Reply once (a re-run edits the same reply); return ``outcome``."""
    Reply(ctx, command, "undo").post(text, reaction="rocket" if rocket else None)
    return outcome


def _short(sha: str) -> str:
    return sha[:7]


COMMAND = Command("undo", HELP, cancellable("undo", run_undo))
