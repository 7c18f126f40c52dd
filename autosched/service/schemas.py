"""Pydantic models at the HTTP edge: what a request may say and what a response says.

Static bounds live here (they document themselves in /openapi.json); bounds that depend on the
deployment (the trial cap, tensor sizes, DAG size) are checked against `ServiceSettings` in
`service.workloads`, so one schema serves every deployment. A workload is a registered op name
with JSON arguments or a DAG in its JSON form: never code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Scalar = int | float | str | bool | None
ArgValue = Scalar | Annotated[list[Scalar], Field(max_length=16)]  # a shape or an axis list: short
Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
SEARCHERS = Literal["random", "grid", "annealing", "genetic", "rl"]
TargetSpec = Annotated[str, Field(min_length=1, max_length=128, examples=["cpu"],
                                  description="'cpu', 'cuda', 'triton', or the exact key 'kind|device|cores' of a "
                                              "target a live worker offers")]


MAX_REFUSED_SHOWN = 1000
"""Refused import lines listed in a response (all are counted)."""


def gflops(flops: float, seconds: float) -> float:
    """GFLOP/s to 4 significant digits (a tiny workload still shows a non-zero rate)."""
    return float(f"{flops / seconds / 1e9:.4g}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OpWorkload(_Strict):
    """A registered op of the library (`GET /v1/workloads` lists them under `ops`) with its arguments."""

    op: Name = Field(examples=["matmul"])
    args: list[ArgValue] = Field(default_factory=list, max_length=32, examples=[[32, 32, 32]])
    kwargs: dict[Name, ArgValue] = Field(default_factory=dict, max_length=32)


class DagWorkload(_Strict):
    """A user's tensor expression as `ComputeDAG.to_dict()` JSON; `args_order` lists the build
    arguments (inputs, then outputs) by tensor name."""

    dag: dict[str, Any] = Field(description="{'format': 'autosched-dag', 'version': 1, 'ops': [...], 'outputs': [...]}")
    args_order: list[Name] = Field(min_length=1, max_length=64)
    name: Name = "custom"


class JobCreate(_Strict):
    workload: OpWorkload | DagWorkload
    target: TargetSpec = "cpu"
    trials: int = Field(64, ge=1, le=1_000_000)
    searcher: SEARCHERS = "genetic"
    cost_model: Literal["xgb", "random", "none"] = "xgb"
    batch_size: int = Field(16, ge=1, le=4096)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    early_stopping: int | None = Field(None, ge=1, le=1_000_000)
    verify: int = Field(4, ge=0, le=64, description="best schedules re-measured at the end; the best median wins")
    transfer: bool = Field(True, description="with the xgb model, start from the best stored schedules of the "
                                             "same operator at other shapes")
    priority: int = Field(0, ge=-100, le=100,
                          description="higher runs first; equal priorities share workers round robin")


class JobOut(BaseModel):
    id: str
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    workload_key: str
    workload_name: str
    target: str
    trials: int
    trials_done: int
    records: int | None = Field(None, description="measurements this job has stored (with `GET /v1/jobs/{id}`)")
    best_median_ms: float | None
    best_gflops: float | None
    searcher: str
    cost_model: str
    priority: int
    owner: str
    cancelled_by: str = Field("", description="who cancelled the job (owner or admin name), if it was cancelled")
    mode: Literal["tune", "verify"] = Field("tune", description="tune: search; verify: re-measure stored "
                                                                 "candidates (POST /v1/schedules/{key}/verify)")
    error: str
    created: datetime
    updated: datetime


class JobList(BaseModel):
    jobs: list[JobOut]


class CurveOut(BaseModel):
    job_id: str
    workload_name: str
    points: list[tuple[int, float]] = Field(description="(measurements so far, best GFLOP/s so far)")


class SourceOut(BaseModel):
    language: str
    entry: str
    code: str


class ScheduleOut(BaseModel):
    workload_key: str
    workload_name: str
    target: str
    record_id: int
    median_ms: float
    gflops: float
    steps: Any
    primitives: str | None = Field(None, description="the schedule as TVM-style primitive calls")
    source: SourceOut | None = None
    host: str
    device: str
    created: datetime
    verified: bool = Field(description="measured valid at least 3 times on this service's workers; an unverified "
                                       "schedule (e.g. imported) is served only while no verified one exists")
    n_valid: int = Field(description="valid local measurements of this schedule")
    n_imported: int = Field(description="measurements of this schedule imported from elsewhere")
    origin: str = Field(description="'' when the served record was measured here, else where it came from "
                                    "('import...')")


class StandingOut(BaseModel):
    """Where one candidate schedule stands, and why it is or is not served."""

    steps_hash: str
    record_id: int | None
    median_ms: float | None
    gflops: float | None
    n_valid: int
    n_imported: int
    n_disqualifying: int = Field(description="measurements that failed in a way that disqualifies it "
                                             "(runtime error, wrong answer, worker crash)")
    verified: bool
    disqualified: bool
    origin: str
    reason: str = Field(description="why the schedule stands where it does (e.g. why it is not served)")


class StandingList(BaseModel):
    workload_key: str
    target: str
    served_steps_hash: str | None = Field(description="the candidate `GET /v1/schedules/{key}` serves, if any")
    standings: list[StandingOut]


class BestOut(BaseModel):
    target: str
    median_ms: float
    gflops: float
    record_id: int


class WorkloadOut(BaseModel):
    key: str
    name: str
    kind: str
    args: list[Any]
    kwargs: dict[str, Any]
    flops: float
    best: list[BestOut]


class WorkloadList(BaseModel):
    workloads: list[WorkloadOut]
    ops: list[str] = Field(description="registered op names that `POST /v1/jobs` accepts")


class RefusedOut(BaseModel):
    line: int = Field(description="1-based line number in the uploaded file")
    reason: str


class ImportOut(BaseModel):
    imported: int
    duplicates: int
    n_refused: int
    refused: list[RefusedOut] = Field(description=f"refused lines with their reasons (the first {MAX_REFUSED_SHOWN} "
                                                  "when there are more; `n_refused` counts all)")


class Problem(BaseModel):
    detail: Any
