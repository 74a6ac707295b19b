"""Outgoing webhook deliveries: signed like GitHub's, recorded, sent in order by one thread, redeliverable."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import queue
import threading
import time
import uuid
from dataclasses import dataclass

import requests

from sandbox.github.state import utcnow

USER_AGENT = "GitHub-Hookshot/sandbox"


@dataclass
class HookDelivery:
    """One delivery attempt as `GET /app/hook/deliveries` reports it (plus the body, for redelivery)."""

    id: int
    guid: str
    event: str
    action: str | None
    body: bytes
    installation_id: int | None
    repository_id: int | None
    redelivery: bool
    delivered_at: str
    status_code: int = 0
    status: str = "pending"
    duration: float = 0.0
    done: bool = False

    def summary(self) -> dict[str, object]:
        """Return GitHub's delivery-list shape."""
        return {
            "id": self.id,
            "guid": self.guid,
            "delivered_at": self.delivered_at,
            "redelivery": self.redelivery,
            "duration": round(self.duration, 3),
            "status": self.status,
            "status_code": self.status_code,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repository_id": self.repository_id,
        }


def sign(secret: str, body: bytes) -> str:
    """Return the X-Hub-Signature-256 header value for a body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Hookshot:
    """Queues deliveries and sends them from one background thread, in the order they were made."""

    def __init__(self, url: str | None, secret: str, app_id: int = 0) -> None:
        self.url = url
        self.secret = secret
        self.app_id = app_id
        self.deliveries: list[HookDelivery] = []
        self._ids = itertools.count(1)
        self._queue: queue.Queue[HookDelivery | None] = queue.Queue()
        self._idle = threading.Condition()
        self._pending = 0
        self._session = requests.Session()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the sender thread."""
        self._thread = threading.Thread(target=self._run, name="sandbox-hookshot", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the sender thread after the deliveries already queued."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._thread = None
        self._session.close()

    def send(
        self,
        event: str,
        payload: dict[str, object],
        installation_id: int | None,
        repository_id: int | None,
        guid: str | None = None,
    ) -> HookDelivery:
        """Record a delivery and queue it (a fresh GUID unless redelivering)."""
        action = payload.get("action")
        delivery = HookDelivery(
            id=next(self._ids),
            guid=guid or str(uuid.uuid4()),
            event=event,
            action=action if isinstance(action, str) else None,
            body=json.dumps(payload).encode(),
            installation_id=installation_id,
            repository_id=repository_id,
            redelivery=guid is not None,
            delivered_at=utcnow(),
        )
        with self._idle:
            self.deliveries.append(delivery)
            self._pending += 1
        self._queue.put(delivery)
        return delivery

    def redeliver(self, delivery_id: int) -> HookDelivery:
        """Send a recorded delivery again with the same GUID, event and body."""
        original = self.find(delivery_id)
        payload = json.loads(original.body)
        return self.send(
            original.event, payload, original.installation_id, original.repository_id, original.guid
        )

    def find(self, delivery_id: int) -> HookDelivery:
        """Return a recorded delivery by id (KeyError when unknown)."""
        for delivery in self.deliveries:
            if delivery.id == delivery_id:
                return delivery
        raise KeyError(delivery_id)

    def wait(self, timeout: float = 10.0) -> None:
        """Block until every queued delivery has been attempted."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self._pending} webhook deliveries still pending")
                self._idle.wait(remaining)

    def _run(self) -> None:
        while (delivery := self._queue.get()) is not None:
            self._deliver(delivery)
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def _deliver(self, delivery: HookDelivery) -> None:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-GitHub-Event": delivery.event,
            "X-GitHub-Delivery": delivery.guid,
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self.app_id),
            "X-Hub-Signature": "sha1="
            + hmac.new(self.secret.encode(), delivery.body, hashlib.sha1).hexdigest(),
            "X-Hub-Signature-256": sign(self.secret, delivery.body),
        }
        started = time.monotonic()
        if self.url is None:
            delivery.status, delivery.done = "No webhook URL configured", True
            return
        try:
            response = self._session.post(self.url, data=delivery.body, headers=headers, timeout=10)
            delivery.status_code = response.status_code
            ok = 200 <= response.status_code < 300
            delivery.status = "OK" if ok else f"Invalid HTTP Response: {response.status_code}"
        except requests.RequestException as exc:
            delivery.status = f"failed to connect: {type(exc).__name__}"
        delivery.duration = time.monotonic() - started
        delivery.done = True
