"""Git data and commits: blobs, trees, commits, refs (branch rules apply to each move), a commit, compare."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from flask import Blueprint, Response, request

from sandbox.github.routes.checks import check_runs_for
from sandbox.github.routes.common import body, github, installation_id, json_response, repo_for
from sandbox.github.routes.repos import CONTENTS_MAX, TOO_LARGE_ERROR, TOO_LARGE_MESSAGE
from sandbox.github.shapes import Json
from sandbox.github.state import SUBMODULE_MODE, TREE_MODE, Repo, StateError

blueprint = Blueprint("git", __name__)


@blueprint.get("/repos/<owner>/<name>/git/blobs/<sha>")
def get_blob(owner: str, name: str, sha: str) -> Response:
    repo = repo_for(owner, name)
    gh = github()
    if sha not in gh.state.git.blobs:
        raise StateError(404, "Not Found")
    content = gh.state.git.blobs[sha]
    if len(content) > CONTENTS_MAX:
        # https://docs.github.com/rest/git/blobs#get-a-blob: blobs up to 100 MB.
        raise StateError(403, TOO_LARGE_MESSAGE, [TOO_LARGE_ERROR])
    return json_response(
        {
            "sha": sha,
            "node_id": None,
            "size": len(content),
            "encoding": "base64",
            "url": f"{gh.shapes.api}/repos/{repo.full_name}/git/blobs/{sha}",
            "content": base64.encodebytes(content).decode(),
        }
    )


@blueprint.post("/repos/<owner>/<name>/git/blobs")
def create_blob(owner: str, name: str) -> Response:
    repo = repo_for(owner, name, write=True)
    gh = github()
    data = body()
    raw = str(data.get("content", ""))
    try:
        content = base64.b64decode(raw) if data.get("encoding") == "base64" else raw.encode()
    except binascii.Error as exc:
        raise StateError(422, "Invalid Base64 content") from exc
    sha = gh.state.git.put_blob(content)
    return json_response({"sha": sha, "url": f"{gh.shapes.api}/repos/{repo.full_name}/git/blobs/{sha}"}, 201)


@blueprint.get("/repos/<owner>/<name>/git/trees/<sha>")
def get_tree(owner: str, name: str, sha: str) -> Response:
    repo = repo_for(owner, name)
    state = github().state
    if sha not in state.git.trees:
        sha = state.git.commits[state.resolve_ref(repo, sha)].tree
    return json_response(tree_json(repo, sha, recursive=bool(request.args.get("recursive"))))


@blueprint.post("/repos/<owner>/<name>/git/trees")
def create_tree(owner: str, name: str) -> Response:
    repo = repo_for(owner, name, write=True)
    store = github().state.git
    data = body()
    files = dict(store.flatten(data["base_tree"])) if data.get("base_tree") else {}
    for item in data.get("tree") or []:
        path = item["path"]
        if item.get("sha", "") is None and "content" not in item:
            files.pop(path, None)
        elif "content" in item:
            files[path] = store.put_blob(str(item["content"]).encode())
        else:
            if item["sha"] not in store.blobs:
                raise StateError(422, "GitRPC::BadObjectState")
            files[path] = item["sha"]
    sha = store.build_tree_from_shas(files)
    return json_response(tree_json(repo, sha, recursive=False), 201)


@blueprint.get("/repos/<owner>/<name>/git/commits/<sha>")
def get_git_commit(owner: str, name: str, sha: str) -> Response:
    repo = repo_for(owner, name)
    gh = github()
    if sha not in gh.state.git.commits:
        raise StateError(404, "Not Found")
    return json_response(gh.shapes.git_commit(repo.full_name, gh.state.git.commits[sha]))


@blueprint.post("/repos/<owner>/<name>/git/commits")
def create_git_commit(owner: str, name: str) -> Response:
    repo = repo_for(owner, name, write=True)
    gh = github()
    store = gh.state.git
    data = body()
    tree, parents = data.get("tree"), list(data.get("parents") or [])
    if tree not in store.trees:
        raise StateError(422, "Tree SHA does not exist")
    if any(p not in store.commits for p in parents):
        raise StateError(422, "Parent SHA does not exist or is not a commit object")
    author = data.get("author") or {}
    # GitHub signs an App's commit only when no custom author/committer is given.
    custom = bool(data.get("author") or data.get("committer") or data.get("signature"))
    commit = store.put_commit(
        str(tree),
        parents,
        str(data.get("message", "")),
        author.get("name", gh.bot_login),
        author.get("email", gh.bot_email),
        verified=not custom,
    )
    return json_response(gh.shapes.git_commit(repo.full_name, commit), 201)


@blueprint.get("/repos/<owner>/<name>/git/ref/<path:ref>")
@blueprint.get("/repos/<owner>/<name>/git/refs/<path:ref>")
def get_ref(owner: str, name: str, ref: str) -> Response:
    repo = repo_for(owner, name)
    branch = ref.removeprefix("refs/").removeprefix("heads/")
    if branch not in repo.refs:
        raise StateError(404, "Not Found")
    return json_response(ref_json(repo, branch))


@blueprint.post("/repos/<owner>/<name>/git/refs")
def create_ref(owner: str, name: str) -> Response:
    repo = repo_for(owner, name, write=True)
    gh = github()
    data = body()
    ref, sha = str(data.get("ref", "")), str(data.get("sha", ""))
    if not ref.startswith("refs/heads/") or ref.count("/") < 2:
        raise StateError(422, "Reference name must start with 'refs/' and have at least two slashes.")
    branch = ref.removeprefix("refs/heads/")
    if not gh.can_write_branch(installation_id(), repo, branch):
        raise StateError(403, "Resource not accessible by integration")
    if branch in repo.refs:
        raise StateError(422, "Reference already exists")
    if sha not in gh.state.git.commits:
        raise StateError(422, "Object does not exist")
    repo.refs[branch] = sha
    gh.branch_moved(repo, branch, None, sha, gh.bot_login)
    return json_response(ref_json(repo, branch), 201)


@blueprint.patch("/repos/<owner>/<name>/git/refs/<path:ref>")
def update_ref(owner: str, name: str, ref: str) -> Response:
    repo = repo_for(owner, name)
    data = body()
    branch = ref.removeprefix("refs/").removeprefix("heads/")
    github().update_ref(installation_id(), repo, branch, str(data.get("sha", "")), bool(data.get("force")))
    return json_response(ref_json(repo, branch))


@blueprint.get("/repos/<owner>/<name>/commits/<path:ref>")
def get_commit(owner: str, name: str, ref: str) -> Response:
    repo = repo_for(owner, name)
    if ref.endswith("/check-runs"):
        # `<path:ref>` also matches `{ref}/check-runs` (a ref may hold slashes): that route is the checks'.
        return check_runs_for(repo, ref.removesuffix("/check-runs"))
    gh = github()
    sha = gh.state.resolve_ref(repo, ref)
    return json_response(gh.shapes.commit(repo.full_name, gh.state.git.commits[sha]))


@blueprint.get("/repos/<owner>/<name>/compare/<path:basehead>")
def compare(owner: str, name: str, basehead: str) -> Response:
    repo = repo_for(owner, name)
    gh = github()
    state, shapes = gh.state, gh.shapes
    base_ref, sep, head_ref = basehead.partition("...")
    if not sep:
        raise StateError(404, "Not Found")
    base, head = state.resolve_ref(repo, base_ref), state.resolve_ref(repo, head_ref.split(":")[-1])
    merge_base = state.git.merge_base(head, base) or base
    ahead = [c for c in state.git.ancestors(head) if c not in set(state.git.ancestors(base))]
    behind = [c for c in state.git.ancestors(base) if c not in set(state.git.ancestors(head))]
    status = "identical" if base == head else "ahead" if not behind else "behind" if not ahead else "diverged"
    files = state.git.diff(merge_base, head)
    return json_response(
        {
            "url": f"{shapes.api}/repos/{repo.full_name}/compare/{basehead}",
            "html_url": f"{shapes.html}/{repo.full_name}/compare/{basehead}",
            "permalink_url": f"{shapes.html}/{repo.full_name}/compare/{base}...{head}",
            "diff_url": f"{shapes.html}/{repo.full_name}/compare/{basehead}.diff",
            "patch_url": f"{shapes.html}/{repo.full_name}/compare/{basehead}.patch",
            "base_commit": shapes.commit(repo.full_name, state.git.commits[base], False),
            "merge_base_commit": shapes.commit(repo.full_name, state.git.commits[merge_base], False),
            "status": status,
            "ahead_by": len(ahead),
            "behind_by": len(behind),
            "total_commits": len(ahead),
            "commits": [shapes.commit(repo.full_name, state.git.commits[c], False) for c in reversed(ahead)],
            "files": [shapes.file(repo.full_name, head, f) for f in files],
        }
    )


def tree_json(repo: Repo, sha: str, recursive: bool) -> Json:
    """A git tree, optionally recursive (paths joined with /)."""
    gh = github()
    store, api = gh.state.git, gh.shapes.api

    def walk(tree_sha: str, prefix: str) -> Iterable[Json]:
        for mode, entry_name, child in store.trees[tree_sha]:
            is_tree, is_commit = mode == TREE_MODE, mode == SUBMODULE_MODE
            yield {
                "path": prefix + entry_name,
                "mode": "040000" if is_tree else mode,
                "type": "tree" if is_tree else "commit" if is_commit else "blob",
                "sha": child,
                "size": None if is_tree or is_commit else len(store.blobs[child]),
                "url": f"{api}/repos/{repo.full_name}/git/{'trees' if is_tree else 'blobs'}/{child}",
            }
            if is_tree and recursive:
                yield from walk(child, prefix + entry_name + "/")

    return {
        "sha": sha,
        "url": f"{api}/repos/{repo.full_name}/git/trees/{sha}",
        "tree": list(walk(sha, "")),
        "truncated": False,
    }


def ref_json(repo: Repo, branch: str) -> Json:
    """A git ref object."""
    api = github().shapes.api
    sha = repo.refs[branch]
    return {
        "ref": f"refs/heads/{branch}",
        "node_id": None,
        "url": f"{api}/repos/{repo.full_name}/git/refs/heads/{branch}",
        "object": {"type": "commit", "sha": sha, "url": f"{api}/repos/{repo.full_name}/git/commits/{sha}"},
    }
