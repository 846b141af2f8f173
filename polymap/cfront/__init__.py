"""C in: a function's ``#pragma scop`` region read as a kernel (PolyBench and Pluto style).

Before and after, for PolyBench's gemm (``-I utilities -DMINI_DATASET``)::

    static void kernel_gemm(int ni, int nj, int nk,        kernel kernel_gemm(ni = 20, nj = 25, nk = 30)
        DATA_TYPE alpha, DATA_TYPE beta,                    where ni <= 20 and nj <= 25 and nk <= 30 {
        DATA_TYPE POLYBENCH_2D(C,NI,NJ,ni,nj), ...)  ->      in alpha : f64
    {                                                        inout C[20, 25] : f64 ...
      int i, j, k;                                           for i in 0..ni {
    #pragma scop                                               for j in 0..nj { S0: C[i, j] *= beta }
      for (i = 0; i < _PB_NI; i++) { ... }                     ...
    #pragma endscop

* the file goes through the system preprocessor (:mod:`.preprocess`, with the
  ``--cpp`` flags) and pycparser;
* every function holding a scop becomes a kernel named after it; its integer
  arguments are parameters (defaults from ``int NAME = CONSTANT;`` in
  ``main``, as PolyBench's ``main`` sets them), its arrays tensors (dtype and
  shape from the declarations), its floating scalar arguments ``in``
  scalars, variables declared in the function and used as data ``local``;
  arrays are ``in`` when only read, ``out`` when only written, else ``inout``;
* arrays whose extents are constants while the loops run to parameters (as
  PolyBench declares them) get the ``where`` clause under which every access
  stays inside them, computed exactly with ISL (``ni <= 20``);
* the statements are lowered by :mod:`.lower`; what lies outside the
  language is an error located in the C file;
* ``Kernel.signature`` records the function's arguments so that ``compile``
  writes a function that drops into the original program.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from pycparser import c_ast, c_parser

from polymap import ir
from polymap.errors import Diagnostic, InputError, SemanticError
from polymap.cfront.locate import Sources
from polymap.cfront.lower import Lowerer, Names, Unsupported
from polymap.cfront.preprocess import compiler_error, preprocess
from polymap.cfront.where import in_bounds_where
from polymap.limits import Limits, read_text
from polymap.passes.frontend.semantics import checked

_DTYPES = {"double": "f64", "float": "f32", "int": "i32", "long": "i64", "long long": "i64",
           "int32_t": "i32", "int64_t": "i64"}
_INT = {"int", "long", "long int", "long long", "long long int", "unsigned", "unsigned int",
        "short", "long unsigned int", "unsigned long", "size_t"}


def read_c(path: str | Path, *, cpp: str = "", limits: Limits = Limits()) -> ir.Program:
    """The kernels of the scops of C file ``path``, checked (``PolymapError`` with C locations)."""
    p = Path(path)
    text = read_text(p, limits=limits, what="C file")
    sources = Sources(ir.SourceFile(str(path), text))
    unit = _parse(preprocess(p, cpp), sources, cpp)
    functions = [f for f in unit.ext if isinstance(f, c_ast.FuncDef) and _scops(f.body)]
    if not functions:
        raise InputError(f"{path}: no '#pragma scop' ... '#pragma endscop' region in any function")
    defaults = _main_defaults(unit)
    globals_ = {d.name: d for d in unit.ext if isinstance(d, c_ast.Decl) and d.name
                and not isinstance(d.type, c_ast.FuncDecl)}
    kernels, diags = [], []
    for f in functions:
        try:
            kernels.append(_kernel(f, sources, defaults, globals_))
        except Unsupported as exc:
            diags.append(exc.diagnostic)
        except SemanticError as exc:
            diags.extend(exc.diagnostics)
    if diags:
        raise SemanticError(diags)
    program = checked(ir.Program(tuple(kernels), sources.main))
    return ir.Program(tuple(in_bounds_where(k) for k in program.kernels), sources.main)


def _parse(text: str, sources: Sources, cpp: str) -> c_ast.FileAST:
    try:
        return c_parser.CParser().parse(text, sources.main.name)
    except c_parser.ParseError as exc:
        # pycparser says "FILE:LINE:COL: before: TOKEN", or nothing located: then ask the compiler where
        where, _, what = str(exc).partition(": ")
        parts = where.rsplit(":", 2)
        if len(parts) == 3 and parts[1].isdigit():
            line, col = int(parts[1]), int(parts[2]) if parts[2].isdigit() else 1
            loc = ir.Loc(line, col, line, col + 1, sources.file(parts[0]))
            raise SemanticError([Diagnostic(f"C syntax error ({what})", loc)]) from None
        located = compiler_error(Path(sources.main.name), cpp)
        if located is not None:
            file, line, col, message = located
            loc = ir.Loc(line, col, line, col + 1, sources.file(file))
            raise SemanticError([Diagnostic(f"C syntax error: {message}", loc)]) from None
        raise InputError(f"{sources.main.name}: pycparser cannot read this C ({what or exc})") from None


def _scops(body: c_ast.Compound) -> list[tuple[c_ast.Compound, int, int]]:
    """``(block, start, end)`` for each ``#pragma scop`` .. ``endscop`` pair, at any depth."""
    found = []
    items = body.block_items or []
    start = None
    for k, item in enumerate(items):
        if isinstance(item, c_ast.Pragma) and item.string.strip() == "scop":
            start = k
        elif isinstance(item, c_ast.Pragma) and item.string.strip() == "endscop" and start is not None:
            found.append((body, start, k))
            start = None
        elif isinstance(item, c_ast.Compound):
            found.extend(_scops(item))
    return found


