"""GitHub's REST JSON shapes for the sandbox's state (the fields clients and Spark read, with real URLs)."""

from __future__ import annotations

import base64
from typing import Any

from sandbox.github.state import (
    PERMISSION_LEVELS,
    CheckRun,
    Commit,
    FileDiff,
    IssueComment,
    PullRequest,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    State,
    WorkflowJob,
    WorkflowRun,
    utcnow,
)

Json = dict[str, Any]

# The App's permissions (what bot/web/app.yml asks for).
APP_PERMISSIONS = {
    "metadata": "read",
    "contents": "write",
    "pull_requests": "write",
    "issues": "write",
    "checks": "write",
    "actions": "read",
}
# Every event the sandbox fires. An App receives only those it subscribed to (its manifest's
# `default_events`): https://docs.github.com/webhooks/using-webhooks/creating-webhooks-for-a-github-app
SANDBOX_EVENTS = (
    "check_run",
    "workflow_job",
    "workflow_run",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "push",
)


def node_id(kind: str, number: int) -> str:
    """Return a GraphQL global id in GitHub's legacy base64 form (e.g. `MDQ6VXNlcjE=`)."""
    return base64.b64encode(f"0{len(kind)}:{kind}{number}".encode()).decode()


def parse_node_id(value: str) -> tuple[str, int] | None:
    """Invert node_id; None when the id is not one of ours."""
    try:
        text = base64.b64decode(value, validate=True).decode()
        size, rest = text.split(":", 1)
        kind_len = int(size)
        return rest[:kind_len], int(rest[kind_len:])
    except (ValueError, UnicodeDecodeError):
        return None


