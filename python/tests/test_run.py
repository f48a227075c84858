"""The braid package against the `braid sim` command: same scenario and seed, same numbers."""

from __future__ import annotations

import math
import subprocess
import sys
import tomllib

import numpy as np
import pandas as pd
import pytest

import braid
from conftest import E3, ROOT, SHORT, SHORT_ARGS, SWEEP, SWEEP_ARGS, cli_json, need


@pytest.fixture(scope="module")
def short_e3():
    return braid.Scenario.load(str(E3.relative_to(ROOT)), set=SHORT)


@pytest.fixture(scope="module", autouse=True)
def in_root():
    # Paths as a user in the repository gives them (the JSON's `file` is the path as given).
    import os

    old = os.getcwd()
    os.chdir(ROOT)
    yield
    os.chdir(old)


def test_a_scenario_runs_from_python(short_e3):
    r = short_e3.run(reps=1, progress=False)
    assert short_e3.variants == ["stock", "pto", "rej1", "rej2", "rej4"]
    assert list(r.runs["variant"]) == short_e3.variants
    assert (r.runs["throughput_mbps"] > 15).all()
    # E3's shape holds on the short run: REJ K=1 recovers faster than stock.
    s = r.summary.set_index(["variant", "metric"])
    assert s.loc[("rej1", "delay_increase_ms"), "median"] < 0.4 * s.loc[("stock", "delay_increase_ms"), "median"]
    assert "stock" in r.table() and "delay_increase_ms" in r.table()
    assert set(r.events["metric"]) >= {"delay_increase_ms", "reinjection_rate_pct", "max_gap_ms"}
    assert (r.events.groupby(["variant", "metric"]).size() == 3).all()  # 3 losses each


def test_dataframes_equal_the_cli_json(braid_bin, short_e3):
    cli = cli_json(braid_bin, str(E3.relative_to(ROOT)), *SHORT_ARGS, "--reps", "2", "--seed", "7")
    r = short_e3.run(reps=2, seed=7, progress=False)
    # The whole document, key for key.
    assert r.json == cli
    # Every per-run value of the CLI's JSON is in the frames, and nothing else.
    n_values = 0
    for v in cli["variants"]:
        for rep, run in enumerate(v["runs"]):
            row = r.runs[(r.runs["variant"] == v["name"]) & (r.runs["rep"] == rep)]
            assert len(row) == 1 and row["seed"].item() == run["seed"] == 7 + rep
            assert row["sim_events"].item() == run["events"]
            ev = r.events[(r.events["variant"] == v["name"]) & (r.events["rep"] == rep)]
            for key, values in run["metrics"].items():
                if key in r.runs.columns:
                    assert values == [row[key].item()], key
                else:
                    got = ev[ev["metric"] == key].sort_values("window")["value"].tolist()
                    assert got == values, key
                n_values += len(values)
        for key, stats in v["metrics"].items():
            row = r.summary[(r.summary["variant"] == v["name"]) & (r.summary["metric"] == key)]
            for stat, x in stats.items():
                assert row[stat].item() == x, (v["name"], key, stat)
    assert n_values == len(r.events) + r.runs.drop(
        columns=["variant", "connection.reinjection", "rep", "seed", "sim_events"]
    ).notna().sum().sum()


def test_time_series_equal_the_cli_csv(braid_bin, short_e3, tmp_path):
    out = tmp_path / "out"
    subprocess.run(
        [str(braid_bin), "sim", str(E3), *SHORT_ARGS, "--reps", "1", "-q", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    r = short_e3.run(reps=1, series=True, progress=False)
    for table, frame in [("timeseries", r.timeseries), ("deliveries", r.deliveries), ("cbr", r.cbr)]:
        for variant in short_e3.variants:
            lines = (out / variant / "seed1" / f"{table}.csv").read_text().splitlines()
            ours = frame[frame["variant"] == variant].drop(columns=["variant", "connection.reinjection", "rep", "seed"])
            assert list(ours.columns) == lines[0].split(","), table
            assert len(ours) == len(lines) - 1 > 10, table
            # Each value printed at the CSV column's precision is the CSV's text.
            decimals = [len(x.partition(".")[2]) for x in lines[1].split(",")]
            for row, line in zip(ours.itertuples(index=False), lines[1:]):
                assert ",".join(f"{x:.{d}f}" for x, d in zip(row, decimals)) == line, table


def test_a_sweep_of_3_by_2_points_gives_6_rows(braid_bin, short_e3):
    r = short_e3.run(sweep=SWEEP, reps=1, progress=False)
    assert len(r.runs) == 6
    assert r.runs[["connection.reinjection", "link.wlan.delay"]].drop_duplicates().shape[0] == 6
    assert r.runs["variant"].is_unique
    assert r.json == cli_json(braid_bin, str(E3.relative_to(ROOT)), *SHORT_ARGS, "--reps", "1", *SWEEP_ARGS)
    # Delay swept: the median one-way delay follows the Wi-Fi path's delay.
    d = r.runs.set_index(["connection.reinjection", "link.wlan.delay"])["delay_ms"]
    assert d[("stock", "20ms")] > d[("stock", "10ms")] + 8
    # The same sweep given as --sweep strings.
    r2 = short_e3.run(sweep=["connection.reinjection=stock,rej1,rej2", "link.wlan.delay=10ms,20ms"], reps=1, progress=False)
    pd.testing.assert_frame_equal(r.runs, r2.runs)


def test_results_do_not_depend_on_jobs(short_e3):
    a = short_e3.run(reps=2, jobs=1, progress=False)
    b = short_e3.run(reps=2, jobs=3, progress=False)
    assert a.json == b.json


def test_a_dict_scenario_runs_as_its_file(short_e3):
    with open(E3, "rb") as f:
        d = tomllib.load(f)
    s = braid.Scenario.from_dict(d, set=SHORT)
    a = s.run(reps=1, progress=False)
    b = short_e3.run(reps=1, progress=False)
    assert a.json["file"] == "<dict>"
    a.json.pop("file"), b.json.pop("file")
    assert a.json == b.json
    # braid.run takes a dict too.
    c = braid.run(d, set=SHORT, reps=1, progress=False)
    pd.testing.assert_frame_equal(c.runs, b.runs)


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda d: d["link"][0].update(colour="blue"), "link[0]"),
        (lambda d: d.update(durations="1s"), "durations"),
        (lambda d: d["connection"].update(congestion="cubik"), "connection.congestion"),
        (lambda d: d["link"][1].update(delay=None), "link[1].delay"),
        (lambda d: d["app"].update(rate=object()), "app.rate"),
    ],
)
def test_bad_dict_scenarios_are_one_clear_error(change, key, capsys):
    with open(E3, "rb") as f:
        d = tomllib.load(f)
    change(d)
    with pytest.raises(braid.ScenarioError) as e:
        braid.run(d, reps=1)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("<dict>: "), msg
    assert key in msg, msg
    # Refused before anything ran: no progress line.
    assert "braid:" not in capsys.readouterr().err


