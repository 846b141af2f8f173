"""Statement separators between the lexer and the parser.

The grammar sees at most one ``_NL`` between two items. This postlexer
makes that true: a newline or ``;`` becomes one ``_NL``; inside ``( )`` and
``[ ]`` it is dropped (an expression may span lines); a run of separators
collapses into one; and a separator that cannot end anything is dropped:
at the start and end of the file, after ``{`` or ``,``, and before ``}``,
``{``, ``else`` or ``where``.

Sketch (token types)::

    { \\n \\n S : x [ i \\n ] = 0 ; \\n }   ->   { S : x [ i ] = 0 }
"""
from __future__ import annotations

from typing import Iterator

from lark import Token

_OPEN = {"LPAR", "LSQB"}
_CLOSE = {"RPAR", "RSQB"}
#: After these a separator means nothing.
_NO_NL_AFTER = {"LBRACE", "COMMA"}
#: Before these a separator means nothing (``}`` closes the statement by itself).
_NO_NL_BEFORE = {"RBRACE", "LBRACE", "ELSE", "WHERE"}


class SeparatorPostLex:
    """Lark postlexer: normalises ``_NL`` tokens as described in the module docstring."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        pending: Token | None = None
        previous: str | None = None
        for tok in stream:
            if tok.type == "_NL":
                if depth == 0 and previous is not None and previous not in _NO_NL_AFTER:
                    pending = pending or tok
                continue
            if tok.type in _OPEN:
                depth += 1
            elif tok.type in _CLOSE:
                depth = max(0, depth - 1)
            if pending is not None and tok.type not in _NO_NL_BEFORE:
                yield pending
            pending = None
            yield tok
            previous = tok.type