def _main_defaults(unit: c_ast.FileAST) -> dict[str, int]:
    """``int ni = 20;`` in ``main`` -> ``{"ni": 20}`` (PolyBench sets the sizes there)."""
    out: dict[str, int] = {}
    for f in unit.ext:
        if isinstance(f, c_ast.FuncDef) and f.decl.name == "main":
            for item in f.body.block_items or []:
                if (isinstance(item, c_ast.Decl) and isinstance(item.init, c_ast.Constant)
                        and item.init.type == "int"):
                    try:
                        out[item.name] = int(item.init.value.rstrip("uUlL"), 0)
                    except ValueError:
                        continue
    return out


def _type_name(decl_type: c_ast.Node) -> str | None:
    while isinstance(decl_type, (c_ast.ArrayDecl, c_ast.PtrDecl)):
        decl_type = decl_type.type
    if isinstance(decl_type, c_ast.TypeDecl) and isinstance(decl_type.type, c_ast.IdentifierType):
        return " ".join(decl_type.type.names)
    return None


class _Declared:
    """The declarations one kernel may use: arguments, the function's variables, globals."""

    def __init__(self, f: c_ast.FuncDef, sources: Sources, globals_: dict[str, c_ast.Decl]) -> None:
        self.sources = sources
        params = f.decl.type.args.params if f.decl.type.args is not None else []
        self.args = [p for p in params if isinstance(p, c_ast.Decl) and p.name]
        self.body_vars = [d for d in f.body.block_items or [] if isinstance(d, c_ast.Decl) and d.name]
        self.globals = globals_

    def all(self) -> list[tuple[c_ast.Decl, str]]:
        """Every declaration with where it comes from: "arg", "local" or "global"."""
        return ([(d, "arg") for d in self.args] + [(d, "local") for d in self.body_vars]
                + [(d, "global") for d in self.globals.values()])


def _kernel(f: c_ast.FuncDef, sources: Sources, defaults: dict[str, int],
            globals_: dict[str, c_ast.Decl]) -> ir.Kernel:
    scops = _scops(f.body)
    if len(scops) > 1:
        raise Unsupported(sources.error(f"function '{f.decl.name}' has more than one scop", scops[1][0].block_items[scops[1][1]]))
    block, start, end = scops[0]
    region = block.block_items[start + 1:end]
    declared = _Declared(f, sources, globals_)
    iterators = _iterators(region)
    names = Names(params=set(), tensors={})
    kinds: dict[str, tuple[c_ast.Decl, str, str]] = {}  # name -> (decl, origin, "param"|"tensor"|"pointer")
    for d, origin in declared.all():
        if d.name in kinds or (origin != "arg" and d.name in iterators):
            continue
        t = _type_name(d.type)
        if isinstance(d.type, c_ast.PtrDecl):
            kinds[d.name] = (d, origin, "pointer")
        elif isinstance(d.type, c_ast.ArrayDecl):
            kinds[d.name] = (d, origin, "tensor")
            names.tensors[d.name] = _rank(d.type)
        elif origin == "arg" and t in _INT:
            kinds[d.name] = (d, origin, "param")
            names.params.add(d.name)
        elif t is not None:
            kinds[d.name] = (d, origin, "tensor")
            names.tensors[d.name] = 0
    names.iterators = set(iterators) - names.params - set(names.tensors)
    for it in iterators:
        if it in names.params or it in names.tensors and kinds[it][1] == "arg":
            raise Unsupported(sources.error(f"'{it}' is an argument of the function and cannot be a loop iterator",
                                            kinds[it][0]))
    lowerer = Lowerer(sources, names)
    for d, origin, kind in kinds.values():
        if kind == "pointer" and _used(region, d.name):
            raise Unsupported(sources.error(
                f"'{d.name}' is a pointer, whose shape is unknown: declare it as an array "
                f"(double {d.name}[N][M]) to use it in the scop", d))
    body = lowerer.block(region, {})
    written, read = _uses(body)
    decls, signature_ok = [], True
    for d, origin, kind in kinds.values():
        if kind != "tensor":
            continue
        used = d.name in written or d.name in read
        if origin != "arg" and not used:
            continue
        if origin == "global":
            signature_ok = False
        decls.append(_decl(d, origin, written, read, lowerer))
    params = tuple(ir.Param(d.name, defaults.get(d.name) if defaults.get(d.name, 0) >= 1 else None,
                            sources.loc(d)) for d, _, kind in kinds.values() if kind == "param")
    if any(kind == "pointer" and origin == "arg" for _, origin, kind in kinds.values()):
        signature_ok = False
    signature = None
    if signature_ok:
        signature = tuple(ir.Argument(d.name, _type_name(d.type) or "int",
                                      by_value=not isinstance(d.type, c_ast.ArrayDecl))
                          for d in declared.args)
    return ir.Kernel(f.decl.name, params, (), tuple(decls), body, sources.loc(f.decl), signature=signature)


