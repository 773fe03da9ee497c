"""Configuration from the environment (pydantic-settings).

`DATABASE_URL` picks the database; unset, tidings runs its embedded
PostgreSQL under `TIDINGS_HOME`. Every other setting is `TIDINGS_<NAME>`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TIDINGS_", extra="ignore")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "TIDINGS_DATABASE_URL")
    )
    home: Path = Field(default=Path("~/.tidings"))
    secret_key: SecretStr | None = None
    tenant: str = "default"
    simulator_url: str | None = None
    simulator_webhook_secret: SecretStr = SecretStr("tidings-simulator-secret")
    policy_dir: Path | None = None
    pool_size: int = 10
    lease_seconds: float = 30.0
    not_received_after_seconds: float = 60.0
    # Uploaded audiences stream past the small JSON body limit; this bounds
    # one upload instead (1 GiB: millions of recipients).
    max_upload_bytes: int = 1024**3
    # How long `worker` and `serve` wait for the database at start-up before
    # giving up; unset, they wait as long as it takes (see store/wait.py).
    database_wait_seconds: float | None = None

    def resolved_home(self) -> Path:
        return self.home.expanduser()


def load_settings(**overrides: object) -> Settings:
    return Settings(**overrides)  # type: ignore[arg-type]
