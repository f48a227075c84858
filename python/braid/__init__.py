"""braid's deterministic multipath simulator from Python.

Load a scenario (a file of ``scenarios/`` or a dict), override keys as ``braid sim --set``
does, sweep keys over values, run it here (threads) or on a Ray cluster, and get the results
as pandas DataFrames -- the same numbers ``braid sim --json`` prints for the same seed::

    import braid
    s = braid.Scenario.load("scenarios/e3-rtt-below-rtomin.toml", set={"duration": "60s"})
    r = s.run(sweep={"link.wlan.delay": ["10ms", "20ms"]}, reps=2)
    r.summary        # one row per (variant, metric): median, q1, q3, min, max, mean, std, n
    r.runs           # one row per run: the run metrics
    r.events         # one row per (run, metric, event window): the event metrics
    print(r.table()) # the table braid sim prints

``ray=True`` (a local Ray instance, or the one ``ray.init`` connected to) or
``ray="HOST:PORT"`` runs each (variant, seed, parameter point) as one Ray task.
"""

from ._native import BraidError, ScenarioError, __version__
from ._api import Result, Scenario, metrics, run

__all__ = [
    "BraidError",
    "Result",
    "Scenario",
    "ScenarioError",
    "__version__",
    "metrics",
    "run",
]
