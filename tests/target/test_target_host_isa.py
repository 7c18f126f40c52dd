"""The host's vector ISA (`autosched.target.host_isa`): the vector width `-march=native` enables
(64 bytes with AVX-512, 32 with AVX2, 16 otherwise; AUTOSCHED_VECTOR_BYTES pins it), and the arch
tag of the target key, which names the vector extensions that differ from the named CPU's."""

from __future__ import annotations

import platform
import re

import pytest

from autosched.target import host_isa
from autosched.target.host_isa import VECTOR_BYTES_ENV


@pytest.mark.parametrize("value", ["48", "wide", "-32", "0"])
def test_a_bad_pinned_width_is_named(monkeypatch, value: str) -> None:
    monkeypatch.setenv(VECTOR_BYTES_ENV, value)
    with pytest.raises(ValueError, match=f"{VECTOR_BYTES_ENV}='{value}'.*16, 32, 64"):
        host_isa.vector_bytes()


def test_the_host_width_is_what_march_native_enables(monkeypatch) -> None:
    monkeypatch.delenv(VECTOR_BYTES_ENV, raising=False)
    macros = host_isa.native_macros()
    assert macros, "the C compiler could not be asked for its predefined macros"
    got = host_isa.vector_bytes()
    assert got == (64 if "__AVX512F__" in macros else 32 if "__AVX__" in macros else 16)
    if platform.machine() == "x86_64":
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
        assert ("avx512f" in flags) == (got == 64)
        assert host_isa.native_arch() != "unknown"


def _fake_compiler(monkeypatch, name: str, macros: dict[str, set[str]]) -> None:
    """`-march=native` resolves to `name`; `macros[march]` is what `-march=<march>` predefines."""
    monkeypatch.setattr(host_isa, "native_march_name", lambda compiler="cc": name)
    monkeypatch.setattr(host_isa, "predefined_macros", lambda compiler="cc", march="native": frozenset(macros[march]))


def test_an_extension_beyond_the_named_cpu_is_in_the_arch_tag(monkeypatch) -> None:
    """gcc 12.2 on a Zen 4 names it znver3 and enables AVX-512: the key must not be a Zen 3's."""
    avx2 = {"__AVX__", "__AVX2__", "__FMA__"}
    _fake_compiler(monkeypatch, "znver3", {"native": avx2 | {"__AVX512F__"}, "znver3": avx2})
    assert host_isa.native_arch() == "znver3+avx512f"
    _fake_compiler(monkeypatch, "znver3", {"native": avx2, "znver3": avx2})
    assert host_isa.native_arch() == "znver3"


def test_an_extension_the_host_masks_is_in_the_arch_tag(monkeypatch) -> None:
    avx2 = {"__AVX__", "__AVX2__", "__FMA__"}
    _fake_compiler(monkeypatch, "icelake-server", {"native": avx2, "icelake-server": avx2 | {"__AVX512F__"}})
    assert host_isa.native_arch() == "icelake-server-avx512f"


def test_an_unanswered_compiler_leaves_the_name_alone(monkeypatch) -> None:
    _fake_compiler(monkeypatch, "znver3", {"native": set(), "znver3": set()})
    assert host_isa.native_arch() == "znver3"
    _fake_compiler(monkeypatch, "unknown", {"native": {"__AVX__"}})
    assert host_isa.native_arch() == "unknown"


def test_the_host_target_key_names_the_vector_extensions_that_differ() -> None:
    """On this machine, whatever it is: the tag is the CPU name plus exactly the differing extensions."""
    from autosched.target.key import Target

    name = host_isa.native_march_name()
    if name == "unknown":
        pytest.skip("the C compiler does not say what -march=native selects here")
    native, named = host_isa.native_macros(), host_isa.predefined_macros("cc", name)
    tag = host_isa.native_arch()
    assert tag.startswith(name)
    parts = set(re.findall(r"([+-])([a-z0-9]+)", tag[len(name):]))
    for macro, feature in host_isa.VECTOR_FEATURES:
        assert (("+", feature) in parts) == (macro in native and macro not in named)
        assert (("-", feature) in parts) == (macro in named and macro not in native)
    assert f"({tag})" in Target.host("cpu").key
