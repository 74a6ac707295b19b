"""``spark redeliver``: send the App's failed webhook deliveries again (GitHub never retries them itself).

GitHub keeps a log of every delivery attempt. One event (one ``X-GitHub-Delivery`` GUID) may have several
attempts; it needs redelivering only when none of them succeeded. GitHub accepts redelivery requests for
three days, so older failures are reported and left alone. A redelivered event keeps its GUID, so the
receiver's idempotency on the delivery id makes a redelivery of an already queued event harmless.
Exit codes: 0 nothing failed or all redelivered, 1 a GitHub call failed, 2 bad arguments or settings.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

import orjson

from bot.adapters.github_app import GitHubApp, HookDelivery
from bot.adapters.github_port import GitHubError
from bot.core.wording import plural
from bot.settings import Settings, SettingsError

# GitHub refuses to redeliver attempts older than this.
REDELIVERY_WINDOW = timedelta(days=3)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str) -> timedelta:
    """Parse ``90m``, ``6h``, ``3d`` (a number and a unit); raise ``SettingsError`` on anything else."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not match:
        raise SettingsError(f"--since: expected a number and a unit (s, m, h, d) like 6h or 3d, got {text!r}")
    return timedelta(**{_UNITS[match[2]]: float(match[1])})


def delivered_at(delivery: HookDelivery) -> datetime | None:
    """Return when GitHub attempted the delivery (None when the log has no parseable time)."""
    try:
        when = datetime.fromisoformat(delivery.delivered_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def succeeded(delivery: HookDelivery) -> bool:
    """Return whether the receiver answered this attempt with a 2xx."""
    return 200 <= delivery.status_code < 300


def pending(delivery: HookDelivery) -> bool:
    """Return whether this attempt has not been made yet (GitHub is still sending it)."""
    return delivery.status_code == 0 and delivery.status.lower() == "pending"


@dataclass(frozen=True, slots=True)
class FailedEvent:
    """One event (GUID) none of whose attempts succeeded; ``latest`` is the attempt to redeliver."""

    guid: str
    event: str
    action: str | None
    attempts: int
    latest_id: int
    latest_status: str
    delivered_at: str
    redeliverable: bool


def failed_events(deliveries: Iterable[HookDelivery], now: datetime, since: timedelta) -> list[FailedEvent]:
    """Group attempts by GUID and return, oldest first, the events seen within ``since`` with no success."""
    groups: dict[str, list[HookDelivery]] = {}
    for delivery in deliveries:
        groups.setdefault(delivery.guid or f"id-{delivery.id}", []).append(delivery)
    failed: list[FailedEvent] = []
    for guid, attempts in groups.items():
        if any(succeeded(a) or pending(a) for a in attempts):
            continue
        latest = max(attempts, key=lambda a: a.id)
        when = delivered_at(latest)
        if when is not None and now - when > since:
            continue
        failed.append(
            FailedEvent(
                guid=guid,
                event=latest.event,
                action=latest.action,
                attempts=len(attempts),
                latest_id=latest.id,
                latest_status=latest.status or str(latest.status_code),
                delivered_at=latest.delivered_at,
                redeliverable=when is None or now - when <= REDELIVERY_WINDOW,
            )
        )
    return sorted(failed, key=lambda f: (f.delivered_at, f.latest_id))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one failed event."""

    failed: FailedEvent
    result: str  # "redelivered", "would redeliver", "too old", or "error: ..."


def redeliver_failed(
    app: GitHubApp, failed: list[FailedEvent], *, dry_run: bool, progress: bool = True
) -> list[Outcome]:
    """Ask GitHub to redeliver each failed event (or only say so on ``dry_run``), printing progress."""
    outcomes: list[Outcome] = []
    total = len(failed)
    for number, item in enumerate(failed, 1):
        if not item.redeliverable:
            result = "too old"
        elif dry_run:
            result = "would redeliver"
        else:
            try:
                app.redeliver(item.latest_id)
                result = "redelivered"
            except GitHubError as exc:
                result = f"error: {exc}"
        outcomes.append(Outcome(item, result))
        if progress:
            name = item.event + (f".{item.action}" if item.action else "")
            print(f"[{number}/{total}] {item.guid} {name}: {result}", file=sys.stderr, flush=True)
    return outcomes


def run(settings: Settings, args: argparse.Namespace) -> int:
    """``spark redeliver [--since 3d] [--dry-run] [--json]``."""
    since = parse_since(args.since)
    if since > REDELIVERY_WINDOW:
        print(
            "spark redeliver: GitHub redelivers only the last 3 days; older failures are listed",
            file=sys.stderr,
        )
    app = GitHubApp.from_settings(settings)
    try:
        try:
            deliveries = app.deliveries()
        except GitHubError as exc:
            print(f"spark redeliver: cannot list the App's deliveries: {exc}", file=sys.stderr)
            return 1
        failed = failed_events(deliveries, datetime.now(UTC), since)
        print(
            f"{plural(len(deliveries), 'delivery attempt')} in the log, "
            f"{plural(len(failed), 'failed event')} in the last {args.since}",
            file=sys.stderr,
        )
        outcomes = redeliver_failed(app, failed, dry_run=args.dry_run)
    finally:
        app.close()
    errors = [o for o in outcomes if o.result.startswith("error")]
    if args.json:
        data = {
            "attempts": len(deliveries),
            "failed": len(failed),
            "redelivered": sum(o.result == "redelivered" for o in outcomes),
            "errors": len(errors),
            "dry_run": bool(args.dry_run),
            "events": [{**asdict(o.failed), "result": o.result} for o in outcomes],
        }
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for o in outcomes:
            name = o.failed.event + (f".{o.failed.action}" if o.failed.action else "")
            print(
                f"{o.failed.delivered_at}  {o.failed.guid}  {name}  {o.failed.latest_status}  -> {o.result}"
            )
        if not outcomes:
            print("No failed deliveries to redeliver.")
    return 1 if errors else 0