def _rank(t: c_ast.Node) -> int:
    n = 0
    while isinstance(t, c_ast.ArrayDecl):
        n, t = n + 1, t.type
    return n


def _decl(d: c_ast.Decl, origin: str, written: set[str], read: set[str], lowerer: Lowerer) -> ir.Decl:
    t = _type_name(d.type)
    if t not in _DTYPES:
        raise Unsupported(lowerer.sources.error(
            f"'{d.name}' has type '{t}': the language's tensors are double, float, int or long", d))
    shape: list[ir.Expr] = []
    node = d.type
    while isinstance(node, c_ast.ArrayDecl):
        if node.dim is None:
            raise Unsupported(lowerer.sources.error(
                f"the extent of a dimension of '{d.name}' is not given: declare every extent", d))
        shape.append(_fold(lowerer.index(node.dim, {})))
        node = node.type
    if origin == "local":
        role = "local"
    elif d.name in written:
        role = "inout" if d.name in read else "out"
    else:
        role = "in"
    if origin == "arg" and not shape and d.name in written:
        raise Unsupported(lowerer.sources.error(
            f"the scalar argument '{d.name}' is passed by value and written in the scop: "
            f"the write would be lost", d))
    return ir.Decl(d.name, role, tuple(shape), _DTYPES[t], lowerer.sources.loc(d))


def _fold(e: ir.Expr) -> ir.Expr:
    """``20 + 0`` -> ``20`` (PolyBench's padding), other expressions unchanged."""
    if isinstance(e, ir.BinOp):
        a, b = _fold(e.lhs), _fold(e.rhs)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and e.op in ("+", "-", "*"):
            v = {"+": a.value + b.value, "-": a.value - b.value, "*": a.value * b.value}[e.op]
            return ir.Const(v, e.loc)
        if isinstance(b, ir.Const) and b.value == 0 and e.op in ("+", "-"):
            return a
        return ir.BinOp(e.op, a, b, e.loc)
    return e


def _iterators(region: list[c_ast.Node]) -> list[str]:
    out: list[str] = []
    for item in region:
        for node in _walk(item):
            if isinstance(node, c_ast.For):
                init = node.init
                if isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
                    out.append(init.lvalue.name)
                elif isinstance(init, c_ast.DeclList):
                    out.extend(d.name for d in init.decls)
    return list(dict.fromkeys(out))


def _walk(node: c_ast.Node) -> Iterator[c_ast.Node]:
    yield node
    for _, child in node.children():
        yield from _walk(child)


def _used(region: list[c_ast.Node], name: str) -> bool:
    return any(isinstance(n, c_ast.ID) and n.name == name for item in region for n in _walk(item))


def _uses(body: tuple[ir.Node, ...]) -> tuple[set[str], set[str]]:
    kernel = ir.Kernel("_", (), (), (), body)
    written = {c.stmt.target.tensor for c in kernel.statements()}
    read = {r.tensor for c in kernel.statements() for r in ir.reads_of(c.stmt)}
    return written, read
