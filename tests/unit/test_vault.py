"""The vault: what it writes now, what earlier releases wrote, and what it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.platform.vault import AES_GCM, NONCE_BYTES, UndecryptableDestination, Vault

SECRET = "a fixed secret for the legacy vector"
# Written by the vault of e46ded4 (Fernet) with SECRET: rows stored before
# AES-GCM must stay readable by every later release.
LEGACY = {
    "+14155550123": b"gAAAAABrDaUcEYYdtE7wy3GRrthEEeDGtUbjWyMHwaud9ob1L1uNjlfxUt5LDHgXVyaENP"
    b"eBEy2GvhqhWRFlcblaQCiH44wcMg==",
    "someone@example.com": b"gAAAAABrDaUcPh9dHN4U-EISizrS08NkTduBZMi3mjX5epEDggVHZ0PUEGPqf8pS4E"
    b"yXdypJJo3cOrAKsekrm-OZQjdedipSC4tSRMc9amWgn5VUDh95T28=",
}
LEGACY_REFERENCE = "ae4e083712e70f5d22fd4f454a6f759e4acf44f419cbd777f558de4f88d4550d"


@given(st.text(max_size=300))
def test_what_is_encrypted_decrypts_to_itself(destination: str) -> None:
    vault = Vault(SECRET)
    sealed = vault.encrypt(destination)
    assert sealed[:1] == AES_GCM
    assert vault.decrypt(sealed) == destination


def test_ciphertexts_are_randomized_and_short() -> None:
    vault = Vault(SECRET)
    first, second = vault.encrypt("+14155550123"), vault.encrypt("+14155550123")
    assert first != second
    assert first[1 : 1 + NONCE_BYTES] != second[1 : 1 + NONCE_BYTES]
    # version byte, nonce, 12 bytes of phone number, 16 of tag
    assert len(first) == 1 + NONCE_BYTES + 12 + 16


@pytest.mark.parametrize("destination", sorted(LEGACY))
def test_rows_written_by_earlier_releases_stay_readable(destination: str) -> None:
    assert Vault(SECRET).decrypt(LEGACY[destination]) == destination
    assert Vault(SECRET).decrypt(memoryview(LEGACY[destination])) == destination


def test_another_secret_cannot_open_a_ciphertext() -> None:
    sealed = Vault(SECRET).encrypt("+14155550123")
    other = Vault("another secret entirely")
    with pytest.raises(UndecryptableDestination, match="does not open"):
        other.decrypt(sealed)
    with pytest.raises(UndecryptableDestination, match="does not open"):
        other.decrypt(LEGACY["+14155550123"])


@pytest.mark.parametrize("position", [0, 1, NONCE_BYTES, NONCE_BYTES + 1, -1])
def test_an_altered_ciphertext_is_refused(position: int) -> None:
    sealed = bytearray(Vault(SECRET).encrypt("+14155550123"))
    sealed[position] ^= 0x01
    with pytest.raises(UndecryptableDestination):
        Vault(SECRET).decrypt(bytes(sealed))


def test_an_unknown_version_is_named() -> None:
    with pytest.raises(UndecryptableDestination, match="unknown ciphertext version"):
        Vault(SECRET).decrypt(b"\x02" + bytes(40))
    with pytest.raises(UndecryptableDestination, match="unknown ciphertext version"):
        Vault(SECRET).decrypt(b"")


def test_references_are_those_of_earlier_releases() -> None:
    # The keyed hash that names a destination did not change with the
    # cipher: rows found by it before AES-GCM are found by it now.
    vault = Vault(SECRET)
    assert vault.reference("sms", "+14155550123") == LEGACY_REFERENCE
    assert vault.reference("email", "+14155550123") != LEGACY_REFERENCE


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        Vault("too short")
