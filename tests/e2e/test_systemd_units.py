"""The systemd units in deploy/systemd run as written.

systemd is not PID 1 where the tests run, so each unit is played the way
systemd would: its file parsed, its `ExecStart` run as a real process with
its `Environment=` and `EnvironmentFile=` (the shipped example) against a
fresh database, an intent sent through the API and delivered by the
simulator, its receipts taken by the API's webhook route, and then the
unit's `KillSignal`, with the exit awaited for its `TimeoutStopSec` and
judged by systemd's rule (exit 0, `SuccessExitStatus`, or the clean
signals). Only the install path, the state directory, the database and
the ports change, so the test can run beside others on one machine.
`systemd-analyze verify` checks the same files, with the install path
pointed at this checkout's `tidings`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest
from harness.processes import await_exit, wait_http, wait_until

from tests.databases import admin, drop_database
from tidings.cli.devstack import free_port

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
ENV_EXAMPLE = UNITS / "tidings.env.example"
INSTALLED = "/opt/tidings/bin/tidings"
ENV_FILE = "/etc/tidings/tidings.env"
TIDINGS = str(Path(sys.executable).with_name("tidings"))
# The ports the units and the example name; the test swaps in free ones.
PORTS = ("8000", "8099", "9464", "9100")
WORKER_INSTANCE = "9100"
# systemd counts these as a clean end of any service but a oneshot.
CLEAN_SIGNALS = {signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE}
REQUIRE_PEERS = os.environ.get("TIDINGS_REQUIRE_PEERS") == "1"


@dataclass
class Unit:
    path: Path
    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def all(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def get(self, section: str, key: str, default: str | None = None) -> str | None:
        found = self.all(section, key)
        return found[-1] if found else default


def parse_unit(path: Path) -> Unit:
    """A unit file as systemd reads it: sections of `Key=value` lines, a
    key repeatable, `#` and `;` comments. Continuation lines are not used
    here, so one is refused rather than misread."""
    unit = Unit(path)
    section = None
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        assert not line.endswith("\\"), f"{path.name}:{number}: a continuation line"
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            unit.sections.setdefault(section, [])
            continue
        assert section is not None and "=" in line, f"{path.name}:{number}: {raw!r}"
        key, value = line.split("=", 1)
        unit.sections[section].append((key.strip(), value.strip()))
    return unit


def unit_files() -> list[Path]:
    return sorted(UNITS.glob("*.service"))


def seconds(value: str) -> float:
    """A systemd time span as these units write it: `45`, `45s`, `2min`."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|min|m)?", value)
    assert match, f"a time span this test does not read: {value!r}"
    number = float(match.group(1))
    return number * 60 if match.group(2) in ("min", "m") else number


def env_file(path: Path) -> dict[str, str]:
    """`EnvironmentFile=` as systemd reads one: `KEY=value`, comments, quotes."""
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, value = line.split("=", 1)
        values[key.strip()] = " ".join(shlex.split(value)) if value.strip() else ""
    return values


def expand(value: str, specifiers: dict[str, str]) -> str:
    return re.sub(r"%(.)", lambda m: specifiers[m.group(1)], value)


