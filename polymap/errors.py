"""One error hierarchy for polymap, and the ``FILE:LINE:COL`` renderer.

Two families, matching the exit statuses of ``cli.md``:

* :class:`PolymapError` and its subclasses are *bad input* (exit 2): syntax,
  semantics, unreadable files, bad options. They carry one or more
  :class:`Diagnostic` values that print as::

      gemm.loop:7:13: error: tensor 'A' has 2 dimensions but is indexed with 3 subscripts
          acc: C[i, j] += A[i, k, 0] * B[k, j]
                          ^^^^^^^^^^

* :class:`Refusal` is a well-formed request whose answer is "no" (exit 1):
  an illegal order, an invalid mapping, a failed verification. It carries
  the structured answer (``payload``) that ``--json`` prints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from polymap.ir import Loc


@dataclass(frozen=True)
class Diagnostic:
    """One message about one place in a file (or about no place: ``loc=None``)."""

    message: str
    loc: Loc | None = None
    severity: str = "error"  # "error" | "warning" | "note"
    notes: tuple[str, ...] = ()

    def render(self) -> str:
        """``FILE:LINE:COL: severity: message``, the source line and a caret under the span."""
        if self.loc is None or self.loc.line <= 0:
            head = f"{self.loc.filename}: " if self.loc is not None else ""
            text = f"{head}{self.severity}: {self.message}"
        else:
            text = f"{self.loc}: {self.severity}: {self.message}"
            src = self.loc.source.line(self.loc.line) if self.loc.source else ""
            if src:
                width = (
                    self.loc.end_col - self.loc.col
                    if self.loc.end_line == self.loc.line and self.loc.end_col > self.loc.col
                    else 1
                )
                text += f"\n    {src}\n    {' ' * (self.loc.col - 1)}{'^' * width}"
        for note in self.notes:
            text += f"\n    note: {note}"
        return text


class PolymapError(Exception):
    """Bad input: exit status 2. Holds one or more diagnostics."""

    exit_status = 2

    def __init__(self, message_or_diagnostics: str | Diagnostic | list[Diagnostic], loc: Loc | None = None) -> None:
        if isinstance(message_or_diagnostics, str):
            diags = [Diagnostic(message_or_diagnostics, loc)]
        elif isinstance(message_or_diagnostics, Diagnostic):
            diags = [message_or_diagnostics]
        else:
            diags = list(message_or_diagnostics)
        self.diagnostics: list[Diagnostic] = diags
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


class LoopSyntaxError(PolymapError):
    """The text is not in the ``.loop`` language."""


class SemanticError(PolymapError):
    """The text parses but breaks a rule of ``dsl.md`` (names, subscripts, affinity, bounds)."""


class InputError(PolymapError):
    """A file, option, parameter value or array given on the command line is unusable."""


class MappingError(PolymapError):
    """An architecture or mapping file is malformed (unknown names, bad tiles...)."""


class AnalysisError(PolymapError):
    """ISL could not answer a question about a well-formed kernel."""


class EnvironmentProblem(PolymapError):
    """The installation is broken (islpy without barvinok, no C compiler)."""


@dataclass
class Refusal(Exception):
    """A well-formed request whose answer is "no": exit status 1.

    ``message`` is the human report; ``payload`` the JSON document.
    """

    message: str
    payload: dict[str, Any] = field(default_factory=dict)
    exit_status: int = 1

    def __str__(self) -> str:
        return self.message


class IllegalTransformation(Refusal):
    """A loop order, tiling or spatial assignment would change the program's results."""


class InvalidMapping(Refusal):
    """A mapping that does not fit its architecture (capacity, fan-out)."""


class VerificationFailure(Refusal):
    """Generated code computed something else than the reference execution."""
