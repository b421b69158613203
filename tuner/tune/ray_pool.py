"""Trials on Ray: one `TrialWorker` per Ray actor, each with its own engine session, model
copy and device, all reporting through this process into one Optuna study.

`address = "local"` starts a Ray instance on this machine (stopped again at the end);
otherwise `address` is a running cluster's (`ray start --head` prints it), and every node
needs tuner installed. Each worker measures its own baseline, so trials are paired only
with a baseline of the same worker, on the same machine. With CUDA each worker asks Ray
for one GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray

from tuner.tune.worker import TrialWorker


def _gpus(device: str) -> int:
    """GPUs a worker asks for: one when the trials run on CUDA."""
    if device == "cuda":
        return 1
    if device == "auto":
        return int(ray.cluster_resources().get("GPU", 0) >= 1)
    return 0


def _local_env() -> dict[str, Any]:
    """Workers of a local instance import this tuner, and find this machine's models."""
    import os

    env = {"PYTHONPATH": os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH"))
        if p)}
    if os.environ.get("TUNER_HOME"):
        env["TUNER_HOME"] = os.environ["TUNER_HOME"]
    return {"env_vars": env}


class RayPool:
    def __init__(self, address: str, workers: int, spec):
        self.started = not ray.is_initialized()
        if self.started:
            if address == "local":
                if not spec.base.get("model"):  # made once here, not by two workers at once
                    from tuner.engine.weights import synth

                    synth.ensure()
                ray.init(runtime_env=_local_env(), include_dashboard=False,
                         log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        actor = ray.remote(num_cpus=1, num_gpus=_gpus(spec.base.get("device", "auto")))(
            TrialWorker)
        self.actors = [actor.remote(spec.measured_base, spec.span, spec.sentinel_every)
                       for _ in range(workers)]
        self.size = workers
        self._pending: dict[ray.ObjectRef, tuple[int, int]] = {}  # -> (worker, trial)

    def submit(self, worker: int, number: int, params: dict[str, Any]) -> None:
        self._pending[self.actors[worker].trial.remote(number, params)] = (worker, number)

    def next_done(self) -> tuple[int, list[dict[str, Any]]]:
        (ref,), _ = ray.wait(list(self._pending), num_returns=1)
        worker, number = self._pending.pop(ref)
        try:
            return worker, ray.get(ref)
        except ray.exceptions.RayError as err:  # the trial fails; the study carries on
            return worker, [{"number": number, "worker": f"ray worker {worker}",
                             "baseline": None,
                             "refused": f"the worker failed: {type(err).__name__}: {err}"}]

    def finish(self, closing: bool) -> list[dict[str, Any]]:
        """Closing, every worker's sentinel; stopped, nothing: a worker may still be in
        the middle of a trial, and its waiting trials are failed rather than waited for."""
        if not closing:
            return []
        out = []
        for ref in [a.settle.remote() for a in self.actors]:
            try:
                out += ray.get(ref)
            except ray.exceptions.RayError:  # a failed worker: its trials are failed
                pass
        return out

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor)
        if self.started:
            ray.shutdown()
