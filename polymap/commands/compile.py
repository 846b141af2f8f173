"""``polymap compile FILE``: tiled C and NumPy code for every kernel, verified.

Per kernel: the mapping (``--mapping``, refused when illegal, or the best
legal fitting candidate of :mod:`polymap.passes.search.choice`, ranked by exact
counts; loops that share a name are renamed apart first); ``DIR/NAME.c``,
``DIR/NAME.py`` (when the NumPy emitter exists) and ``DIR/NAME.json`` (the
mappings and their cost report); then, unless ``--no-verify``, a run of
every target on random inputs against the reference execution.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Mapping as MappingT

from polymap import ir
from polymap.driver import (
    check_defines,
    load_program,
    param_values,
    parse_defines,
    print_warnings,
    select_kernels,
)
from polymap.errors import IllegalTransformation, InputError, InvalidMapping, VerificationFailure
from polymap.mapping.renamed import in_original_terms
from polymap.passes.search.isl_schedule import describe as describe_schedule
from polymap.passes.search.numpy_choice import numpy_mappings
from polymap.passes.search.register_mapping import register_tile_doc
from polymap.poly import KernelModel, build_model
from polymap.limits import require_integers, require_tractable

TARGETS = ("c", "numpy")


def main(args) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    print_warnings(program, kernels)
    targets = _targets(args.target)
    from polymap.machine.presets import load_architecture

    arch = load_architecture(args.arch, limits=args.limits)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    from polymap.passes.search.choice import progress_printer

    progress = progress_printer()
    out_dir = Path(args.output_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {out_dir}: cannot create the directory: {exc.strerror or exc}") from None
    user_mapping = None
    if args.mapping:
        from polymap.mapping.files import load_mapping

        user_mapping = load_mapping(args.mapping, kernel=kernels if len(kernels) > 1 else kernels[0], arch=arch, limits=args.limits)
    documents = []
    for kernel in kernels:
        params = param_values(kernel, defines)
        model = build_model(kernel)
        require_tractable(kernel, limits=args.limits, model=model, what="compile's analyses")
        require_integers(kernel, params, limits=args.limits)
        choice = None
        if user_mapping is not None and user_mapping.kernel == kernel.name:
            mappings, why = (user_mapping,), f"the mapping of {args.mapping}"
            check_mapping(model, user_mapping, arch, params)
        else:
            documents.append(_compile_chosen(kernel, arch, params, targets, out_dir, args, progress))
            continue
        documents.append(_compile_one(kernel, model, mappings, why, arch, params, targets, out_dir, args,
                                      choice=choice, progress=progress, extra={"cache": "off"}))
    if args.json:
        print(json.dumps({"kernels": documents}, indent=2))
    return 0


def cache_dir_from_environment(environ: MappingT[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/polymap``, else ``~/.cache/polymap`` (``cli.md``)."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polymap"


def _compile_chosen(kernel: ir.Kernel, arch, params, targets, out_dir, args, progress) -> dict:
    """Compile with compile's own choice: remembered, or chosen (and tuned with ``--tune K``)."""
    from polymap.api import tuned_choice
    from polymap.passes.search.cache import arch_fingerprint

    if args.tune < 0:
        raise InputError(f"--tune {args.tune}: expected a number of candidates (0 or more)")
    cache_dir = None if args.no_cache else cache_dir_from_environment()
    try:
        fingerprint = arch_fingerprint(args.arch)
    except OSError as exc:
        raise InputError(f"--arch {args.arch}: cannot read the file: {exc.strerror or exc}") from None
    # a remembered mapping is re-checked (legal, fits); the verification below checks its code, and
    # a failure drops the entry and chooses again (with --no-verify, legal and fitting is the check)
    from polymap.codegen.timing import ProcessTimer, timing_environment

    timer = ProcessTimer(timing_environment(os.environ))
    found = tuned_choice(kernel, arch=arch, params=params, tune=args.tune, cache_dir=cache_dir,
                         arch_fingerprint=fingerprint, verify_hit=False, timer=timer, progress=progress,
                         budget=args.budget)
    for w in found.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if found.cache == "hit":
        why = "the tuned mapping remembered for this shape bucket (re-checked: legal, fits)"
    elif found.tuning:
        why = f"the fastest measured of the model's best {args.tune} candidates of each nest"
    else:
        why = "the best legal, fitting candidate of each nest by exact counts (cycles, then energy)"
    choice = found.choice
    extra = {"cache": found.cache, "tuning": [t.to_json() for t in found.tuning]}
    try:
        return _compile_one(choice.kernel, choice.model, choice.mappings, why, arch, params, targets, out_dir,
                            args, choice=choice, progress=progress, extra=extra, tuning=found.tuning,
                            original=kernel)
    except VerificationFailure:
        if found.cache != "hit":
            raise
    # a remembered mapping whose code disagrees with the reference is dropped, never trusted
    from polymap.passes.search.cache import TuningCache, cache_key

    TuningCache(cache_dir).discard(cache_key(kernel, fingerprint, params))
    print(f"warning: the remembered mapping of kernel {kernel.name} failed verification; "
          "dropped from the cache, choosing again", file=sys.stderr)
    found = tuned_choice(kernel, arch=arch, params=params, tune=args.tune, cache_dir=cache_dir,
                         arch_fingerprint=fingerprint, timer=timer, progress=progress, budget=args.budget)
    choice = found.choice
    extra = {"cache": "miss", "tuning": [t.to_json() for t in found.tuning]}
    return _compile_one(choice.kernel, choice.model, choice.mappings, why, arch, params, targets, out_dir,
                        args, choice=choice, progress=progress, extra=extra, tuning=found.tuning,
                        original=kernel)


