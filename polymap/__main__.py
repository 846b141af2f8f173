"""``python -m polymap`` is the ``polymap`` command."""
from .cli import entry

entry()
