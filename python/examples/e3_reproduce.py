"""Reproduces the README's E3 table (seed 002 Fig. 3) and draws its figure with matplotlib.

    python python/examples/e3_reproduce.py                # the full experiment, ~10 s
    python python/examples/e3_reproduce.py --quick        # 40 s runs, 3 losses (for tests)
    python python/examples/e3_reproduce.py --out e3.png   # where the figure goes

Left: the delay increase at each of the 60 address losses per variant (whiskers: min–max).
Right: the one-way delay of every CBR message around the first loss, stock against REJ K=1.
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import braid  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def num(x: float) -> str:
    """Numbers as braid sim's table prints them."""
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def cell(summary, variant: str, metric: str) -> str:
    s = summary[(summary["variant"] == variant) & (summary["metric"] == metric)].iloc[0]
    return f"{num(s['median'])} [{num(s['q1'])}–{num(s['q3'])}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="40 s runs with 3 losses, 1 repetition")
    p.add_argument("--out", default="e3.png", help="figure file (PNG, SVG or PDF)")
    a = p.parse_args()
    quick = {"duration": "40s", "schedule.0.count": 3, "repetitions": 1} if a.quick else {}
    e3 = braid.Scenario.load(ROOT / "scenarios" / "e3-rtt-below-rtomin.toml", set=quick)

    r = e3.run(progress=False)
    axis = braid.metrics().set_index("key")["axis"]
    paper = (r.json["paper"] or {}).get("values", {})
    print(f"| variant | {axis['delay_increase_ms']} | {axis['reinjection_rate_pct']} | paper |")
    print("|---|---|---|---|")
    for v in e3.variants:
        p_ms = paper.get(v, {}).get("delay_increase_ms")
        print(
            f"| {v} | {cell(r.summary, v, 'delay_increase_ms')} "
            f"| {cell(r.summary, v, 'reinjection_rate_pct')} | {f'≈ {p_ms:.0f} ms' if p_ms else ''} |"
        )

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    ev = r.events[r.events["metric"] == "delay_increase_ms"]
    data = [ev[ev["variant"] == v]["value"] for v in e3.variants]
    left.boxplot(data, whis=(0, 100))
    left.set_xticks(range(1, len(e3.variants) + 1), e3.variants)
    for i, v in enumerate(e3.variants):
        p_ms = paper.get(v, {}).get("delay_increase_ms")
        if p_ms:
            left.plot([i + 0.7, i + 1.3], [p_ms, p_ms], "r--", lw=1, label="paper" if i == 0 else None)
    left.set_ylabel(axis["delay_increase_ms"])
    left.set_xlabel("Reinjection policy")
    per = len(ev) // len(e3.variants)
    left.set_title(f"per address loss ({per} per variant; whiskers: min–max)", fontsize=10)
    left.legend(loc="upper left", bbox_to_anchor=(1.01, 1))

    # One run per variant with its time series: the CBR delay around the first loss.
    one = e3.run(set={"repetitions": 1}, series=True, progress=False)
    first = float(tomllib.loads(e3.text)["schedule"][0]["first"].removesuffix("s"))
    for v, colour in [("stock", "tab:red"), ("rej1", "tab:blue")]:
        c = one.cbr[(one.cbr["variant"] == v) & one.cbr["sent_s"].between(first - 0.2, first + 0.8)]
        right.plot((c["sent_s"] - first) * 1e3, c["delay_ms"], ".", ms=2, color=colour, label=v)
    right.axvline(0, color="grey", lw=1, ls=":", label="wlan address lost")
    right.set_xlabel("Message generated, relative to the loss (ms)")
    right.set_ylabel("One-way delay (ms)")
    right.set_title("CBR messages around the first loss", fontsize=10)
    right.legend(loc="upper left", bbox_to_anchor=(1.01, 1), markerscale=4)
    fig.suptitle("E3 — seed 002 Fig. 3: connection loss, RTT ≪ RTO_min")
    fig.savefig(a.out, dpi=120)
    print(f"figure: {a.out}")


if __name__ == "__main__":
    main()
