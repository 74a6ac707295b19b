"""One structured JSON line per delivery, carrying its id and never a secret; the registry's rules."""

from __future__ import annotations

import json

import pytest
import redis

from bot.intake.events import BadDelivery, Delivery
from bot.intake.handlers import router
from bot.intake.payloads import Event, PullRequestEvent
from bot.intake.routing import Decision, Router, ignore
from bot.logs import REDACTED, configure_logging, get_logger
from bot.web.app import create_app
from tests.conftest import SECRET, make_settings, signed_post


def test_delivery_log_line(redis_conn: redis.Redis, capfd: pytest.CaptureFixture[str]) -> None:
    app = create_app(make_settings(), redis_conn)
    post = signed_post(app.test_client())
    post("pull_request", {"action": "labeled"}, delivery="delivery-for-the-log")
    post("pull_request", {"action": "labeled"}, secret="not the secret", delivery="forged-one")
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines() if line.startswith("{")]
    ours = [line for line in lines if line.get("event") == "delivery"]
    assert [(line["delivery_id"], line["status"]) for line in ours] == [
        ("delivery-for-the-log", 202),
        ("forged-one", 401),
    ]
    assert ours[0]["github_event"] == "pull_request" and ours[0]["level"] == "info"
    assert SECRET not in json.dumps(lines)


def test_secret_fields_are_redacted(capfd: pytest.CaptureFixture[str]) -> None:
    configure_logging(make_settings())
    log = get_logger("test")
    log.warning("calling out", webhook_secret="hunter2", installation_token="ghs_x", repo="a/b")
    line = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert line["webhook_secret"] == REDACTED and line["installation_token"] == REDACTED
    assert line["repo"] == "a/b"


def test_registry_rules() -> None:
    local = Router()

    @local.register("push", Event)
    def any_push(delivery: Delivery[Event]) -> Decision:
        return ignore("any push")

    @local.register("push", Event, "special")
    def special(delivery: Delivery[Event]) -> Decision:
        return ignore("special")

    assert local.decide(Delivery("push", "d", Event())).reason == "any push"
    assert local.decide(Delivery("push", "d", Event(action="special"))).reason == "special"
    assert (
        local.decide(Delivery("star", "d", Event(action="created"))).reason == "star.created is not acted on"
    )
    # Only events with a handler have their payloads decoded beyond the action.
    local.register("pull_request", PullRequestEvent, "opened")(lambda delivery: ignore("opened"))
    assert local.payload_type("pull_request") is PullRequestEvent and local.payload_type("star") is Event
    with pytest.raises(ValueError, match=r"two handlers for push\.special"):
        local.register("push", Event, "special")(special)
    with pytest.raises(ValueError, match="pull_request payloads are decoded as PullRequestEvent already"):
        local.register("pull_request", Event, "closed")


def test_decode_refuses_only_what_a_handler_would_read() -> None:
    local = Router()
    local.register("pull_request", PullRequestEvent, "opened")(lambda delivery: ignore("opened"))
    # An action no handler acts on is not refused for the fields handlers read: it is read for its action.
    assert local.decode("pull_request", b'{"action": "labeled"}') == Event(action="labeled")
    with pytest.raises(BadDelivery, match=r"Object missing required field `repository`"):
        local.decode("pull_request", b'{"action": "opened"}')
    with pytest.raises(BadDelivery, match=r"Expected `object`, got `array`"):
        local.decode("pull_request", b"[]")


def test_routes_cover_the_routing_table() -> None:
    from tests.intake.expectations import TABLE

    assert set(router.routes) == set(TABLE)
