"""Scenarios: TOML files validated into typed, frozen models.

A scenario says which store runs (and with what settings), how many replicas
share it, what the network between them does, and what traffic arrives.
Every field has a default, a domain and a description; ``.venv/bin/python -m simulator
fields`` prints them all (``simulator.scenario.reference``), and
``docs/scenario-fields.txt`` is that output.

A bad file gets a ``ScenarioError`` with one line per problem, each naming
the file, the field path, what was expected and what was given; the CLI
prints it without a traceback. Each value is checked where it is read (its
type's domain, ``stores.domains``), and values that must agree with each
other are checked together before anything runs (``CROSS_FIELD_CHECKS``).
"""

from __future__ import annotations

import numbers
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from simulator.backends.slots import shard_of_slot, slot_ranges
from simulator.scenario.base import MAX_REPLICAS, Model, ReplicaIndex
from simulator.scenario.conditions import parse_expectation
from simulator.scenario.distributions import DurationDistribution, PpmDistribution
from simulator.scenario.domains import describe, field_at, field_path
from simulator.scenario.faults import (
    SHARD_FAULTS,
    Faults,
    PlannedFault,
    ScheduledFault,
    ServerSettings,
    plan,
)
from simulator.scenario.limits import Limits
from simulator.scenario.reconfigure import Reconfiguration, parsed_changes, unreloadable
from simulator.scenario.sessions import MAX_RETRIES
from simulator.scenario.workload import Workload
from stores import registry
from stores.domains import Domain, Flag, Integer, NotANumber, Probability, Seed
from stores.quantities import DurationUs, format_duration_us

# redis-py 8's own client defaults: 10 retries, exponential backoff with full
# jitter from 10 ms, capped at 1 s.
REDIS_PY_RETRIES = {"count": 10, "backoff_base": "10ms", "backoff_cap": "1s"}

MAX_MIGRATION_COMMANDS = 1_000_000_000
"""The largest ``crash_after_commands``."""


StoreKindName = Annotated[str, Domain(
    "a store kind (.venv/bin/python -m simulator stores lists them)")]


class ScenarioError(ValueError):
    """A scenario that cannot run; one line per problem."""


class Retries(Model):
    """Driver-level retries of a timed-out command (each may execute again)."""

    count: Integer = Field(
        0, ge=0, le=MAX_RETRIES, description="Re-sends after a timeout (0: none, the lab's "
        "default)."
    )
    backoff_base_us: DurationUs = Field(
        "10ms", alias="backoff_base", description="Backoff base: min(cap, random * base * 2^n)."
    )
    backoff_cap_us: DurationUs = Field(
        "1s", alias="backoff_cap", description="Longest backoff between two attempts."
    )


def _retries(value: Any) -> Any:
    if isinstance(value, str) and value == "redis-py":
        return REDIS_PY_RETRIES
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return {"count": value}
    if not isinstance(value, Mapping | Retries):
        raise ValueError("expected a count, 'redis-py' or {count, backoff_base, backoff_cap}, "
                         f"got {value!r}")
    return value


class Network(Model):
    """The links between replicas and the server."""

    latency: DurationDistribution = Field(
        "lognormal(500us, 0.3)", description="One-way latency of each message."
    )
    request_loss: Probability = Field(
        0.0, description="Chance a command is lost before it reaches the server (never runs)."
    )
    reply_loss: Probability = Field(
        0.0, description="Chance a reply is lost after the command ran (the caller times out)."
    )
    timeout_us: DurationUs = Field(
        "1s", alias="timeout", description="How long a caller waits for a reply."
    )
    retries: Annotated[Retries, BeforeValidator(_retries)] = Field(
        Retries(),
        description="A count, 'redis-py' (its defaults: 10, 10ms..1s), or "
        "{count, backoff_base, backoff_cap}.",
    )
    connection: Literal["pooled", "multiplexed"] = Field(
        "pooled", description="The replica's own connection: 'pooled' (each call on a "
        "connection of its own) or 'multiplexed' (one connection shared by every caller, "
        "replies matched in order). Stores that open connections (the lease limiter) get "
        "multiplexed ones whatever this says.",
    )


class Fleet(Model):
    """The gateway replicas sharing the store."""

    replicas: Integer = Field(100, ge=1, le=MAX_REPLICAS, description="How many replicas run.")
    boot_retry_us: DurationUs = Field(
        "1s", alias="boot_retry",
        description="How soon a replica whose store refused to boot is started again.",
    )
    clock_offset: DurationDistribution = Field(
        "0ms", description="Each replica's clock offset from true time, drawn once per replica."
    )
    clock_drift_ppm: PpmDistribution = Field(
        0, description="Each replica's clock drift, in parts per million, drawn once."
    )


