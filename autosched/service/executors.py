"""Where job bodies run: worker threads of the API process, or Ray tasks on a cluster.

Both executors have the same calls (`launch`, `poll`, `shutdown`, and `offered_targets`: the
target keys their live workers measure on, which bounds what a job may name), so the job
manager's policy (which job runs when) is one piece of code whatever runs the jobs. `poll` hands back the
`JobOutcome` of every job that ended since the last poll; a job whose runner was lost (a Ray
node died under it) comes back as status "lost", which the manager turns into a retry.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from autosched.service.job_runner import JobOutcome, JobSpec, run_job, safe_error
from autosched.service.targets import host_offers


class Executor(Protocol):
    def launch(self, spec: JobSpec) -> None: ...

    def poll(self) -> list[JobOutcome]: ...

    def shutdown(self, wait_s: float = 10.0) -> None: ...

    def offered_targets(self) -> list[str]: ...


class ThreadExecutor:
    """Jobs in threads of this process; each tunes with a local builder pool and kernel process.

    `shutdown` sets an event every running job's `should_stop` sees, so jobs stop between
    batches and their rows stay "running" for the next start to resume.
    """

    def __init__(self, max_workers: int) -> None:
        self._pool = ThreadPoolExecutor(max(1, max_workers), thread_name_prefix="autosched-job")
        self._stop = threading.Event()
        self._futures: dict[str, Future[JobOutcome]] = {}
        self._lock = threading.Lock()

    def launch(self, spec: JobSpec) -> None:
        with self._lock:
            self._futures[spec.job_id] = self._pool.submit(run_job, spec, self._stop)

    def poll(self) -> list[JobOutcome]:
        done: list[JobOutcome] = []
        with self._lock:
            for job_id, fut in list(self._futures.items()):
                if fut.done():
                    del self._futures[job_id]
                    exc = fut.exception()
                    done.append(fut.result() if exc is None else
                                JobOutcome(job_id, "error", message=safe_error(exc)))
        return done

    def offered_targets(self) -> list[str]:
        """This host's targets: its jobs measure here."""
        return host_offers()

    def shutdown(self, wait_s: float = 10.0) -> None:
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor:
    """Every job is a Ray task (0 CPUs: it mostly waits) on the head node, tuning with a
    `RayRunner` on the whole cluster: builds as CPU tasks anywhere, runs on per-device actors.

    The head is where the API and the GCS live, so losing a worker node costs measurement
    retries (RayRunner's job), not the job. A job task that dies anyway (its worker crashed)
    comes back "lost" and the manager re-queues it; it resumes from its records.
    """

    HEAD = "node:__internal_head__"
    PROBE_TIMEOUT_S = 10.0

    def __init__(self, address: str) -> None:
        import ray

        from autosched.measure.ray_node import keep_loopback

        self.address = address
        if not ray.is_initialized():
            keep_loopback()  # a loopback head listens on loopback only: reach it there
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        self._ray = ray
        self._remote = ray.remote(num_cpus=0, max_retries=0)(run_job)
        self._probe = ray.remote(num_cpus=0, max_retries=0)(host_offers)
        self._refs: dict[str, object] = {}
        self._node_offers: dict[str, list[str]] = {}  # node id -> its target keys (a node's never change)
        self._offers_lock = threading.Lock()

    def offered_targets(self) -> list[str]:
        """Target keys of the live nodes, each node asked once (a 0-CPU task pinned to it running
        `host_offers`); a node that does not answer within PROBE_TIMEOUT_S offers nothing yet, and
        a node that gave Ray no GPU offers no GPU target (its GPU runs no actor of ours)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        with self._offers_lock:
            try:
                nodes = [n for n in self._ray.nodes() if n.get("Alive")]
            except Exception:  # noqa: BLE001  the GCS briefly unreachable: the offers last seen stand
                return sorted({k for keys in self._node_offers.values() for k in keys})
            alive = {n["NodeID"] for n in nodes}
            has_gpu = {n["NodeID"] for n in nodes if n.get("Resources", {}).get("GPU", 0) > 0}
            for nid in [n for n in self._node_offers if n not in alive]:
                del self._node_offers[nid]
            new = sorted(alive - set(self._node_offers))
            refs = {self._probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False))
                    .remote(): nid for nid in new}
            if refs:
                deadline = time.monotonic() + self.PROBE_TIMEOUT_S
                pending = list(refs)
                while pending and time.monotonic() < deadline:
                    ready, pending = self._ray.wait(pending, num_returns=len(pending),
                                                    timeout=max(0.0, deadline - time.monotonic()))
                    for ref in ready:
                        nid = refs[ref]
                        try:
                            keys = list(self._ray.get(ref))
                        except Exception:  # noqa: BLE001  the node died under the probe: it offers nothing
                            continue
                        self._node_offers[nid] = [k for k in keys if nid in has_gpu or k.startswith("cpu|")]
                for ref in pending:
                    try:
                        self._ray.cancel(ref, force=True)
                    except Exception:  # noqa: BLE001  finished or gone meanwhile
                        pass
            return sorted({k for keys in self._node_offers.values() for k in keys})

    def launch(self, spec: JobSpec) -> None:
        opts = {"resources": {self.HEAD: 0.001}} if self._has_head_resource() else {}
        self._refs[spec.job_id] = self._remote.options(name=f"job-{spec.job_id}", **opts).remote(spec)

    def _has_head_resource(self) -> bool:
        try:
            return self._ray.cluster_resources().get(self.HEAD, 0) > 0
        except Exception:  # noqa: BLE001  the GCS briefly unreachable: schedule anywhere
            return False

    def poll(self) -> list[JobOutcome]:
        if not self._refs:
            return []
        ray = self._ray
        by_ref = {ref: job_id for job_id, ref in self._refs.items()}
        ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        out = []
        for ref in ready:
            job_id = by_ref[ref]
            del self._refs[job_id]
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayTaskError as exc:
                out.append(JobOutcome(job_id, "error", message=str(exc)[:2000]))
            except ray.exceptions.RayError as exc:  # worker/node/object lost: the job itself is fine
                out.append(JobOutcome(job_id, "lost", message=f"{type(exc).__name__}: {str(exc)[:500]}"))
        return out

    def shutdown(self, wait_s: float = 10.0) -> None:
        for ref in self._refs.values():
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001  already finished or gone with its node
                pass
        self._refs.clear()
        if self._ray.is_initialized():
            self._ray.shutdown()
