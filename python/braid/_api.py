"""Scenarios, runs and results (the package's public API; see ``braid.__doc__``)."""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping, Union

from . import _native
from ._native import BraidError, ScenarioError

Overrides = Union[Mapping[str, Any], Iterable[str], None]
Sweep = Union[Mapping[str, Any], Iterable[str], None]


def _set_overrides(values: Overrides) -> list[str]:
    """``{"key": value}`` or ``["key=value", ...]`` as ``--set`` strings."""
    if values is None:
        return []
    if isinstance(values, Mapping):
        return [_native.set_override(str(k), v) for k, v in values.items()]
    if isinstance(values, str):
        return [values]
    return [str(v) for v in values]


def _sweep_overrides(values: Sweep) -> list[str]:
    """``{"key": [a, b]}`` (or ``{"key": "a,b"}``) or ``["key=a,b", ...]`` as overrides."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Mapping):
        pairs = {}
        for spec in values:
            key, sep, rest = str(spec).partition("=")
            if not sep:
                raise ScenarioError(f"sweep `{spec}`: expected key=a,b,c")
            pairs[key.strip()] = rest
        values = pairs
    return [_native.sweep_override(str(k), v) for k, v in values.items()]


def _key(override: str) -> str:
    return override.partition("=")[0].strip()


class Scenario:
    """A scenario (file text and where it came from) with ``--set`` overrides applied.

    The scenario is checked when it is made: a bad key or value raises ``ScenarioError``
    naming the key, before anything runs.
    """

    def __init__(self, text: str, file: str = "<string>", base_dir: str = ".", set: Overrides = None):
        self._text = text
        self._file = file
        # Absolute, so Ray workers whose working directory differs find the traces.
        self._base_dir = os.path.abspath(base_dir or ".")
        self._overrides = tuple(_set_overrides(set))
        self._plan = _native.Plan(text, file, self._base_dir, list(self._overrides))

    @classmethod
    def load(cls, path: str | os.PathLike, set: Overrides = None) -> "Scenario":
        """A scenario file (TOML), as ``braid sim FILE --set ...`` loads it."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ScenarioError(f"{path}: cannot read the scenario: {e.strerror or e}") from None
        return cls(text, path, os.path.dirname(path), set)

    @classmethod
    def from_dict(
        cls, scenario: Mapping[str, Any], base_dir: str = ".", set: Overrides = None, file: str = "<dict>"
    ) -> "Scenario":
        """A scenario given as a dict of the file's keys (``{"name": ..., "link": [{...}]}``);
        unknown keys raise ``ScenarioError`` naming them."""
        if not isinstance(scenario, Mapping):
            raise ScenarioError(f"{file}: a scenario is a dict, not {type(scenario).__name__}")
        try:
            text = _native.scenario_toml(dict(scenario))
        except ScenarioError as e:
            raise ScenarioError(f"{file}: {e}") from None
        return cls(text, file, base_dir, set)

    @classmethod
    def from_toml(cls, text: str, base_dir: str = ".", set: Overrides = None, file: str = "<string>") -> "Scenario":
        """A scenario given as TOML text."""
        return cls(text, file, base_dir, set)

    def with_set(self, set: Overrides) -> "Scenario":
        """This scenario with more overrides (later ones win)."""
        s = Scenario.__new__(Scenario)
        s._text, s._file, s._base_dir = self._text, self._file, self._base_dir
        s._overrides = self._overrides + tuple(_set_overrides(set))
        s._plan = _native.Plan(s._text, s._file, s._base_dir, list(s._overrides))
        return s

    @property
    def name(self) -> str:
        return self._plan.name

    @property
    def file(self) -> str:
        return self._file

    @property
    def text(self) -> str:
        return self._text

    @property
    def overrides(self) -> tuple[str, ...]:
        return self._overrides

    @property
    def repetitions(self) -> int:
        return self._plan.repetitions

    @property
    def seed(self) -> int:
        return self._plan.seed

    @property
    def duration_s(self) -> float:
        return self._plan.duration_s

    @property
    def variants(self) -> list[str]:
        return [name for name, _ in self._plan.variants()]

    def __repr__(self) -> str:
        return f"Scenario({self.name!r}, file={self._file!r}, variants={self.variants!r})"

    def run(
        self,
        *,
        sweep: Sweep = None,
        set: Overrides = None,
        reps: int | None = None,
        seed: int | None = None,
        jobs: int | None = None,
        series: bool = False,
        ray: bool | str | None = None,
        progress: bool = True,
    ) -> "Result":
        """Runs every variant × repetition and returns the results.

        sweep: ``{"key": [a, b, c]}`` -- one variant per value, per combination with several
            keys and with the file's own ``[sweep]`` (as ``braid sim --sweep key=a,b,c``).
        set: more overrides, as ``braid sim --set``. reps, seed: as ``--reps``, ``--seed``.
        jobs: parallel runs on this machine (default: its cores).
        series: keep every run's time series (``timeseries``, ``deliveries``, ``cbr``).
        ray: None runs here; True runs on Ray (the instance ``ray.init`` connected to, else a
            local one it starts); "HOST:PORT" or "ray://HOST:PORT" connects to that cluster.
            Each task is one (variant, seed, parameter point); results do not depend on where
            tasks run.
        progress: a line per finished run on stderr.
        """
        extra = _set_overrides(set)
        sweeps = _sweep_overrides(sweep)
        swept = {_key(o)[len("sweep.") :].strip('"') for o in sweeps}
        fixed = [k for k in map(_key, extra) if k in swept]
        if fixed:
            raise ScenarioError(f"{self._file}: `{fixed[0]}` is both swept and set: give one")
        if reps is not None:
            extra.append(f"repetitions={int(reps)}")
        if seed is not None:
            extra.append(f"seed={int(seed)}")
        if jobs is not None and jobs < 1:
            raise BraidError(f"jobs = {jobs}: at least 1")
        overrides = list(self._overrides) + sweeps + extra
        plan = _native.Plan(self._text, self._file, self._base_dir, overrides)
        spec = (self._text, self._file, self._base_dir, tuple(overrides))
        variants = plan.variants()
        tasks = [(v, r) for v in range(len(variants)) for r in range(plan.repetitions)]
        on_ray = ray is not None and ray is not False
        if on_ray:
            from . import _ray

            cluster = _ray.connect(ray)  # an unreachable cluster fails here, before anything
        report = _Progress(plan, len(tasks), len(variants), progress, on_ray)
        started = time.perf_counter()
        if on_ray:
            results = _ray.run_tasks(cluster, spec, tasks, series, report)
        else:
            results = _run_local(plan, tasks, series, jobs or os.cpu_count() or 1, report)
        wall = time.perf_counter() - started
        doc, table = plan.assemble(results, wall)
        return Result(doc, table, results, variants, wall)


