"""Timeloop v0.4 problems as ``.loop`` kernels.

Before (a problem file)::

    problem:
      version: 0.4
      shape:
        name: conv1d
        dimensions: [K, R, P]
        coefficients: [{name: Wstride, default: 1}]
        data-spaces:
          - {name: Weights, projection: [[[K]], [[R]]]}
          - {name: Inputs,  projection: [[[R], [P, Wstride]]]}
          - {name: Outputs, projection: [[[K]], [[P]]], read-write: true}
      instance: {K: 4, R: 3, P: 8, Wstride: 2}

After::

    kernel conv1d(K = 4, R = 3, P = 8) {
      in    Weights[K, R]
      in    Inputs[R + 2*P - 2]
      inout Outputs[K, P]
      for k in 0..K, r in 0..R, p in 0..P {
        Outputs[k, p] += Weights[k, r] * Inputs[r + 2*p]
      }
    }

Each projection term is ``[DIM]`` or ``[DIM, COEFFICIENT]`` (either order;
a coefficient is a name of ``coefficients``, valued by the instance or its
default, or an integer). Dimensions become parameters (their instance
values the defaults) and loops named in lower case; coefficients are
constants. The read-write data space is ``inout`` (its initial content
given, as the exact counts assume; ``--convention timeloop`` takes it as
zero instead) and accumulates the product of the others, as Timeloop's
problems mean.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from polymap.yamlsource import YamlDocument

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYWORDS = {"kernel", "in", "out", "inout", "local", "for", "if", "else", "step", "where", "and", "or", "not"}


@dataclass(frozen=True)
class DataSpace:
    name: str
    projection: tuple[tuple[tuple[str, int], ...], ...]  # per tensor dimension: (loop dim, coefficient) terms
    read_write: bool


@dataclass(frozen=True)
class Problem:
    name: str
    dimensions: tuple[str, ...]
    instance: dict[str, int]
    data_spaces: tuple[DataSpace, ...]

    def loop(self, dim: str) -> str:
        """The loop name of a dimension: its lower case (``P`` -> ``p``)."""
        return loop_name(dim, self.dimensions)

    @property
    def output(self) -> DataSpace:
        return next(d for d in self.data_spaces if d.read_write)


def loop_name(dim: str, dims: tuple[str, ...]) -> str:
    low = dim.lower()
    if low == dim or low in dims or low in KEYWORDS:
        low = f"{low}_"
    return low


def read_problem(doc: YamlDocument, fallback_name: str) -> Problem:
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("problem"), dict):
        doc.fail((), "a Timeloop problem file needs a top-level 'problem:' mapping")
    p = ("problem",)
    prob = data["problem"]
    shape = prob.get("shape")
    if not isinstance(shape, dict):
        doc.fail(p, "the problem needs a 'shape:' (dimensions, data-spaces)")
    s = p + ("shape",)
    dims = shape.get("dimensions")
    if not isinstance(dims, list) or not dims or not all(isinstance(d, str) and _NAME.match(d) for d in dims):
        doc.fail(s + ("dimensions",), "'dimensions' must be a list of names, e.g. [K, R, P]")
    dims = tuple(dims)
    instance = prob.get("instance")
    if not isinstance(instance, dict):
        doc.fail(p, "the problem needs an 'instance:' giving every dimension its size")
    coeffs: dict[str, int] = {}
    for k, c in enumerate(shape.get("coefficients") or []):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            doc.fail(s + ("coefficients", k), "a coefficient is {name: NAME, default: VALUE}")
        coeffs[c["name"]] = _int(doc, s + ("coefficients", k, "default"), c.get("default", 1), c["name"])
    sizes: dict[str, int] = {}
    for name, v in instance.items():
        if name in dims:
            sizes[name] = _int(doc, p + ("instance", name), v, name)
            if sizes[name] < 1:
                doc.fail(p + ("instance", name), f"instance: {name} must be at least 1")
        elif name in coeffs:
            coeffs[name] = _int(doc, p + ("instance", name), v, name)
        else:
            doc.fail(p + ("instance", name), f"instance: '{name}' is neither a dimension nor a coefficient",
                     key=True)
    missing = [d for d in dims if d not in sizes]
    if missing:
        doc.fail(p + ("instance",), f"instance: no size for {', '.join(missing)}")
    spaces = []
    for k, ds in enumerate(shape.get("data-spaces") or shape.get("data_spaces") or []):
        spaces.append(_data_space(doc, s + ("data-spaces", k), ds, dims, coeffs))
    if not spaces:
        doc.fail(s, "the shape needs 'data-spaces'")
    if sum(d.read_write for d in spaces) != 1:
        doc.fail(s + ("data-spaces",), "exactly one data space must be 'read-write: true' (the output)")
    name = shape.get("name") if isinstance(shape.get("name"), str) else fallback_name
    name = re.sub(r"\W", "_", name) or "problem"
    if name[0].isdigit() or name in KEYWORDS:
        name = f"k_{name}"
    return Problem(name, dims, sizes, tuple(spaces))


def _int(doc: YamlDocument, path: tuple, v: object, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        doc.fail(path, f"{what}: expected an integer, got {v!r}")
    return v


def _data_space(doc: YamlDocument, path: tuple, ds: object, dims: tuple[str, ...], coeffs: dict[str, int]) -> DataSpace:
    if not isinstance(ds, dict) or not isinstance(ds.get("name"), str) or not _NAME.match(ds["name"]):
        doc.fail(path, "a data space is {name: NAME, projection: [...]}")
    proj = ds.get("projection")
    if not isinstance(proj, list) or not proj:
        doc.fail(path + ("projection",), f"data space {ds['name']}: 'projection' must list one entry per dimension")
    out = []
    for j, sop in enumerate(proj):
        if not isinstance(sop, list) or not sop:
            doc.fail(path + ("projection", j), "a projection entry is a sum of terms: [[P], [R]] or [[P, Wstride]]")
        terms = []
        for t, term in enumerate(sop):
            where = path + ("projection", j, t)
            term = term if isinstance(term, list) else [term]
            dim = [x for x in term if x in dims]
            rest = [x for x in term if x not in dims]
            if len(dim) != 1 or len(rest) > 1:
                doc.fail(where, f"a term is [DIM] or [DIM, COEFFICIENT] with DIM one of {', '.join(dims)}")
            coef = 1
            if rest:
                c = rest[0]
                if isinstance(c, int) and not isinstance(c, bool):
                    coef = c
                elif c in coeffs:
                    coef = coeffs[c]
                else:
                    doc.fail(where, f"'{c}' is not a coefficient of the shape")
            terms.append((dim[0], coef))
        out.append(tuple(terms))
    rw = ds.get("read-write", ds.get("read_write", False))
    return DataSpace(ds["name"], tuple(out), bool(rw))


def _index(terms: tuple[tuple[str, int], ...], problem: Problem) -> str:
    return " + ".join(problem.loop(d) if c == 1 else f"{c}*{problem.loop(d)}" for d, c in terms)


def _extent(terms: tuple[tuple[str, int], ...]) -> str:
    """``sum c * (D - 1) + 1``: the largest index plus one."""
    parts = [d if c == 1 else f"{c}*{d}" for d, c in terms]
    const = 1 - sum(c for _, c in terms)
    text = " + ".join(parts)
    return text if const == 0 else f"{text} + {const}" if const > 0 else f"{text} - {-const}"


def kernel_text(problem: Problem, *, source: str) -> str:
    """The ``.loop`` kernel of ``problem``."""
    header = ", ".join(f"{d} = {problem.instance[d]}" for d in problem.dimensions)
    lines = [f"# imported from Timeloop ({source}) by polymap import timeloop",
             f"kernel {problem.name}({header}) {{"]
    for ds in problem.data_spaces:
        role = "inout" if ds.read_write else "in"
        shape = ", ".join(_extent(t) for t in ds.projection)
        lines.append(f"  {role:<5} {ds.name}[{shape}]")
    loops = ", ".join(f"{problem.loop(d)} in 0..{d}" for d in problem.dimensions)
    out = problem.output
    factors = " * ".join(f"{ds.name}[{', '.join(_index(t, problem) for t in ds.projection)}]"
                         for ds in problem.data_spaces if not ds.read_write)
    target = f"{out.name}[{', '.join(_index(t, problem) for t in out.projection)}]"
    lines += [f"  for {loops} {{", f"    {target} += {factors or '1'}", "  }", "}"]
    return "\n".join(lines) + "\n"