def _comparison(text: str) -> str:
    parse_expectation("", text)
    return text


class Metrics(Model):
    """The metrics time series (``metrics.parquet``)."""

    sample_every_us: DurationUs = Field(
        "1s", alias="sample_every", description="Virtual time between samples; 0: none.")
    per_key: Flag = Field(False, description="Also one row per key, not only the aggregate.")


class MigrationStep(Model):
    """An operator's migration in the middle of a run: stop the fleet, run the
    target kind's migration, start the fleet again on the target kind."""

    at: DurationUs = Field(description="When the operator starts (virtual time).")
    to: StoreKindName = Field(
        description="The kind the fleet runs afterwards, one with a migration from the "
        "scenario's store (.venv/bin/python -m simulator stores).")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Settings of the target kind, over store_settings.")
    namespaces: list[str] | None = Field(
        None, description="The configured namespace ids; default: the workload's.")
    stop_fleet: Flag = Field(True, description="Stop the fleet first (drain, then exit).")
    keep_running: list[ReplicaIndex] = Field(
        default_factory=list, description="Replicas the operator forgot to stop (stray "
        "writers of the old layout).")
    strays_hung_for: DurationUs | None = Field(
        None, description="The replicas kept running hang from the migration's start for "
        "this long (the operator missed them because they did not answer), then go on "
        "writing the old layout. None: they never hang.")
    crash_after_commands: Integer | None = Field(
        None, ge=1, le=MAX_MIGRATION_COMMANDS, description="Kill the migration after this "
        "many of its commands ran; the operator runs it again.")
    rerun_after: DurationUs = Field("1s", description="How soon a killed migration is re-run.")
    restart_after: DurationUs = Field("1s", description="Fleet downtime after the migration.")
    again_after: DurationUs | None = Field(
        None, description="Run the migration once more this long after the fleet restarted, "
        "beside the serving fleet: the recovery a boot fence prescribes when a writer of the "
        "old layout is found still running. None: once.")
    scheduled: Flag = Field(False, description="Run it only when, and as often as, the fault "
                            "schedule's migrate entries name it, at their instants and with "
                            "their timings (hunt --faults migrate draws them).")

    @field_validator("to")
    @classmethod
    def _migratable(cls, value: str) -> str:
        if registry.get(value).migrate is None:
            raise ValueError(f"the store {value!r} has no migration to run")
        return value


