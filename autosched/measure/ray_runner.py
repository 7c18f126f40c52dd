"""`RayRunner`: builds as CPU tasks anywhere in a Ray cluster, runs on actors that own a device.

Embedded by default (`ray.init()` on this machine, no dashboard, a small object store, every
listener on loopback) or connected to a cluster by address (a loopback address stays loopback,
see `ray_node.py`). Builds are plain tasks (the MeasureInput travels as JSON)
and return the artifact's bytes (a C library, or a cuda/triton artifact folder as a tar), so
the run can happen on any node. cuda/triton candidates are built by the GPU builder, preferably
on nodes that have GPUs (that is where CuPy's NVRTC and Triton are installed; soft affinity, so
a cluster without GPU nodes still builds them), with `gpu_build_timeout` (a first Triton compile
takes seconds), and run on GPU actors with `gpu_config` (one call per repeat, cold L2). Each node gets one CPU
actor pinned to it (NodeAffinitySchedulingStrategy) and each GPU one actor (`num_gpus=1`),
so a device is never timed by two runs at once. A CPU actor reserves `actor_num_cpus` (0 by
default: the actor, not a CPU count, is what makes the device exclusive, and a whole-node
reservation would leave no CPU for build tasks on a small cluster).

A node that dies mid-batch costs retries, not results: calls that fail with an actor/worker/
node/object-loss error are re-queued (at most `max_retries` times each) onto actors re-created
on live nodes; past that, WORKER_CRASHED. Kernel crashes never reach Ray: the actor's kernel
process absorbs them (see `sandbox.py`).
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.exceptions import (
    GetTimeoutError,
    NodeDiedError,
    ObjectLostError,
    RayActorError,
    RayError,
    WorkerCrashedError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from autosched.codegen.source import KernelSource
from autosched.compile.types import BuildResult, ErrorCode, MeasureInput
from autosched.measure.config import RunnerConfig
from autosched.measure.local_runner import failed_build_result, reference_error_result
from autosched.measure.ray_actors import DeviceActor, build_task, input_kind, input_to_json, pack_artifact
from autosched.measure.ray_node import keep_loopback
from autosched.measure.reference import DagReferenceProvider, ReferenceCache, ReferenceProvider
from autosched.measure.types import MeasureResult

LOST = (RayActorError, WorkerCrashedError, NodeDiedError, ObjectLostError, GetTimeoutError)
# A node that lost an actor gets no new one for this long (unless no other node is left): Ray
# may still list a killed node as alive until its health checks fail.
SUSPECT_S = 60.0


@dataclass
class _Slot:
    kind: str  # "cpu" or "gpu"
    node_id: str
    handle: object
    inflight: int = 0


class RayRunner:
    """Builder and runner on a Ray cluster; use it for both roles of `measure_batch`."""

    def __init__(
        self,
        address: str | None = None,
        config: RunnerConfig | None = None,
        *,
        reference: ReferenceProvider | None = None,
        num_build_tasks: int | None = None,
        build_timeout: float = 30.0,
        cache_dir: str | Path | None = None,
        max_retries: int = 2,
        actor_num_cpus: float = 0.0,
        per_actor_inflight: int = 2,
        call_timeout: float | None = None,
        object_store_memory: int = 200_000_000,
        num_cpus: int | None = None,
        init_kwargs: dict | None = None,
        gpu_config: RunnerConfig | None = None,
        gpu_build_timeout: float = 120.0,
    ) -> None:
        from autosched.measure.gpu_runner import GPU_RUNNER_CONFIG

        self.config = config or RunnerConfig()
        self.gpu_config = gpu_config or GPU_RUNNER_CONFIG
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            kw = dict(init_kwargs or {})
            if address is None:  # embedded: a node of this machine alone, listening on loopback only
                kw.setdefault("include_dashboard", False)
                kw.setdefault("object_store_memory", object_store_memory)
                kw.setdefault("num_cpus", num_cpus)
                kw.setdefault("_node_ip_address", "127.0.0.1")
            keep_loopback()
            ray.init(address=address, **kw)
        provider = reference if reference is not None else DagReferenceProvider(self.config.seed)
        self.references = ReferenceCache(provider, self.config.seed)
        self.num_build_tasks = num_build_tasks
        self.build_timeout = build_timeout
        self.gpu_build_timeout = gpu_build_timeout
        self.cache_dir = str(cache_dir) if cache_dir is not None else None
        self.max_retries = max_retries
        self.actor_num_cpus = actor_num_cpus
        self.per_actor_inflight = max(1, per_actor_inflight)
        self.call_timeout = call_timeout or (max(self.config.timeout, self.gpu_config.timeout) + 90.0)
        self._build_remote = ray.remote(num_cpus=1, max_retries=2)(build_task)
        self._actor_cls = ray.remote(max_restarts=0, max_concurrency=1)(DeviceActor)
        self._slots: dict[str, _Slot] = {}
        self._suspect: dict[str, float] = {}  # node id -> monotonic time until which it is avoided
        self._artifacts: OrderedDict[str, bytes] = OrderedDict()
        self._ref_objects: OrderedDict[str, object] = OrderedDict()
        self.build_nodes: list[str] = []  # node id of each build of the last batch (for inspection)
        self.last_retries = 0  # calls re-queued after a lost actor/node in the last run

    # ---------------------------------------------------------------- build
    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        return self._build([input_to_json(inp) for inp in inputs], [input_kind(inp) for inp in inputs])

    def build_sources(self, sources: Sequence[KernelSource]) -> list[BuildResult]:
        return self._build(list(sources), ["cpu" if s.language == "c" else "gpu" for s in sources])

    def _gpu_build_options(self) -> list[dict]:
        """Task options that place GPU builds on GPU nodes, round-robin (soft: anywhere if none)."""
        nodes = [n["NodeID"] for n in self._alive_nodes() if n.get("Resources", {}).get("GPU", 0) > 0]
        return [{"scheduling_strategy": NodeAffinitySchedulingStrategy(nid, soft=True)} for nid in nodes] or [{}]

    def _build(self, payloads: list[str | KernelSource], kinds: list[str]) -> list[BuildResult]:
        limit = self.num_build_tasks or max(1, int(ray.cluster_resources().get("CPU", 1)))
        gpu_opts = self._gpu_build_options() if "gpu" in kinds else [{}]
        timeouts = {"cpu": self.build_timeout, "gpu": self.gpu_build_timeout}
        backstop = 2 * max(timeouts[k] for k in kinds) + 30.0 if kinds else 0.0
        results: list[BuildResult | None] = [None] * len(payloads)
        nodes = [""] * len(payloads)
        queue = deque(range(len(payloads)))
        inflight: dict[object, tuple[int, float]] = {}
        while queue or inflight:
            while queue and len(inflight) < limit:
                i = queue.popleft()
                remote = self._build_remote
                if kinds[i] == "gpu":
                    remote = remote.options(**gpu_opts[i % len(gpu_opts)])
                ref = remote.remote(payloads[i], self.cache_dir, timeouts[kinds[i]])
                inflight[ref] = (i, time.monotonic())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                i, t0 = inflight.pop(ref)
                results[i], nodes[i] = self._collect_build(ref, time.monotonic() - t0)
            now = time.monotonic()
            for ref, (i, t0) in list(inflight.items()):
                if now - t0 > backstop:
                    ray.cancel(ref, force=True)
                    del inflight[ref]
                    results[i] = BuildResult(None, "", (), "", ErrorCode.BUILD_TIMEOUT,
                                             f"build task unresponsive past the {backstop:.0f} s backstop", now - t0)
        self.build_nodes = nodes
        return [r for r in results if r is not None]

    def _collect_build(self, ref: object, waited: float) -> tuple[BuildResult, str]:
        try:
            res, data, node = ray.get(ref)
        except LOST as exc:
            return BuildResult(None, "", (), "", ErrorCode.WORKER_CRASHED,
                               f"build task lost: {type(exc).__name__}: {_short(exc)}", waited), ""
        except RayError as exc:
            return BuildResult(None, "", (), "", ErrorCode.COMPILE_ERROR,
                               f"build task failed: {type(exc).__name__}: {_short(exc)}", waited), ""
        if data is not None:
            self._artifacts[res.source_hash] = data
            self._artifacts.move_to_end(res.source_hash)
            while len(self._artifacts) > 4096:
                self._artifacts.popitem(last=False)
        return res, node

    # ---------------------------------------------------------------- devices
    def _alive_nodes(self) -> list[dict]:
        return [n for n in ray.nodes() if n.get("Alive")]

    def _ensure_actors(self, kind: str) -> list[str]:
        """One actor per live node (cpu) or per GPU (gpu); suspect nodes only as a last resort.

        Actors of nodes that are no longer alive are dropped, and nodes that joined since the
        last call get theirs, so a cluster that grows or shrinks between batches is followed."""
        nodes = self._alive_nodes()
        alive = {n["NodeID"] for n in nodes}
        now = time.monotonic()
        avoid = {nid for nid, until in self._suspect.items() if until > now}
        for key in [k for k, s in self._slots.items() if s.kind == kind and s.node_id not in alive]:
            self._drop_actor(key)
        preferred = [n for n in nodes if n["NodeID"] not in avoid] or nodes
        for node in preferred:
            nid = node["NodeID"]
            count = 1 if kind == "cpu" else int(node.get("Resources", {}).get("GPU", 0))
            for g in range(count):
                key = f"{kind}:{nid}:{g}"
                if key in self._slots:
                    continue
                opts = {"scheduling_strategy": NodeAffinitySchedulingStrategy(nid, soft=False)}
                if kind == "gpu":
                    opts.update(num_cpus=0, num_gpus=1)
                else:
                    opts.update(num_cpus=self.actor_num_cpus)
                timeout = self.gpu_build_timeout if kind == "gpu" else self.build_timeout
                handle = self._actor_cls.options(**opts).remote(kind, self.cache_dir, timeout)
                self._slots[key] = _Slot(kind, nid, handle)
        return [k for k, s in self._slots.items() if s.kind == kind]

    def _drop_actor(self, key: str) -> None:
        slot = self._slots.pop(key, None)
        if slot is not None:
            try:
                ray.kill(slot.handle, no_restart=True)
            except Exception:  # already gone with its node
                pass

    def devices(self, kinds: Sequence[str] = ("cpu",)) -> list[dict]:
        """Start the device actors of `kinds` on every live node and describe them."""
        keys = [k for kind in kinds for k in self._ensure_actors(kind)]
        return ray.get([self._slots[k].handle.info.remote() for k in keys], timeout=self.call_timeout)

    # ---------------------------------------------------------------- run
    def _reference_box(self, inp: MeasureInput, build: BuildResult,
                       config: RunnerConfig) -> tuple[str | None, list | None]:
        if not config.enable_check:
            return None, None
        key, ref = self.references.get(inp, build.args)
        if key not in self._ref_objects:
            self._ref_objects[key] = ray.put(ref)
            while len(self._ref_objects) > 16:
                self._ref_objects.popitem(last=False)
        return key, [self._ref_objects[key]]

    def _library(self, build: BuildResult) -> bytes | None:
        data = self._artifacts.get(build.source_hash)
        if data is None and build.artifact_path and Path(build.artifact_path).exists():
            data = pack_artifact(build.artifact_path)
        return data

    def run(
        self,
        inputs: Sequence[MeasureInput],
        builds: Sequence[BuildResult],
        on_result: Callable[[int, MeasureResult], None] | None = None,
    ) -> list[MeasureResult]:
        """Measure every build; `on_result(index, result)` is called as results arrive."""
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} builds")
        results: list[MeasureResult | None] = [None] * len(inputs)
        jobs: dict[int, tuple] = {}
        queues: dict[str, deque[int]] = {"cpu": deque(), "gpu": deque()}

        def finish(i: int, res: MeasureResult) -> None:
            results[i] = res
            if on_result is not None:
                on_result(i, res)

        for i, (inp, build) in enumerate(zip(inputs, builds)):
            if build.error_code != ErrorCode.NO_ERROR:
                finish(i, failed_build_result(build))
                continue
            kind = _device_kind(build)
            config = self.gpu_config if kind == "gpu" else self.config
            try:
                key, box = self._reference_box(inp, build, config)
            except Exception as exc:
                finish(i, reference_error_result(build, exc))
                continue
            jobs[i] = (input_to_json(inp), build, self._library(build), config, key, box)
            queues[kind].append(i)
        for kind, queue in queues.items():
            if queue:
                self._ensure_actors(kind)
        self._dispatch(jobs, queues, builds, finish)
        return [r for r in results if r is not None]

    def _dispatch(self, jobs: dict[int, tuple], queues: dict[str, deque[int]],
                  builds: Sequence[BuildResult], finish: Callable[[int, MeasureResult], None]) -> None:
        attempts: Counter[int] = Counter()
        self.last_retries = 0
        lost_any = False
        inflight: dict[object, tuple[int, str, float]] = {}

        def lost(i: int, key: str, why: str) -> None:
            nonlocal lost_any
            lost_any = True
            slot = self._slots.get(key)
            if slot is not None:
                self._suspect[slot.node_id] = time.monotonic() + SUSPECT_S
            self._drop_actor(key)
            attempts[i] += 1
            if attempts[i] > self.max_retries:
                finish(i, MeasureResult((), ErrorCode.WORKER_CRASHED,
                                        f"device worker lost {attempts[i]} times ({why}); giving up",
                                        builds[i].build_seconds, 0.0, "", "", "", time.time()))
            else:
                self.last_retries += 1
                queues[_device_kind(builds[i])].appendleft(i)

        while any(queues.values()) or inflight:
            for kind, queue in queues.items():
                if not queue:
                    continue
                keys = [k for k, s in self._slots.items() if s.kind == kind] or self._ensure_actors(kind)
                if not keys:  # lost them all during this batch (crash), or the cluster has none
                    code = ErrorCode.WORKER_CRASHED if lost_any else ErrorCode.RUNTIME_ERROR
                    while queue:
                        i = queue.popleft()
                        finish(i, MeasureResult((), code, f"no live {kind} device in the cluster",
                                                builds[i].build_seconds, 0.0, "", "", "", time.time()))
                    continue
                for key in keys:
                    slot = self._slots[key]
                    while queue and slot.inflight < self.per_actor_inflight:
                        i = queue.popleft()
                        ref = slot.handle.measure.remote(*jobs[i])
                        slot.inflight += 1
                        inflight[ref] = (i, key, time.monotonic())
            if not inflight:
                continue
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.5)
            for ref in ready:
                i, key, _t0 = inflight.pop(ref)
                if key in self._slots:
                    self._slots[key].inflight -= 1
                try:
                    finish(i, ray.get(ref))
                except LOST as exc:
                    lost(i, key, f"{type(exc).__name__}: {_short(exc)}")
                except RayError as exc:  # a bug in the actor: report it, do not retry
                    finish(i, MeasureResult((), ErrorCode.RUNTIME_ERROR, f"device actor failed: {_short(exc)}",
                                            builds[i].build_seconds, 0.0, "", "", "", time.time()))
            now = time.monotonic()
            for ref, (i, key, t0) in list(inflight.items()):
                if key not in self._slots:  # its actor was dropped: that call is lost too
                    del inflight[ref]
                    lost(i, key, "actor dropped after a failure")
                elif now - t0 > self.call_timeout:
                    del inflight[ref]
                    lost(i, key, f"no answer within {self.call_timeout:.0f} s")

    # ---------------------------------------------------------------- lifetime
    def shutdown(self) -> None:
        """Kill the device actors; stop Ray if this runner started (or connected) it."""
        for key in list(self._slots):
            self._drop_actor(key)
        self._ref_objects.clear()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _device_kind(build: BuildResult) -> str:
    """C kernels run on a node's CPU; everything else needs a GPU actor."""
    return "cpu" if build.language == "c" else "gpu"
