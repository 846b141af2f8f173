"""``python -m polymap`` is the ``polymap`` command."""
from polymap.cli import entry

entry()
