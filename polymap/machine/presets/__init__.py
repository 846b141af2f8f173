"""Architecture presets shipped as package data (``toy.yaml``, ``eyeriss.yaml``).

``host`` is not a file: :mod:`polymap.machine.hostinfo` builds it from the operating system.
"""
