"""Sweep speed: a 64-run E3 sweep on the local runner against the same sweep through Ray.

    RAY_USAGE_STATS_ENABLED=0 python python/bench/sweep_ray.py [--repeat 3] [--cli target/release/braid]

The sweep: reinjection stock, pto, rej1, rej2 × Wi-Fi delay 5, 10, 15, 20 ms × 4 seeds of the
full E3 (310 s simulated each). Timed, on this machine's cores (median of --repeat):
- `braid sim --sweep` (the Rust runner, --jobs = cores), when --cli names a release build;
- the Python package's local runner (threads, jobs = cores, and 1);
- Ray, a local instance with as many CPUs as cores (and 1), already started: the sweep alone,
  and the first sweep after start (workers load the package); the start itself.
Per-task overhead: 256 runs of 0.2 s simulated (a few ms each) on both. Exits 1 when Ray is
slower than 1.2 × the local runner on the 64-run sweep, and when the rows differ.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import braid

ROOT = Path(__file__).resolve().parents[2]
E3 = ROOT / "scenarios" / "e3-rtt-below-rtomin.toml"
SWEEP = {"connection.reinjection": ["stock", "pto", "rej1", "rej2"], "link.wlan.delay": ["5ms", "10ms", "15ms", "20ms"]}
LIMIT = 1.2


def timed(f, repeat: int) -> tuple[float, object]:
    walls, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cli", help="a release build of the braid command, timed beside")
    a = p.parse_args()
    import ray

    cores = os.cpu_count() or 1
    s = braid.Scenario.load(E3)
    sweep = dict(SWEEP)
    runs = 4 * 4 * 4
    tiny = s.with_set({"duration": "2s", "metrics.warmup": "0.5s", "schedule.0.first": "1s", "schedule.0.count": 1, "schedule.0.up": "0.1s", "schedule.0.down": "0.5s"})
    rows = []

    def row(what: str, wall: float, n: int) -> None:
        rows.append((what, wall, n))
        print(f"{what:58s} {wall:8.2f} s  ({n} runs, {wall / n * 1e3:.1f} ms per run)", flush=True)

    if a.cli:
        args = [a.cli, "sim", str(E3), "--reps", "4", "--jobs", str(cores), "-q", "--json"]
        for k, vals in SWEEP.items():
            args += ["--sweep", f"{k}={','.join(vals)}"]
        wall, out = timed(lambda: subprocess.run(args, capture_output=True, check=True), a.repeat)
        row(f"braid sim --sweep (Rust runner, {cores} jobs)", wall, runs)
        cli_doc = json.loads(out.stdout)
    local_wall, local = timed(lambda: s.run(sweep=sweep, reps=4, jobs=cores, progress=False), a.repeat)
    row(f"Python, local runner ({cores} threads)", local_wall, runs)
    if a.cli:
        cli_doc["file"] = local.json["file"]
        assert cli_doc == local.json, "the CLI and the package differ"
    one_wall, _ = timed(lambda: s.run(sweep=sweep, reps=4, jobs=1, progress=False), 1)
    row("Python, local runner (1 thread)", one_wall, runs)
    tiny_local, _ = timed(lambda: tiny.run(reps=256 // len(tiny.variants), jobs=cores, progress=False), a.repeat)
    row(f"tiny runs, local runner ({cores} threads)", tiny_local, 256 // len(tiny.variants) * len(tiny.variants))

    results = {}
    for cpus in sorted({cores, 1}, reverse=True):
        tmp = tempfile.mkdtemp(prefix="braid-rayb-")
        t0 = time.perf_counter()
        ray.init(num_cpus=cpus, include_dashboard=False, _temp_dir=tmp, logging_level="WARNING")
        start = time.perf_counter() - t0
        print(f"{'Ray start, ' + str(cpus) + ' CPU(s)':58s} {start:8.2f} s", flush=True)
        first, r = timed(lambda: s.run(sweep=sweep, reps=4, ray=True, progress=False), 1)
        row(f"Ray, {cpus} worker(s), first sweep after start", first, runs)
        wall, r = timed(lambda: s.run(sweep=sweep, reps=4, ray=True, progress=False), a.repeat)
        row(f"Ray, {cpus} worker(s)", wall, runs)
        results[cpus] = (wall, r)
        if cpus == cores:
            tw, _ = timed(lambda: tiny.run(reps=256 // len(tiny.variants), ray=True, progress=False), a.repeat)
            n = 256 // len(tiny.variants) * len(tiny.variants)
            row(f"tiny runs, Ray ({cpus} workers)", tw, n)
            overhead = (tw - tiny_local) / n * cpus
            print(f"Ray overhead per task (tiny runs): {overhead * 1e3:.2f} ms of a worker's time", flush=True)
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
        assert r.json == local.json, "Ray's rows differ from the local runner's"
    ratio = results[cores][0] / local_wall
    print(f"\nRay / local runner, {runs} runs on {cores} cores: {ratio:.3f} (limit {LIMIT})")
    if 1 in results and cores > 1:
        print(f"Ray speed-up 1 → {cores} workers: {results[1][0] / results[cores][0]:.2f}")
    print(f"local speed-up 1 → {cores} threads: {one_wall / local_wall:.2f}")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