def help_texts(commands: list[str]) -> dict[str, str]:
    """`tidings COMMAND --help` of each command, run at once; only the
    commands that answered."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    running = {
        c: subprocess.Popen(
            [TIDINGS, c, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for c in commands
    }
    texts = {}
    for command, proc in running.items():
        out, _ = proc.communicate(timeout=60)
        if proc.returncode == 0:
            texts[command] = out.decode()
    return texts


def test_every_unit_names_commands_and_options_that_exist() -> None:
    units = [parse_unit(p) for p in unit_files()]
    names = {u.path.name for u in units}
    assert {
        "tidings-migrate.service",
        "tidings-api.service",
        "tidings-worker@.service",
        "tidings-simulator.service",
    } <= names
    commands = {shlex.split(u.get("Service", "ExecStart") or "x x")[1] for u in units}
    helps = help_texts(sorted(commands))
    for unit in units:
        service = unit.sections["Service"]
        assert unit.get("Service", "EnvironmentFile") == ENV_FILE, unit.path.name
        argv = shlex.split(unit.get("Service", "ExecStart") or "")
        assert argv[0] == INSTALLED, unit.path.name
        command = argv[1]
        assert command in helps, f"{unit.path.name}: no `tidings {command}`"
        for option in (a for a in argv[2:] if a.startswith("--")):
            assert re.search(rf"{re.escape(option)}\b", helps[command]), (
                f"{unit.path.name}: `tidings {command}` has no {option}"
            )
        # The hardening every unit keeps.
        for key, value in [
            ("DynamicUser", "yes"),
            ("NoNewPrivileges", "yes"),
            ("ProtectSystem", "strict"),
            ("StateDirectory", "tidings"),
        ]:
            assert (key, value) in service, f"{unit.path.name}: no {key}={value}"
        assert "TIDINGS_HOME=%S/tidings" in unit.all("Service", "Environment")
        if unit.get("Service", "Type") != "oneshot":
            assert unit.get("Service", "KillSignal") == "SIGTERM", unit.path.name
            assert unit.get("Service", "TimeoutStopSec"), unit.path.name
    # The worker's stop: one lease, then 10 s before it exits 70 on its own;
    # systemd's SIGKILL must come after that, or the stacks are never printed.
    worker = parse_unit(UNITS / "tidings-worker@.service")
    lease = float(env_file(ENV_EXAMPLE)["TIDINGS_LEASE_SECONDS"])
    assert seconds(worker.get("Service", "TimeoutStopSec") or "0") > lease + 10
    # The API and the workers start after the migrations, and are not kept
    # from starting by a database that is slow to come up (they wait for it).
    for name in ("tidings-api.service", "tidings-worker@.service"):
        unit = parse_unit(UNITS / name)
        assert "tidings-migrate.service" in (unit.get("Unit", "After") or "").split()
        assert not unit.all("Unit", "Requires")


def test_the_environment_example_names_documented_settings() -> None:
    text = ENV_EXAMPLE.read_text()
    named = set(re.findall(r"^#?\s*((?:TIDINGS_|DATABASE_URL)[A-Z0-9_]*)=", text, re.M))
    assert "DATABASE_URL" in named and "TIDINGS_SIMULATOR_WEBHOOK_URL" in named
    docs = (ROOT / "README.md").read_text() + "".join(
        p.read_text() for p in (ROOT / "docs").rglob("*.md")
    )
    assert not sorted(n for n in named if f"`{n}`" not in docs), "undocumented in the example"


def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        why = "systemd-analyze is not installed (scripts/install-systemd)"
        if REQUIRE_PEERS:
            pytest.fail(f"{why}, and TIDINGS_REQUIRE_PEERS=1 forbids skipping")
        pytest.skip(why)
    checked = []
    for path in unit_files():
        name = path.name.replace("@.service", f"@{WORKER_INSTANCE}.service")
        (tmp_path / name).write_text(path.read_text().replace(INSTALLED, TIDINGS))
        checked.append(str(tmp_path / name))
    done = subprocess.run(
        [analyze, "verify", "--man=no", *checked], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


@pytest.fixture
def fresh_database(pg_server_url: str) -> Iterator[str]:
    """An empty database: the migrate unit has everything to do."""
    name = f"tidings_t_{uuid.uuid4().hex[:12]}"
    admin(pg_server_url, f"CREATE DATABASE {name}")
    yield psycopg.conninfo.make_conninfo(pg_server_url, dbname=name)
    drop_database(pg_server_url, name)


class Played:
    """A unit's `ExecStart` as a real process, with the environment systemd
    would give it."""

    def __init__(
        self,
        path: Path,
        inherited: dict[str, str],
        file: dict[str, str],
        state: Path,
        logs: Path,
        instance: str,
    ) -> None:
        self.unit = parse_unit(path)
        self.name = path.name.replace("@.service", f"@{instance}.service")
        specifiers = {"S": str(state), "i": instance, "%": "%"}
        environment = dict(inherited)
        for assignment in self.unit.all("Service", "Environment"):
            for word in shlex.split(assignment):
                key, value = word.split("=", 1)
                environment[key] = expand(value, specifiers)
        # systemd: an EnvironmentFile's settings override Environment='s.
        environment.update(file)
        exec_start = expand(self.unit.get("Service", "ExecStart") or "", specifiers)
        self.argv = [TIDINGS if a == INSTALLED else a for a in shlex.split(exec_start)]
        self.env = environment
        self.log = logs / f"{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        return self.proc

    def stop(self) -> tuple[int, float]:
        """The unit's KillSignal; the exit status and how long it took."""
        assert self.proc is not None
        sig = signal.Signals[self.unit.get("Service", "KillSignal", "SIGTERM") or "SIGTERM"]
        limit = seconds(self.unit.get("Service", "TimeoutStopSec", "90") or "90")
        started = time.monotonic()
        self.proc.send_signal(sig)
        code = await_exit(self.proc, self.log, timeout=limit)
        return code, time.monotonic() - started

    def clean(self, code: int) -> bool:
        """systemd's judgement of an exit status."""
        allowed = set()
        for value in self.unit.all("Service", "SuccessExitStatus"):
            for word in value.split():
                allowed.add(-signal.Signals[word] if word.startswith("SIG") else int(word))
        oneshot = self.unit.get("Service", "Type") == "oneshot"
        by_signal = code < 0 and signal.Signals(-code) in CLEAN_SIGNALS and not oneshot
        return code == 0 or code in allowed or by_signal


