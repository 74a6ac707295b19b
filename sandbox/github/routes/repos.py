"""A repository: its metadata, a collaborator's permission, and its contents (with GitHub's size tiers)."""

from __future__ import annotations

import base64
import posixpath
from urllib.parse import quote

from flask import Blueprint, Response, request

from sandbox.github.routes.common import github, json_response, media_type, repo_for
from sandbox.github.shapes import Json
from sandbox.github.state import (
    EXECUTABLE_MODE,
    FILE_MODE,
    SUBMODULE_MODE,
    SYMLINK_MODE,
    Entry,
    Repo,
    StateError,
)

blueprint = Blueprint("repos", __name__)

RAW_MEDIA = ("application/vnd.github.raw", "application/vnd.github.raw+json", "application/vnd.github.v3.raw")
# https://docs.github.com/rest/repos/contents#get-repository-content: content inline up to 1 MB, the raw media
# type up to 100 MB, nothing above (blobs too: https://docs.github.com/rest/git/blobs#get-a-blob).
CONTENTS_INLINE_MAX = 1024 * 1024
CONTENTS_MAX = 100 * 1024 * 1024
TOO_LARGE_MESSAGE = "The requested blob is too large to fetch via the API (the limit is 100 MB)."
TOO_LARGE_ERROR = {"resource": "Blob", "field": "data", "code": "too_large"}


@blueprint.get("/repos/<owner>/<name>")
def get_repo(owner: str, name: str) -> Response:
    # PyGithub's entry to every repository call (`Github.get_repo`) reads the repository first.
    return json_response(github().shapes.repo(repo_for(owner, name)))


@blueprint.get("/repos/<owner>/<name>/collaborators/<login>/permission")
def collaborator_permission(owner: str, name: str, login: str) -> Response:
    return json_response(github().permission_of(repo_for(owner, name), login))


@blueprint.get("/repos/<owner>/<name>/contents/", defaults={"path": ""})
@blueprint.get("/repos/<owner>/<name>/contents/<path:path>")
def contents(owner: str, name: str, path: str) -> Response:
    """`GET …/contents/{path}`: a file, symlink, submodule or directory, as GitHub answers each."""
    # Flask hands the path percent-decoded: `%23` is a `#` in a file name, while an unencoded `#` or `?`
    # never reaches here (the client cut the URL there), as on GitHub.
    repo = repo_for(owner, name)
    path = path.strip("/")
    ref = request.args.get("ref") or repo.default_branch
    state = github().state
    git = state.git
    entries = git.entries_at(state.resolve_ref(repo, ref))
    entry = entries.get(path)
    if entry is None:
        return json_response(directory(repo, path, ref, entries))
    shown, target = entry, None
    if entry[0] == SYMLINK_MODE:
        target = git.blobs[entry[1]].decode("utf-8", "replace")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        found = entries.get(resolved)
        if found is not None and found[0] in (FILE_MODE, EXECUTABLE_MODE):
            # A symlink to a normal file answers with that file's content (and the link's target).
            shown = found
        else:
            target = None
    if shown[0] != SUBMODULE_MODE and len(git.blobs[shown[1]]) > CONTENTS_MAX:
        raise StateError(403, TOO_LARGE_MESSAGE, [TOO_LARGE_ERROR])
    if media_type() in RAW_MEDIA and shown[0] != SUBMODULE_MODE:
        return Response(git.blobs[shown[1]], status=200, mimetype="application/vnd.github.raw")
    out = content_json(repo, path, shown, ref, kind="file" if target else "")
    if target is not None:
        out["target"] = target
    return json_response(out)


def directory(repo: Repo, path: str, ref: str, entries: dict[str, Entry]) -> list[Json]:
    """A directory listing (each entry without content), or GitHub's 404 when nothing is under ``path``."""
    prefix = f"{path}/" if path else ""
    names = sorted({p[len(prefix) :].split("/")[0] for p in entries if p.startswith(prefix)})
    if not names:
        raise StateError(404, "Not Found")
    api = github().shapes.api
    listing = []
    for name in names:
        full = prefix + name
        if full in entries:
            # In a directory listing a submodule is a "file", for backwards compatibility (same page).
            kind = "file" if entries[full][0] == SUBMODULE_MODE else ""
            listing.append(content_json(repo, full, entries[full], ref, with_content=False, kind=kind))
        else:
            listing.append(
                {
                    "type": "dir",
                    "name": name,
                    "path": full,
                    "sha": None,
                    "size": 0,
                    "url": f"{api}/repos/{repo.full_name}/contents/{quote(full)}?ref={ref}",
                }
            )
    return listing


def content_json(
    repo: Repo, path: str, entry: Entry, ref: str, with_content: bool = True, kind: str = ""
) -> Json:
    """A `contents` entry: a file (base64 content up to 1 MB), a symlink or a submodule.

    https://docs.github.com/rest/repos/contents#get-repository-content: files of 1-100 MB come with an
    empty ``content`` and ``encoding: "none"`` (only the raw media type carries them); a submodule has
    ``type: "submodule"`` and its ``submodule_git_url``; a symlink ``type: "symlink"`` and its ``target``.
    """
    mode, sha = entry
    gh = github()
    git = gh.state.git
    api, html = gh.shapes.api, gh.shapes.html
    where = quote(path)
    submodule = mode == SUBMODULE_MODE
    data = b"" if submodule else git.blobs[sha]
    out: Json = {
        "type": kind or ("submodule" if submodule else "symlink" if mode == SYMLINK_MODE else "file"),
        "size": len(data),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "sha": sha,
        "url": f"{api}/repos/{repo.full_name}/contents/{where}?ref={ref}",
        "git_url": None if submodule else f"{api}/repos/{repo.full_name}/git/blobs/{sha}",
        "html_url": f"{html}/{repo.full_name}/{'tree' if submodule else 'blob'}/{ref}/{where}",
        "download_url": None if submodule else f"{html}/{repo.full_name}/raw/{ref}/{where}",
    }
    out["_links"] = {"self": out["url"], "git": out["git_url"], "html": out["html_url"]}
    out["submodule_git_url"] = gh.state.submodule_urls.get(sha, "") if submodule else None
    if out["type"] == "symlink":
        out["target"] = data.decode("utf-8", "replace")
    elif out["type"] == "file" and with_content:
        inline = len(data) <= CONTENTS_INLINE_MAX
        out["encoding"] = "base64" if inline else "none"
        out["content"] = base64.encodebytes(data).decode() if inline else ""
    return out
