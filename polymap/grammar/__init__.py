"""The ``.loop`` parser: text -> :class:`polymap.ir.Program` (syntax only).

The grammar is ``loop.lark`` (LALR, basic lexer so that keywords are
reserved everywhere); :mod:`.postlex` normalises statement separators;
:mod:`.transformer` builds the located IR; :mod:`.syntax_errors` turns
lark's exceptions into :class:`~polymap.errors.LoopSyntaxError` in the
user's words. The rules of ``dsl.md`` that need more than syntax live in
:mod:`polymap.passes.semantics`.
"""
from __future__ import annotations

from functools import lru_cache

from lark import Lark
from lark.exceptions import UnexpectedInput, VisitError

from .. import ir
from ..errors import PolymapError
from .postlex import SeparatorPostLex
from .syntax_errors import syntax_error
from .transformer import LoopTransformer

__all__ = ["parse_program"]


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark.open(
        "loop.lark",
        rel_to=__file__,
        parser="lalr",
        lexer="basic",
        postlex=SeparatorPostLex(),
        propagate_positions=True,
        maybe_placeholders=True,
    )


def parse_program(text: str, filename: str = "<input>") -> ir.Program:
    """Parse ``.loop`` source into a Program whose nodes all carry locations.

    Raises :class:`~polymap.errors.LoopSyntaxError` at the first token that
    does not fit, saying what was expected there. Names, subscripts and
    affinity are not checked here (see :func:`polymap.passes.semantics.checked`).
    """
    source = ir.SourceFile(filename, text)
    parser = _parser()
    try:
        tree = parser.parse(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, parser, source) from None
    try:
        return LoopTransformer(source).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, PolymapError):
            raise exc.orig_exc from None
        raise