def _targets(text: str) -> tuple[str, ...]:
    targets = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [t for t in targets if t not in TARGETS]
    if bad or not targets:
        raise InputError(f"--target {text}: expected a comma-separated list of {', '.join(TARGETS)}")
    return targets


def check_mapping(model: KernelModel, mapping, arch, params) -> None:
    """Refuse (exit 1) a mapping that changes the results or does not fit the architecture."""
    from polymap.mapping.model import check_fanout, loop_extents, mapping_loop_extents

    problems = check_fanout(mapping, arch, mapping_loop_extents(model.kernel, mapping, params))
    if problems:
        raise InvalidMapping(f"kernel {model.kernel.name}: invalid mapping: " + "; ".join(problems),
                             {"kernel": model.kernel.name, "legal": False, "violations": problems})
    reasons = _violations(model, mapping, params)
    if reasons:
        raise IllegalTransformation(
            f"kernel {model.kernel.name}: the mapping is illegal:\n" + "\n".join(f"  {r}" for r in reasons),
            {"kernel": model.kernel.name, "legal": False, "violations": [{"reason": r} for r in reasons]})


def _violations(model: KernelModel, mapping, params) -> list[str]:
    from polymap.passes.legality.legality import schedule_violations
    from polymap.passes.schedule.tiling import mapped_schedule

    return [v.reason for v in schedule_violations(model, mapped_schedule(model, mapping), params=params)]


def _compile_one(kernel: ir.Kernel, model: KernelModel, mappings, why, arch, params, targets, out_dir, args, *,
                 choice=None, progress=None, extra: dict | None = None, tuning: tuple = (),
                 original: ir.Kernel | None = None) -> dict:
    from polymap.codegen.c.emitter import emit_c

    written = []
    c_path = out_dir / f"{kernel.name}.c"
    if progress:
        progress("building C...")
    reassociate = getattr(args, "reassociate", False)
    c_source = emit_c(kernel, model, mappings, arch=arch, params=params, command=args.command_line,
                      reassociate=reassociate)
    py_path = out_dir / f"{kernel.name}.py"
    # compile's own choice gives the NumPy target its own mappings (whole-array blocks); a given one is shared
    numpy_maps = (numpy_mappings(model, arch, params, reassociate=reassociate) if choice is not None
                  else tuple(mappings))
    numpy_source = _numpy_source(kernel, model, numpy_maps, reassociate=reassociate)
    if numpy_source is None and "numpy" in targets:
        print(f"note: no NumPy code generator in this build; {py_path} not written", file=sys.stderr)
        targets = tuple(t for t in targets if t != "numpy")
    verification = None
    if not args.no_verify:
        # the very text written, at sizes that exercise every tile edge, before it is written as good
        from polymap.codegen.verify_sizes import verify_written

        if progress:
            progress("verifying...")
        sources = {"c": c_source, "numpy": numpy_source}
        try:
            verification = verify_written(kernel, params, {t: sources[t] for t in targets}, model=model,
                                          mappings=tuple(mappings) + tuple(numpy_maps),
                                          full=getattr(args, "verify_full", False), budget=args.budget)
        except VerificationFailure as exc:
            kept = _write_unverified(out_dir, kernel.name, c_source, numpy_source)
            raise VerificationFailure(f"{exc.message}\n  not written as {c_path.name}: the code that failed is in "
                                      f"{', '.join(kept)}", exc.payload) from None
    c_path.write_text(c_source)
    written.append(str(c_path))
    if numpy_source is not None:
        py_path.write_text(numpy_source)
        written.append(str(py_path))
    doc = {"kernel": kernel.name, "params": dict(params), "arch": arch.name, "why": why,
           # mappings said of the kernel as written (renamed loops become schedule entries)
           "mappings": [in_original_terms(original or kernel, kernel, m).to_dict() for m in mappings], "cost": [_cost(model, m, arch, params) for m in mappings]}
    if choice is not None:
        doc["choice"] = _choice_doc(choice)
        doc["numpy_mappings"] = [in_original_terms(original or kernel, kernel, m).to_dict() for m in numpy_maps]
    doc["register_tiles"] = register_tile_doc(model, mappings, arch)
    doc.update(extra or {})
    json_path = out_dir / f"{kernel.name}.json"
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    written.append(str(json_path))
    doc["files"] = written
    if not args.json:
        print(f"kernel {kernel.name}: {why}")
        if choice is not None:
            from polymap.passes.search.choice import explain

            for nest, names in choice.renamed:
                print(f"  nest {nest}: loops sharing a name ({', '.join(names)}) renamed apart")
            for nc in choice.nests:
                print("\n".join("  " + line for line in explain(nc, arch)))
                if nc.chosen.mapping is not None:  # a schedule (skew, shift, fusion) in words
                    print("\n".join("    " + line for line in describe_schedule(nc.chosen.mapping, choice.model)))
        if tuning:
            from polymap.passes.search.tune import tuning_lines

            for t in tuning:
                print("\n".join("  tuned " + line if k == 0 else "  " + line
                                 for k, line in enumerate(tuning_lines(t))))
        for m in mappings:
            print(f"  nest {m.nest}: " + " | ".join(_level_text(m, k) for k in range(len(m.levels))))
        if not mappings:
            print("  every nest in its original order")
        for entry in doc["register_tiles"]:
            print(f"  nest {entry['nest']}: C register tile {entry['tile']} {entry['dtype']}: {entry['why']}")
        if choice is not None:
            for m in numpy_maps:
                print(f"  nest {m.nest} (NumPy target): " + " | ".join(_level_text(m, k) for k in range(len(m.levels))))
            if not numpy_maps:
                print("  NumPy target: every nest in its original order")
        print("  wrote " + ", ".join(written))
    if verification is not None:
        doc["verification"] = verification.to_dict()
        json_path.write_text(json.dumps({k: v for k, v in doc.items() if k != "files"}, indent=2) + "\n")
        if not args.json:
            target, c = verification.largest() or ("-", None)
            if c is not None:
                print(f"  verified against the reference ({', '.join(targets)}) at {verification.what()}: "
                      f"largest difference {c.max_abs:.3g} on {c.tensor} ({target}, relative to the largest "
                      f"value {c.max_rel:.3g}, within the relative tolerance {c.tolerance:.3g})")
    return doc


