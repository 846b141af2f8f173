"""Reading a mapping file: every rule of ``mapping.md`` that needs no numbers.

Each problem is a :class:`~polymap.errors.MappingError` at the YAML entry
(``levels[2] (RF): tile of 'j' is 0; tiles must be positive integers``).
Rules that need parameter values (the spatial fan-out, capacities) live
with the numbers: :mod:`polymap.passes.counting.fit` and the cost model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from polymap import ir
from polymap.machine.arch import Architecture
from polymap.mapping.model import LevelMapping, Mapping, nest_tensors
from polymap.passes.frontend.expansion import expansions
from polymap.poly import build_model
from polymap.mapping.schedule_files import mapping_loops, read_nests, read_schedule, read_wavefront
from polymap.yamlsource import YamlDocument, read_yaml
from polymap.limits import Limits

MAPPING_KEYS = ("kernel", "nest", "nests", "schedule", "expand", "levels")
ENTRY_KEYS = ("level", "tile", "order", "spatial", "wavefront", "keep")


def _kernels(kernel: ir.Kernel | ir.Program | Iterable[ir.Kernel]) -> tuple[ir.Kernel, ...]:
    if isinstance(kernel, ir.Kernel):
        return (kernel,)
    if isinstance(kernel, ir.Program):
        return kernel.kernels
    return tuple(kernel)


def _select_kernel(doc: YamlDocument, data: dict, kernels: tuple[ir.Kernel, ...]) -> ir.Kernel:
    names = ", ".join(k.name for k in kernels)
    name = data.get("kernel")
    if name is None:
        if len(kernels) != 1:
            doc.fail((), f"the program holds several kernels ({names}); say which with 'kernel: NAME'")
        return kernels[0]
    found = next((k for k in kernels if k.name == name), None)
    if found is None:
        doc.fail(("kernel",), f"kernel: no kernel named '{name}' here (kernels: {names})")
    return found


def _select_nest(doc: YamlDocument, data: dict, kernel: ir.Kernel) -> int:
    count = len(kernel.nests())
    nest = data.get("nest", 0)
    if isinstance(nest, bool) or not isinstance(nest, int):
        doc.fail(("nest",), f"nest: expected the index of a loop nest (0, 1, ...), not {nest!r}")
    if not 0 <= nest < count:
        doc.fail(("nest",), f"nest: kernel '{kernel.name}' has {count} top-level loop nest(s), "
                            f"numbered from 0; there is no nest {nest}")
    return nest


def _names(doc: YamlDocument, path: tuple, value: Any, what: str, known: tuple[str, ...], kind: str) -> tuple[str, ...]:
    """A list of distinct names from ``known``."""
    if not isinstance(value, list):
        doc.fail(path, f"{what} must be a list of {kind} names, like [{', '.join(known[:2])}]")
    seen: list[str] = []
    for k, x in enumerate(value):
        if x not in known:
            doc.fail(path + (k,), f"{what}: unknown {kind} '{x}' (the nest has {', '.join(known)})")
        if x in seen:
            doc.fail(path + (k,), f"{what}: {kind} '{x}' is listed twice")
        seen.append(x)
    return tuple(seen)


def _tile(doc: YamlDocument, k: int, what: str, value: Any, loops: tuple[str, ...],
          parent: tuple[int | None, ...]) -> tuple[int | None, ...]:
    path = ("levels", k, "tile")
    if k == 0:
        if value:
            doc.fail(path, f"{what}: the backing store's tile is the whole nest; give no tile here")
        return parent
    if not isinstance(value, dict):
        doc.fail(path, f"{what}: tile must map loops to extents, like {{{loops[0]}: 32}}")
    tile = dict(zip(loops, parent))
    for x, t in value.items():
        if x not in loops:
            doc.fail(path + (x,), f"{what}: tile of unknown loop '{x}' (the nest has {', '.join(loops)})", key=True)
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            doc.fail(path + (x,), f"{what}: tile of '{x}' is {t!r}; tiles must be positive integers")
        if tile[x] is not None and t > tile[x]:
            doc.fail(path + (x,), f"{what}: tile of '{x}' is {t}, larger than the enclosing level's tile "
                                  f"{tile[x]}; tiles cannot grow inward")
        tile[x] = t
    return tuple(tile[x] for x in loops)


def _keep(doc: YamlDocument, k: int, what: str, value: Any, kernel: ir.Kernel,
          nests: tuple[int, ...]) -> tuple[str, ...]:
    path = ("levels", k, "keep")
    used = {t for n in nests for t in nest_tensors(kernel, n)}
    tensors = tuple(d.name for d in kernel.decls if d.name in used)
    nest = nests[0] if len(nests) == 1 else nests
    if value is None:
        return tensors
    if not isinstance(value, list):
        doc.fail(path, f"{what}: keep must be a list of tensor names, like [{', '.join(tensors[:2])}]")
    for j, t in enumerate(value):
        if not isinstance(t, str) or kernel.decl(t) is None:
            doc.fail(path + (j,), f"{what}: keep names unknown tensor '{t}' (the nest uses {', '.join(tensors)})")
        if t not in tensors:
            doc.fail(path + (j,), f"{what}: keep names tensor '{t}', which nest {nest} does not access" if len(nests) == 1
                     else f"{what}: keep names tensor '{t}', which nests {', '.join(map(str, nests))} do not access")
        if value.count(t) > 1:
            doc.fail(path + (j,), f"{what}: keep lists tensor '{t}' twice")
    if k == 0 and set(value) != set(tensors):
        missing = ", ".join(t for t in tensors if t not in value)
        doc.fail(path, f"{what}: the backing store keeps every tensor; keep lacks {missing}")
    return tuple(t for t in tensors if t in value)


def _entry_names(doc: YamlDocument, entries: list, arch: Architecture) -> None:
    """One entry per architecture level, outermost first."""
    names = arch.level_names
    listed = ", ".join(names)
    for k, entry in enumerate(entries):
        path = ("levels", k)
        if not isinstance(entry, dict):
            doc.fail(path, f"levels[{k}] must be a mapping with keys {', '.join(ENTRY_KEYS)}")
        for key in entry:
            if key not in ENTRY_KEYS:
                doc.fail(path + (key,), f"levels[{k}]: unknown key '{key}' (expected one of {', '.join(ENTRY_KEYS)})",
                         key=True)
        name = entry.get("level")
        if name is None:
            doc.fail(path, f"levels[{k}]: every entry names its architecture level ('level: NAME')")
        if name not in names:
            doc.fail(path + ("level",), f"levels[{k}]: unknown level '{name}' (architecture '{arch.name}' has {listed})")
        if k >= len(names) or name != names[k]:
            if any(e.get("level") == name for e in entries[:k] if isinstance(e, dict)):
                doc.fail(path + ("level",), f"levels[{k}]: level '{name}' is listed twice")
            doc.fail(path + ("level",), f"levels[{k}]: expected level '{names[k]}' here, found '{name}' "
                                        f"(one entry per level, outermost first: {listed})")
    if len(entries) < len(names):
        missing = ", ".join(names[len(entries):])
        doc.fail(("levels",), f"levels: no entry for {missing} (one entry per level, outermost first: {listed})")


def _given(entry: dict, key: str, default: Any) -> Any:
    """``entry[key]``, with an absent or empty (``key:`` alone, YAML null) entry meaning the default."""
    value = entry.get(key)
    return default if value is None else value


def mapping_from_dict(data: Any, *, kernel: ir.Kernel | ir.Program | Iterable[ir.Kernel], arch: Architecture,
                      source_name: str = "<mapping>", document: YamlDocument | None = None) -> Mapping:
    """Validate mapping-file ``data``; a problem is a :class:`~polymap.errors.MappingError` at its entry.

    ``kernel`` is the kernel the mapping applies to, or every kernel of a
    program (the file's ``kernel:`` then picks one). ``document`` (the YAML
    the data was read from) gives errors line numbers.
    """
    doc = document if document is not None else YamlDocument.of_data(data, source_name)
    if not isinstance(data, dict):
        doc.fail((), f"a mapping file holds a mapping with keys {', '.join(MAPPING_KEYS)}")
    for key in data:
        if key not in MAPPING_KEYS:
            doc.fail((key,), f"unknown key '{key}' (expected one of {', '.join(MAPPING_KEYS)})", key=True)
    chosen = _select_kernel(doc, data, _kernels(kernel))
    if "nests" in data:
        if "nest" in data:
            doc.fail(("nest",), "give either 'nest: K' or 'nests: [K, ...]', not both", key=True)
        nests = read_nests(doc, data["nests"], chosen)
    else:
        nests = (_select_nest(doc, data, chosen),)
    nest = nests[0]
    schedule = read_schedule(doc, data.get("schedule"), chosen, nests)
    loops = mapping_loops(chosen, nests, schedule)
    entries = data.get("levels")
    if not isinstance(entries, list):
        doc.fail(("levels",) if "levels" in data else (),
                 f"levels: expected a list with one entry per level, outermost first: {', '.join(arch.level_names)}")
    _entry_names(doc, entries, arch)
    levels = []
    tile: tuple[int | None, ...] = (None,) * len(loops)
    for k, entry in enumerate(entries):
        what = f"levels[{k}] ({entry['level']})"
        path = ("levels", k)
        tile = _tile(doc, k, what, _given(entry, "tile", {}), loops, tile)
        order = _names(doc, path + ("order",), _given(entry, "order", []), f"{what}: order", loops, "loop")
        order += tuple(x for x in loops if x not in order)
        spatial = _names(doc, path + ("spatial",), _given(entry, "spatial", []), f"{what}: spatial", loops, "loop")
        keep = _keep(doc, k, what, entry.get("keep"), chosen, nests)
        wavefront = read_wavefront(doc, path + ("wavefront",), entry.get("wavefront"), what,
                                   _given(entry, "order", []), loops, chosen, nests, schedule)
        levels.append(LevelMapping(entry["level"], tile, order, spatial, keep, wavefront))
    return Mapping(chosen.name, nest, loops, tuple(levels), nests if len(nests) > 1 else (), schedule,
                   _expand(doc, data.get("expand"), chosen))


def _expand(doc: YamlDocument, value: Any, kernel: ir.Kernel) -> tuple[tuple[str, str], ...]:
    """``expand: {SCALAR: LOOP}``: only the expansions that keep every result (``expansions``, the one rule)."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        doc.fail(("expand",), "expand: expected entries SCALAR: LOOP, like {temp2: j}")
    exact = expansions(build_model(kernel))
    for name, loop in value.items():
        if name not in exact:
            doc.fail(("expand", name), f"expand: '{name}' is not a local scalar of kernel '{kernel.name}' that "
                                       f"passes no value between the iterations of a loop; expanding it could "
                                       f"change the results", key=True)
        if loop != exact[name]:
            doc.fail(("expand", name), f"expand: {name} is expanded along loop '{exact[name]}' (the innermost "
                                       f"loop it passes no value across), not '{loop}'")
    return tuple(sorted(value.items()))


def load_mapping(path: str | Path, *, kernel: ir.Kernel | ir.Program | Iterable[ir.Kernel],
                 arch: Architecture, limits: Limits | None = None) -> Mapping:
    """Read (within ``limits``) and validate a mapping YAML file."""
    doc = read_yaml(path, limits=limits)
    return mapping_from_dict(doc.data, kernel=kernel, arch=arch, source_name=str(path), document=doc)
