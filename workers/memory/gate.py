"""The merge gate's memory of a pull request (``spark:gate:*``): its published high-severity findings, and
the head whose review last completed (a re-run of the check on that head needs no new model call).

The findings are kept whatever ``review.gate`` says, so turning the gate on applies to what was already
reported. How each finding stands (resolved, dismissed) is the ledger's and GitHub's threads'; fixed is
recorded here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from bot import keys
from bot.core.gate import GateFinding
from bot.redis_server import as_text
from workers.context import JobContext

# The field that holds the head whose review completed; fingerprints are 16 hex digits, never this.
HEAD_FIELD = "_head"


@dataclass(frozen=True, slots=True)
class GateMemory:
    """What Spark remembers for the gate: the findings, and the head whose review completed."""

    findings: tuple[GateFinding, ...] = ()
    reviewed_head: str = ""


def recall(ctx: JobContext) -> GateMemory:
    """Return what Spark remembers for the gate of the job's pull request."""
    raw = ctx.redis.hgetall(keys.GATE.format(ctx.pr.key))
    head = ""
    findings = []
    for field_name, value in raw.items():
        name = as_text(field_name)
        if name == HEAD_FIELD:
            head = as_text(value)
            continue
        try:
            data = orjson.loads(value)
        except orjson.JSONDecodeError:
            continue
        finding = GateFinding.from_dict(name, data) if isinstance(data, dict) else None
        if finding is not None:
            findings.append(finding)
    return GateMemory(tuple(findings), head)


def remember(ctx: JobContext, findings: Iterable[GateFinding], *, reviewed_head: str | None) -> None:
    """Record ``findings`` (new ones, or ones now fixed) and the head whose review completed.

    ``reviewed_head`` empty: the review of the head did not complete (files unreviewed, an error), so a
    re-run reviews again; ``None`` leaves what is recorded.
    """
    key = keys.GATE.format(ctx.pr.key)
    mapping: dict[Any, Any] = {f.fingerprint: orjson.dumps(f.as_dict()) for f in findings}
    with ctx.redis.pipeline() as pipe:
        if reviewed_head:
            mapping[HEAD_FIELD] = reviewed_head
        elif reviewed_head is not None:
            pipe.hdel(key, HEAD_FIELD)
        if mapping:
            pipe.hset(key, mapping=mapping)
        pipe.expire(key, keys.GATE.seconds)
        pipe.execute()