def test_the_units_run_send_and_stop_as_systemd_would(fresh_database: str, tmp_path: Path) -> None:
    ports = {p: str(free_port()) for p in PORTS}

    def moved(text: str) -> str:
        for old, new in ports.items():
            text = re.sub(rf"(?<![0-9]){old}(?![0-9])", new, text)
        return text

    env_path = tmp_path / "tidings.env"
    env_path.write_text(moved(ENV_EXAMPLE.read_text()))
    settings = env_file(env_path)
    settings["DATABASE_URL"] = fresh_database
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_") and k != "DATABASE_URL"
    }
    state = tmp_path / "state"
    (state / "tidings").mkdir(parents=True)
    logs = tmp_path / "logs"
    logs.mkdir()
    instance = ports[WORKER_INSTANCE]

    def play(name: str) -> Played:
        unit = Played(UNITS / name, inherited, settings, state, logs, instance)
        for old, new in ports.items():
            unit.argv = [new if a == old else a for a in unit.argv]
        return unit

    # The oneshot first, as the others are ordered after it.
    migrate = play("tidings-migrate.service")
    assert migrate.unit.get("Service", "Type") == "oneshot"
    code = await_exit(migrate.start(), migrate.log, timeout=120)
    assert migrate.clean(code), migrate.log.read_text()
    with psycopg.connect(fresh_database) as conn:
        assert conn.execute("SELECT to_regclass('intents')").fetchone() == ("intents",)

    cli_env = {**inherited, **settings, "TIDINGS_HOME": str(state / "tidings")}

    def cli(*args: str) -> str:
        done = subprocess.run(
            [TIDINGS, *args], env=cli_env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli("policy", "publish", str(ROOT / "src/tidings/policies/default.json"), "--tenant", "acme")
    key = cli("keys", "create", "--tenant", "acme", "--scopes", "send,read,admin").split()[-1]

    running = [
        play(name)
        for name in ("tidings-simulator.service", "tidings-api.service", "tidings-worker@.service")
    ]
    stopped: list[Played] = []
    try:
        for unit in running:
            unit.start()
        api = f"http://127.0.0.1:{ports['8000']}"
        wait_http(f"{api}/healthz", running[1].proc)
        wait_http(f"http://127.0.0.1:{ports['8099']}/healthz", running[0].proc)
        wait_http(f"http://127.0.0.1:{instance}/metrics", running[2].proc)
        with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {key}"}) as http:
            http.post(
                "/v1/templates",
                json={
                    "name": "hello",
                    "channel": "sms",
                    "body": "Hello {{ name }}",
                    "required_variables": ["name"],
                },
            ).raise_for_status()
            created = http.post(
                "/v1/intents",
                json={
                    "idempotency_key": "hello:1",
                    "channel": "sms",
                    "recipient": {"ref": "r1", "phone": "+14155550123"},
                    "template": {"name": "hello"},
                    "variables": {"name": "Ada"},
                    "purpose": "transactional",
                    "event_class": "hello",
                },
            )
            assert created.status_code == 201, created.text
            intent = created.json()["id"]
            wait_until(
                lambda: http.get(f"/v1/intents/{intent}").json()["state"] == "delivered",
                60,
                "the intent delivered",
            )
        # The receipt came through the API's webhook route, signed and taken.
        api_log = running[1].log
        wait_until(
            lambda: '"POST /v1/webhooks/simulator HTTP/1.1\\" 200' in api_log.read_text(),
            10,
            "the simulator's receipt at the API",
        )
        # Stopped as systemd stops them: the API and the workers before
        # what they are ordered after.
        for unit in reversed(running):
            code, took = unit.stop()
            stopped.append(unit)
            assert unit.clean(code), f"{unit.name} exited {code}:\n{unit.log.read_text()[-4000:]}"
            assert took < seconds(unit.unit.get("Service", "TimeoutStopSec") or "90")
        assert "worker stopped; in-flight sends recorded" in running[2].log.read_text()
    finally:
        for unit in running:
            if unit not in stopped and unit.proc is not None and unit.proc.poll() is None:
                unit.proc.kill()
                unit.proc.wait()
