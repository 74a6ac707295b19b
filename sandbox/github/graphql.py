"""GitHub's GraphQL API, the part a PR bot uses: a subset of GitHub's own schema, executed by graphql-core."""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Any

from graphql import (
    DocumentNode,
    GraphQLError,
    GraphQLObjectType,
    GraphQLSchema,
    build_schema,
    execute_sync,
    parse,
    validate,
)

from sandbox.github.rules import RuleViolation
from sandbox.github.service import GitHub
from sandbox.github.shapes import node_id, parse_node_id
from sandbox.github.state import Commit, PullRequest, ReviewComment, StateError, Thread

# Field names, types and nullability copied from GitHub's public schema (schema.docs.graphql); a test checks
# every type and field here against it.
SCHEMA_SDL = """
scalar GitObjectID
scalar Base64String
scalar URI
scalar DateTime

interface Node { id: ID! }
interface Actor { login: String! url: URI! }
interface RepositoryOwner { id: ID! login: String! url: URI! }
interface GitObject { oid: GitObjectID! id: ID! }
interface GitSignature { isValid: Boolean! state: GitSignatureState! wasSignedByGitHub: Boolean! }
enum GitSignatureState { VALID INVALID UNSIGNED }
enum DiffSide { LEFT RIGHT }

type Query {
  viewer: User!
  repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
  node(id: ID!): Node
  rateLimit(dryRun: Boolean = false): RateLimit
}

type Mutation {
  createCommitOnBranch(input: CreateCommitOnBranchInput!): CreateCommitOnBranchPayload
  resolveReviewThread(input: ResolveReviewThreadInput!): ResolveReviewThreadPayload
  unresolveReviewThread(input: UnresolveReviewThreadInput!): UnresolveReviewThreadPayload
}

type RateLimit { cost: Int! limit: Int! nodeCount: Int! remaining: Int! resetAt: DateTime! used: Int! }

type User implements Node & Actor & RepositoryOwner { id: ID! login: String! url: URI! databaseId: Int }
type Organization implements Node & Actor & RepositoryOwner {
  id: ID!
  login: String!
  url: URI!
  databaseId: Int
}
type Bot implements Node & Actor { id: ID! login: String! url: URI! databaseId: Int }

type Repository implements Node {
  id: ID!
  databaseId: Int
  name: String!
  nameWithOwner: String!
  isPrivate: Boolean!
  isFork: Boolean!
  url: URI!
  owner: RepositoryOwner!
  defaultBranchRef: Ref
  ref(qualifiedName: String!): Ref
  object(expression: String, oid: GitObjectID): GitObject
  pullRequest(number: Int!): PullRequest
}

type Ref implements Node { id: ID! name: String! prefix: String! target: GitObject }

type GpgSignature implements GitSignature {
  isValid: Boolean!
  state: GitSignatureState!
  wasSignedByGitHub: Boolean!
}

type Commit implements Node & GitObject {
  id: ID!
  oid: GitObjectID!
  url: URI!
  message: String!
  messageHeadline: String!
  messageBody: String!
  committedDate: DateTime!
  signature: GitSignature
}

type PullRequest implements Node {
  id: ID!
  databaseId: Int
  number: Int!
  title: String!
  state: PullRequestState!
  isDraft: Boolean!
  url: URI!
  headRefName: String!
  headRefOid: GitObjectID!
  baseRefName: String!
  baseRefOid: GitObjectID!
  isCrossRepository: Boolean!
  maintainerCanModify: Boolean!
  headRepository: Repository
  repository: Repository!
  reviewThreads(after: String, before: String, first: Int, last: Int): PullRequestReviewThreadConnection!
}
enum PullRequestState { CLOSED MERGED OPEN }

type PageInfo { endCursor: String hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String }

type PullRequestReviewThreadConnection {
  nodes: [PullRequestReviewThread]
  pageInfo: PageInfo!
  totalCount: Int!
}

type PullRequestReviewThread implements Node {
  id: ID!
  isResolved: Boolean!
  isOutdated: Boolean!
  path: String!
  line: Int
  startLine: Int
  diffSide: DiffSide!
  resolvedBy: User
  comments(
    after: String, before: String, first: Int, last: Int, skip: Int
  ): PullRequestReviewCommentConnection!
}

type PullRequestReviewCommentConnection {
  nodes: [PullRequestReviewComment]
  pageInfo: PageInfo!
  totalCount: Int!
}

type PullRequestReviewComment implements Node {
  id: ID!
  databaseId: Int
  body: String!
  path: String!
  line: Int
  startLine: Int
  url: URI!
  createdAt: DateTime!
  author: Actor
  replyTo: PullRequestReviewComment
}

input CommittableBranch { branchName: String id: ID repositoryNameWithOwner: String }
input CommitMessage { body: String headline: String! }
input FileAddition { contents: Base64String! path: String! }
input FileDeletion { path: String! }
input FileChanges { additions: [FileAddition!] = [] deletions: [FileDeletion!] = [] }
input CreateCommitOnBranchInput {
  branch: CommittableBranch!
  clientMutationId: String
  expectedHeadOid: GitObjectID!
  fileChanges: FileChanges
  message: CommitMessage!
}
type CreateCommitOnBranchPayload { clientMutationId: String commit: Commit ref: Ref }

input ResolveReviewThreadInput { clientMutationId: String threadId: ID! }
type ResolveReviewThreadPayload { clientMutationId: String thread: PullRequestReviewThread }
input UnresolveReviewThreadInput { clientMutationId: String threadId: ID! }
type UnresolveReviewThreadPayload { clientMutationId: String thread: PullRequestReviewThread }
"""

