"""Timeloop in and out: ``polymap import timeloop`` and ``cost --export timeloop``.

Before: Timeloop v0.4 problem, architecture and (optionally) mapping files.
After: ``DIR/NAME.loop`` (:mod:`.problem`), ``DIR/arch.yaml`` (:mod:`.arch`)
and ``DIR/mapping.yaml`` (:mod:`.mapping`) in polymap's formats, which every
command reads; :mod:`.export` writes a polymap mapping back in Timeloop's
format, so that export then import gives the same mapping back.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from polymap.errors import InputError
from polymap.timeloop import yamltags
from polymap.timeloop.arch import polymap_levels, read_arch
from polymap.timeloop.mapping import polymap_files, read_mapping
from polymap.timeloop.problem import kernel_text, read_problem


@dataclass(frozen=True)
class Imported:
    files: tuple[str, ...]
    kernel: str
    notes: tuple[str, ...]


def _comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def import_timeloop(problem: str | Path, arch: str | Path, mapping: str | Path | None, out_dir: str | Path) -> Imported:
    """Read the Timeloop files and write the polymap ones into ``out_dir``."""
    pdoc, _ = yamltags.read(problem)
    prob = read_problem(pdoc, Path(problem).stem)
    adoc, tags = yamltags.read(arch)
    tarch = read_arch(adoc, tags, Path(arch).stem)
    levels = polymap_levels(tarch)
    targets = None
    if mapping is not None:
        mdoc, _ = yamltags.read(mapping)
        targets = read_mapping(mdoc, prob, tarch)
    arch_levels, mapping_doc, notes = polymap_files(prob, tarch, targets, levels)
    compute = {"instances": tarch.compute.instances if tarch.compute is not None else 1}
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {out_dir}: cannot create the directory: {exc.strerror or exc}") from None
    files = []
    loop_path = out / f"{prob.name}.loop"
    arch_path = out / "arch.yaml"
    head = [f"imported from Timeloop by polymap import timeloop ({Path(arch).name})",
            "capacities in elements (depth x width / datawidth); energies are Accelergy's business in",
            "Timeloop and are 0 here unless the component gave read_energy / write_energy"]
    arch_doc = {"name": tarch.name, "levels": arch_levels, "compute": compute}
    texts = {loop_path: kernel_text(prob, source=Path(problem).name),
             arch_path: _comment(head + notes) + yaml.safe_dump(arch_doc, sort_keys=False)}
    if mapping_doc is not None:
        mhead = [f"imported from Timeloop by polymap import timeloop ({Path(mapping).name})",
                 "tiles: the extents one residency of the level covers (the product of its factors and",
                 "of every inner level's); orders outer -> inner (Timeloop's permutations are innermost first)"]
        texts[out / "mapping.yaml"] = _comment(mhead + notes) + yaml.safe_dump(mapping_doc, sort_keys=False)
    for path, text in texts.items():
        try:
            path.write_text(text)
        except OSError as exc:
            raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
        files.append(str(path))
    return Imported(tuple(files), prob.name, tuple(notes))
