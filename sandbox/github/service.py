"""The sandbox's behaviour: GitHub's rules for every state change, and the webhook each change fires."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from sandbox.github.auth import AppAuth
from sandbox.github.bodies import check_body, check_run_fields
from sandbox.github.faults import Faults
from sandbox.github.rules import RuleBook
from sandbox.github.shapes import Json, Shapes
from sandbox.github.state import (
    REACTIONS,
    CheckRun,
    Commit,
    FileChanges,
    FileDiff,
    IssueComment,
    PullRequest,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    Side,
    State,
    StateError,
    Thread,
    utcnow,
)
from sandbox.github.webhooks import Hookshot

NOT_ACCESSIBLE = "Resource not accessible by integration"
SUGGESTION = re.compile(r"^(`{3,}|~{3,})suggestion[^\n]*\n(.*?)^\1\s*$", re.S | re.M)


@dataclass(frozen=True)
class CommentSpec:
    """A requested inline comment, before GitHub's rules accept it."""

    path: str
    body: str
    line: int
    side: Side = "RIGHT"
    start_line: int | None = None
    start_side: Side | None = None

    @classmethod
    def from_json(cls, data: Json) -> CommentSpec:
        """Build from a REST body; `position`-only comments are not supported by the sandbox (deprecated)."""
        if "line" not in data or not isinstance(data["line"], int):
            raise StateError(
                422, "Unprocessable Entity", ["line is required (position is not supported here)"]
            )
        sides = (None, "LEFT", "RIGHT")
        if data.get("side") not in sides or data.get("start_side") not in sides:
            raise StateError(422, "Unprocessable Entity", ["side must be LEFT or RIGHT"])
        side: Side = "LEFT" if data.get("side") == "LEFT" else "RIGHT"
        start = data.get("start_line")
        start_side: Side | None = None
        if start is not None:
            start_side = "LEFT" if (data.get("start_side") or side) == "LEFT" else "RIGHT"
        return cls(
            str(data.get("path", "")), str(data.get("body", "")), data["line"], side, start, start_side
        )


