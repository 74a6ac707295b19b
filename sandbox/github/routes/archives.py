"""A repository's archive: ``GET /repos/{owner}/{repo}/tarball/{ref}`` and the download it redirects to.

As GitHub serves it (https://docs.github.com/rest/repos/contents#download-a-repository-archive-tar): the API
answers ``302 Found`` with a ``Location`` on the download host (``codeload``), valid for five minutes and
carrying a token for a private repository; the download is a gzipped tar written as ``git archive`` writes
it: a pax global header whose ``comment`` is the commit SHA, every entry under ``owner-repo-shortsha/``,
directories listed, files 0664 and executables 0775, symlinks as symlink entries, a submodule as an empty
directory, every time stamp the commit's. Only the API request counts against the rate limit.
"""

from __future__ import annotations

import io
import secrets
import tarfile
import time
from datetime import datetime

from flask import Blueprint, Response, request

from sandbox.github.routes.common import github, repo_for
from sandbox.github.state import EXECUTABLE_MODE, SUBMODULE_MODE, SYMLINK_MODE, StateError

blueprint = Blueprint("archives", __name__)

# The download host's path prefix in the sandbox (GitHub's is a host of its own: codeload.github.com).
CODELOAD = "/_codeload"
LINK_SECONDS = 300
# Issued download tokens: token -> (repository, commit, expiry).
_TOKENS: dict[str, tuple[str, str, float]] = {}


@blueprint.get("/repos/<owner>/<name>/tarball", defaults={"ref": ""})
@blueprint.get("/repos/<owner>/<name>/tarball/<path:ref>")
def tarball(owner: str, name: str, ref: str) -> Response:
    repo = repo_for(owner, name)
    state = github().state
    commit = state.resolve_ref(repo, ref or repo.default_branch)
    token = secrets.token_urlsafe(24)
    _TOKENS[token] = (repo.full_name, commit, time.time() + LINK_SECONDS)
    location = f"{github().shapes.api}{CODELOAD}/{repo.full_name}/legacy.tar.gz/{ref or repo.default_branch}"
    if repo.private:
        location += f"?token={token}"
    else:
        location += f"?sha={commit}"
    response = Response(b"", status=302)
    response.headers["Location"] = location
    return response


@blueprint.get(f"{CODELOAD}/<owner>/<name>/legacy.tar.gz/<path:ref>")
def download(owner: str, name: str, ref: str) -> Response:
    state = github().state
    repo = state.repo(f"{owner}/{name}")
    token = request.args.get("token", "")
    if repo.private:
        issued = _TOKENS.get(token)
        if issued is None or issued[0] != repo.full_name or issued[2] < time.time():
            raise StateError(404, "Not Found")
        commit = issued[1]
    else:
        commit = request.args.get("sha") or state.resolve_ref(repo, ref)
    data = archive(owner, name, commit)
    response = Response(data, status=200, mimetype="application/x-gzip")
    response.headers["Content-Disposition"] = f"attachment; filename={owner}-{name}-{commit[:7]}.tar.gz"
    return response


def archive(owner: str, name: str, commit_sha: str) -> bytes:
    """Return the gzipped tar of a commit as GitHub's codeload writes it."""
    git = github().state.git
    commit = git.commits[commit_sha]
    mtime = int(datetime.fromisoformat(commit.date.replace("Z", "+00:00")).timestamp())
    prefix = f"{owner}-{name}-{commit_sha[:7]}/"
    entries = git.entries_at(commit_sha)
    out = io.BytesIO()
    # git archive writes gzip at its default level; level 1 keeps big sandbox repositories quick.
    with tarfile.open(
        fileobj=out,
        mode="w:gz",
        format=tarfile.PAX_FORMAT,
        pax_headers={"comment": commit_sha},
        compresslevel=1,
    ) as tar:
        directories = sorted(
            {path.rsplit("/", i)[0] for path in entries for i in range(1, path.count("/") + 1)}
        )
        for directory in ["", *directories]:
            tar.addfile(_info(prefix + directory, tarfile.DIRTYPE, 0o775, mtime))
        for path, (mode, sha) in sorted(entries.items()):
            if mode == SUBMODULE_MODE:
                tar.addfile(_info(prefix + path, tarfile.DIRTYPE, 0o775, mtime))
            elif mode == SYMLINK_MODE:
                info = _info(prefix + path, tarfile.SYMTYPE, 0o777, mtime)
                info.linkname = git.blobs[sha].decode("utf-8", "replace")
                tar.addfile(info)
            else:
                data = git.blobs[sha]
                info = _info(
                    prefix + path, tarfile.REGTYPE, 0o775 if mode == EXECUTABLE_MODE else 0o664, mtime
                )
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _info(name: str, kind: bytes, mode: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name if kind != tarfile.DIRTYPE else name.rstrip("/") + "/")
    info.type = kind
    info.mode = mode
    info.mtime = mtime
    info.uname = info.gname = "root"
    return info