def test_unknown_override_and_sweep_keys_are_refused(short_e3):
    with pytest.raises(braid.ScenarioError, match="unknown field `colour`"):
        short_e3.run(set={"link.wlan.colour": 3}, progress=False)
    with pytest.raises(braid.ScenarioError, match="no `link` entry named `nope`"):
        short_e3.run(sweep={"link.nope.delay": ["1ms", "2ms"]}, progress=False)
    with pytest.raises(braid.ScenarioError, match="both swept and set"):
        short_e3.run(sweep={"link.wlan.delay": ["1ms", "2ms"]}, set={"link.wlan.delay": "3ms"}, progress=False)
    with pytest.raises(braid.ScenarioError, match="cannot read the scenario"):
        braid.Scenario.load("/nonexistent.toml")


def test_metric_definitions_cover_every_key(short_e3):
    m = braid.metrics().set_index("key")
    assert set(m["per"]) == {"event", "run"}
    # The figures' names and units, from the same table.
    assert m.loc["delay_increase_ms", "axis"] == "Delay increase (ms)"
    assert m.loc["reinjections", "label"] == "Reinjected segments"
    r = short_e3.run(reps=1, progress=False)
    for key in set(r.events["metric"]) | {c for c in r.runs.columns[5:] if not c.startswith("link.")}:
        assert key in m.index, key
    assert not math.isnan(r.wall_s)


def test_python_m_braid_prints_the_cli_document(braid_bin):
    args = [str(E3.relative_to(ROOT)), *SHORT_ARGS, "--reps", "1", *SWEEP_ARGS]
    out = subprocess.run(
        [sys.executable, "-m", "braid", "sim", *args, "--json", "-q"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    import json

    assert json.loads(out.stdout) == cli_json(braid_bin, *args)
    bad = subprocess.run(
        [sys.executable, "-m", "braid", "sim", str(E3), "--set", "link.0.rate=-3Mbit"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "key `link[0].rate`" in bad.stderr


def test_the_example_reproduces_a_table_and_a_figure(tmp_path):
    need("matplotlib")
    png = tmp_path / "e3.png"
    out = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "e3_reproduce.py"), "--quick", "--out", str(png)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0][2:] for r in rows[1:]] == ["stock", "pto", "rej1", "rej2", "rej4"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_path_manager_decisions_equal_the_cli_csv(braid_bin, tmp_path):
    # E7's cross-layer path manager, shortened to its first loss of coverage: every decision
    # it took, as `--out`'s decisions.csv has them.
    e7 = ROOT / "scenarios" / "e7-v2i-aggregation.toml"
    short = ["duration=22s"]
    out = tmp_path / "out"
    subprocess.run(
        [str(braid_bin), "sim", str(e7), "--set", short[0], "--variant", "cross", "--reps", "1", "-q", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    s = braid.Scenario.load(str(e7.relative_to(ROOT)), set=short)
    r = s.run(reps=1, series=True, progress=False)
    lines = (out / "cross" / "seed1" / "decisions.csv").read_text().splitlines()
    assert lines[0] == "t_s,link,demote,flip"
    d = r.decisions
    ours = d[d["variant"] == "cross"][lines[0].split(",")]
    # A created subflow and at least one demotion before the loss.
    assert len(ours) == len(lines) - 1 >= 2
    assert (ours["demote"] == 1).any()
    for row, line in zip(ours.itertuples(index=False), lines[1:]):
        assert f"{row.t_s:.6f},{row.link},{row.demote},{row.flip}" == line