class Scenario(Model):
    """A run: a store, a fleet, a network and a workload, for a virtual duration."""

    name: str = Field(description="A short name, used in result paths.")
    description: str = Field("", description="What the scenario shows, in a sentence or two.")
    duration_us: DurationUs = Field(
        "60s", alias="duration", description="Virtual time during which requests arrive."
    )
    drain_us: DurationUs = Field(
        "30s",
        alias="drain",
        description="Virtual time after the last arrival for in-flight requests to finish.",
    )
    seed: Seed = Field(1, description="The run seed (the CLI's --seed overrides it).")
    plugins: list[str] = Field(
        default_factory=list, description="Python modules to import first, each registering "
        "store kinds from outside the lab (found on PYTHONPATH), e.g. ['my_variant'].")
    store: StoreKindName = Field(
        description="The store kind (.venv/bin/python -m simulator stores lists them).")
    backend: str | None = Field(
        None,
        description="'memory', 'valkey' (the lab's engine), 'fakeredis', 'redis://HOST:PORT/DB', "
        "'redis-cluster' or 'valkey-cluster' (a throwaway local cluster), "
        "'postgresql://USER@HOST:PORT/DB' (a ledger service's database: the lab works in a "
        "schema of its own, dropped afterwards) or 'postgresql' (a throwaway local one); "
        "default: the store's own (for Redis stores the lab's Valkey engine, fakeredis where it "
        "did not install; memory for the others).",
    )
    store_settings: dict[str, Any] = Field(
        default_factory=dict, description="The store's settings (see its kind)."
    )
    fleet: Fleet = Field(Fleet(), description="The replicas.")
    network: Network = Field(Network(), description="The links.")
    workload: Workload = Field(Workload(), description="The traffic.")
    faults: Faults = Field(Faults(), description="What breaks, and when.")
    migrations: list[MigrationStep] = Field(
        default_factory=list, description="Operator migrations during the run.")
    server: ServerSettings = Field(ServerSettings(), description="The Redis server.")
    metrics: Metrics = Field(Metrics(), description="The metrics time series.")
    limits: Limits = Field(Limits(), description="How much work a run may do: refused before "
                           "it starts past these (estimated), stopped past them as it runs.")
    expect: dict[str, Annotated[str, AfterValidator(_comparison)]] = Field(
        default_factory=dict,
        description="Thresholds on summary metrics, e.g. cap_overshoot_max_ratio = "
        "\"<= 0.01\", or named conditions joined by and / or, e.g. books = "
        "\"conservation_drift_microdollars_total == 0 and holds_leaked == 0\"; "
        "run exits 3 when one fails.")

    @model_validator(mode="before")
    @classmethod
    def _plugins_first(cls, data: Any) -> Any:
        # Before any field is validated: the store a plugin registers must be
        # known when `store` and `migrations` are checked.
        plugins = data.get("plugins", []) if isinstance(data, dict) else []
        if isinstance(plugins, list) and all(isinstance(name, str) for name in plugins):
            try:
                registry.load_plugins(plugins)
            except registry.PluginError as error:
                raise ScenarioError(f"plugins: {error}") from None
        return data

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        registry.get(value)
        return value

    @model_validator(mode="after")
    def _settings_fit_the_store(self) -> Scenario:
        settings_model = registry.get(self.store).settings_model
        try:
            settings_model.model_validate(self.store_settings)
        except ValidationError as error:
            raise ScenarioError(format_errors(error, prefix=("store_settings",),
                                              model=settings_model,
                                              data=self.store_settings)) from None
        for index, step in enumerate(self.migrations):
            target = registry.get(step.to).settings_model
            merged = {**self.store_settings, **step.settings}
            try:
                target.model_validate(merged)
            except ValidationError as error:
                raise ScenarioError(format_errors(
                    error, prefix=("migrations", index, "settings"), model=target,
                    data=merged)) from None
        return self

    @model_validator(mode="after")
    def _fits_together(self) -> Scenario:
        problems = [problem for check in CROSS_FIELD_CHECKS for problem in check(self)]
        if problems:
            raise ScenarioError("\n".join(problems))
        return self

    @property
    def end_us(self) -> int:
        """The last instant of the run: its arrival window and then its drain."""
        return self.duration_us + self.drain_us

    def settings_after(self, step: MigrationStep) -> BaseModel:
        """The settings of the fleet a migration step starts."""
        return registry.get(step.to).settings_model.model_validate(
            {**self.store_settings, **step.settings})

    @property
    def operations(self) -> list[MigrationStep]:
        """The migrations this run performs, in time order: each declared one
        not ``scheduled``, and one per ``migrate`` entry of the fault schedule
        (its step, at the entry's instant, with the entry's timings)."""
        steps = [step for step in self.migrations if not step.scheduled]
        for entry in self.faults.schedule:
            if entry.fault != "migrate" or entry.step is None:
                continue
            changes: dict[str, Any] = {"at": entry.at, "scheduled": False}
            for name in ("restart_after", "keep_running", "crash_after_commands",
                         "stop_fleet", "again_after", "strays_hung_for"):
                if getattr(entry, name) is not None:
                    changes[name] = getattr(entry, name)
            steps.append(self.migrations[entry.step].model_copy(update=changes))
        return sorted(steps, key=lambda step: step.at)

    @property
    def rolling_restarts(self) -> list[ScheduledFault]:
        """The operator's rolling restarts, from the fault schedule."""
        return [entry for entry in self.faults.schedule if entry.fault == "rolling_restart"]

    @property
    def reconfigurations(self) -> list[Reconfiguration]:
        """The operator's configuration changes, from the fault schedule, each
        with its changes read by the store's settings model."""
        model = self.kind.settings_model
        return [Reconfiguration(entry, parsed_changes(model, self.store_settings,
                                                      entry.settings or {}))
                for entry in self.faults.schedule if entry.fault == "reconfigure"]

    def planned_faults(self, streams: Any) -> list[PlannedFault]:
        """Every fault of a run of this scenario, drawn from ``streams`` (the
        run's): ``faults.plan`` over the fleet, the arrival window and, on a
        cluster, its shards."""
        cluster = self.server.cluster
        return plan(self.faults, self.fleet.replicas, self.duration_us, streams,
                    cluster.shards if cluster is not None else None)

    @property
    def kind(self) -> registry.StoreKind:
        return registry.get(self.store)

    @property
    def settings(self) -> BaseModel:
        """The store's settings, validated by its own model."""
        return self.kind.settings_model.model_validate(self.store_settings)


