"""Printing IR back as ``.loop`` source text.

``expr`` gives the text of one expression with only the parentheses that
precedence needs; ``kernel`` prints a whole kernel that parses again to the
same IR (locations aside). ``polymap transform`` and the JSON of ``show``
(tensor shapes) use it.
"""
from __future__ import annotations

from polymap import ir

# Binding strength, higher binds tighter (as in Python).
_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "neg": 7, "atom": 8}


def _prec(e: ir.Expr) -> int:
    match e:
        case ir.BoolOp(op=op):
            return _PREC[op]
        case ir.Not():
            return _PREC["not"]
        case ir.Compare():
            return _PREC["cmp"]
        case ir.BinOp(op=op):
            return _PREC[op]
        case ir.Neg():
            return _PREC["neg"]
    return _PREC["atom"]


def _wrap(e: ir.Expr, min_prec: int) -> str:
    text = expr(e)
    return f"({text})" if _prec(e) < min_prec else text


def expr(e: ir.Expr) -> str:
    """``.loop`` text of an expression: ``expr(BinOp('+', Var('i'), Const(1))) == 'i + 1'``."""
    match e:
        case ir.Const(value=v):
            return repr(v) if isinstance(v, float) else str(v)
        case ir.Var(name=n):
            return n
        case ir.Ref(tensor=t, indices=()):
            return t
        case ir.Ref(tensor=t, indices=idx):
            return f"{t}[{', '.join(expr(x) for x in idx)}]"
        case ir.Neg(operand=a):
            return f"-{_wrap(a, _PREC['neg'])}"
        case ir.BinOp(op=op, lhs=a, rhs=b):
            p = _PREC[op]
            # left-associative: the right operand needs parentheses at equal precedence
            return f"{_wrap(a, p)} {op} {_wrap(b, p + 1)}"
        case ir.Compare(op=op, lhs=a, rhs=b):
            return f"{_wrap(a, _PREC['+'])} {op} {_wrap(b, _PREC['+'])}"
        case ir.BoolOp(op=op, operands=args):
            return f" {op} ".join(_wrap(a, _PREC[op] + 1) for a in args)
        case ir.Not(operand=a):
            return f"not {_wrap(a, _PREC['not'])}"
        case ir.Call(func=f, args=args):
            return f"{f}({', '.join(expr(a) for a in args)})"
        case ir.Select(cond=c, if_true=a, if_false=b):
            return f"select({expr(c)}, {expr(a)}, {expr(b)})"
    raise TypeError(f"not an expression: {e!r}")


def _bound(parts: tuple[ir.Expr, ...], func: str) -> str:
    return expr(parts[0]) if len(parts) == 1 else f"{func}({', '.join(expr(p) for p in parts)})"


def node_lines(node: ir.Node, indent: int = 1) -> list[str]:
    """Source lines of one body node at ``indent`` levels (two spaces each)."""
    pad = "  " * indent
    match node:
        case ir.Assign(label=lab, target=t, op=op, value=v, explicit_label=explicit):
            head = f"{lab}: " if explicit else ""
            return [f"{pad}{head}{expr(t)} {op} {expr(v)}"]
        case ir.Loop(var=var, lower=lo, upper=hi, step=step, body=body):
            st = f" step {step}" if step != 1 else ""
            lines = [f"{pad}for {var} in {_bound(lo, 'max')}..{_bound(hi, 'min')}{st} {{"]
            for child in body:
                lines += node_lines(child, indent + 1)
            return lines + [f"{pad}}}"]
        case ir.If(cond=c, then=then, orelse=orelse):
            lines = [f"{pad}if {expr(c)} {{"]
            for child in then:
                lines += node_lines(child, indent + 1)
            if orelse:
                lines.append(f"{pad}}} else {{")
                for child in orelse:
                    lines += node_lines(child, indent + 1)
            return lines + [f"{pad}}}"]
    raise TypeError(f"not a body node: {node!r}")


def decl(d: ir.Decl) -> str:
    """``in A[M, K] : f32``."""
    shape = f"[{', '.join(expr(x) for x in d.shape)}]" if d.shape else ""
    return f"{d.role:<5} {d.name}{shape} : {d.dtype}"


def kernel(k: ir.Kernel) -> str:
    """The whole kernel as ``.loop`` source."""
    params = ", ".join(p.name if p.default is None else f"{p.name} = {p.default}" for p in k.params)
    where = f" where {' and '.join(expr(w) for w in k.where)}" if k.where else ""
    lines = [f"kernel {k.name}({params}){where} {{"]
    lines += [f"  {decl(d)}" for d in k.decls]
    for node in k.body:
        lines += node_lines(node)
    return "\n".join(lines + ["}"]) + "\n"
