"""Sweeps on Ray: a local instance and a head node started by the test, same rows as here."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

import braid
from conftest import E3, ROOT, SHORT, SWEEP, free_port, need


@pytest.fixture(scope="module")
def local_result():
    s = braid.Scenario.load(str(E3), set=SHORT)
    return s, s.run(sweep=SWEEP, reps=1, progress=False, series=True)


def assert_same(a, b):
    assert a.json == b.json
    for frame in ["runs", "events", "summary", "timeseries", "deliveries", "cbr"]:
        pd.testing.assert_frame_equal(getattr(a, frame), getattr(b, frame), check_exact=True)


def test_local_ray_gives_identical_rows(local_result, ray_local):
    s, here = local_result
    on_ray = s.run(sweep=SWEEP, reps=1, progress=False, series=True, ray=True)
    assert len(on_ray.runs) == 6
    assert_same(here, on_ray)
    # The tasks ran in Ray's workers, not in this process.
    assert os.getpid() not in set(on_ray.tasks["pid"])


def test_a_cluster_address_gives_identical_rows(local_result, ray_head):
    s, here = local_result
    on_ray = s.run(sweep=SWEEP, reps=1, progress=False, series=True, ray=ray_head)
    assert_same(here, on_ray)
    # The command-line form against the same cluster.
    import ray

    ray.shutdown()
    out = subprocess.run(
        [sys.executable, "-m", "braid", "sim", str(E3), "--set=duration=40s", "--set=schedule.0.count=3",
         "--reps=1", "--sweep=connection.reinjection=stock,rej1,rej2", "--sweep=link.wlan.delay=10ms,20ms",
         "--json", "-q", "--ray", ray_head],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    import json

    assert json.loads(out.stdout) == here.json


def test_an_unreachable_address_is_one_clear_error(local_result, capsys):
    ray = need("ray")
    s, _ = local_result
    address = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(braid.BraidError) as e:
        s.run(sweep=SWEEP, reps=1, ray=address)
    msg = str(e.value)
    assert "\n" not in msg and address in msg and "cannot reach" in msg, msg
    assert time.monotonic() - t0 < 10
    # Nothing started, nothing left connected.
    assert not ray.is_initialized()
    err = capsys.readouterr().err
    assert "[1/" not in err
    out = subprocess.run(
        [sys.executable, "-m", "braid", "sim", str(E3), "--ray", address], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().count("\n") == 0 and address in out.stderr, out.stderr


def test_without_ray_installed_the_error_says_what_to_install(local_result, monkeypatch):
    import types

    s, _ = local_result
    # Not installed (import fails), or a folder named `ray` in the working directory (an
    # empty namespace package).
    for stand_in in [None, types.ModuleType("ray")]:
        monkeypatch.setitem(sys.modules, "ray", stand_in)
        with pytest.raises(braid.BraidError, match=r"pip install 'braid\[ray\]'"):
            s.run(reps=1, ray=True, progress=False)
