"""Runs a plan's tasks on a Ray cluster: one Ray task per (variant, seed, parameter point).

The scenario travels once (``ray.put``); each worker loads it into a plan once per process
and runs the tasks it is given. A task's result depends only on (scenario, overrides,
variant, repetition), never on the worker, so a sweep gives the same rows wherever it runs.
"""

from __future__ import annotations

import functools
import logging
import socket
import time
from typing import Any, Callable

from . import _native
from ._api import _where
from ._native import BraidError


@functools.lru_cache(maxsize=8)
def _plan(spec: tuple) -> Any:
    text, file, base_dir, overrides = spec
    return _native.Plan(text, file, base_dir, list(overrides))


def _task(spec: tuple, variant: int, rep: int, series: bool) -> dict:
    res = _plan(spec).run(variant, rep, series)
    res["host"], res["pid"] = _where()
    return res


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        ray = None
    # A folder named `ray` in the working directory imports as an empty namespace package.
    if ray is None or not hasattr(ray, "init"):
        raise BraidError("ray=... needs Ray: pip install 'braid[ray]' (or pip install ray)")
    return ray


def _host_port(address: str) -> tuple[str, int]:
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise BraidError(f"Ray address `{address}`: expected HOST:PORT, ray://HOST:PORT or auto")
    return host.strip("[]"), int(port)


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


def connect(address: Any) -> Any:
    """The ``ray`` module, connected: to the running instance for True (else a local one it
    starts), to ``address`` otherwise. An address that cannot be reached is one BraidError,
    and Ray is left as it was."""
    ray = _import_ray()
    if ray.is_initialized():
        if address is True or address == "auto":
            return ray
        current = ray.get_runtime_context().gcs_address
        if _host_port(address) != _host_port(current):
            raise BraidError(
                f"Ray is already connected to {current}, not {address}: ray.shutdown() first, or pass ray=True"
            )
        return ray
    if address is True:
        kwargs: dict = {"include_dashboard": False}
    elif isinstance(address, str):
        if address != "auto":
            host, port = _host_port(address)
            try:
                socket.create_connection((host, port), timeout=5).close()
            except OSError as e:
                raise BraidError(f"cannot reach a Ray cluster at {address}: {e.strerror or e}") from None
        kwargs = {"address": address}
    else:
        raise BraidError(f"ray={address!r}: expected True, 'auto', 'HOST:PORT' or 'ray://HOST:PORT'")
    try:
        ray.init(logging_level=logging.WARNING, **kwargs)
    except Exception as e:
        if ray.is_initialized():
            ray.shutdown()
        where = address if isinstance(address, str) else "a local Ray instance"
        raise BraidError(f"cannot connect to {where}: {_first_line(e)}") from None
    return ray


def run_tasks(ray: Any, spec: tuple, tasks: list, series: bool, report: Callable) -> list:
    """Every task on the cluster ``ray`` (from ``connect``); the results as they finished."""
    remote = ray.remote(num_cpus=1)(_task)
    spec_ref = ray.put(spec)
    pending = [remote.remote(spec_ref, v, r, series) for v, r in tasks]
    out = []
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
            for res in ray.get(done):
                out.append(res)
                report(res)
    except BaseException as e:
        for ref in pending:
            ray.cancel(ref, force=True)
        if isinstance(e, ray.exceptions.RayError):
            raise BraidError(f"a Ray task failed: {_first_line(e)}") from e
        raise
    return out


def wait_for_cluster(address: str, timeout_s: float = 60.0) -> None:
    """Waits until something listens at ``address`` (for scripts that start a head node)."""
    host, port = _host_port(address)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise BraidError(f"no Ray cluster at {address} after {timeout_s:.0f} s") from None
            time.sleep(0.2)
