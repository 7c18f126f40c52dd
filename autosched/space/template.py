"""Expert templates with explicit knobs (AutoTVM style).

A template is a function `fn(cfg, s, tensors)` that schedules `s` using knob values read from
`cfg`. It is run once to collect the knobs (each `define_*` call declares one; reading a value
returns its first choice), then once per config to build that config's schedule:

    def matmul_tmpl(cfg, s, tensors):
        A, B, C = tensors
        i, j = s[C].op.axis
        cfg.define_split("tile_i", i.extent, max_factor=64)
        cfg.define_knob("vec", [True, False])
        io, ii = s[C].split(i, factor=cfg["tile_i"])
        ...

    asc.tune(workload, "cpu", 64, template=matmul_tmpl)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError
from autosched.space.knobs import ConfigSpace, Knob
from autosched.te.dag import ComputeDAG

TemplateFn = Callable[[Any, Schedule, list], None]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class _Config:
    """What a template sees as `cfg`: declares knobs, then hands out their values."""

    def __init__(self, values: dict[str, Any] | None) -> None:
        self.knobs: list[Knob] = []
        self._values = values

    def _declare(self, knob: Knob) -> None:
        if self._values is None:
            if any(k.name == knob.name for k in self.knobs):
                raise ScheduleError(f"template declares knob {knob.name!r} twice")
            self.knobs.append(knob)

    def define_knob(self, name: str, choices: Sequence[Any]) -> None:
        """A knob with explicit choices (ints, strs, bools)."""
        self._declare(Knob(name, tuple(choices), "template"))

    def define_split(self, name: str, extent: int, max_factor: int | None = None,
                     policy: str = "factors") -> None:
        """A split factor for a loop of `extent`: its divisors (`policy="factors"`) or powers of two."""
        if not isinstance(extent, int) or extent <= 0:
            raise ScheduleError(f"define_split {name!r}: extent must be a positive int, got {extent!r}")
        if policy == "factors":
            choices = _divisors(extent)
        elif policy == "power2":
            choices = [1 << k for k in range(extent.bit_length()) if (1 << k) <= extent]
        else:
            raise ScheduleError(f"define_split {name!r}: unknown policy {policy!r} (factors, power2)")
        if max_factor is not None:
            choices = [c for c in choices if c <= max_factor] or [1]
        self._declare(Knob(name, tuple(choices), "tile"))

    def __getitem__(self, name: str) -> Any:
        if self._values is None:
            for k in self.knobs:
                if k.name == name:
                    return k.choices[0]
            raise ScheduleError(f"template reads knob {name!r} before defining it")
        if name not in self._values:
            raise ScheduleError(f"template reads unknown knob {name!r}")
        return self._values[name]


class TemplateSpace:
    """The same interface as `SketchSpace` (`space`, `apply`), for a hand-written template."""

    def __init__(self, dag: ComputeDAG, fn: TemplateFn, tensor_names: Sequence[str]) -> None:
        self.dag, self.fn, self.names = dag, fn, list(tensor_names)
        cfg = _Config(None)
        fn(cfg, Schedule(dag), [dag[n] for n in self.names])
        if not cfg.knobs:
            raise ScheduleError("the template defines no knobs (cfg.define_knob / cfg.define_split)")
        self.space = ConfigSpace(tuple(cfg.knobs))
        self.seeds: tuple[dict[str, Any], ...] = ()
        """Knob values (one dict per config) that tuners measure first; set by the space's rules."""

    def apply(self, config) -> Schedule:
        cfg = _Config(self.space.values(config))
        s = Schedule(self.dag)
        self.fn(cfg, s, [self.dag[n] for n in self.names])
        return s