def _write_unverified(out_dir: Path, name: str, c_source: str, numpy_source: str | None) -> list[str]:
    """The sources that failed verification, under names that say so (``NAME.unverified.c``)."""
    kept = []
    for suffix, text in ((".unverified.c", c_source), (".unverified.py", numpy_source)):
        if text is not None:
            path = out_dir / f"{name}{suffix}"
            path.write_text(text)
            kept.append(str(path))
    return kept


def _choice_doc(choice) -> dict:
    """The ranking of every nest for the JSON document."""
    nests = []
    for nc in choice.nests:
        cands = []
        for c in nc.candidates:
            entry = {"source": c.source, "legal": c.legal, "chosen": c is nc.chosen}
            if c.report is not None:
                entry.update(cycles=c.report.cycles, energy_pj=c.report.energy_pj)
            if c.problems:
                entry["problems"] = list(c.problems)
            cands.append(entry)
        nests.append({"nest": nc.nest, "chosen": nc.chosen.source,
                      "original_schedule": nc.chosen.mapping is None, "candidates": cands})
    return {"renamed": {str(n): list(x) for n, x in choice.renamed}, "nests": nests}


def _level_text(m, k: int) -> str:
    lv = m.levels[k]
    tile = {x: t for x, t in zip(m.loops, lv.tile) if t is not None}
    text = f"{lv.level}"
    if tile:
        text += " tile " + ",".join(f"{x}={t}" for x, t in tile.items())
    text += " order " + ",".join(lv.order)
    if lv.spatial:
        text += " spatial " + ",".join(lv.spatial)
    if lv.wavefront:
        text += " wavefront " + ",".join(lv.wavefront)
    return text


def _numpy_source(kernel, model, mappings, *, reassociate: bool = False) -> str | None:
    try:
        from polymap.codegen.numpy.emitter import emit_numpy
    except ImportError as exc:
        if exc.name is not None and exc.name.startswith("polymap.codegen"):
            return None
        raise
    from polymap.codegen.runner import numpy_mapping_arg

    return emit_numpy(kernel, model, numpy_mapping_arg(tuple(mappings)), reassociate=reassociate)


def _cost(model, mapping, arch, params) -> dict | None:
    """The cost report of a mapping when the counting module is there (None otherwise)."""
    try:
        from polymap.passes.counting.counting import count_mapping
    except ImportError:
        return None
    try:
        counts = count_mapping(model, mapping, arch, params=dict(params))
    except Exception as exc:  # the report is informative; compile does not depend on it
        return {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    for name in ("to_json", "to_dict"):
        if hasattr(counts, name):
            return getattr(counts, name)()
    try:
        from polymap.commands.cost import counts_document

        return counts_document(counts, arch)
    except Exception:
        return {"instances": counts.instances}