class Shapes:
    """Renders state as GitHub's JSON, with URLs on the sandbox's own host (PyGithub follows them)."""

    def __init__(self, state: State, base_url: str, app_id: int, app_slug: str) -> None:
        self.state = state
        self.app_id = app_id
        self.api = base_url.rstrip("/")
        self.html = self.api
        self.app_slug = app_slug
        # The events the App subscribed to; webhooks of any other event are not sent.
        self.events: tuple[str, ...] = SANDBOX_EVENTS

    def user(self, login: str) -> Json:
        """Return a simple-user object (bots end in `[bot]` and have type Bot)."""
        uid = self.state.user_id(login)
        url = f"{self.api}/users/{login}"
        return {
            "login": login,
            "id": uid,
            "node_id": node_id("User", uid),
            "avatar_url": f"{self.html}/avatars/{login}",
            "gravatar_id": "",
            "url": url,
            "html_url": f"{self.html}/{login}",
            "followers_url": url + "/followers",
            "following_url": url + "/following{/other_user}",
            "gists_url": url + "/gists{/gist_id}",
            "starred_url": url + "/starred{/owner}{/repo}",
            "subscriptions_url": url + "/subscriptions",
            "organizations_url": url + "/orgs",
            "repos_url": url + "/repos",
            "events_url": url + "/events{/privacy}",
            "received_events_url": url + "/received_events",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "site_admin": False,
        }

    def app(self, app_id: int) -> Json:
        """Return the App (`GET /app`, and `app` in check runs)."""
        return {
            "id": app_id,
            "slug": self.app_slug,
            "node_id": f"A_{app_id}",
            "name": self.app_slug.capitalize(),
            "owner": self.user("spark-owner"),
            "description": "Spark (sandbox)",
            "external_url": self.html,
            "html_url": f"{self.html}/apps/{self.app_slug}",
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "permissions": dict(APP_PERMISSIONS),
            "events": list(self.events),
            "installations_count": len(self.state.installations),
        }

    def other_app(self, slug: str) -> Json:
        """Return another App as check runs carry it (GitHub Actions owns its jobs' runs)."""
        return {
            "id": 15368 if slug == "github-actions" else self.state.user_id(slug),
            "slug": slug,
            "node_id": f"MDM6QXBw{slug}",
            "name": "GitHub Actions" if slug == "github-actions" else slug,
            "owner": self.user("github"),
            "description": "Automate your workflow from idea to production",
            "external_url": "https://help.github.com/en/actions",
            "created_at": "2018-07-30T09:30:17Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "html_url": f"{self.html}/apps/{slug}",
            "permissions": {"actions": "write", "checks": "write", "contents": "write", "metadata": "read"},
            "events": [],
        }

    def workflow_run(self, run: WorkflowRun) -> Json:
        """Return a workflow run (`GET …/actions/runs/{id}`, `workflow_run` deliveries)."""
        url = f"{self.api}/repos/{run.repo}/actions/runs/{run.id}"
        pulls = self.pulls_at_head(run.repo, run.head_sha, open_only=False)
        return {
            "id": run.id,
            "name": run.name,
            "node_id": node_id("WorkflowRun", run.id),
            "head_branch": run.head_branch,
            "head_sha": run.head_sha,
            "path": run.path,
            "display_title": run.name,
            "run_number": run.id % 1000,
            "event": run.event,
            "status": run.status,
            "conclusion": run.conclusion,
            "workflow_id": abs(hash(run.path)) % 10_000_000,
            "check_suite_id": run.id,
            "url": url,
            "html_url": f"{self.html}/{run.repo}/actions/runs/{run.id}",
            "jobs_url": url + "/jobs",
            "logs_url": url + "/logs",
            "rerun_url": url + "/rerun",
            "cancel_url": url + "/cancel",
            "artifacts_url": url + "/artifacts",
            "check_suite_url": f"{self.api}/repos/{run.repo}/check-suites/{run.id}",
            "workflow_url": f"{self.api}/repos/{run.repo}/actions/workflows/{run.path.rsplit('/', 1)[-1]}",
            "head_commit": self._head_commit(run),
            "repository": self.repo(self.state.repo(run.repo)),
            "head_repository": self.repo(self.state.repo(run.repo)),
            "pull_requests": pulls,
            "created_at": run.created_at,
            "updated_at": run.created_at,
            "run_attempt": run.run_attempt,
            "run_started_at": run.created_at,
        }

    def _head_commit(self, run: WorkflowRun) -> Json:
        commit = self.state.git.commits.get(run.head_sha)
        person = {"name": commit.author if commit else "", "email": commit.email if commit else ""}
        return {
            "id": run.head_sha,
            "tree_id": commit.tree if commit else "",
            "message": commit.message if commit else "",
            "timestamp": commit.date if commit else run.created_at,
            "author": person,
            "committer": person,
        }

    def workflow_job(self, job: WorkflowJob) -> Json:
        """Return a workflow job (`GET …/actions/jobs/{id}`, `workflow_job` deliveries)."""
        run = self.state.workflow_runs[job.run_id]
        return {
            "id": job.id,
            "run_id": job.run_id,
            "run_url": f"{self.api}/repos/{job.repo}/actions/runs/{job.run_id}",
            "run_attempt": run.run_attempt,
            "node_id": node_id("WorkflowJob", job.id),
            "head_sha": job.head_sha,
            "head_branch": job.head_branch,
            "url": f"{self.api}/repos/{job.repo}/actions/jobs/{job.id}",
            "html_url": f"{self.html}/{job.repo}/actions/runs/{job.run_id}/job/{job.id}",
            "status": "completed",
            "conclusion": job.conclusion,
            "created_at": job.started_at,
            "started_at": job.started_at,
            "completed_at": job.completed_at,
            "name": job.name,
            "steps": [
                {**step, "started_at": job.started_at, "completed_at": job.completed_at} for step in job.steps
            ],
            "check_run_url": f"{self.api}/repos/{job.repo}/check-runs/{job.id}",
            "labels": ["ubuntu-latest"],
            "runner_id": 5,
            "runner_name": "GitHub Actions 5",
            "runner_group_id": 2,
            "runner_group_name": "GitHub Actions",
            "workflow_name": run.name,
        }

    def installation(self, installation_id: int) -> Json:
        """Return an installation object (`GET /app/installations/{id}`, `GET /repos/{repo}/installation`)."""
        account = self.state.installations[installation_id]
        return {
            "id": installation_id,
            "account": self.user(account),
            "repository_selection": "selected",
            "access_tokens_url": f"{self.api}/app/installations/{installation_id}/access_tokens",
            "repositories_url": f"{self.api}/installation/repositories",
            "html_url": f"{self.html}/settings/installations/{installation_id}",
            "app_id": self.app_id,
            "app_slug": self.app_slug,
            "target_id": self.state.user_id(account),
            "target_type": "Organization",
            "permissions": dict(self.state.permissions.get(installation_id, APP_PERMISSIONS)),
            "events": list(self.events),
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": utcnow(),
            "single_file_name": None,
            "suspended_at": None,
            "suspended_by": None,
        }

    def owner(self, repo: Repo) -> Json:
        """Return the owner of a repository (an Organization or a User)."""
        data = self.user(repo.owner)
        data["type"] = repo.owner_type
        return data

    def repo(self, repo: Repo) -> Json:
        """Return a full repository object."""
        url = f"{self.api}/repos/{repo.full_name}"
        data: Json = {
            "id": repo.id,
            "node_id": node_id("Repository", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "owner": self.owner(repo),
            "html_url": f"{self.html}/{repo.full_name}",
            "description": None,
            "fork": repo.parent is not None,
            "url": url,
            "pulls_url": url + "/pulls{/number}",
            "issues_url": url + "/issues{/number}",
            "contents_url": url + "/contents/{+path}",
            "compare_url": url + "/compare/{base}...{head}",
            "git_refs_url": url + "/git/refs{/sha}",
            "trees_url": url + "/git/trees{/sha}",
            "blobs_url": url + "/git/blobs{/sha}",
            "commits_url": url + "/commits{/sha}",
            **{
                f"{name}_url": f"{url}/{path}"
                for name, path in (
                    ("forks", "forks"),
                    ("keys", "keys{/key_id}"),
                    ("collaborators", "collaborators{/collaborator}"),
                    ("teams", "teams"),
                    ("hooks", "hooks"),
                    ("issue_events", "issues/events{/number}"),
                    ("events", "events"),
                    ("assignees", "assignees{/user}"),
                    ("branches", "branches{/branch}"),
                    ("tags", "tags"),
                    ("git_tags", "git/tags{/sha}"),
                    ("statuses", "statuses/{sha}"),
                    ("languages", "languages"),
                    ("stargazers", "stargazers"),
                    ("contributors", "contributors"),
                    ("subscribers", "subscribers"),
                    ("subscription", "subscription"),
                    ("git_commits", "git/commits{/sha}"),
                    ("comments", "comments{/number}"),
                    ("issue_comment", "issues/comments{/number}"),
                    ("merges", "merges"),
                    ("archive", "{archive_format}{/ref}"),
                    ("downloads", "downloads"),
                    ("milestones", "milestones{/number}"),
                    ("notifications", "notifications{?since,all,participating}"),
                    ("labels", "labels{/name}"),
                    ("releases", "releases{/id}"),
                    ("deployments", "deployments"),
                )
            },
            "clone_url": f"{self.html}/{repo.full_name}.git",
            "git_url": f"git://{self.html.split('://', 1)[-1]}/{repo.full_name}.git",
            "ssh_url": f"git@sandbox:{repo.full_name}.git",
            "svn_url": f"{self.html}/{repo.full_name}",
            "mirror_url": None,
            "homepage": None,
            "language": None,
            "license": None,
            "topics": [],
            "size": 0,
            "forks": 0,
            "forks_count": 0,
            "watchers": 0,
            "watchers_count": 0,
            "stargazers_count": 0,
            "open_issues": 0,
            "open_issues_count": 0,
            "has_issues": True,
            "has_projects": False,
            "has_downloads": True,
            "has_wiki": False,
            "has_pages": False,
            "is_template": False,
            "web_commit_signoff_required": False,
            "custom_properties": {},
            "network_count": 0,
            "subscribers_count": 0,
            "default_branch": repo.default_branch,
            "visibility": "private" if repo.private else "public",
            "archived": False,
            "disabled": False,
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": utcnow(),
            "pushed_at": utcnow(),
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True},
        }
        if repo.parent is not None:
            parent = self.state.repo(repo.parent)
            data["parent"] = data["source"] = {k: v for k, v in self.repo(parent).items() if k != "parent"}
        return data

    def commit_ref(self, repo: Repo, ref: str, sha: str) -> Json:
        """Return a PR's `head`/`base` object."""
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.owner(repo),
            "repo": self.repo(repo),
        }

    def pull(self, pr: PullRequest) -> Json:
        """Return a full pull-request object (head/base, draft, maintainer_can_modify, counts)."""
        base_repo, head_repo = self.state.repo(pr.repo), self.state.repo(pr.head_repo)
        url = f"{self.api}/repos/{pr.repo}/pulls/{pr.number}"
        issue_url = f"{self.api}/repos/{pr.repo}/issues/{pr.number}"
        files = self.state.pr_diff(pr)
        head_sha = self.state.head_sha(pr)
        base_sha = base_repo.refs.get(pr.base_ref, pr.base_sha)
        return {
            "url": url,
            "id": pr.id,
            "node_id": node_id("PullRequest", pr.id),
            "html_url": f"{self.html}/{pr.repo}/pull/{pr.number}",
            "diff_url": f"{self.html}/{pr.repo}/pull/{pr.number}.diff",
            "patch_url": f"{self.html}/{pr.repo}/pull/{pr.number}.patch",
            "issue_url": issue_url,
            "commits_url": url + "/commits",
            "review_comments_url": url + "/comments",
            "review_comment_url": f"{self.api}/repos/{pr.repo}/pulls/comments{{/number}}",
            "comments_url": issue_url + "/comments",
            "statuses_url": f"{self.api}/repos/{pr.repo}/statuses/{head_sha}",
            "number": pr.number,
            "state": pr.state,
            "locked": False,
            "title": pr.title,
            "user": self.user(pr.author),
            "body": pr.body,
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": pr.created_at,
            "updated_at": pr.updated_at,
            "closed_at": None if pr.state == "open" else pr.updated_at,
            "merged_at": None,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self.commit_ref(head_repo, pr.head_ref, head_sha),
            "base": self.commit_ref(base_repo, pr.base_ref, base_sha),
            "author_association": self.association(base_repo, pr.author),
            "auto_merge": None,
            "draft": pr.draft,
            "merged": False,
            "mergeable": True,
            "rebaseable": True,
            "mergeable_state": "clean",
            "merged_by": None,
            "comments": sum(
                1 for c in self.state.issue_comments.values() if (c.repo, c.number) == (pr.repo, pr.number)
            ),
            "review_comments": sum(
                1 for c in self.state.review_comments.values() if (c.repo, c.number) == (pr.repo, pr.number)
            ),
            "maintainer_can_modify": pr.maintainer_can_modify,
            "commits": len(self.pr_commits(pr)),
            "additions": sum(f.additions for f in files),
            "deletions": sum(f.deletions for f in files),
            "changed_files": len(files),
            "_links": {
                "self": {"href": url},
                "html": {"href": f"{self.html}/{pr.repo}/pull/{pr.number}"},
                "issue": {"href": issue_url},
                "comments": {"href": issue_url + "/comments"},
                "review_comments": {"href": url + "/comments"},
                "review_comment": {"href": f"{self.api}/repos/{pr.repo}/pulls/comments{{/number}}"},
                "commits": {"href": url + "/commits"},
                "statuses": {"href": f"{self.api}/repos/{pr.repo}/statuses/{head_sha}"},
            },
        }

    def pr_commits(self, pr: PullRequest) -> list[str]:
        """Return the PR's commits (head ancestors not on the base branch), oldest first."""
        base_tip = self.state.repo(pr.repo).refs.get(pr.base_ref, pr.base_sha)
        on_base = set(self.state.git.ancestors(base_tip))
        return [c for c in reversed(self.state.git.ancestors(self.state.head_sha(pr))) if c not in on_base]

    def association(self, repo: Repo, login: str) -> str:
        """Return `author_association` of a user on a repository."""
        if login == repo.owner:
            return "OWNER"
        if PERMISSION_LEVELS.index(repo.collaborators.get(login, "none")) >= PERMISSION_LEVELS.index(
            "triage"
        ):
            return "COLLABORATOR"
        return "CONTRIBUTOR" if repo.collaborators.get(login) else "NONE"

    def file(self, repo: str, head_sha: str, diff: FileDiff) -> Json:
        """Return one entry of `GET …/pulls/{n}/files` or a compare's `files`."""
        data: Json = {
            "sha": diff.new_sha or diff.old_sha,
            "filename": diff.path,
            "status": diff.status,
            "additions": diff.additions,
            "deletions": diff.deletions,
            "changes": diff.additions + diff.deletions,
            "blob_url": f"{self.html}/{repo}/blob/{head_sha}/{diff.path}",
            "raw_url": f"{self.html}/{repo}/raw/{head_sha}/{diff.path}",
            "contents_url": f"{self.api}/repos/{repo}/contents/{diff.path}?ref={head_sha}",
        }
        if diff.patch is not None:
            data["patch"] = diff.patch
        return data

    def git_commit(self, repo: str, commit: Commit) -> Json:
        """Return a git-data commit (`GET …/git/commits/{sha}`) with its verification."""
        person = {"name": commit.author, "email": commit.email, "date": commit.date}
        return {
            "sha": commit.sha,
            "node_id": node_id("Commit", int(commit.sha[:12], 16)),
            "url": f"{self.api}/repos/{repo}/git/commits/{commit.sha}",
            "html_url": f"{self.html}/{repo}/commit/{commit.sha}",
            "author": person,
            "committer": person,
            "message": commit.message,
            "tree": {"sha": commit.tree, "url": f"{self.api}/repos/{repo}/git/trees/{commit.tree}"},
            "parents": [
                {
                    "sha": p,
                    "url": f"{self.api}/repos/{repo}/git/commits/{p}",
                    "html_url": f"{self.html}/{repo}/commit/{p}",
                }
                for p in commit.parents
            ],
            "verification": {
                "verified": commit.verified,
                "reason": "valid" if commit.verified else "unsigned",
                "signature": None,
                "payload": None,
            },
        }

    def commit(self, repo: str, commit: Commit, with_files: bool = True) -> Json:
        """Return a repos commit (`GET …/commits/{ref}`), with files against its first parent."""
        login = (
            self.app_slug + "[bot]"
            if commit.verified and commit.email.endswith("[bot]@users.noreply.github.com")
            else None
        )
        data: Json = {
            "sha": commit.sha,
            "node_id": node_id("Commit", int(commit.sha[:12], 16)),
            "url": f"{self.api}/repos/{repo}/commits/{commit.sha}",
            "html_url": f"{self.html}/{repo}/commit/{commit.sha}",
            "comments_url": f"{self.api}/repos/{repo}/commits/{commit.sha}/comments",
            "commit": {
                k: v
                for k, v in self.git_commit(repo, commit).items()
                if k not in ("sha", "node_id", "html_url", "parents")
            },
            "author": self.user(login) if login else None,
            "committer": self.user(login) if login else None,
            "parents": [
                {
                    "sha": p,
                    "url": f"{self.api}/repos/{repo}/commits/{p}",
                    "html_url": f"{self.html}/{repo}/commit/{p}",
                }
                for p in commit.parents
            ],
        }
        data["commit"]["comment_count"] = 0
        if with_files:
            files = self.state.git.diff(commit.parents[0], commit.sha) if commit.parents else []
            data["files"] = [self.file(repo, commit.sha, f) for f in files]
            data["stats"] = {
                "additions": sum(f.additions for f in files),
                "deletions": sum(f.deletions for f in files),
                "total": sum(f.additions + f.deletions for f in files),
            }
        return data

    def reactions_summary(self, subject: str, subject_id: int, url: str) -> Json:
        """Return the `reactions` rollup embedded in comments."""
        counts = {name: 0 for name in ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes")}
        for reaction in self.state.reactions.values():
            if (reaction.subject, reaction.subject_id) == (subject, subject_id):
                counts[reaction.content] += 1
        return {"url": url + "/reactions", "total_count": sum(counts.values()), **counts}

    def issue_comment(self, comment: IssueComment) -> Json:
        """Return an issue comment."""
        url = f"{self.api}/repos/{comment.repo}/issues/comments/{comment.id}"
        return {
            "id": comment.id,
            "node_id": node_id("IssueComment", comment.id),
            "url": url,
            "html_url": f"{self.html}/{comment.repo}/pull/{comment.number}#issuecomment-{comment.id}",
            "issue_url": f"{self.api}/repos/{comment.repo}/issues/{comment.number}",
            "body": comment.body,
            "user": self.user(comment.author),
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "author_association": self.association(self.state.repo(comment.repo), comment.author),
            "performed_via_github_app": None,
            "reactions": self.reactions_summary("issue_comment", comment.id, url),
        }

    def review_comment(self, comment: ReviewComment) -> Json:
        """Return a pull-request review comment (line/side/start_line/start_side, in_reply_to_id)."""
        url = f"{self.api}/repos/{comment.repo}/pulls/comments/{comment.id}"
        pr_url = f"{self.api}/repos/{comment.repo}/pulls/{comment.number}"
        html = f"{self.html}/{comment.repo}/pull/{comment.number}#discussion_r{comment.id}"
        data: Json = {
            "url": url,
            "pull_request_review_id": comment.review_id,
            "id": comment.id,
            "node_id": node_id("PullRequestReviewComment", comment.id),
            "diff_hunk": comment.diff_hunk,
            "path": comment.path,
            "position": None,
            "original_position": None,
            "commit_id": comment.commit_id,
            "original_commit_id": comment.commit_id,
            "user": self.user(comment.author),
            "body": comment.body,
            "created_at": comment.created_at,
            "updated_at": comment.created_at,
            "html_url": html,
            "pull_request_url": pr_url,
            "author_association": self.association(self.state.repo(comment.repo), comment.author),
            "_links": {"self": {"href": url}, "html": {"href": html}, "pull_request": {"href": pr_url}},
            "start_line": comment.start_line,
            "original_start_line": comment.start_line,
            "start_side": comment.start_side,
            "line": comment.line,
            "original_line": comment.line,
            "side": comment.side,
            "subject_type": "line",
            "reactions": self.reactions_summary("review_comment", comment.id, url),
        }
        if comment.in_reply_to_id is not None:
            data["in_reply_to_id"] = comment.in_reply_to_id
        return data

    def review(self, review: Review) -> Json:
        """Return a pull-request review."""
        pr_url = f"{self.api}/repos/{review.repo}/pulls/{review.number}"
        html = f"{self.html}/{review.repo}/pull/{review.number}#pullrequestreview-{review.id}"
        return {
            "id": review.id,
            "node_id": node_id("PullRequestReview", review.id),
            "user": self.user(review.author),
            "body": review.body,
            "state": {
                "COMMENT": "COMMENTED",
                "APPROVE": "APPROVED",
                "REQUEST_CHANGES": "CHANGES_REQUESTED",
            }.get(review.event, "PENDING"),
            "html_url": html,
            "pull_request_url": pr_url,
            "author_association": self.association(self.state.repo(review.repo), review.author),
            "_links": {"html": {"href": html}, "pull_request": {"href": pr_url}},
            "submitted_at": None if review.event == "PENDING" else review.submitted_at,
            "commit_id": review.commit_id,
        }

    def reaction(self, reaction: Reaction) -> Json:
        """Return a reaction."""
        return {
            "id": reaction.id,
            "node_id": node_id("Reaction", reaction.id),
            "user": self.user(reaction.author),
            "content": reaction.content,
            "created_at": reaction.created_at,
        }

    def check_run_pulls(self, run: CheckRun) -> list[Json]:
        """Return a check run's `pull_requests`: open PRs of its repository whose head is its head SHA.

        "The Checks API only looks for pushes in the repository where the check suite or check run were
        created. Pushes to a branch in a forked repository are not detected and return an empty
        pull_requests array" (https://docs.github.com/rest/checks/runs).
        """
        return self.pulls_at_head(run.repo, run.head_sha, open_only=True)

    def pulls_at_head(self, repo_name: str, head_sha: str, *, open_only: bool) -> list[Json]:
        """Return the minimal pull requests of ``repo_name`` (not of forks) whose head is ``head_sha``."""
        repo = self.state.repo(repo_name)
        minimal = {"id": repo.id, "url": f"{self.api}/repos/{repo.full_name}", "name": repo.name}
        return [
            {
                "id": pr.id,
                "number": pr.number,
                "url": f"{self.api}/repos/{pr.repo}/pulls/{pr.number}",
                "head": {"ref": pr.head_ref, "sha": self.state.head_sha(pr), "repo": minimal},
                "base": {"ref": pr.base_ref, "sha": pr.base_sha, "repo": minimal},
            }
            for pr in self.state.pulls.values()
            if pr.repo == repo_name
            and pr.head_repo == repo_name
            and (pr.state == "open" or not open_only)
            and self.state.head_sha(pr) == head_sha
        ]

    def check_run(self, run: CheckRun) -> Json:
        """Return a check run."""
        url = f"{self.api}/repos/{run.repo}/check-runs/{run.id}"
        output = {
            "title": None,
            "summary": None,
            "text": None,
            **run.output,
            "annotations_count": len(run.annotations),
        }
        output["annotations_url"] = url + "/annotations"
        return {
            "id": run.id,
            "node_id": node_id("CheckRun", run.id),
            "head_sha": run.head_sha,
            "external_id": run.external_id,
            "url": url,
            "html_url": f"{self.html}/{run.repo}/runs/{run.id}",
            "details_url": run.details_url,
            "status": run.status,
            "conclusion": run.conclusion,
            "started_at": run.started_at,
            "completed_at": run.completed_at,
            "output": output,
            "name": run.name,
            "check_suite": {"id": run.id},
            "app": self.app(self.app_id) if run.app_slug is None else self.other_app(run.app_slug),
            "pull_requests": self.check_run_pulls(run),
            "actions": run.actions,
        }