# ----------------------------------------------------------- cross-field checks
# Each yields one line per problem, naming the field path; its docstring is
# the rule, as the fields reference states it.


def _replicas_in_the_fleet(scenario: Scenario) -> Iterator[str]:
    """A replica a scheduled fault or a migration's keep_running names is one of the
    fleet's: below fleet.replicas."""
    replicas = scenario.fleet.replicas
    named = [(f"faults.schedule.{index}.replica", fault.replica)
             for index, fault in enumerate(scenario.faults.schedule)
             if fault.replica is not None and not fault.migration]
    named += [(f"faults.schedule.{index}.replicas.{position}", replica)
              for index, fault in enumerate(scenario.faults.schedule) if not fault.migration
              for position, replica in enumerate(fault.replicas)]
    named += [(f"migrations.{index}.keep_running.{position}", replica)
              for index, step in enumerate(scenario.migrations)
              for position, replica in enumerate(step.keep_running)]
    named += [(f"faults.schedule.{index}.keep_running.{position}", replica)
              for index, fault in enumerate(scenario.faults.schedule)
              for position, replica in enumerate(fault.keep_running or ())]
    for path, replica in named:
        if replica >= replicas:
            yield (f"{path}: expected a replica from 0 to {replicas - 1} (fleet.replicas is "
                   f"{replicas}), got {replica}")


def _instants_in_the_run(scenario: Scenario) -> Iterator[str]:
    """A scheduled fault, a migration and faults.until happen within the run: at most
    duration + drain."""
    end = scenario.end_us
    instants = [(f"faults.schedule.{index}.at", fault.at)
                for index, fault in enumerate(scenario.faults.schedule)]
    instants += [(f"migrations.{index}.at", step.at)
                 for index, step in enumerate(scenario.migrations)]
    if scenario.faults.until is not None:
        instants.append(("faults.until", scenario.faults.until))
    for path, at_us in instants:
        if at_us > end:
            yield (f"{path}: expected an instant within the run, at most "
                   f"{format_duration_us(end)} (duration + drain), got "
                   f"{format_duration_us(at_us)} (it would never happen)")


def _migrate_names_a_step(scenario: Scenario) -> Iterator[str]:
    """A scheduled migrate names one of the scenario's [[migrations]] (its step)."""
    steps = len(scenario.migrations)
    for index, fault in enumerate(scenario.faults.schedule):
        if fault.fault == "migrate" and fault.step is not None and fault.step >= steps:
            declared = (f"from 0 to {steps - 1}" if steps
                        else "but the scenario declares no [[migrations]]")
            yield (f"faults.schedule.{index}.step: expected a [[migrations]] entry, "
                   f"{declared}, got {fault.step}")


def _reconfigure_reloads(scenario: Scenario) -> Iterator[str]:
    """A scheduled reconfigure changes only settings the store may reload (its
    settings model's ``reloadable``: caps, TTLs), to values its settings take."""
    kind = scenario.kind
    model = kind.settings_model
    for index, fault in enumerate(scenario.faults.schedule):
        if fault.fault != "reconfigure" or not fault.settings:
            continue
        path = ("faults", "schedule", index, "settings")
        unknown = unreloadable(model, kind.name, fault.settings, path)
        if unknown:
            yield from unknown
            continue
        merged = {**scenario.store_settings, **fault.settings}
        try:
            model.model_validate(merged)
        except ValidationError as error:
            yield from format_errors(error, prefix=path, model=model, data=merged).split("\n")


def _arrivals_fit_the_run(scenario: Scenario) -> Iterator[str]:
    """A fixed list of arrivals names replicas of the fleet, and times before the
    duration."""
    try:
        scenario.workload.arrivals.check_fits(scenario.fleet.replicas, scenario.duration_us)
    except ValueError as error:
        yield str(error)


