"""``python -m braid sim FILE ...``: ``braid sim`` with the Python runner, locally or on Ray.

Same scenario, overrides, sweeps, table and ``--json`` document as ``braid sim``; ``--ray
[ADDRESS]`` runs the tasks on a Ray cluster (no ADDRESS: a local Ray instance).
"""

from __future__ import annotations

import argparse
import sys

from . import BraidError, Scenario


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m braid", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sim", help="run a scenario (as braid sim)")
    s.add_argument("file", help="scenario file (TOML)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario value")
    s.add_argument("--sweep", action="append", default=[], metavar="KEY=A,B,C", help="sweep a key over values")
    s.add_argument("--reps", type=int, help="repetitions per variant")
    s.add_argument("--seed", type=int, help="base seed")
    s.add_argument("--jobs", type=int, help="parallel runs on this machine (default: its cores)")
    s.add_argument(
        "--ray",
        nargs="?",
        const=True,
        metavar="ADDRESS",
        help="run on Ray: HOST:PORT, ray://HOST:PORT or auto; alone: a local Ray instance",
    )
    s.add_argument("--json", action="store_true", help="print the braid sim --json document")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    a = p.parse_args(argv)
    try:
        sc = Scenario.load(a.file)
        r = sc.run(
            set=a.set,
            sweep=a.sweep,
            reps=a.reps,
            seed=a.seed,
            jobs=a.jobs,
            ray=a.ray,
            progress=not a.quiet,
        )
    except BraidError as e:
        print(f"braid: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(r.to_json())
    else:
        sys.stdout.write(r.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
