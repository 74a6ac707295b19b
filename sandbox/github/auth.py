"""GitHub App authentication as GitHub does it: RS256 JWTs for the App, expiring installation tokens."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from sandbox.github.state import StateError

DEFAULT_TOKEN_TTL = 3600.0  # GitHub: "The installation access token will expire after 1 hour".
MAX_JWT_LIFETIME = 600  # GitHub refuses a JWT whose exp is more than 10 minutes ahead.


def generate_private_key_pem() -> str:
    """Generate a 2048-bit RSA key in PKCS#1 PEM, the form GitHub hands out for an App."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def public_key_of(private_pem: str) -> rsa.RSAPublicKey:
    """Return the public half of a PEM private key."""
    # Only the public half is used, to verify signatures; skipping the (slow) private-key checks is safe.
    key = serialization.load_pem_private_key(
        private_pem.encode(), password=None, unsafe_skip_rsa_key_validation=True
    )
    assert isinstance(key, rsa.RSAPrivateKey)
    return key.public_key()


@dataclass(frozen=True)
class InstallationToken:
    """An installation access token and the moment it stops working."""

    token: str
    installation_id: int
    expires_at: float


class AppAuth:
    """Verifies App JWTs with the App's public key and mints/validates installation tokens."""

    def __init__(self, app_id: int, private_key_pem: str) -> None:
        self.app_id = app_id
        self.private_key_pem = private_key_pem
        self.public_key = public_key_of(private_key_pem)
        self.token_ttl = DEFAULT_TOKEN_TTL
        self._tokens: dict[str, InstallationToken] = {}
        self._lock = threading.Lock()

    def verify_jwt(self, token: str) -> None:
        """Accept only an unexpired RS256 JWT issued by this App and signed by its key; else GitHub's 401."""
        try:
            claims = jwt.decode(
                token,
                self.public_key,
                algorithms=["RS256"],
                options={"require": ["exp", "iat", "iss"], "verify_iat": False},
                leeway=0,
            )
        except jwt.ExpiredSignatureError as exc:
            raise StateError(
                401,
                "'Expiration time' claim ('exp') must be a numeric value representing the future time at "
                "which the assertion expires",
            ) from exc
        except jwt.PyJWTError as exc:
            raise StateError(401, "A JSON web token could not be decoded") from exc
        if str(claims["iss"]) != str(self.app_id):
            raise StateError(401, "'Issuer' claim ('iss') must be an Integer")
        if claims["exp"] - time.time() > MAX_JWT_LIFETIME + 60:
            raise StateError(
                401,
                "'Expiration time' claim ('exp') is too far in the future",
            )

    def mint(self, installation_id: int) -> InstallationToken:
        """Create an installation token that expires after the current TTL."""
        issued = InstallationToken(
            "ghs_" + secrets.token_urlsafe(27)[:36], installation_id, time.time() + self.token_ttl
        )
        with self._lock:
            self._tokens[issued.token] = issued
        return issued

    def installation_for(self, token: str) -> int:
        """Return the installation a live token belongs to, or raise GitHub's 401 "Bad credentials"."""
        issued = self._tokens.get(token)
        if issued is None or issued.expires_at <= time.time():
            raise StateError(401, "Bad credentials")
        return issued.installation_id

    def expire_all(self) -> None:
        """Make every token minted so far expire now (a test of re-minting mid-job)."""
        with self._lock:
            for key, issued in list(self._tokens.items()):
                self._tokens[key] = InstallationToken(issued.token, issued.installation_id, time.time() - 1)
