"""Configuration from the environment (pydantic-settings).

`DATABASE_URL` picks the database; unset, tidings runs its embedded
PostgreSQL under `TIDINGS_HOME`. Every other setting is `TIDINGS_<NAME>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tidings.domain.senders import SenderNumbers
from tidings.templates.limits import RenderLimits


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TIDINGS_", extra="ignore")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "TIDINGS_DATABASE_URL")
    )
    home: Path = Field(default=Path("~/.tidings"))
    secret_key: SecretStr | None = None
    tenant: str = "default"
    # The tenant inbound messages (STOP/START) act for when they were sent to
    # a number `sender_numbers` names nobody with; unset, `tenant`. Never
    # taken from the request (api/routes/inbound.py).
    inbound_tenant: str | None = None
    # Which number each tenant sends SMS from, per provider account, as JSON
    # {"<account>": {"<tenant>": "<number>"}}: sent as the sender, and an
    # inbound STOP to a number opts out every tenant named with it
    # (domain/senders.py). The operator's, never a tenant's: a number names
    # whose texts a STOP ends. Tenants not named send from the adapter's own.
    sender_numbers: dict[str, dict[str, str]] = {}
    simulator_url: str | None = None
    # Which provider the simulator plays (providers/simulator/profiles.py);
    # the simulator process is started with the same (`--profile`). Unset,
    # a worker asks the simulator it talks to, and a simulator it starts
    # plays `ideal`.
    simulator_profile: str | None = None
    # Unset, the simulator's webhooks are refused, except in loopback
    # development (providers/routing.py); `tidings up` makes one per run.
    simulator_webhook_secret: SecretStr | None = None
    # Where a separately started `tidings simulator` POSTs its receipts and
    # inbound messages (`--webhook-url`): the API's /v1/webhooks/simulator.
    # Unset, it sends none.
    simulator_webhook_url: str | None = None
    policy_dir: Path | None = None
    pool_size: int = 10
    lease_seconds: float = 30.0
    # Whose time leases, deadlines, quiet windows and retries are judged by:
    # the database server's (store/database_clock.py), so a host whose clock
    # is off cannot take a held lease or send past a deadline; or this
    # host's own, for a single host with a trusted clock (docs/scaling.md).
    clock: Literal["database", "system"] = "database"
    # Set when DATABASE_URL leads through a pooler in transaction mode
    # (PgBouncer's `pool_mode = transaction`): statements are not prepared
    # (a server connection is not this client's between transactions), and
    # workers LISTEN for wakeups only on `listen_url`, a direct connection,
    # or else find new intents by the timed scan alone (docs/scaling.md).
    transaction_pooling: bool = False
    listen_url: str | None = None
    not_received_after_seconds: float = 60.0
    # Uploaded audiences stream past the small JSON body limit; this bounds
    # one upload instead (1 GiB: millions of recipients).
    max_upload_bytes: int = 1024**3
    # A report attachment's bytes are read at send time from a path or URL
    # the tenant chose: streamed, and the send fails (ATTACHMENT_TOO_LARGE)
    # past this, instead of a worker buffering whatever the server sends.
    max_attachment_bytes: int = 25 * 1024 * 1024
    # A slow upload must not hold the API: the longest pause between two
    # chunks of its body, the longest the whole body may take, and how many
    # one tenant may have in flight per API process (api/upload_slots.py).
    upload_idle_seconds: float = 30.0
    upload_deadline_seconds: float = 900.0
    uploads_per_tenant: int = 2
    # Requests per second per tenant, shared by every API process, and how
    # many may come at once after a quiet spell (api/rate_limit.py); 0 turns
    # the limit off.
    api_rate_per_second: float = 1000.0
    api_rate_burst: int = 2000
    # Requests whose key (or console session) does not authenticate, per
    # client address and per key id, per API process, and how many may come
    # at once; past it they answer 429 before any database read
    # (domain/auth_failures.py). 0 turns the limit off.
    auth_failure_rate_per_second: float = 1.0
    auth_failure_burst: int = 20
    # One template render (templates/limits.py): loop iterations and calls,
    # bytes per rendered part, seconds. Past one, the send fails with
    # RENDER_LIMIT; constants past them are refused at publish.
    template_max_iterations: int = Field(default=100_000, ge=1)
    template_max_output_bytes: int = Field(default=256 * 1024, ge=1024)
    template_max_seconds: float = Field(default=1.0, gt=0)
    # How long `worker` and `serve` wait for the database at start-up before
    # giving up; unset, they wait as long as it takes (see store/wait.py).
    database_wait_seconds: float | None = None
    # The URL clients reach the API at, when a proxy sits in front (e.g.
    # https://notify.example.com): provider webhook signatures (Twilio) are
    # computed over it, and https:// makes the console's cookies Secure.
    public_base_url: str | None = None
    # Event webhooks (tenant-chosen URLs) to loopback or private addresses:
    # for development and tests only (src/tidings/platform/outbound.py).
    allow_private_webhooks: bool = False
    # Event pushes run on a pool of their own: how many tenants at once,
    # and the most one request may take, trickled answer included.
    event_push_concurrency: int = 4
    # The claim's lanes (docs/concepts/lanes.md): the part of each batch
    # single intents may take while jobs are waiting too. The rest goes to
    # the jobs, shared equally between tenants and between a tenant's jobs;
    # room a lane leaves unused goes to the other.
    urgent_share: float = Field(default=0.9, gt=0.0, le=1.0)
    # A job's intent this near its deadline (a token's life) goes before the
    # jobs' shares, the earliest deadline first.
    deadline_horizon_seconds: float = Field(default=600.0, ge=0.0, le=86400.0)
    event_push_deadline_seconds: float = 10.0
    # Synthetic canaries (dispatch/canary.py, docs/operations.md): one round
    # through every provider account to its official test destination, at
    # most once this often across all workers. 0, the default: off (a
    # canary to SES's simulator is still billed and uses the sending rate).
    canary_interval_seconds: float = Field(default=0.0, ge=0.0)
    # OpenTelemetry spans at an intent's boundaries (docs/tracing.md): off;
    # `global`, to the tracer provider the application installed; `otlp`,
    # to an OTLP/HTTP exporter set up by the standard OTEL_* variables.
    # Both need the `tracing` extra.
    tracing: Literal["off", "global", "otlp"] = "off"

    @field_validator("sender_numbers")
    @classmethod
    def _sender_numbers(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        parsed = SenderNumbers.parse(value).by_account  # a bad number fails at start-up
        return {account: dict(tenants) for account, tenants in parsed.items()}

    def senders(self) -> SenderNumbers:
        return SenderNumbers(self.sender_numbers)

    def resolved_home(self) -> Path:
        return self.home.expanduser()

    def render_limits(self) -> RenderLimits:
        return RenderLimits(
            max_iterations=self.template_max_iterations,
            max_output_bytes=self.template_max_output_bytes,
            max_seconds=self.template_max_seconds,
        )
