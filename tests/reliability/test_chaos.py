"""The real stack under load and faults: nothing lost, nothing done twice, never 2xx for an unstored delivery.

CI runs small loads (``SPARK_RELIABILITY_DELIVERIES``, default 300); ``bench/report.py`` runs the full size.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import chaos
from tests.reliability.conftest import knob

DELIVERIES = knob("SPARK_RELIABILITY_DELIVERIES", 300)

pytestmark = pytest.mark.slow


def test_mixed_load_at_concurrency_64_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    result = chaos.run_load(tmp_path, DELIVERIES, concurrency=64)
    assert result["sent"] == DELIVERIES
    assert result["answers"].get("202 queued", 0) > 0 and result["answers"].get("202 ignored", 0) > 0
    assert result["unstored_2xx"] == 0
    assert result["jobs"] > 0 and result["runs"] >= result["jobs"]
    assert (result["lost"], result["duplicated"], result["ran_again"]) == (0, 0, 0), result


def test_redis_outage_answers_503_and_redelivery_recovers_everything(tmp_path: Path) -> None:
    result = chaos.run_redis_outage(tmp_path, DELIVERIES, concurrency=64)
    # While Redis was down, deliveries that needed it were refused with 503, never accepted.
    assert result["answers_while_down"].get("503", 0) > 0, result
    assert result["unstored_2xx"] == 0
    # The local GitHub's failed webhooks were all redelivered by `spark redeliver` and are now stored.
    assert result["webhooks_failed_while_down"] > 0
    assert result["redeliver_exit"] == 0 and result["redeliver"].get("redelivered", 0) > 0, result
    assert result["webhooks_unrecovered"] == 0
    assert result["direct_still_failing"] == 0
    assert result["lost"] == 0, result
    # A job running when Redis vanished may run again once its worker is replaced (at-least-once); at
    # most one per worker process, and never with a second visible effect on GitHub.
    assert result["ran_again"] <= 2 and result["ran_again"] == result["ran_again_other_worker"], result
    assert result["duplicated_effects"] == [], result


def test_sigterm_to_web_and_workers_under_load_loses_nothing(tmp_path: Path) -> None:
    result = chaos.run_sigterm(tmp_path, max(DELIVERIES, 1000), concurrency=64)
    assert result["exit_codes"] == {"web": 0, "worker": 0}
    assert result["deliveries_resent_during_restart"] > 0, "the restart happened under load"
    assert result["unstored_2xx"] == 0
    assert (result["lost"], result["duplicated"]) == (0, 0), result
    # A worker stopped by SIGTERM finishes its job first: nothing runs twice.
    assert result["ran_again"] == 0, result
