"""The ``.loop`` parser: text -> :class:`polymap.ir.Program` (syntax only).

The grammar is ``loop.lark`` (LALR, basic lexer so that keywords are
reserved everywhere); :mod:`.postlex` normalises statement separators;
:mod:`.transformer` builds the located IR; :mod:`.syntax_errors` turns
lark's exceptions into :class:`~polymap.errors.LoopSyntaxError` in the
user's words. The rules of ``dsl.md`` that need more than syntax live in
:mod:`polymap.passes.frontend.semantics`.
"""
from __future__ import annotations

from functools import lru_cache

from lark import Lark, Tree
from lark import __version__ as lark_version
from lark.exceptions import UnexpectedInput, VisitError

from polymap import ir
from polymap.errors import LoopSyntaxError, PolymapError
from polymap.grammar.postlex import SeparatorPostLex
from polymap.grammar.syntax_errors import syntax_error
from polymap.grammar.transformer import LoopTransformer
from polymap.userdirs import user_cache_dir, writable_dir

__all__ = ["parse_program"]


@lru_cache(maxsize=1)
def _parser() -> Lark:
    # lark keeps the LALR tables it analysed in a file of the user's cache (tagged inside with a hash of
    # the grammar, the options and lark's version: a stale or damaged file is rebuilt, silently): every
    # command parses, and analysing the grammar was 60 ms of each start (a cache hit's compile is ~1 s)
    where = writable_dir(user_cache_dir())
    return Lark.open(
        "loop.lark",
        rel_to=__file__,
        parser="lalr",
        lexer="basic",
        postlex=SeparatorPostLex(),
        propagate_positions=True,
        maybe_placeholders=True,
        cache=False if where is None else str(where / f"loop-grammar-lark-{lark_version}.tables"),
    )


def parse_program(text: str, filename: str = "<input>") -> ir.Program:
    """Parse ``.loop`` source into a Program whose nodes all carry locations.

    Raises :class:`~polymap.errors.LoopSyntaxError` at the first token that
    does not fit, saying what was expected there. Names, subscripts and
    affinity are not checked here (see :func:`polymap.passes.frontend.semantics.checked`).
    """
    source = ir.SourceFile(filename, text)
    parser = _parser()
    try:
        tree = parser.parse(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, parser, source) from None
    _check_depth(tree, source)
    try:
        return LoopTransformer(source).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, PolymapError):
            raise exc.orig_exc from None
        raise


#: Deepest parse tree accepted. The transformer and every pass after it
#: (semantics, ISL text, evaluation, code printers) walk expressions
#: recursively; 400 levels still pass them all, 900 exhaust Python's stack.
MAX_DEPTH = 256


def _check_depth(tree: Tree, source: ir.SourceFile) -> None:
    """A located error for a tree deeper than :data:`MAX_DEPTH` (``1+1+...+1``, ``- - - 1``).

    Iterative, since the point is not to recurse that deep.
    """
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            meta = node.meta
            loc = (ir.Loc(meta.line, meta.column, meta.end_line, meta.end_column, source)
                   if not meta.empty else ir.Loc(0, 0, 0, 0, source))
            raise LoopSyntaxError(f"nested more than {MAX_DEPTH} levels deep (a very long expression?); "
                                  "split it, e.g. with a local scalar", loc)
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, Tree))