class GitHub:
    """State plus the rules: each method either refuses with GitHub's status and message, or changes state."""

    def __init__(
        self, state: State, auth: AppAuth, shapes: Shapes, hookshot: Hookshot, faults: Faults, slug: str
    ):
        self.state = state
        self.auth = auth
        self.shapes = shapes
        self.hookshot = hookshot
        self.faults = faults
        self.rules = RuleBook()
        self.bot_login = f"{slug}[bot]"
        self.bot_email = f"{auth.app_id}+{slug}[bot]@users.noreply.github.com"

    # ---- access -------------------------------------------------------------------------------------------

    def can_read(self, installation_id: int, repo: Repo) -> bool:
        """Installation tokens read their own repositories and any public one."""
        return repo.installation_id == installation_id or not repo.private

    def can_write_branch(self, installation_id: int, repo: Repo, branch: str | None) -> bool:
        """The App writes to installed repos, and to a user-owned fork's PR branch open to maintainers.

        ``branch=None`` asks whether any branch of the repository is writable (to create git objects there).
        """
        if repo.installation_id == installation_id:
            return True
        if repo.parent is None or repo.owner_type != "User":
            return False
        return any(
            pr.head_repo == repo.full_name
            and branch in (None, pr.head_ref)
            and pr.state == "open"
            and pr.maintainer_can_modify
            and self.state.repo(pr.repo).installation_id == installation_id
            for pr in self.state.pulls.values()
        )

    # ---- webhooks -----------------------------------------------------------------------------------------

    def emit(self, event: str, repo: Repo, sender: str, payload: Json) -> None:
        """Deliver an event about an installed repository to the App, if it subscribed to that event."""
        if repo.installation_id is None or not self.faults.webhooks_enabled:
            return
        if event not in self.shapes.events:
            return
        body: Json = {
            **payload,
            "repository": self.shapes.repo(repo),
            "installation": {
                "id": repo.installation_id,
                "node_id": f"MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u{repo.installation_id}",
            },
            "sender": self.shapes.user(sender),
        }
        if repo.owner_type == "Organization":
            body["organization"] = self.organization(repo.owner)
        self.hookshot.send(event, body, repo.installation_id, repo.id)

    def organization(self, login: str) -> Json:
        """Return the `organization` object webhook payloads carry for organization repositories."""
        uid = self.state.user_id(login)
        url = f"{self.shapes.api}/orgs/{login}"
        return {
            "login": login,
            "id": uid,
            "node_id": self.shapes.user(login)["node_id"],
            "url": url,
            "repos_url": url + "/repos",
            "events_url": url + "/events",
            "hooks_url": url + "/hooks",
            "issues_url": url + "/issues",
            "members_url": url + "/members{/member}",
            "public_members_url": url + "/public_members{/member}",
            "avatar_url": f"{self.shapes.html}/avatars/{login}",
            "description": None,
        }

    def issue(self, pr: PullRequest) -> Json:
        """Return the issue side of a PR (what `issue_comment` payloads carry)."""
        data = self.shapes.pull(pr)
        url = f"{self.shapes.api}/repos/{pr.repo}/issues/{pr.number}"
        keep = (
            "id",
            "node_id",
            "number",
            "title",
            "user",
            "labels",
            "state",
            "locked",
            "assignee",
            "assignees",
            "milestone",
            "comments",
            "created_at",
            "updated_at",
            "closed_at",
            "author_association",
            "active_lock_reason",
            "body",
            "draft",
        )
        issue = {k: data[k] for k in keep}
        issue.update(
            url=url,
            repository_url=f"{self.shapes.api}/repos/{pr.repo}",
            comments_url=url + "/comments",
            events_url=url + "/events",
            labels_url=url + "/labels{/name}",
            reactions=self.shapes.reactions_summary("issue", pr.id, url),
            html_url=data["html_url"],
            pull_request={
                "url": data["url"],
                "html_url": data["html_url"],
                "diff_url": data["diff_url"],
                "patch_url": data["patch_url"],
                "merged_at": None,
            },
        )
        return issue

    # ---- pull requests and pushes -------------------------------------------------------------------------

    def open_pull_request(
        self,
        base: Repo,
        head: Repo,
        head_ref: str,
        base_ref: str,
        title: str,
        body: str | None,
        author: str,
        draft: bool,
        maintainer_can_modify: bool,
    ) -> PullRequest:
        """Open a PR and fire `pull_request` opened."""
        with self.state.lock:
            if head_ref not in head.refs or base_ref not in base.refs:
                raise StateError(
                    422,
                    "Validation Failed",
                    [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                )
            number = next(self.state.issue_numbers.setdefault(base.full_name, _counter()))
            pr = PullRequest(
                id=self.state.next_id(),
                number=number,
                repo=base.full_name,
                head_repo=head.full_name,
                head_ref=head_ref,
                base_ref=base_ref,
                base_sha=base.refs[base_ref],
                title=title,
                body=body,
                author=author,
                draft=draft,
                maintainer_can_modify=maintainer_can_modify and head.owner_type == "User",
            )
            self.state.pulls[(base.full_name, number)] = pr
        self.emit(
            "pull_request",
            base,
            author,
            {"action": "opened", "number": number, "pull_request": self.shapes.pull(pr)},
        )
        return pr

    def close_pull_request(self, pr: PullRequest, sender: str) -> None:
        """Close a PR and fire `pull_request` closed."""
        pr.state, pr.updated_at = "closed", utcnow()
        self.emit(
            "pull_request",
            self.state.repo(pr.repo),
            sender,
            {"action": "closed", "number": pr.number, "pull_request": self.shapes.pull(pr)},
        )

    def mark_ready_for_review(self, pr: PullRequest, sender: str) -> None:
        """Take a draft PR out of draft and fire `pull_request` ready_for_review."""
        pr.draft, pr.updated_at = False, utcnow()
        self.emit(
            "pull_request",
            self.state.repo(pr.repo),
            sender,
            {"action": "ready_for_review", "number": pr.number, "pull_request": self.shapes.pull(pr)},
        )

    def branch_moved(self, repo: Repo, branch: str, before: str | None, after: str, sender: str) -> None:
        """Fire `push`, then `pull_request` synchronize for every open PR whose head is that branch."""
        self.emit(
            "push",
            repo,
            sender,
            {
                "ref": f"refs/heads/{branch}",
                "before": before or "0" * 40,
                "after": after,
                "created": before is None,
                "deleted": False,
                "forced": False,
                "commits": [],
                "head_commit": {"id": after},
                "pusher": {"name": sender},
            },
        )
        for pr in list(self.state.pulls.values()):
            if pr.head_repo == repo.full_name and pr.head_ref == branch and pr.state == "open":
                pr.updated_at = utcnow()
                base = self.state.repo(pr.repo)
                self.emit(
                    "pull_request",
                    base,
                    sender,
                    {
                        "action": "synchronize",
                        "number": pr.number,
                        "before": before,
                        "after": after,
                        "pull_request": self.shapes.pull(pr),
                    },
                )

    def push(
        self,
        repo: Repo,
        branch: str,
        files: FileChanges,
        message: str,
        author: str,
        email: str,
        verified: bool,
    ) -> Commit:
        """Commit on a branch (creating it from the default branch if new) and fire the push events."""
        with self.state.lock:
            before = repo.refs.get(branch)
            if before is None and repo.default_branch in repo.refs:
                repo.refs[branch] = repo.refs[repo.default_branch]
            commit = self.state.commit_files(repo, branch, files, message, author, email, verified)
        self.branch_moved(repo, branch, before or repo.refs.get(repo.default_branch), commit.sha, author)
        return commit

    def commit_on_branch(
        self,
        installation_id: int,
        repo: Repo,
        branch: str,
        expected_head: str,
        files: FileChanges,
        message: str,
    ) -> Commit:
        """GraphQL createCommitOnBranch: compare-and-swap on the branch head, a verified commit by the App."""
        with self.state.lock:
            if branch not in repo.refs:
                raise StateError(
                    404, f'A ref named "refs/heads/{branch}" does not exist in {repo.full_name}.'
                )
            if not self.can_write_branch(installation_id, repo, branch):
                raise StateError(403, NOT_ACCESSIBLE)
            if repo.refs[branch] != expected_head:
                raise StateError(
                    409, f'Expected branch to point to "{expected_head}" but it did not. Pull and try again.'
                )
            # GitHub signs the App's createCommitOnBranch commits, so a signature rule never refuses them.
            self.rules.enforce(repo.full_name, branch, self.bot_login, verified=True)
            return self.push(repo, branch, files, message, self.bot_login, self.bot_email, verified=True)

    def update_ref(self, installation_id: int, repo: Repo, branch: str, sha: str, force: bool) -> None:
        """PATCH a branch: fast-forward only unless forced, like GitHub."""
        with self.state.lock:
            if branch not in repo.refs:
                raise StateError(422, "Reference does not exist")
            if not self.can_write_branch(installation_id, repo, branch):
                raise StateError(403, NOT_ACCESSIBLE)
            if sha not in self.state.git.commits:
                raise StateError(422, "Object does not exist")
            before = repo.refs[branch]
            if not force and before not in self.state.git.ancestors(sha):
                raise StateError(422, "Update is not a fast forward")
            verified = all(self.state.git.commits[c].verified for c in self._new_commits(before, sha))
            self.rules.enforce(repo.full_name, branch, self.bot_login, verified)
            repo.refs[branch] = sha
        self.branch_moved(repo, branch, before, sha, self.bot_login)

    def _new_commits(self, before: str, after: str) -> list[str]:
        """Return the commits a ref update from ``before`` to ``after`` brings onto the branch."""
        old = set(self.state.git.ancestors(before))
        return [c for c in self.state.git.ancestors(after) if c not in old]

    # ---- comments, reviews, reactions ---------------------------------------------------------------------

    def add_issue_comment(self, pr: PullRequest, body: str, author: str) -> IssueComment:
        """Comment on a PR's conversation and fire `issue_comment` created."""
        check_body("IssueComment", body)
        if not body:
            raise StateError(
                422,
                "Validation Failed",
                [{"resource": "IssueComment", "code": "missing_field", "field": "body"}],
            )
        comment = IssueComment(self.state.next_id(), pr.repo, pr.number, body, author)
        with self.state.lock:
            self.state.issue_comments[comment.id] = comment
        self.emit(
            "issue_comment",
            self.state.repo(pr.repo),
            author,
            {
                "action": "created",
                "issue": self.issue(pr),
                "comment": self.shapes.issue_comment(comment),
            },
        )
        return comment

    def edit_issue_comment(self, comment: IssueComment, body: str, sender: str) -> None:
        """Edit a comment and fire `issue_comment` edited."""
        check_body("IssueComment", body)
        before, comment.body, comment.updated_at = comment.body, body, utcnow()
        pr = self.state.pull(comment.repo, comment.number)
        self.emit(
            "issue_comment",
            self.state.repo(pr.repo),
            sender,
            {
                "action": "edited",
                "changes": {"body": {"from": before}},
                "issue": self.issue(pr),
                "comment": self.shapes.issue_comment(comment),
            },
        )

    def check_comment(self, files: dict[str, FileDiff], spec: CommentSpec) -> tuple[FileDiff, str] | str:
        """Apply GitHub's placement rules; return (file, diff_hunk) or the refusal message."""
        diff = files.get(spec.path)
        if diff is None:
            return "Path could not be resolved"
        if spec.side not in ("LEFT", "RIGHT") or (spec.start_side or spec.side) not in ("LEFT", "RIGHT"):
            return "Side is invalid"
        end_hunk = diff.hunk_of(spec.line, spec.side)
        if end_hunk is None:
            return "Pull request review thread line must be part of the diff"
        if spec.start_line is not None:
            if spec.start_line >= spec.line and (spec.start_side or spec.side) == spec.side:
                return "Pull request review thread start line must precede the end line."
            if diff.hunk_of(spec.start_line, spec.start_side or spec.side) != end_hunk:
                return "Pull request review thread start line must be part of the same hunk as the line."
        hunk = diff.hunks[end_hunk]
        return diff, _hunk_until(hunk.header, hunk.lines, spec.line, spec.side)

    def create_review(
        self,
        pr: PullRequest,
        body: str,
        event: str,
        commit_id: str | None,
        specs: list[CommentSpec],
        author: str,
    ) -> Review:
        """Create a review (PENDING without an event); one misplaced comment rejects it all (GitHub's 422)."""
        if event not in ("COMMENT", "APPROVE", "REQUEST_CHANGES", "PENDING"):
            raise StateError(
                422, "Unprocessable Entity", ["Event must be one of COMMENT, APPROVE, REQUEST_CHANGES"]
            )
        check_body("PullRequestReview", body)
        for spec in specs:
            check_body("PullRequestReviewComment", spec.body)
        if event in ("COMMENT", "REQUEST_CHANGES") and not body and not specs:
            raise StateError(422, "Unprocessable Entity", ["Body is required for this event"])
        with self.state.lock:
            head = self.state.head_sha(pr)
            if commit_id is not None and commit_id not in self.state.git.ancestors(head):
                raise StateError(422, "Unprocessable Entity", ["commit_id is not part of the pull request"])
            files = {f.path: f for f in self.state.pr_diff(pr)}
            placed: list[tuple[CommentSpec, str]] = []
            for spec in specs:
                checked = self.check_comment(files, spec)
                if isinstance(checked, str):
                    raise StateError(422, "Unprocessable Entity", [checked])
                placed.append((spec, checked[1]))
            review = Review(self.state.next_id(), pr.repo, pr.number, body, event, commit_id or head, author)
            self.state.reviews[review.id] = review
            comments = [self._store_comment(pr, review.id, review.commit_id, s, h, author) for s, h in placed]
        if event == "PENDING":  # a pending review is invisible (and fires nothing) until submitted
            return review
        self._emit_review(pr, review, comments)
        return review

    def _emit_review(self, pr: PullRequest, review: Review, comments: list[ReviewComment]) -> None:
        """Fire `pull_request_review` submitted, then `pull_request_review_comment` created per comment."""
        self.emit(
            "pull_request_review",
            self.state.repo(pr.repo),
            review.author,
            {
                "action": "submitted",
                "review": self.shapes.review(review),
                "pull_request": self.shapes.pull(pr),
            },
        )
        for comment in comments:
            self._emit_review_comment(pr, comment)

    def create_review_comment(
        self, pr: PullRequest, spec: CommentSpec, commit_id: str | None, author: str
    ) -> ReviewComment:
        """Create a single inline comment (its own one-comment review), with the single-comment 422 shape."""
        check_body("PullRequestReviewComment", spec.body)
        with self.state.lock:
            files = {f.path: f for f in self.state.pr_diff(pr)}
            checked = self.check_comment(files, spec)
            if isinstance(checked, str):
                field = "pull_request_review_thread." + ("start_line" if "start line" in checked else "line")
                text = checked.replace("Pull request review thread start line", field).replace(
                    "Pull request review thread line", field
                )
                raise StateError(
                    422,
                    "Validation Failed",
                    [
                        {
                            "resource": "PullRequestReviewComment",
                            "code": "custom",
                            "field": field,
                            "message": text,
                        }
                    ],
                )
            commit = commit_id or self.state.head_sha(pr)
            review = Review(self.state.next_id(), pr.repo, pr.number, "", "COMMENT", commit, author)
            self.state.reviews[review.id] = review
            comment = self._store_comment(pr, review.id, commit, spec, checked[1], author)
        self._emit_review(pr, review, [comment])
        return comment

    def reply(self, pr: PullRequest, comment_id: int, body: str, author: str) -> ReviewComment:
        """Reply in a review thread (only to a top-level comment, as GitHub requires)."""
        check_body("PullRequestReviewComment", body)
        with self.state.lock:
            parent = self.state.review_comments.get(comment_id)
            if parent is None or (parent.repo, parent.number) != (pr.repo, pr.number):
                raise StateError(404, "Not Found")
            if parent.in_reply_to_id is not None:
                raise StateError(
                    422,
                    "Validation Failed",
                    [
                        {
                            "resource": "PullRequestReviewComment",
                            "code": "invalid",
                            "field": "in_reply_to",
                            "message": "Replies to replies are not supported",
                        }
                    ],
                )
            review = Review(self.state.next_id(), pr.repo, pr.number, "", "COMMENT", parent.commit_id, author)
            self.state.reviews[review.id] = review
            reply = ReviewComment(
                self.state.next_id(),
                pr.repo,
                pr.number,
                review.id,
                parent.path,
                parent.commit_id,
                body,
                author,
                parent.line,
                parent.side,
                parent.start_line,
                parent.start_side,
                parent.diff_hunk,
                parent.id,
            )
            self.state.review_comments[reply.id] = reply
        self._emit_review_comment(pr, reply)
        return reply

    def _store_comment(
        self, pr: PullRequest, review_id: int, commit: str, spec: CommentSpec, hunk: str, author: str
    ) -> ReviewComment:
        comment = ReviewComment(
            self.state.next_id(),
            pr.repo,
            pr.number,
            review_id,
            spec.path,
            commit,
            spec.body,
            author,
            spec.line,
            spec.side,
            spec.start_line,
            spec.start_side if spec.start_line is not None else None,
            hunk,
        )
        self.state.review_comments[comment.id] = comment
        thread = Thread(self.state.next_id(), comment.id)
        self.state.threads[thread.id] = thread
        return comment

    def _emit_review_comment(self, pr: PullRequest, comment: ReviewComment) -> None:
        self.emit(
            "pull_request_review_comment",
            self.state.repo(pr.repo),
            comment.author,
            {
                "action": "created",
                "comment": self.shapes.review_comment(comment),
                "pull_request": self.shapes.pull(pr),
            },
        )

    def react(self, subject: str, subject_id: int, content: str, author: str) -> tuple[Reaction, bool]:
        """Add a reaction; idempotent per user and content (GitHub: 200 for an existing one, 201 for new)."""
        if content not in REACTIONS:
            raise StateError(
                422, "Validation Failed", [{"resource": "Reaction", "code": "invalid", "field": "content"}]
            )
        with self.state.lock:
            for reaction in self.state.reactions.values():
                if (reaction.subject, reaction.subject_id, reaction.content, reaction.author) == (
                    subject,
                    subject_id,
                    content,
                    author,
                ):
                    return reaction, False
            reaction = Reaction(self.state.next_id(), subject, subject_id, content, author)
            self.state.reactions[reaction.id] = reaction
            return reaction, True

    def apply_suggestion(self, comment_id: int, author: str) -> Commit:
        """Commit a review comment's suggestion as GitHub's "Commit suggestion" button does."""
        with self.state.lock:
            comment = self.state.review_comments[comment_id]
            pr = self.state.pull(comment.repo, comment.number)
            if pr.state != "open":
                raise StateError(422, "Suggestions cannot be applied while the pull request is closed.")
            if comment.side != "RIGHT":
                raise StateError(422, "Applying suggestions on deleted lines is not supported.")
            if comment.review_id is not None and self.state.reviews[comment.review_id].event == "PENDING":
                raise StateError(422, "Suggestions cannot be applied from pending reviews.")
            if comment.commit_id != self.state.head_sha(pr):
                raise StateError(422, "Outdated suggestions cannot be applied.")
            match = SUGGESTION.search(comment.body)
            if match is None:
                raise StateError(422, "This comment has no suggestion.")
            head_repo = self.state.repo(pr.head_repo)
            blob = self.state.git.files_at(self.state.head_sha(pr))[comment.path]
            lines = self.state.git.blobs[blob].decode("utf-8").splitlines(keepends=True)
            start = (comment.start_line or comment.line) - 1
            replacement = match.group(2).splitlines(keepends=True)
            lines[start : comment.line] = replacement
            trailer = f"Co-authored-by: {comment.author} <{comment.author}@users.noreply.github.com>"
            message = f"Update {comment.path}\n\n{trailer}"
            return self.push(
                head_repo,
                pr.head_ref,
                {comment.path: "".join(lines)},
                message,
                author,
                f"{author}@users.noreply.github.com",
                verified=True,
            )

    # ---- check runs ---------------------------------------------------------------------------------------

    def create_check_run(self, repo: Repo, data: Json) -> CheckRun:
        """Create a check run for a head SHA."""
        if not data.get("name") or not data.get("head_sha"):
            raise StateError(
                422,
                "Validation Failed",
                [{"resource": "CheckRun", "code": "missing_field", "field": "name/head_sha"}],
            )
        run = CheckRun(
            self.state.next_id(),
            repo.full_name,
            str(data["head_sha"]),
            str(data["name"]),
            str(data.get("status") or "queued"),
            None,
            {},
            [],
            data.get("external_id"),
            data.get("details_url"),
        )
        self.update_check_run(run, data)
        with self.state.lock:
            self.state.check_runs[run.id] = run
        return run

    def update_check_run(self, run: CheckRun, data: Json) -> None:
        """Apply a create/update body; a conclusion completes the run."""
        check_run_fields(data)
        for key in ("name", "status", "details_url", "external_id"):
            if data.get(key) is not None:
                setattr(run, key, data[key])
        if data.get("output"):
            output = dict(data["output"])
            # Annotations add up over a run's updates; GitHub lists them at …/annotations, not in the run.
            run.annotations.extend(output.pop("annotations", None) or [])
            run.output.update(output)
        if data.get("actions") is not None:
            run.actions = list(data["actions"])
        if data.get("conclusion"):
            run.conclusion, run.status = str(data["conclusion"]), "completed"
            run.completed_at = data.get("completed_at") or utcnow()

    def check_run_event(self, run: CheckRun, action: str, sender: str, identifier: str | None = None) -> None:
        """Fire `check_run` (requested_action with its identifier, or rerequested) as a user's click does."""
        repo = self.state.repo(run.repo)
        payload: Json = {"action": action, "check_run": self.shapes.check_run(run)}
        if identifier is not None:
            payload["requested_action"] = {"identifier": identifier}
        self.emit("check_run", repo, sender, payload)

    def permission_of(self, repo: Repo, login: str) -> Json:
        """Return `GET …/collaborators/{user}/permission`'s body."""
        permission = self.state.permission(repo, login)
        legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
        return {"permission": legacy, "role_name": permission, "user": self.shapes.user(login)}


def _counter() -> itertools.count[int]:
    return itertools.count(1)


def _hunk_until(header: str, lines: list[str], line: int, side: Side) -> str:
    """Return GitHub's `diff_hunk`: the hunk header and its lines up to the commented one."""
    match = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)", header)
    assert match is not None
    old, new = int(match.group(1)), int(match.group(2))
    out = [header]
    for text in lines:
        out.append(text)
        if text.startswith("\\"):
            continue
        here_old, here_new = old, new
        if text.startswith("-"):
            old += 1
        elif text.startswith("+"):
            new += 1
        else:
            old, new = old + 1, new + 1
        if (side == "RIGHT" and not text.startswith("-") and here_new == line) or (
            side == "LEFT" and not text.startswith("+") and here_old == line
        ):
            break
    return "\n".join(out)
