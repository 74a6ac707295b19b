"""Pages a person opens on the local GitHub: a pull request (conversation, commits, files), a commit, a file.

Comment bodies are rendered as GitHub renders them: GitHub's own Markdown renderer (cmarkgfm, with its
extensions and hard line breaks, as in comments), then an allowlist of tags and attributes (nh3), so raw
HTML shows as GitHub shows it (``<details>``, ``<sub>``) and anything live (scripts, event handlers) is
dropped. A ```suggestion block in a review comment shows as GitHub's "Suggested change": the lines it
replaces, then it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from html import escape, unescape

import cmarkgfm
import nh3
from cmarkgfm.cmark import Options

from sandbox.github.service import SUGGESTION, GitHub
from sandbox.github.state import FileDiff, IssueComment, PullRequest, Review, ReviewComment, StateError

MARKDOWN_EXTENSIONS = ["autolink", "table", "strikethrough", "tagfilter", "tasklist"]
MARKDOWN_OPTIONS = Options.CMARK_OPT_UNSAFE | Options.CMARK_OPT_HARDBREAKS | Options.CMARK_OPT_GITHUB_PRE_LANG
# What survives of raw HTML: sanitizer defaults (GitHub's allowlist is much the same), task-list boxes, code
# block languages. Links keep only http(s) and mailto.
ALLOWED_TAGS = nh3.ALLOWED_TAGS | {"input"}
ALLOWED_ATTRIBUTES = {
    **nh3.ALLOWED_ATTRIBUTES,
    "input": {"type", "checked", "disabled"},
    "pre": {"lang"},
}
URL_SCHEMES = {"http", "https", "mailto"}
REACTION_EMOJI = {
    "+1": "👍",
    "-1": "👎",
    "laugh": "😄",
    "confused": "😕",
    "heart": "❤️",
    "hooray": "🎉",
    "rocket": "🚀",
    "eyes": "👀",
}
# A GitHub login: letters, digits and single hyphens, at most 39 characters (an App's `name[bot]` is none).
LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$")
POLL_MS = 1000

STYLE = """
body{font:14px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;max-width:980px;
padding:16px;color:#1f2328}
h1{font-weight:400;margin:8px 0}h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:32px}
.meta,.note{color:#59636e}.box{border:1px solid #d0d7de;border-radius:6px;margin:12px 0}
.box>header{background:#f6f8fa;border-bottom:1px solid #d0d7de;padding:6px 12px;border-radius:6px 6px 0 0}
.box>.body{padding:4px 12px}.bot{background:#ddf4ff}.state{border-radius:2em;padding:2px 10px;color:#fff;
background:#1f883d}.state.closed{background:#cf222e}.reactions>span{border:1px solid #d0d7de;
border-radius:2em;padding:0 6px;margin:0 4px 8px 0;display:inline-block}pre{background:#f6f8fa;padding:8px;
overflow:auto;border-radius:6px}code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.add{background:#dafbe1}.del{background:#ffebe9}.hunk{color:#59636e;background:#ddf4ff}
.diff{padding:0}.diff div{white-space:pre;font:12px ui-monospace,monospace;padding:0 8px}
.thread{margin-left:24px}.suggestion>header{font-weight:600}textarea{width:100%;box-sizing:border-box;
min-height:6em;font:inherit}.error{color:#cf222e;font-weight:600}.ok{color:#1f883d}.fail{color:#cf222e}
form{margin:8px 0}form.button{display:inline-block;margin:4px 8px 4px 0}
input[name=as]{width:14em}.lines td{font:12px ui-monospace,monospace;white-space:pre;
padding:0 8px}.lines td.n{color:#59636e;text-align:right}.lines tr:target{background:#fff8c5}
.diff .n{color:#59636e;user-select:none}
"""

# Keeps the conversation live: every second it asks for the page's live part again and swaps it in when it
# changed, unless the person is in a box inside it or has typed there (a reply would be lost).
POLL_SCRIPT = """
const live = () => document.getElementById("live");
async function poll() {
  const part = live();
  const typed = [...part.querySelectorAll("textarea, input[name=line]")].some(t => t.value);
  const busy = typed || part.contains(document.activeElement);
  if (!busy) {
    const url = new URL(location.href);
    url.searchParams.set("part", "live");
    url.hash = "";
    const answer = await fetch(url, {cache: "no-store"});
    if (answer.ok) {
      const html = await answer.text();
      const version = html.match(/data-version="([0-9a-f]+)"/);
      if (version && version[1] !== part.dataset.version) part.outerHTML = html;
    }
  }
}
setInterval(() => poll().catch(() => {}), %d);
"""


def markdown(text: str) -> str:
    """Return ``text`` as GitHub renders a comment body: GitHub Flavored Markdown, raw HTML allowlisted."""
    rendered = cmarkgfm.markdown_to_html_with_extensions(text, MARKDOWN_OPTIONS, MARKDOWN_EXTENSIONS)
    return nh3.clean(
        rendered, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES, link_rel=None
    )


def check_login(login: str, bot_login: str) -> str:
    """Return a login people may comment as, or raise 422 saying why not."""
    login = login.strip()
    if login.lower() == bot_login.lower() or not LOGIN.match(login):
        raise StateError(
            422,
            f"{login!r} is not a user's login: letters, digits and single hyphens, at most 39 characters "
            f"({bot_login} is the App, which posts only through the API)",
        )
    return login


class Pages:
    """Renders the pages of one local GitHub from its state, as HTML strings."""

    def __init__(self, github: GitHub) -> None:
        self.gh = github
        self.state = github.state

    # ---- the pull request ---------------------------------------------------------------------------------

    def pull_request(
        self, pr: PullRequest, *, nonce: str, error: str = "", draft: str = "", as_user: str = ""
    ) -> str:
        """Return the pull request's page: its conversation, checks, commits and files, and a comment box."""
        users = self.users(pr)
        chosen = as_user or pr.author
        options = "".join(f'<option value="{escape(u, quote=True)}">' for u in users)
        heading = (
            f'<h1>{escape(pr.title)} <span class="meta">#{pr.number}</span></h1>'
            f'<p><span class="state {escape(pr.state)}">{escape(pr.state.title())}</span> '
            f"<b>{escape(pr.author)}</b> wants to merge into <code>{escape(pr.base_ref)}</code> from "
            f"<code>{escape(pr.head_repo)}:{escape(pr.head_ref)}</code></p>"
            + (f'<p class="error" id="error">{escape(error)}</p>' if error else "")
        )
        box = (
            f'<h2>Comment</h2><form method="post" action="{self.pull_path(pr)}/comments" id="comment-form">'
            + self._as_field(chosen, "as")
            + f'<textarea name="body" id="comment-body" placeholder="/spark fix ..., /spark ask ..." '
            f'required>{escape(draft)}</textarea><button type="submit" id="comment-submit">Comment</button>'
            f"</form>"
            f'<datalist id="users">{options}</datalist>'
            f'<p class="note">Permissions here: {self.permissions(pr, users)}; anyone else may comment '
            f"too (with read access on a public repository). Each comment is delivered to the App as GitHub "
            f"would deliver it.</p>"
        )
        body = heading + self.live(pr, chosen) + box
        return self.document(f"{pr.title} · {pr.repo}#{pr.number}", body, nonce, poll=True)

    def live(self, pr: PullRequest, as_user: str = "") -> str:
        """Return the part of the pull request page that changes as people and the App act (polled)."""
        inner = (
            "<h2>Conversation</h2>"
            + self._description(pr)
            + "".join(self._timeline(pr, as_user))
            + self._checks(pr, as_user or pr.author)
            + "<h2>Commits</h2>"
            + self._commits(pr)
            + "<h2>Files changed</h2>"
            + "".join(self._pr_file(pr, f, as_user or pr.author) for f in self.state.pr_diff(pr))
        )
        version = hashlib.sha1(inner.encode()).hexdigest()
        return f'<div id="live" data-version="{version}">{inner}</div>'

    def _description(self, pr: PullRequest) -> str:
        text = pr.body or "*No description provided.*"
        return self._box(pr.author, "opened this pull request", pr.created_at, markdown(text), "description")

    def _timeline(self, pr: PullRequest, as_user: str) -> Iterable[str]:
        """Yield the conversation's comments and reviews in the order they were made."""
        mine = (pr.repo, pr.number)
        items: list[IssueComment | Review] = [
            c for c in self.state.issue_comments.values() if (c.repo, c.number) == mine
        ]
        items += [
            r for r in self.state.reviews.values() if (r.repo, r.number) == mine and r.event != "PENDING"
        ]
        for item in sorted(items, key=lambda i: i.id):
            if isinstance(item, IssueComment):
                reactions = self._reactions(pr, item.id, as_user or pr.author)
                yield self._box(
                    item.author,
                    "commented",
                    item.created_at,
                    markdown(item.body) + reactions,
                    f"issuecomment-{item.id}",
                )
            else:
                review = self._review(pr, item, as_user)
                if review:
                    yield review

    def _review(self, pr: PullRequest, review: Review, as_user: str) -> str:
        """Return a review with its threads (each reply shown under the thread it answers), or ""."""
        roots = [
            c
            for c in self.state.review_comments.values()
            if c.review_id == review.id and c.in_reply_to_id is None
        ]
        if not review.body and not roots:
            return ""  # a reply's own review: the reply shows in its thread
        verb = {"APPROVE": "approved these changes", "REQUEST_CHANGES": "requested changes"}.get(
            review.event, "reviewed"
        )
        content = markdown(review.body) if review.body else ""
        content += "".join(self._thread(pr, root, as_user) for root in roots)
        return self._box(review.author, verb, review.submitted_at, content, f"pullrequestreview-{review.id}")

    def _thread(self, pr: PullRequest, root: ReviewComment, as_user: str) -> str:
        replies = [c for c in self.state.review_comments.values() if c.in_reply_to_id == root.id]
        resolved = any(t.resolved for t in self.state.threads.values() if t.root_comment_id == root.id)
        lines = f"lines {root.start_line}-{root.line}" if root.start_line else f"line {root.line}"
        hunk = root.diff_hunk.split("\n")[-4:]
        out = [
            f'<div class="box thread" id="thread-{root.id}"><header><code>{escape(root.path)}</code> '
            f"{lines}{' · resolved' if resolved else ''}</header>"
            f'<div class="diff">{"".join(self._diff_line(line) for line in hunk)}</div>'
        ]
        for comment in [root, *replies]:
            acting = as_user or pr.author
            body = self._review_comment_body(pr, comment, acting) + self._reactions(pr, comment.id, acting)
            out.append(
                f'<div class="body" id="discussion_r{comment.id}">{self._who(comment.author)} '
                f'<span class="meta">{escape(comment.created_at)}</span>{body}</div>'
            )
        out.append(
            f'<form method="post" action="{self.pull_path(pr)}/comments" class="body reply">'
            f'<input type="hidden" name="in_reply_to" value="{root.id}">'
            + self._as_field(as_user or pr.author, f"as-{root.id}")
            + '<textarea name="body" placeholder="Reply..." required></textarea>'
            '<button type="submit">Reply</button></form></div>'
        )
        return "".join(out)

    def _review_comment_body(self, pr: PullRequest, comment: ReviewComment, as_user: str) -> str:
        """Render a review comment, its ```suggestion blocks as GitHub's "Suggested change".

        While the suggestion applies (the comment is on the head, on its new side, in an open pull request) it
        has GitHub's "Commit suggestion" button.
        """
        html = markdown(comment.body)
        if not SUGGESTION.search(comment.body):
            return html
        replaced = self._lines_at(comment)
        before = "".join(self._diff_line("-" + line) for line in replaced)
        button = ""
        if pr.state == "open" and comment.side == "RIGHT" and comment.commit_id == self.state.head_sha(pr):
            button = self._button(
                f"{self.pull_path(pr)}/suggestions/{comment.id}", as_user, "Commit suggestion", {}
            )

        def suggested(match: re.Match[str]) -> str:
            after = "".join(self._diff_line("+" + line) for line in _code_lines(match.group(1)))
            return (
                '<div class="box suggestion"><header>Suggested change</header>'
                f'<div class="diff">{before}{after}</div>{button}</div>'
            )

        return re.sub(r'<pre lang="suggestion"><code>(.*?)</code></pre>', suggested, html, flags=re.S)

    def _lines_at(self, comment: ReviewComment) -> list[str]:
        """Return the lines a review comment covers, in the file as it was at the comment's commit."""
        blob = self.state.git.files_at(comment.commit_id).get(comment.path)
        if blob is None:
            return []
        lines = self.state.git.blobs[blob].decode("utf-8", "replace").splitlines()
        return lines[(comment.start_line or comment.line) - 1 : comment.line]

    def _checks(self, pr: PullRequest, as_user: str) -> str:
        """Return the check runs on the head, with the App's buttons: its requested actions, and Re-run."""
        head = self.state.head_sha(pr)
        runs = [r for r in self.state.check_runs.values() if r.repo == pr.repo and r.head_sha == head]
        if not runs:
            return ""
        out = ['<div class="box" id="checks"><header>Checks on the head commit</header>']
        for run in runs:
            outcome = run.conclusion or run.status
            style = "ok" if outcome == "success" else "fail" if outcome in ("failure", "cancelled") else ""
            title = run.output.get("title") or ""
            summary = str(run.output.get("summary") or "")
            text = str(run.output.get("text") or "")
            details = markdown(summary + ("\n\n" + text if text else ""))
            buttons = ""
            if run.app_slug is None:  # GitHub shows another App's buttons to that App only
                target = f"{self.pull_path(pr)}/checks/{run.id}"
                buttons = "".join(
                    self._button(target, as_user, str(a.get("label")), {"action": str(a.get("identifier"))})
                    for a in run.actions
                ) + self._button(target, as_user, "Re-run", {"action": "rerequest"})
            out.append(
                f'<div class="body" id="check-run-{run.id}"><b>{escape(run.name)}</b> '
                f'<span class="{style}">{escape(outcome)}</span> {escape(str(title))} {buttons}'
                f"<details><summary>Details</summary>{details}</details></div>"
            )
        return "".join(out) + "</div>"

    def _commits(self, pr: PullRequest) -> str:
        head_repo = self.state.repo(pr.head_repo)
        base_tip = self.state.repo(pr.repo).refs[pr.base_ref]
        before = set(self.state.git.ancestors(base_tip))
        shas = [s for s in self.state.git.ancestors(self.state.head_sha(pr)) if s not in before]
        rows = []
        for sha in reversed(shas):
            commit = self.state.git.commits[sha]
            subject = commit.message.split("\n", 1)[0]
            verified = " · Verified" if commit.verified else ""
            rows.append(
                f'<li id="commit-{sha[:7]}"><a href="/{head_repo.full_name}/commit/{sha}"><code>{sha[:7]}'
                f'</code></a> {escape(subject)} <span class="meta">{escape(commit.author)}'
                f"{verified}</span></li>"
            )
        return f'<ol id="commits">{"".join(rows)}</ol>'

    # ---- a commit, a file ---------------------------------------------------------------------------------

    def commit(self, full_name: str, sha: str, *, nonce: str) -> str:
        """Return a commit's page: its message, author and what it changed against its first parent."""
        commit = self.state.git.commits[sha]
        parent = commit.parents[0] if commit.parents else None
        files = self.state.git.diff(parent, sha) if parent else []
        verified = " · Verified" if commit.verified else ""
        body = (
            f'<p class="meta">{escape(full_name)}</p>'
            f"<h1>{escape(commit.message.split(chr(10), 1)[0])}</h1>"
            f"<pre>{escape(commit.message)}</pre>"
            f'<p class="meta">{escape(commit.author)} committed {escape(commit.date)}{verified} · '
            f"<code>{sha}</code></p>" + "".join(self._file_diff(f) for f in files)
        )
        return self.document(f"{commit.message.split(chr(10), 1)[0]} · {full_name}@{sha[:7]}", body, nonce)

    def blob(self, full_name: str, ref: str, sha: str, path: str, *, nonce: str) -> str:
        """Return a file's page at a commit, one anchor per line (``#L3-L5`` permalinks land on them)."""
        blob = self.state.git.files_at(sha).get(path)
        if blob is None:
            raise StateError(404, "Not Found")
        lines = self.state.git.blobs[blob].decode("utf-8", "replace").splitlines()
        rows = "".join(
            f'<tr id="L{n}"><td class="n">{n}</td><td>{escape(line)}</td></tr>'
            for n, line in enumerate(lines, 1)
        )
        body = (
            f'<p class="meta">{escape(full_name)} at <code>{escape(ref)}</code>'
            f"</p><h1><code>{escape(path)}</code></h1>"
            f'<div class="box"><table class="lines">{rows}</table></div>'
        )
        return self.document(f"{path} at {ref[:12]} · {full_name}", body, nonce)

    # ---- pieces -------------------------------------------------------------------------------------------

    def users(self, pr: PullRequest) -> list[str]:
        """Return the people of this pull request: its author, the collaborators, everyone who commented."""
        repo = self.state.repo(pr.repo)
        people = [pr.author, repo.owner, *repo.collaborators]
        mine = (pr.repo, pr.number)
        people += [c.author for c in self.state.issue_comments.values() if (c.repo, c.number) == mine]
        return [p for p in dict.fromkeys(people) if p != self.gh.bot_login]

    def permissions(self, pr: PullRequest, users: list[str]) -> str:
        """Return who holds which permission on the base repository, as a sentence."""
        repo = self.state.repo(pr.repo)
        return ", ".join(f"<b>{escape(u)}</b> {self.state.permission(repo, u)}" for u in users)

    def pull_path(self, pr: PullRequest) -> str:
        """Return the path of a pull request's page (its ``html_url`` on this host)."""
        return f"/{pr.repo}/pull/{pr.number}"

    def _as_field(self, login: str, field_id: str) -> str:
        return (
            f'<label>Comment as <input name="as" id="{field_id}" list="users" '
            f'value="{escape(login, quote=True)}" required></label> '
        )

    def _button(
        self, action: str, as_user: str, label: str, fields: dict[str, str], *, quiet: bool = False
    ) -> str:
        """Return a one-button form that acts as ``as_user``, the person the page acts as (said beside it,
        or when ``quiet`` on hovering)."""
        hidden = "".join(
            f'<input type="hidden" name="{name}" value="{escape(value, quote=True)}">'
            for name, value in {"as": as_user, **fields}.items()
        )
        who = f"as {escape(as_user)}"
        said = "" if quiet else f' <span class="meta">{who}</span>'
        return (
            f'<form method="post" action="{escape(action, quote=True)}" class="button">{hidden}'
            f'<button type="submit" title="{who}">{escape(label)}</button>{said}</form>'
        )

    def _who(self, login: str) -> str:
        return f"<b>{escape(login)}</b>"

    def _box(self, author: str, verb: str, when: str, content: str, anchor: str) -> str:
        bot = " bot" if author == self.gh.bot_login else ""
        return (
            f'<div class="box{bot}" id="{anchor}"><header>{self._who(author)} {verb} '
            f'<span class="meta">{escape(when)}</span></header><div class="body">{content}</div></div>'
        )

    def _reactions(self, pr: PullRequest, subject_id: int, as_user: str) -> str:
        """Return a comment's reactions (who, on hover), and 👍 and 👎 buttons to add one."""
        counts: dict[str, list[str]] = {}
        for reaction in self.state.reactions.values():
            if reaction.subject_id == subject_id:
                counts.setdefault(reaction.content, []).append(reaction.author)
        spans = "".join(
            f'<span title="{escape(", ".join(who), quote=True)}" data-reaction="{escape(content)}">'
            f"{REACTION_EMOJI.get(content, content)} {len(who)}</span>"
            for content, who in counts.items()
        )
        target = f"{self.pull_path(pr)}/reactions/{subject_id}"
        buttons = "".join(
            self._button(target, as_user, REACTION_EMOJI[content], {"content": content}, quiet=True)
            for content in ("+1", "-1")
        )
        return f'<div class="reactions">{spans}{buttons}</div>'

    def _pr_file(self, pr: PullRequest, diff: FileDiff, as_user: str) -> str:
        """Return a file of the pull request: its diff with line numbers, and a box to comment on a line."""
        rows = []
        for hunk in diff.hunks:
            rows.append(self._diff_line(hunk.header))
            old, new = _hunk_starts(hunk.header)
            for line in hunk.lines:
                left = right = ""
                if line.startswith("-"):
                    left, old = str(old), old + 1
                elif line.startswith("+"):
                    right, new = str(new), new + 1
                elif not line.startswith("\\"):
                    left, right, old, new = str(old), str(new), old + 1, new + 1
                rows.append(self._diff_line(line, f"{left:>4} {right:>4} "))
        if diff.binary:
            rows = ['<div class="hunk">Binary file not shown.</div>']
        form = ""
        if pr.state == "open" and not diff.binary:
            form = (
                f'<form method="post" action="{self.pull_path(pr)}/comments" class="body line-comment">'
                f'<input type="hidden" name="path" value="{escape(diff.path, quote=True)}">'
                + self._as_field(as_user, f"as-{escape(diff.path, quote=True)}")
                + '<label>on line <input name="line" type="number" min="1" required></label> '
                '<select name="side"><option value="RIGHT">of the new file</option>'
                '<option value="LEFT">of the old file</option></select>'
                '<textarea name="body" placeholder="A comment on that line: /spark fix ..., a question..." '
                'required></textarea><button type="submit">Comment on the line</button></form>'
            )
        return (
            f'<div class="box file" id="file-{escape(diff.path, quote=True)}"><header>'
            f"<code>{escape(diff.path)}</code> "
            f'<span class="meta">{diff.status}, +{diff.additions} −{diff.deletions}</span></header>'
            f'<div class="diff">{"".join(rows)}</div>{form}</div>'
        )

    def _file_diff(self, diff: FileDiff) -> str:
        lines = "".join(self._diff_line(line) for hunk in diff.hunks for line in [hunk.header, *hunk.lines])
        if diff.binary:
            lines = '<div class="hunk">Binary file not shown.</div>'
        return (
            f'<div class="box file"><header><code>{escape(diff.path)}</code> '
            f'<span class="meta">{diff.status}, +{diff.additions} −{diff.deletions}</span></header>'
            f'<div class="diff">{lines}</div></div>'
        )

    def _diff_line(self, line: str, gutter: str = "") -> str:
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        numbers = f'<span class="n">{gutter}</span>' if gutter else ""
        return f'<div class="{kind}">{numbers}{escape(line) or " "}</div>'

    def document(self, title: str, body: str, nonce: str, *, poll: bool = False) -> str:
        """Return a whole HTML page; its only script (the live poll) runs by ``nonce``, nothing else can."""
        script = f'<script nonce="{nonce}">{POLL_SCRIPT % POLL_MS}</script>' if poll else ""
        return (
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<style nonce="{nonce}">{STYLE}</style></head><body>'
            '<p class="note">The local GitHub sandbox: nothing here is on github.com.</p>'
            f"{body}{script}</body></html>"
        )


def _hunk_starts(header: str) -> tuple[int, int]:
    """Return the first old and new line numbers of a ``@@ -a,b +c,d @@`` hunk header."""
    match = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)", header)
    return (int(match.group(1)), int(match.group(2))) if match else (1, 1)


def _code_lines(html: str) -> list[str]:
    """Return the lines of a rendered code block's text (its HTML escapes undone)."""
    text = unescape(html)
    return text.removesuffix("\n").split("\n") if text else []
