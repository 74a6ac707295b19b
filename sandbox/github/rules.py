"""Branch protection and rulesets on a branch, enforced on the App's pushes as GitHub enforces them.

GitHub checks a push against the branch's classic protection rule and against every active ruleset that
targets the branch; a violation refuses the whole push. Over GraphQL a classic rule answers with the error
type ``BRANCH_PROTECTION_RULE_VIOLATION``; a ruleset answers ``UNPROCESSABLE`` with "Repository rule
violations found" and one line per broken rule, the lines ``git push`` prints after ``GH013``.
Docs: https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches
and https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/available-rules-for-rulesets
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from sandbox.github.state import StateError

Source = Literal["protection", "ruleset"]
PROTECTION_TYPE = "BRANCH_PROTECTION_RULE_VIOLATION"
RULESET_TYPE = "UNPROCESSABLE"


@dataclass(frozen=True)
class BranchRules:
    """What guards one branch: a classic protection rule or a ruleset."""

    source: Source = "protection"
    require_pull_request: bool = False
    required_signatures: bool = False
    required_status_checks: tuple[str, ...] = ()
    # Who may push (logins; the App is ``<slug>[bot]``); None lets anyone with write access push.
    allowed_pushers: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Refusal:
    """A refused push: GitHub's GraphQL error type, its REST status and message, the broken rules."""

    type: str
    status: int
    message: str
    rules: tuple[str, ...]


class RuleViolation(StateError):
    """A push the branch's rules refuse; ``type`` is the GraphQL error type GitHub answers with."""

    def __init__(self, refused: Refusal) -> None:
        super().__init__(refused.status, refused.message)
        self.type = refused.type
        self.rules = refused.rules


def violations(rules: BranchRules, pusher: str, verified: bool) -> list[str]:
    """Return GitHub's line for each rule this push breaks (a new commit has no status checks yet)."""
    found: list[str] = []
    if rules.allowed_pushers is not None and pusher not in rules.allowed_pushers:
        found.append(
            "Cannot update this protected ref."
            if rules.source == "ruleset"
            else "You're not authorized to push to this branch."
        )
    if rules.require_pull_request:
        found.append("Changes must be made through a pull request.")
    checks = rules.required_status_checks
    if len(checks) == 1:
        found.append(f'Required status check "{checks[0]}" is expected.')
    elif checks:
        found.append(f"{len(checks)} of {len(checks)} required status checks are expected.")
    if rules.required_signatures and not verified:
        found.append("Commits must have verified signatures.")
    return found


def refusal(rules: BranchRules, branch: str, broken: Sequence[str]) -> Refusal:
    """Return how GitHub words a refused push to ``branch`` for the broken rules."""
    lines = "\n".join(f"- {line}" for line in broken)
    if rules.source == "ruleset":
        message = f"Repository rule violations found for refs/heads/{branch}.\n\n{lines}"
        return Refusal(RULESET_TYPE, 422, message, tuple(broken))
    message = f"Protected branch update failed for refs/heads/{branch}.\n\n{lines}"
    return Refusal(PROTECTION_TYPE, 422, message, tuple(broken))


@dataclass
class RuleBook:
    """Every branch's rules in the sandbox, keyed by repository full name and branch."""

    rules: dict[tuple[str, str], list[BranchRules]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, repo: str, branch: str, rules: BranchRules) -> None:
        """Guard ``repo``'s ``branch`` with ``rules`` (a classic rule and rulesets may stack)."""
        with self._lock:
            self.rules.setdefault((repo.lower(), branch), []).append(rules)

    def enforce(self, repo: str, branch: str, pusher: str, verified: bool) -> None:
        """Raise ``RuleViolation`` when a push by ``pusher`` to ``repo``'s ``branch`` breaks a rule."""
        with self._lock:
            guards = list(self.rules.get((repo.lower(), branch), ()))
        for rules in guards:
            broken = violations(rules, pusher, verified)
            if broken:
                raise RuleViolation(refusal(rules, branch, broken))
