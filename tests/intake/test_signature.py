"""X-Hub-Signature-256: GitHub's published test vector, and what must not verify."""

from __future__ import annotations

import json
from pathlib import Path

from bot.intake.signature import sign, verify

# Published in GitHub's docs ("Validating webhook deliveries", "Testing the webhook payload validation").
SECRET = b"It's a Secret to Everybody"
PAYLOAD = b"Hello, World!"
HEADER = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_published_vector() -> None:
    assert sign(SECRET, PAYLOAD) == HEADER
    assert verify(SECRET, PAYLOAD, HEADER)


def test_shared_vector_file(shared_dir: Path) -> None:
    vector = json.loads((shared_dir / "github" / "signature-test-vector.json").read_text())
    secret = vector["secret"].encode(vector["encoding"])
    payload = vector["payload"].encode(vector["encoding"])
    assert sign(secret, payload) == vector["header_value"]
    assert verify(secret, payload, vector["header_value"])


def test_rejections() -> None:
    assert not verify(SECRET, PAYLOAD, None)
    assert not verify(SECRET, PAYLOAD, "")
    assert not verify(SECRET, PAYLOAD, HEADER.removeprefix("sha256="))  # bare hex, no prefix
    assert not verify(SECRET, PAYLOAD, "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59")  # legacy header value
    assert not verify(SECRET, PAYLOAD + b"\n", HEADER)  # another body
    assert not verify(b"another secret", PAYLOAD, HEADER)
    assert not verify(SECRET, PAYLOAD, HEADER.upper())
    assert not verify(SECRET, PAYLOAD, HEADER[:-1] + "é")  # non-ASCII must not raise
