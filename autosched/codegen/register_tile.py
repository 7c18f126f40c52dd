"""Register tiles as named vector variables in generated C.

Why: a cache_write tile whose every access is a whole vector at a constant offset (an unrolled and
vectorized register tile) was written as a small stack array, `float C_local[256]`, read and written
through `asc_ld`/`asc_st` at constant offsets. gcc keeps such an array in registers, but its
register allocation then copies every accumulator around each FMA of the reduction loop; written as
one variable per vector the loop is loads, broadcasts and FMAs only
(see docs/decisions/explicit-vector-code.md). The rewrite is exact: the variables are the array's
vectors, no access overlaps another, and nothing else touches the array.
"""

from __future__ import annotations

import re

_ACCESS = r"asc_(ld|st)_(asc_f(?:32|64)x(\d+))\(&{name}\[(\d+)\](\)|, )"
"""A whole-vector load `asc_ld_T(&name[c])` or the head of a store `asc_st_T(&name[c], `."""


def register_name(buffer: str, offset: int) -> str:
    return f"asc_reg_{buffer}_{offset}"


def promote(lines: list[str], decl: int, name: str, size: int) -> bool:
    """Rewrite the array `name` (declared at `lines[decl]`, used in the lines after it) as one vector
    variable per accessed vector, in place (the line count does not change), when every use is a
    whole-vector load or a statement-level whole-vector store at a constant offset, all of one vector
    type. False, with nothing changed, otherwise. The variables start at zero: reading one before any
    store is then defined, where the array's element was indeterminate."""
    escaped = re.escape(name)
    access = re.compile(_ACCESS.format(name=escaped))
    store_stmt = re.compile(r"^(\s*)" + _ACCESS.format(name=escaped))
    word = re.compile(rf"\b{escaped}\b")
    vtypes, offsets = set(), set()
    for line in lines[decl + 1:]:
        n_uses = len(word.findall(line))
        if not n_uses:
            continue
        found = list(access.finditer(line))
        if len(found) != n_uses:
            return False  # a scalar access, a variable offset or the array's address taken
        for m in found:
            kind, vt, n, off = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
            if off % n or off + n > size or (m.group(5) == ")") != (kind == "ld"):
                return False
            if kind == "st":
                head = store_stmt.match(line)
                if head is None or head.end(1) != m.start():
                    return False  # a store inside an expression
            vtypes.add(vt)
            offsets.add(off)
    if len(vtypes) != 1:
        return False
    for i in range(decl + 1, len(lines)):
        line = lines[i]
        if not word.search(line):
            continue
        head = store_stmt.match(line)
        if head is not None and head.group(2) == "st":  # `asc_st_T(&name[c], value);` -> `reg = (value);`
            line = f"{head.group(1)}{register_name(name, int(head.group(5)))} = (" + line[head.end():]
        lines[i] = access.sub(lambda a: register_name(name, int(a.group(4))), line)
    (vtype,) = vtypes
    indent = lines[decl][: len(lines[decl]) - len(lines[decl].lstrip())]
    lines[decl] = f"{indent}{vtype} " + ", ".join(f"{register_name(name, o)} = {{0}}" for o in sorted(offsets)) + ";"
    return True
