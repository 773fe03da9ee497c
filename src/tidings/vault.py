"""Destinations encrypted at rest and referenced by a keyed hash.

One secret (TIDINGS_SECRET_KEY, or a key file generated in TIDINGS_HOME for
a local trial) yields two keys through HKDF: one encrypts destinations
(Fernet: AES-128-CBC with HMAC-SHA256), one keys the HMAC that names them,
so the same phone number always has the same reference but the reference
reveals nothing without the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(secret)


class Vault:
    def __init__(self, secret: str) -> None:
        raw = secret.encode()
        if len(raw) < 16:
            raise ValueError("TIDINGS_SECRET_KEY must be at least 16 characters")
        self._fernet = Fernet(base64.urlsafe_b64encode(_derive(raw, b"tidings destination")))
        self._hash_key = _derive(raw, b"tidings destination hash")

    def reference(self, channel: str, destination: str) -> str:
        digest = hmac.new(self._hash_key, f"{channel}:{destination}".encode(), hashlib.sha256)
        return digest.hexdigest()

    def encrypt(self, destination: str) -> bytes:
        return self._fernet.encrypt(destination.encode())

    def decrypt(self, ciphertext: bytes) -> str:
        return self._fernet.decrypt(bytes(ciphertext)).decode()


def local_secret(home: Path) -> str:
    """The trial key: generated once, readable only by its owner."""
    path = home / "secret.key"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process won the race; its key is the key
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(32))
    return path.read_text().strip()
