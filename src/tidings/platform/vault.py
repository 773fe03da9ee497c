"""Destinations encrypted at rest and referenced by a keyed hash.

One secret (TIDINGS_SECRET_KEY, or a key file generated in TIDINGS_HOME for
a local trial) yields keys through HKDF: one encrypts destinations, one keys
the HMAC that names them, so the same phone number always has the same
reference but the reference reveals nothing without the secret.

A ciphertext says how it was made by its first byte, so rows written by an
earlier release stay readable:
- `0x01`: AES-256-GCM, then a random 96-bit nonce, then the sealed bytes
  (tag last). What every encryption writes now. About a tenth of Fernet's
  cost, and 41 bytes for a phone number instead of 100; every recipient of
  a job and every send pays it.
- `g` (Fernet's base64 of its own version byte 0x80): Fernet, AES-128-CBC
  with HMAC-SHA256, what releases before AES-GCM wrote. Read, never written.
A random nonce bounds one secret to about 2^32 encryptions (NIST SP
800-38D, section 8.3); rotate the secret well before that.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from tidings.platform.private_files import make_private_dir, narrow

AES_GCM = b"\x01"
FERNET = b"g"
NONCE_BYTES = 12
# Binds a sealed value to this use: a ciphertext of another AES-GCM user of
# the same key (there is none today) could not pass for a destination.
_CONTEXT = b"tidings destination v1"


class UndecryptableDestination(ValueError):
    """A ciphertext this secret did not make, or one altered since."""


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(secret)


class Vault:
    def __init__(self, secret: str) -> None:
        raw = secret.encode()
        if len(raw) < 16:
            raise ValueError("TIDINGS_SECRET_KEY must be at least 16 characters")
        self._aead = AESGCM(_derive(raw, b"tidings destination aes-256-gcm"))
        self._fernet = Fernet(base64.urlsafe_b64encode(_derive(raw, b"tidings destination")))
        self._hash_key = _derive(raw, b"tidings destination hash")
        self._api_key_hash_key = _derive(raw, b"tidings api key hash")

    def reference(self, channel: str, destination: str) -> str:
        digest = hmac.new(self._hash_key, f"{channel}:{destination}".encode(), hashlib.sha256)
        return digest.hexdigest()

    def api_key_hash(self, plaintext: str) -> str:
        """What the database keeps of an API key (store/api_keys.py): keyed,
        so a copy of the table alone cannot confirm a guessed key."""
        return hmac.new(self._api_key_hash_key, plaintext.encode(), hashlib.sha256).hexdigest()

    def encrypt(self, destination: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return AES_GCM + nonce + self._aead.encrypt(nonce, destination.encode(), _CONTEXT)

    def decrypt(self, ciphertext: bytes) -> str:
        sealed = bytes(ciphertext)
        version = sealed[:1]
        try:
            if version == AES_GCM:
                nonce, body = sealed[1 : 1 + NONCE_BYTES], sealed[1 + NONCE_BYTES :]
                return self._aead.decrypt(nonce, body, _CONTEXT).decode()
            if version == FERNET:
                return self._fernet.decrypt(sealed).decode()
        except (InvalidTag, InvalidToken):
            raise UndecryptableDestination(
                "the ciphertext does not open with this secret (another TIDINGS_SECRET_KEY,"
                " or altered)"
            ) from None
        raise UndecryptableDestination(f"unknown ciphertext version {version!r}")


def local_secret(home: Path) -> str:
    """The trial key: generated once, readable only by its owner."""
    path = home / "secret.key"
    if not path.exists():
        make_private_dir(home)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process won the race; its key is the key
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(32))
    narrow(path)  # a key file copied or written by an older version may be 0644
    return path.read_text().strip()
