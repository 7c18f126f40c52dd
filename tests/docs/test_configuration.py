"""docs/configuration.md lists every AUTOSCHED_* variable and every CLI option, and nothing else."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

from autosched.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
VAR = re.compile(r"AUTOSCHED_[A-Z][A-Z0-9_]*")


def _prefix_helpers(tree: ast.Module) -> set[str]:
    """Functions of a module whose body reads `ENV_PREFIX + <parameter>` (e.g. `_int(env, "MAX_TRIALS", ...)`)."""
    out = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            params = {a.arg for a in fn.args.args}
            for n in ast.walk(fn):
                if (isinstance(n, ast.BinOp) and isinstance(n.left, ast.Name) and n.left.id == "ENV_PREFIX"
                        and isinstance(n.right, ast.Name) and n.right.id in params):
                    out.add(fn.name)
    return out


def variables_in_code() -> set[str]:
    found: set[str] = set()
    for path in [*(ROOT / "autosched").rglob("*.py"), *(ROOT / "tuning_db").rglob("*.py")]:
        text = path.read_text()
        found |= {v for v in VAR.findall(text) if not v.endswith("_")}
        if "ENV_PREFIX" not in text:
            continue
        tree = ast.parse(text)
        helpers = _prefix_helpers(tree)
        for n in ast.walk(tree):
            # ENV_PREFIX + "NAME"
            if (isinstance(n, ast.BinOp) and isinstance(n.left, ast.Name) and n.left.id == "ENV_PREFIX"
                    and isinstance(n.right, ast.Constant) and isinstance(n.right.value, str)):
                found.add("AUTOSCHED_" + n.right.value)
            # helper(env, "NAME", ...) where the helper adds ENV_PREFIX
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in helpers:
                found |= {"AUTOSCHED_" + a.value for a in n.args
                          if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.isupper()}
    return found


def variables_on_page() -> set[str]:
    section = PAGE.read_text().split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(AUTOSCHED_[A-Z0-9_]+)`", section, re.M))


def options_in_parser() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        out[name] = set()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, sp in a.choices.items():
                    walk(sp, f"{name} {sub}")
            elif "--help" not in a.option_strings:
                out[name] |= set(a.option_strings) if a.option_strings else {a.dest}

    walk(build_parser(), "autosched")
    return out


def options_on_page() -> dict[str, set[str]]:
    text = PAGE.read_text().split("## Command-line options", 1)[1]
    out: dict[str, set[str]] = {}
    for block in text.split("\n### ")[1:]:
        title = re.match(r"`([^`]+)`", block).group(1)
        names: set[str] = set()
        for row in re.findall(r"^\| (.+?) \|", block, re.M):
            names |= set(re.findall(r"`(--?[\w-]+)`", row))
            names |= set(re.findall(r"`(\w+)` \(positional\)", row))
        out[title] = names - {"option"}
    return out


def test_every_environment_variable_is_listed():
    code, page = variables_in_code(), variables_on_page()
    assert {"AUTOSCHED_DB_URL", "AUTOSCHED_MAX_TRIALS"} <= code  # the scan finds both spellings
    assert code - page == set(), f"read by the code but not on docs/configuration.md: {sorted(code - page)}"
    assert page - code == set(), f"on docs/configuration.md but not read by the code: {sorted(page - code)}"


def test_every_cli_option_is_listed():
    code, page = options_in_parser(), options_on_page()
    assert set(code) == set(page), f"commands differ: code {sorted(code)}, page {sorted(page)}"
    for cmd in code:
        assert code[cmd] - page[cmd] == set(), f"{cmd}: options missing from the page: {sorted(code[cmd] - page[cmd])}"
        assert page[cmd] - code[cmd] == set(), f"{cmd}: options the parser lacks: {sorted(page[cmd] - code[cmd])}"