Obj = dict[str, Any]


class GraphQLApi:
    """Executes GraphQL documents against the sandbox for one installation at a time."""

    def __init__(self, github: GitHub) -> None:
        self.github = github

    def execute(self, installation_id: int, query: str, variables: dict[str, Any] | None) -> dict[str, Any]:
        """Run a document and return GitHub's response body (`errors` carry GitHub's `type`)."""
        document, problems = _document(query)
        if document is None:
            return {"errors": [_format(error) for error in problems]}
        result = execute_sync(
            _schema(), document, root_value=self, variable_values=variables, context_value=installation_id
        )
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = [_format(error) for error in result.errors]
        return body

    # ---- objects ------------------------------------------------------------------------------------------

    def actor(self, login: str) -> Obj:
        """Return a User or Bot."""
        uid = self.github.state.user_id(login)
        kind = "Bot" if login.endswith("[bot]") else "User"
        return {
            "__typename": kind,
            "id": node_id(kind, uid),
            "login": login.removesuffix("[bot]") if kind == "Bot" else login,
            "url": f"{self.github.shapes.html}/{login}",
            "databaseId": uid,
        }

    def repository(self, installation_id: int, full_name: str) -> Obj | None:
        """Return a Repository the installation can read, else None (GraphQL's NOT_FOUND)."""
        try:
            repo = self.github.state.repo(full_name)
        except StateError:
            return None
        if not self.github.can_read(installation_id, repo):
            return None
        html = self.github.shapes.html
        return {
            "__typename": "Repository",
            "id": node_id("Repository", repo.id),
            "databaseId": repo.id,
            "name": repo.name,
            "nameWithOwner": repo.full_name,
            "isPrivate": repo.private,
            "isFork": repo.parent is not None,
            "url": f"{html}/{repo.full_name}",
            "owner": {**self.actor(repo.owner), "__typename": repo.owner_type},
            "defaultBranchRef": self.ref(repo.full_name, repo.default_branch),
            "ref": lambda info, qualifiedName: self.ref(
                repo.full_name, qualifiedName.removeprefix("refs/heads/")
            ),
            "object": lambda info, expression=None, oid=None: self.commit_or_none(
                repo.full_name, oid or expression
            ),
            "pullRequest": lambda info, number: self.pull_request(repo.full_name, number),
        }

    def ref(self, full_name: str, branch: str) -> Obj | None:
        """Return a branch Ref, or None when absent."""
        repo = self.github.state.repo(full_name)
        if branch not in repo.refs:
            return None
        return {
            "__typename": "Ref",
            "id": node_id("Ref", repo.id) + ":" + base64.b64encode(branch.encode()).decode(),
            "name": branch,
            "prefix": "refs/heads/",
            "target": self.commit(full_name, self.github.state.git.commits[repo.refs[branch]]),
        }

    def commit_or_none(self, full_name: str, ref: str | None) -> Obj | None:
        """Resolve a SHA or branch name to a Commit."""
        try:
            sha = self.github.state.resolve_ref(self.github.state.repo(full_name), ref or "")
        except StateError:
            return None
        return self.commit(full_name, self.github.state.git.commits[sha])

    def commit(self, full_name: str, commit: Commit) -> Obj:
        """Return a Commit with its signature (GitHub-signed when verified)."""
        headline, _, body = commit.message.partition("\n")
        signature = {
            "__typename": "GpgSignature",
            "isValid": True,
            "state": "VALID",
            "wasSignedByGitHub": True,
        }
        return {
            "__typename": "Commit",
            "id": node_id("Commit", int(commit.sha[:12], 16)),
            "oid": commit.sha,
            "url": f"{self.github.shapes.html}/{full_name}/commit/{commit.sha}",
            "message": commit.message,
            "messageHeadline": headline,
            "messageBody": body.lstrip("\n"),
            "committedDate": commit.date,
            "signature": signature if commit.verified else None,
        }

    def pull_request(self, full_name: str, number: int) -> Obj | None:
        """Return a PullRequest with its review threads."""
        try:
            pr = self.github.state.pull(full_name, number)
        except StateError:
            return None
        state = self.github.state
        return {
            "__typename": "PullRequest",
            "id": node_id("PullRequest", pr.id),
            "databaseId": pr.id,
            "number": pr.number,
            "title": pr.title,
            "state": pr.state.upper(),
            "isDraft": pr.draft,
            "url": f"{self.github.shapes.html}/{pr.repo}/pull/{pr.number}",
            "headRefName": pr.head_ref,
            "headRefOid": state.head_sha(pr),
            "baseRefName": pr.base_ref,
            "baseRefOid": state.repo(pr.repo).refs.get(pr.base_ref, pr.base_sha),
            "isCrossRepository": pr.head_repo != pr.repo,
            "maintainerCanModify": pr.maintainer_can_modify,
            "headRepository": lambda info: self.repository(info.context, pr.head_repo),
            "repository": lambda info: self.repository(info.context, pr.repo),
            "reviewThreads": lambda info, **page: _connection(
                [self.thread(pr, t) for t in state.threads.values() if self._thread_on(t, pr)], page
            ),
        }

    def _thread_on(self, thread: Thread, pr: PullRequest) -> bool:
        root = self.github.state.review_comments[thread.root_comment_id]
        return (root.repo, root.number) == (pr.repo, pr.number)

    def thread(self, pr: PullRequest, thread: Thread) -> Obj:
        """Return a PullRequestReviewThread: its root comment's place, resolution, and comments in order."""
        state = self.github.state
        root = state.review_comments[thread.root_comment_id]
        replies = sorted(
            (c for c in state.review_comments.values() if c.in_reply_to_id == root.id), key=lambda c: c.id
        )
        comments = [root, *replies]
        return {
            "__typename": "PullRequestReviewThread",
            "id": node_id("PullRequestReviewThread", thread.id),
            "isResolved": thread.resolved,
            "isOutdated": self._outdated(pr, root),
            "path": root.path,
            "line": root.line,
            "startLine": root.start_line,
            "diffSide": root.side,
            "resolvedBy": self.actor(thread.resolved_by) if thread.resolved_by else None,
            "comments": lambda info, skip=0, **page: _connection(
                [self.comment(c) for c in comments[skip:]], page
            ),
        }

    def _outdated(self, pr: PullRequest, root: ReviewComment) -> bool:
        """A thread is outdated once the head changed the file it points at since the comment was made."""
        git = self.github.state.git
        head = self.github.state.head_sha(pr)
        return git.files_at(root.commit_id).get(root.path) != git.files_at(head).get(root.path)

    def comment(self, comment: ReviewComment) -> Obj:
        """Return a PullRequestReviewComment."""
        state = self.github.state
        parent = state.review_comments.get(comment.in_reply_to_id or -1)
        return {
            "__typename": "PullRequestReviewComment",
            "id": node_id("PullRequestReviewComment", comment.id),
            "databaseId": comment.id,
            "body": comment.body,
            "path": comment.path,
            "line": comment.line,
            "startLine": comment.start_line,
            "url": f"{self.github.shapes.html}/{comment.repo}/pull/{comment.number}#discussion_r{comment.id}",
            "createdAt": comment.created_at,
            "author": self.actor(comment.author),
            "replyTo": self.comment(parent) if parent else None,
        }

    # ---- root resolvers -----------------------------------------------------------------------------------

    def resolve_repository(
        self, _root: object, info: Any, owner: str, name: str, followRenames: bool = True
    ) -> Obj:
        """`repository(owner, name)`: GitHub answers NOT_FOUND for repositories the token cannot see."""
        found = self.repository(info.context, f"{owner}/{name}")
        if found is None:
            raise GraphQLError(
                f"Could not resolve to a Repository with the name '{owner}/{name}'.",
                extensions={"type": "NOT_FOUND"},
            )
        return found

    def resolve_node(self, _root: object, info: Any, id: str) -> Obj | None:
        """`node(id)` for review threads and pull requests."""
        parsed = parse_node_id(id)
        state = self.github.state
        if parsed and parsed[0] == "PullRequestReviewThread" and parsed[1] in state.threads:
            thread = state.threads[parsed[1]]
            root = state.review_comments[thread.root_comment_id]
            return self.thread(state.pull(root.repo, root.number), thread)
        if parsed and parsed[0] == "PullRequest":
            for pr in state.pulls.values():
                if pr.id == parsed[1]:
                    return self.pull_request(pr.repo, pr.number)
        raise GraphQLError(
            f"Could not resolve to a node with the global id of '{id}'", extensions={"type": "NOT_FOUND"}
        )

    def create_commit_on_branch(self, _root: object, info: Any, input: Obj) -> Obj:
        """`createCommitOnBranch`: base64 additions, deletions, expectedHeadOid compare-and-swap, verified."""
        branch_in = input["branch"]
        full_name, branch = branch_in.get("repositoryNameWithOwner"), branch_in.get("branchName")
        if branch_in.get("id"):
            full_name, branch = self._ref_id(branch_in["id"])
        if not full_name or not branch:
            raise GraphQLError(
                "A branch id, or a repositoryNameWithOwner and branchName, is required.",
                extensions={"type": "UNPROCESSABLE"},
            )
        repo = self.repository(info.context, full_name)
        if repo is None:
            raise GraphQLError(
                f"Could not resolve to a Repository with the name '{full_name}'.",
                extensions={"type": "NOT_FOUND"},
            )
        changes = input.get("fileChanges") or {}
        files: dict[str, str | bytes | None] = {d["path"]: None for d in changes.get("deletions") or []}
        for addition in changes.get("additions") or []:
            try:
                files[addition["path"]] = base64.b64decode(addition["contents"], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise GraphQLError(
                    f"Invalid Base64 contents for {addition['path']}", extensions={"type": "UNPROCESSABLE"}
                ) from exc
        message = input["message"]["headline"] + (
            f"\n\n{input['message']['body']}" if input["message"].get("body") else ""
        )
        try:
            commit = self.github.commit_on_branch(
                info.context,
                self.github.state.repo(full_name),
                branch,
                input["expectedHeadOid"],
                files,
                message,
            )
        except RuleViolation as exc:
            raise GraphQLError(exc.message, extensions={"type": exc.type}) from exc
        except StateError as exc:
            kind = {409: "STALE_DATA", 403: "FORBIDDEN", 404: "NOT_FOUND"}.get(exc.status, "UNPROCESSABLE")
            raise GraphQLError(exc.message, extensions={"type": kind}) from exc
        return {
            "clientMutationId": input.get("clientMutationId"),
            "commit": self.commit(full_name, commit),
            "ref": self.ref(full_name, branch),
        }

    def _ref_id(self, ref_id: str) -> tuple[str | None, str | None]:
        repo_part, _, branch_part = ref_id.partition(":")
        parsed = parse_node_id(repo_part)
        if parsed is None or parsed[0] != "Ref":
            return None, None
        repo = next((r for r in self.github.state.repos.values() if r.id == parsed[1]), None)
        return (repo.full_name if repo else None), base64.b64decode(branch_part).decode()

    def set_resolved(self, info: Any, input: Obj, resolved: bool) -> Obj:
        """`resolveReviewThread` / `unresolveReviewThread`."""
        parsed = parse_node_id(input["threadId"])
        state = self.github.state
        if parsed is None or parsed[0] != "PullRequestReviewThread" or parsed[1] not in state.threads:
            raise GraphQLError(
                f"Could not resolve to a node with the global id of '{input['threadId']}'",
                extensions={"type": "NOT_FOUND"},
            )
        thread = state.threads[parsed[1]]
        root = state.review_comments[thread.root_comment_id]
        pr = state.pull(root.repo, root.number)
        if state.repo(pr.repo).installation_id != info.context:
            raise GraphQLError("Resource not accessible by integration", extensions={"type": "FORBIDDEN"})
        thread.resolved = resolved
        thread.resolved_by = self.github.bot_login if resolved else None
        return {"clientMutationId": input.get("clientMutationId"), "thread": self.thread(pr, thread)}


@functools.cache
def _schema() -> GraphQLSchema:
    """Build the schema once per process; root resolvers dispatch to the GraphQLApi passed as root value."""
    schema = build_schema(SCHEMA_SDL)
    query, mutation = schema.query_type, schema.mutation_type
    assert isinstance(query, GraphQLObjectType) and isinstance(mutation, GraphQLObjectType)
    query.fields["viewer"].resolve = lambda api, info: api.actor(api.github.bot_login)
    query.fields["repository"].resolve = lambda api, info, **args: api.resolve_repository(None, info, **args)
    query.fields["node"].resolve = lambda api, info, **args: api.resolve_node(None, info, **args)
    query.fields["rateLimit"].resolve = lambda api, info, dryRun=False: {
        "cost": 1,
        "limit": 5000,
        "nodeCount": 0,
        "remaining": 4999,
        "resetAt": "2099-01-01T00:00:00Z",
        "used": 1,
    }
    mutation.fields["createCommitOnBranch"].resolve = lambda api, info, input: api.create_commit_on_branch(
        None, info, input
    )
    mutation.fields["resolveReviewThread"].resolve = lambda api, info, input: api.set_resolved(
        info, input, True
    )
    mutation.fields["unresolveReviewThread"].resolve = lambda api, info, input: api.set_resolved(
        info, input, False
    )
    return schema


@functools.lru_cache(maxsize=512)
def _document(query: str) -> tuple[DocumentNode | None, tuple[GraphQLError, ...]]:
    """Parse and validate a query once: bots send the same few documents over and over."""
    try:
        document = parse(query)
    except GraphQLError as error:
        return None, (error,)
    problems = validate(_schema(), document)
    return (None, tuple(problems)) if problems else (document, ())


def _connection(items: list[Obj], page: dict[str, Any]) -> Obj:
    """Slice a list as a GraphQL connection (cursor = index)."""
    start = int(page["after"]) + 1 if page.get("after") else 0
    end = len(items)
    if page.get("first") is not None:
        end = min(end, start + int(page["first"]))
    window = items[start:end]
    return {
        "nodes": window,
        "totalCount": len(items),
        "pageInfo": {
            "hasNextPage": end < len(items),
            "hasPreviousPage": start > 0,
            "startCursor": str(start) if window else None,
            "endCursor": str(end - 1) if window else None,
        },
    }


def _format(error: GraphQLError) -> dict[str, Any]:
    """Render an error as GitHub does: `type` at the top level next to message, path and locations."""
    data: dict[str, Any] = dict(error.formatted)
    extensions = data.pop("extensions", None) or {}
    if "type" in extensions:
        data = {"type": extensions["type"], **data}
    return data