def run(scenario: Union[Scenario, str, os.PathLike, Mapping[str, Any]], **kwargs: Any) -> "Result":
    """``braid.run(path_or_dict_or_Scenario, sweep=..., set=..., reps=..., ray=...)``:
    loads the scenario and runs it (see ``Scenario.run``)."""
    if not isinstance(scenario, Scenario):
        if isinstance(scenario, Mapping):
            scenario = Scenario.from_dict(scenario)
        else:
            scenario = Scenario.load(scenario)
    return scenario.run(**kwargs)


class _Progress:
    """What ``braid sim`` prints while it runs, on stderr."""

    def __init__(self, plan: Any, total: int, variants: int, enabled: bool, on_ray: bool):
        self.names = [name for name, _ in plan.variants()]
        self.total, self.done, self.enabled = total, 0, enabled
        self.simulated = plan.duration_s
        self.tty = sys.stderr.isatty()
        where = "on Ray" if on_ray else "here"
        if enabled:
            print(
                f"braid: {plan.name} — {variants} variant(s) × {plan.repetitions} run(s), {where}",
                file=sys.stderr,
            )

    def __call__(self, result: Mapping[str, Any]) -> None:
        self.done += 1
        if not self.enabled:
            return
        line = (
            f"[{self.done}/{self.total}] {self.names[result['variant']]} seed {result['seed']}: "
            f"{self.simulated:.0f} s simulated in {result['wall_s']:.1f} s"
        )
        if self.tty:
            end = "\n" if self.done == self.total else ""
            print(f"\r\x1b[2K{line}", end=end, file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


def _run_local(plan: Any, tasks: list, series: bool, jobs: int, report: Callable) -> list:
    """Tasks on threads (the simulator releases the GIL while it runs)."""
    out: list = []
    pool = ThreadPoolExecutor(max_workers=max(1, min(jobs, len(tasks))))
    try:
        pending = {pool.submit(_local_task, plan, v, r, series) for v, r in tasks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                res = f.result()
                out.append(res)
                report(res)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return out


def _local_task(plan: Any, v: int, r: int, series: bool) -> dict:
    res = plan.run(v, r, series)
    res["host"], res["pid"] = _where()
    return res


def _where() -> tuple[str, int]:
    return os.uname().nodename, os.getpid()


def metrics():
    """The metric definitions: key, per ("event": one value per event window, "run": one per
    run), shown (the table's statistic), about (its definition), label and unit (the name and
    unit figures give it; ``axis`` is "label (unit)")."""
    import pandas as pd

    m = pd.DataFrame(
        _native.metric_defs(), columns=["key", "per", "shown", "about", "label", "unit"]
    )
    m["axis"] = [f"{l} ({u})" if u else l for l, u in zip(m["label"], m["unit"])]
    return m


def _event_keys() -> set[str]:
    return {d[0] for d in _native.metric_defs() if d[1] == "event"}


def _numeric(col: Any) -> Any:
    import pandas as pd

    try:
        return pd.to_numeric(col)
    except (ValueError, TypeError):
        return col


class Result:
    """The results of a run: the ``braid sim --json`` document and DataFrames over it.

    Frames (built on first use): ``runs`` (one row per run: variant, its swept settings, rep,
    seed, sim_events, then every run metric), ``events`` (one row per run, event metric and
    event window: metric, window, value), ``summary`` (one row per variant and metric: the
    table's statistics), ``tasks`` (where and how long each task ran), and with
    ``series=True`` ``timeseries``, ``deliveries``, ``cbr`` (what ``--out`` writes as CSV).
    Settings that are all numbers become numeric columns.
    """

    def __init__(self, doc: str, table: str, results: list, variants: list, wall_s: float):
        self._text = doc
        self._wall = wall_s
        self.json: dict = json.loads(doc)
        self._table = table
        self._results = sorted(results, key=lambda r: (r["variant"], r["rep"]))
        self._settings = sorted({k for _, s in variants for k in s})
        self._variants = variants

    def table(self) -> str:
        """The table ``braid sim`` prints (medians [q1–q3], the paper's numbers)."""
        return self._table

    def to_json(self) -> str:
        """The document ``braid sim --json`` prints."""
        return self._text

    @property
    def wall_s(self) -> float:
        """How long the whole run took (wall clock, seconds)."""
        return self._wall

    def __repr__(self) -> str:
        v = self.json["variants"]
        runs = sum(len(x["runs"]) for x in v)
        return f"<braid.Result {self.json['scenario']}: {len(v)} variant(s), {runs} run(s)>"

    def _keys(self, v: dict) -> dict:
        return {"variant": v["name"], **{k: v["settings"].get(k) for k in self._settings}}

    def _frame(self, rows: list, columns: list):
        import pandas as pd

        df = pd.DataFrame(rows, columns=columns)
        for k in self._settings:
            df[k] = _numeric(df[k])
        return df

    @cached_property
    def _split(self) -> tuple[list, set]:
        """Metric keys of the runs frame (one value per run), in table order."""
        events = _event_keys()
        seen = []
        for v in self.json["variants"]:
            for run in v["runs"]:
                for k, vals in run["metrics"].items():
                    if k not in seen:
                        seen.append(k)
                    if len(vals) > 1:
                        events.add(k)
        order = {key: i for i, (key, *_rest) in enumerate(_native.metric_defs())}
        run_keys = sorted((k for k in seen if k not in events), key=lambda k: (order.get(k, len(order)), k))
        return run_keys, events

    @cached_property
    def runs(self):
        run_keys, _ = self._split
        rows = []
        for v in self.json["variants"]:
            for rep, run in enumerate(v["runs"]):
                m = run["metrics"]
                vals = [(m[k][0] if m.get(k) else None) for k in run_keys]
                rows.append([*self._keys(v).values(), rep, run["seed"], run["events"], *vals])
        cols = ["variant", *self._settings, "rep", "seed", "sim_events", *run_keys]
        df = self._frame(rows, cols)
        for k in run_keys:
            df[k] = df[k].astype("float64")
        return df

    @cached_property
    def events(self):
        _, events = self._split
        rows = []
        for v in self.json["variants"]:
            keys = list(self._keys(v).values())
            for rep, run in enumerate(v["runs"]):
                for k, vals in run["metrics"].items():
                    if k in events:
                        for i, x in enumerate(vals):
                            rows.append([*keys, rep, run["seed"], k, i, x])
        df = self._frame(rows, ["variant", *self._settings, "rep", "seed", "metric", "window", "value"])
        df["value"] = df["value"].astype("float64")
        return df

    @cached_property
    def summary(self):
        stats = ["median", "q1", "q3", "min", "max", "mean", "std", "n", "windows"]
        rows = []
        for v in self.json["variants"]:
            keys = list(self._keys(v).values())
            for k, s in v["metrics"].items():
                rows.append([*keys, k, *(s.get(x) for x in stats)])
        df = self._frame(rows, ["variant", *self._settings, "metric", *stats])
        df["windows"] = df["windows"].astype("Int64")
        return df

    @cached_property
    def tasks(self):
        rows = []
        for r in self._results:
            name = self._variants[r["variant"]][0]
            rows.append([name, r["rep"], r["seed"], r["wall_s"], r.get("host"), r.get("pid")])
        import pandas as pd

        return pd.DataFrame(rows, columns=["variant", "rep", "seed", "wall_s", "host", "pid"])

    def _series(self, table: str):
        import numpy as np
        import pandas as pd

        frames, which = [], []
        for r in self._results:
            s = r.get("series")
            if s is None:
                raise BraidError("no time series kept: run with series=True")
            t = s.get(table)
            if t is None:
                continue
            cols = {}
            for col, dec, buf in zip(t["columns"], t["decimals"], t["data"]):
                a = np.frombuffer(buf, dtype="<f8")
                cols[col] = a.astype("int64") if dec == 0 else a
            n = len(next(iter(cols.values()))) if cols else 0
            which.append(np.full(n, r["variant"], dtype="int32"))
            keys = {"rep": np.full(n, r["rep"]), "seed": np.full(n, r["seed"], dtype="uint64")}
            frames.append(pd.DataFrame({**keys, **cols}))
        if not frames:
            return pd.DataFrame(columns=["variant", *self._settings, "rep", "seed"])
        df = pd.concat(frames, ignore_index=True)
        # Variant and settings as categories: one small code per row, not one string.
        codes = np.concatenate(which)
        names = [name for name, _ in self._variants]
        front = {"variant": pd.Categorical.from_codes(codes, categories=names)}
        for k in self._settings:
            per_variant = _numeric(pd.Series([settings.get(k) for _, settings in self._variants]))
            if pd.api.types.is_numeric_dtype(per_variant):
                front[k] = per_variant.to_numpy()[codes]
            else:
                # A setting only some variants have is missing (None, or NaN once pandas
                # holds the column as strings) in the others: no category, code -1.
                cats = [x for x in dict.fromkeys(per_variant) if not pd.isna(x)]
                vcodes = np.array([-1 if pd.isna(x) else cats.index(x) for x in per_variant])
                front[k] = pd.Categorical.from_codes(vcodes[codes], categories=cats)
        return pd.concat([pd.DataFrame(front), df], axis=1)

    @cached_property
    def timeseries(self):
        """Per sampling interval: throughput, per-link rate, cwnd, SRTT, reorder buffer, counters."""
        return self._series("timeseries")

    @cached_property
    def deliveries(self):
        """Every in-order delivery to the application: t_s, bytes."""
        return self._series("deliveries")

    @cached_property
    def cbr(self):
        """Every CBR message delivered: sent_s, delay_ms and, in the two-node form, bound_ms
        (a lower bound on that delay from the links alone); empty without a CBR application."""
        return self._series("cbr")

    @cached_property
    def decisions(self):
        """Every decision of the client's path manager: t_s, link (index in the time series'
        link order), demote (1: backup or removed; 0: active or created), flip (1: a backup-flag
        change); empty when it took none."""
        return self._series("decisions")
