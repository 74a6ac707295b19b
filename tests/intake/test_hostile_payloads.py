"""Malformed payloads never crash routing: every outcome is a decision or a 400 with a reason."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.intake.events import BadDelivery, parse_delivery
from bot.intake.handlers import router
from tests.conftest import FIXTURES

FIXTURE_FILES = sorted((FIXTURES / "webhooks").glob("*/*.json"))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            paths += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths += _paths(child, (*prefix, index))
    return paths


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_mutated_fixture_never_crashes(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(FIXTURE_FILES))
    payload = json.loads(path.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from(_paths(payload)))
        parent: Any = payload
        for step in target[:-1]:
            parent = parent[step]
        if data.draw(st.booleans()):
            parent[target[-1]] = data.draw(JSON_VALUES)
        else:
            del parent[target[-1]]
        if not _paths(payload):
            break
    event = path.parent.name
    before = copy.deepcopy(payload)
    try:
        body = json.dumps(payload).encode()
        decision = router.decide(parse_delivery(event, "fuzz", "application/json", body, router.decode))
    except BadDelivery as exc:
        assert exc.status == 400 and exc.reason
    else:
        assert decision.jobs or decision.signals or decision.reason
        for job in decision.jobs:
            json.dumps(job.kwargs)  # job arguments stay JSON-able
    assert payload == before  # routing never mutates the payload
