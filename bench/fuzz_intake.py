"""Fuzz the webhook intake's decision path (parse the delivery, route it, build the job arguments) at length.

Inputs are real deliveries (``../shared/github/webhooks`` when present, plus the project's own fixtures)
mutated structurally (a field replaced by a value of another type, deleted, a comment body made huge or
exotic) or byte-wise (truncated, flipped, junk). A ``BadDelivery`` is the right answer for bad input; any
other exception is a crash, and so is a queued job whose arguments are not the small JSON the worker expects.

Run: ``python -m bench fuzz_intake`` (or ``python -m bench.fuzz_intake --inputs 1000000 --seed 7``).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
import traceback
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from bot.intake.events import BadDelivery, parse_delivery
from bot.intake.handlers import router

ROOT = Path(__file__).resolve().parent.parent
OWN_WEBHOOKS = ROOT / "tests" / "fixtures" / "webhooks"
SHARED_WEBHOOKS = ROOT.parent / "shared" / "github" / "webhooks"

Sample = tuple[str, dict[str, Any]]

ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**63,
    1.5,
    "",
    "7",
    "/spark fix",
    "/SPARK  FIX\u00a0now",
    "\u202e/spark fix\u0000",
    "🚀" * 50,
    [],
    [1, "a"],
    {},
    {"id": "x"},
)


def _unwrap(data: Any) -> Any:
    """Return a fixture's payload (unwrapping the Probot ``{event, name, payload}`` test format)."""
    if isinstance(data, dict) and set(data) == {"event", "name", "payload"}:
        return data["payload"]
    return data


@cache
def corpus() -> tuple[Sample, ...]:
    """Return (event, payload) for every fixture delivery: the project's own, plus ../shared when present."""
    samples: list[Sample] = []
    for root in (OWN_WEBHOOKS, SHARED_WEBHOOKS):
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*/*.json")):
            payload = _unwrap(json.loads(path.read_text()))
            if isinstance(payload, dict):
                samples.append((path.parent.name, payload))
    return tuple(samples)


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Return the path of every node below ``value`` (dict keys and list indexes)."""
    found: list[tuple[str | int, ...]] = []
    items: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value[:3]))
    for key, child in items:
        path = (*prefix, key)
        found.append(path)
        found += _paths(child, path)
    return found


def _set(root: Any, path: tuple[str | int, ...], value: Any, delete: bool = False) -> None:
    """Set (or delete) the node at ``path``; TypeError/KeyError/IndexError when an earlier edit changed it."""
    node = root
    for key in path[:-1]:
        node = node[key]
    if isinstance(node, dict) != isinstance(path[-1], str):
        raise TypeError("the path's parent changed type")  # a list became an object, or the other way
    if delete and isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


def _comment_body(rng: random.Random) -> str:
    """Return a hostile comment body: very long, unicode-heavy, or a command with control characters."""
    choice = rng.randrange(4)
    if choice == 0:
        return "/spark fix " + "x" * rng.choice((10, 10, 10, 70_000, 70_000, 1_000_000))
    if choice == 1:
        points = (rng.randrange(0x20, 0x2FFFF) for _ in range(rng.randrange(1, 200)))
        # Lone surrogates cannot travel in UTF-8 JSON at all, so they are not a delivery GitHub could send.
        return "/spark " + "".join(chr(p) for p in points if not 0xD800 <= p <= 0xDFFF)
    if choice == 2:
        return rng.choice(("/spark", "/Spark FIX", "/spark\tfix\r\n", "  /spark fix", "/sparkfix"))
    return "/spark fix " + "\u0000\u200b\ud7ff\ufeff" * rng.randrange(1, 50)


@cache
def _sample_paths(index: int) -> tuple[tuple[str | int, ...], ...]:
    return tuple(_paths(corpus()[index][1]))


def mutate(index: int, rng: random.Random) -> tuple[str, bytes]:
    """Return (event, body): corpus sample ``index`` mutated structurally or byte-wise."""
    event, payload = corpus()[index]
    data = orjson.loads(orjson.dumps(payload))  # a deep copy
    paths = _sample_paths(index)
    for _ in range(rng.randrange(1, 4)):
        path = rng.choice(paths)
        kind = rng.randrange(10)
        try:
            if kind < 5:
                _set(data, path, copy.deepcopy(rng.choice(ODD_VALUES)))
            elif kind < 7:
                _set(data, path, None, delete=True)
            elif kind < 9 and isinstance(data.get("comment"), dict):
                data["comment"]["body"] = _comment_body(rng)
            else:
                data["action"] = rng.choice(("created", "opened", "closed", "synchronize", "", "x" * 300))
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced this path's parent
    body = orjson.dumps(data)
    cut = rng.randrange(20)
    if cut == 0:
        body = body[: rng.randrange(len(body) + 1)]
    elif cut == 1 and body:
        at = rng.randrange(len(body))
        body = body[:at] + bytes([rng.randrange(256)]) + body[at + 1 :]
    elif cut == 2:
        body = rng.choice((b"[]", b"null", b"1", b'"s"', b"{", b"\xff\xfe", b""))
    if rng.randrange(30) == 0:
        event = rng.choice(("", "Pull_Request", "x" * 65, "issue_comment", "pull_request", "push"))
    return event, body


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    """Raise unless the job arguments are the small, typed JSON the worker rebuilds its context from."""
    if orjson.loads(orjson.dumps(kwargs)) != kwargs:
        raise AssertionError("job arguments do not survive JSON")
    pr = kwargs.get("pr")
    if pr is not None:
        for name, kind in (("installation_id", int), ("owner", str), ("repo", str), ("number", int)):
            if not isinstance(pr.get(name), kind) or isinstance(pr.get(name), bool):
                raise AssertionError(f"pr.{name} is {pr.get(name)!r}")


def decide(event: str, body: bytes, delivery_id: str = "fuzz-1") -> str:
    """Run one delivery through parsing and routing; return its outcome label (raises only on a crash)."""
    try:
        delivery = parse_delivery(event, delivery_id, "application/json", body, router.decode)
        decision = router.decide(delivery)
    except BadDelivery as exc:
        return f"{exc.status} bad delivery"
    if decision.ignored:
        return "202 ignored"
    for job in decision.jobs:
        _check_kwargs(job.kwargs)
    return "202 queued " + ",".join(job.func.rsplit(".", 1)[-1] for job in decision.jobs)


def run(inputs: int, seed: int, *, quiet: bool = False) -> tuple[int, Counter[str], float]:
    """Fuzz ``inputs`` cases; return (crashes, outcome tally, seconds)."""
    samples = corpus()
    tally: Counter[str] = Counter()
    crashes = 0
    started = time.perf_counter()
    for count in range(inputs):
        rng = random.Random(seed * 1_000_003 + count)
        event, body = mutate(rng.randrange(len(samples)), rng)
        try:
            tally[decide(event, body)] += 1
        except Exception:
            crashes += 1
            tally["CRASH"] += 1
            if not quiet:
                print(f"crash at case seed {seed * 1_000_003 + count}:", file=sys.stderr)
                traceback.print_exc()
    return crashes, tally, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--inputs``, ``--seed``; print figures; exit 1 on any crash."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--inputs", type=int, default=200_000, help="cases to run (default 200,000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args([] if argv is None else argv)
    crashes, tally, seconds = run(args.inputs, args.seed)
    print(
        f"intake: {args.inputs:,} inputs from {len(corpus())} deliveries in {seconds:.1f} s "
        f"({args.inputs / seconds:,.0f}/s), {crashes} crashes"
    )
    for label, n in sorted(tally.items()):
        print(f"  {label:40} {n:>10,}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