def _shards_in_the_cluster(scenario: Scenario) -> Iterator[str]:
    """A scheduled fault's shard is one of server.cluster's (below shards), named
    only on a cluster and only by server_restart, failover, latency_spike and
    slot_migration (the shard the slot moves to: not the one it is on); a
    failover needs a replica to promote (replicas_per_shard at least 1); a run
    moves one slot at most."""
    cluster = scenario.server.cluster
    migrations = [fault for fault in scenario.faults.schedule if fault.fault == "slot_migration"]
    for index, fault in enumerate(scenario.faults.schedule):
        path = f"faults.schedule.{index}"
        if fault.fault == "slot_migration" and cluster is not None \
                and fault.shard is not None and fault.shard < cluster.shards:
            slot = fault.moving_slot
            assert slot is not None
            if shard_of_slot(slot, slot_ranges(cluster.shards)) == fault.shard:
                split = ", ".join(f"{r.start}-{r.stop - 1}" for r in slot_ranges(cluster.shards))
                yield (f"{path}.shard: slot {slot} is on shard {fault.shard} already (a new "
                       f"cluster of {cluster.shards} splits the slots as {split})")
            if fault is not migrations[0]:
                yield f"{path}: a run moves one slot (this is its second slot_migration)"
        if fault.shard is not None:
            if fault.fault not in (*SHARD_FAULTS, "slot_migration"):
                yield (f"{path}.shard: only {', '.join(SHARD_FAULTS)} hit a shard, "
                       f"not {fault.fault}")
            elif cluster is None:
                yield (f"{path}.shard: the server is not a cluster (set server.cluster, "
                       f"e.g. {{ shards = 3 }}), so there is no shard {fault.shard}")
            elif fault.shard >= cluster.shards:
                yield (f"{path}.shard: expected a shard from 0 to {cluster.shards - 1} "
                       f"(server.cluster.shards is {cluster.shards}), got {fault.shard}")
        if fault.fault == "failover" and cluster is not None and not cluster.replicas_per_shard:
            yield (f"{path}: a failover needs a replica to promote, and "
                   "server.cluster.replicas_per_shard is 0")
    for name in SHARD_FAULTS:
        spec = getattr(scenario.faults, name)
        if spec is None or spec.shards is None:
            continue
        if cluster is None:
            yield (f"faults.{name}.shards: the server is not a cluster (set server.cluster, "
                   "e.g. { shards = 3 })")
        elif any(shard >= cluster.shards for shard in spec.shards):
            yield (f"faults.{name}.shards: expected shards from 0 to {cluster.shards - 1} "
                   f"(server.cluster.shards is {cluster.shards}), got {spec.shards}")
    if (scenario.faults.failover is not None and cluster is not None
            and not cluster.replicas_per_shard):
        yield ("faults.failover: a failover needs a replica to promote, and "
               "server.cluster.replicas_per_shard is 0")


CROSS_FIELD_CHECKS: tuple[Callable[[Scenario], Iterator[str]], ...] = (
    _replicas_in_the_fleet, _instants_in_the_run, _migrate_names_a_step, _reconfigure_reloads,
    _arrivals_fit_the_run, _shards_in_the_cluster)
"""The rules between fields, checked when a scenario is read (after each
field's own domain)."""


def _fields_of(model: type[BaseModel] | None, path: tuple[Any, ...]) -> list[str]:
    """The field names (as written in TOML) of the model at ``path``."""
    for part in path:
        if model is None:
            return []
        match = next(
            (f for name, f in model.model_fields.items() if (f.alias or name) == part), None
        )
        annotation = getattr(match, "annotation", None) if match else None
        model = annotation if isinstance(annotation, type) and issubclass(
            annotation, BaseModel) else None
    if model is None:
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def format_errors(error: ValidationError, prefix: tuple[Any, ...] = (),
                  model: type[BaseModel] | None = Scenario, data: Any = None) -> str:
    """One line per problem: ``path: what was expected (got ...)``; a value
    outside its field's domain is said in the domain's words, and shown as
    written in ``data`` (the validated input) when it is there."""
    lines = []
    for problem in error.errors():
        location = tuple(problem["loc"])
        path = field_path(prefix + location) or "(top level)"
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            known = _fields_of(model, location[:-1])
            message = "unknown field" + (f"; known fields: {', '.join(known)}" if known else "")
        elif problem["type"] == "missing":
            message = "required field is missing"
        elif _out_of_domain(problem) and (typed := _typed_at(model, location)):
            given = _as_written(data, location, problem.get("input"))
            reason = getattr(problem.get("ctx", {}).get("error"), "reason", None)
            message = f"expected {describe(typed)}, got {given!r}" + (
                f" ({reason})" if reason else "")
        elif "got" not in message:
            message = f"{message} (got {problem.get('input')!r})"
        lines.append(f"{path}: {message}")
    return "\n".join(lines)


