"""Shared fixtures: the repository, the `braid` command, a short E3, Ray instances."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# Ray would otherwise try to send usage statistics over the internet.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = Path(__file__).resolve().parents[2]
E3 = ROOT / "scenarios" / "e3-rtt-below-rtomin.toml"
# E3 shortened: 3 address losses in 40 s.
SHORT = {"duration": "40s", "schedule.0.count": 3}
SHORT_ARGS = [f"--set=duration=40s", "--set=schedule.0.count=3"]
# The 3 × 2 sweep of the issue: three reinjection policies × two Wi-Fi delays.
SWEEP = {"connection.reinjection": ["stock", "rej1", "rej2"], "link.wlan.delay": ["10ms", "20ms"]}
SWEEP_ARGS = ["--sweep=connection.reinjection=stock,rej1,rej2", "--sweep=link.wlan.delay=10ms,20ms"]


def need(module: str):
    """Imports an optional test dependency: a visible skip, or a failure under CI=true."""
    try:
        return __import__(module)
    except ImportError:
        msg = f"{module} is not installed (scripts/python-deps installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg + "; CI must run this test")
        pytest.skip(msg)


@pytest.fixture(scope="session")
def braid_bin() -> Path:
    """The `braid` command of this checkout (built with cargo when missing)."""
    env = os.environ.get("BRAID_BIN")
    if env:
        return Path(env)
    path = ROOT / "target" / "debug" / "braid"
    if not path.exists():
        subprocess.run(["cargo", "build", "-p", "braid", "--locked"], cwd=ROOT, check=True)
    return path


def cli_json(braid_bin: Path, *args: str) -> dict:
    """`braid sim ... --json` as a user runs it."""
    out = subprocess.run(
        [str(braid_bin), "sim", *args, "--json", "--quiet"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_local():
    """A local Ray instance started by the test (2 CPUs), shut down after it."""
    ray = need("ray")
    tmp = tempfile.mkdtemp(prefix="braid-ray-")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, logging_level="WARNING")
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def ray_head():
    """A Ray head node started as a cluster is (`ray start --head`), on a loopback port; its
    address, as a user would pass it. The node is stopped by its process id afterwards."""
    need("ray")
    ray_cmd = Path(sys.executable).with_name("ray")
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="braid-rayh-")
    proc = subprocess.Popen(
        [
            str(ray_cmd),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--temp-dir={tmp}",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        from braid._ray import wait_for_cluster

        address = f"127.0.0.1:{port}"
        wait_for_cluster(address, timeout_s=60)
        yield address
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        # `ray start --block` stops the node's processes when it is told to end; its process
        # group holds only what it started.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