OUT_OF_DOMAIN = frozenset({
    "greater_than", "greater_than_equal", "less_than", "less_than_equal", "int_parsing",
    "int_parsing_size", "int_from_float", "int_type", "float_parsing", "float_type",
    "finite_number", "bool_type", "bool_parsing", "literal_error", "enum", "string_type"})
"""Pydantic's refusals of a value outside its field's domain: they are said
in the domain's own words, as the fields reference states it."""


def _out_of_domain(problem: Any) -> bool:
    """Pydantic's own refusal of a value outside its domain, or a number
    field's refusal of what is not a number."""
    return problem["type"] in OUT_OF_DOMAIN or isinstance(
        problem.get("ctx", {}).get("error"), NotANumber)


def _typed_at(model: type[BaseModel] | None, location: tuple[Any, ...]) -> Any:
    return field_at(model, location) if model is not None else None


def _as_written(data: Any, location: tuple[Any, ...], otherwise: Any) -> Any:
    """The value at ``location`` in ``data`` (``"0s"``, not the 0 it was read as)."""
    for part in location:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return otherwise
    return data


def _each_line_from(source: str, detail: str) -> str:
    """One line per problem, each naming the file (or whatever the scenario came from)."""
    # Split at newlines only: the problems are joined by them, and a value
    # quoted in a problem may hold another line break (\x85, \u2028).
    return "\n".join(f"{source}: {line}" for line in detail.split("\n") if line.strip())


def parse_scenario(data: dict[str, Any], source: str = "scenario") -> Scenario:
    """Validate a scenario already read as a dict (TOML, or built in code)."""
    try:
        return Scenario.model_validate(data)
    except ScenarioError as error:
        raise ScenarioError(_each_line_from(source, str(error))) from None
    except ValidationError as error:
        nested = [
            problem for problem in error.errors()
            if isinstance(problem.get("ctx", {}).get("error"), ScenarioError)
        ]
        detail = (
            "\n".join(str(p["ctx"]["error"]) for p in nested) if nested
            else format_errors(error, data=data)
        )
        raise ScenarioError(_each_line_from(source, detail)) from None


def read_toml(path: Path, what: str = "scenario file") -> dict[str, Any]:
    """A TOML file as a dict. Whatever stops it being read — missing, a
    directory, unreadable, not UTF-8 text, not TOML — is a one-line
    ``ScenarioError`` naming the path, so every command reports it alike."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise ScenarioError(_a_directory(path, what)) from None
    except UnicodeDecodeError as error:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {error.start} is "
                            f"{error.object[error.start]:#04x}); give a {what} in TOML") from None
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read the {what}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{path}: not valid TOML: {error}") from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively.
        raise ScenarioError(f"{path}: cannot read the {what}: its arrays or inline tables "
                            "are nested hundreds deep") from None


def _a_directory(path: Path, what: str) -> str:
    """Say so, and name a file in it that would do, as a newcomer who typed
    the directory most likely wanted one of its files."""
    files = sorted(path.glob("*.toml"))
    example = f", e.g. {files[0]}" if files else ""
    return f"{path} is a directory; give a {what} (TOML){example}"


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """Read and validate a scenario file, with optional dotted-path overrides."""
    path = Path(path)
    data = read_toml(path)
    for dotted, value in (overrides or {}).items():
        try:
            set_dotted(data, dotted, value)
        except ScenarioError as error:
            raise ScenarioError(f"{path}: {error}") from None
    return parse_scenario(data, source=str(path))


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """``set_dotted(d, "network.reply_loss", 0.1)`` sets ``d["network"]["reply_loss"]``;
    a number indexes a list (``"migrations.0.to"``). A path through a value
    that is not a table (the file's ``limits = 5``, under ``--max-memory``), or
    naming no entry of a list, is a ``ScenarioError`` naming the field."""
    parts = dotted.split(".")
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, list):
            if not (part.isdigit() and int(part) < len(node)):
                entries = f"from 0 to {len(node) - 1}" if node else "but the list is empty"
                raise ScenarioError(f"{field_path(parts[:depth + 1])}: expected an index "
                                    f"{entries}, to set {dotted}")
            if last:
                node[int(part)] = value
            node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            node = node.setdefault(part, {})
        else:
            raise ScenarioError(f"{field_path(parts[:depth])}: expected a table, to set "
                                f"{dotted} in it, got {node!r}")
