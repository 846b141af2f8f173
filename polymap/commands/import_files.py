"""``polymap import timeloop PROBLEM.yaml ARCH.yaml [MAPPING.yaml] -o DIR``: Timeloop's files as polymap's.

Writes ``DIR/NAME.loop``, ``DIR/arch.yaml`` and (with a mapping)
``DIR/mapping.yaml`` (:func:`polymap.api.import_timeloop`) and says what it
wrote, and which Timeloop levels became two polymap levels.
"""
from __future__ import annotations

import argparse
import json

from polymap import api


def main(args: argparse.Namespace) -> int:
    result = api.import_timeloop(args.problem, args.arch, args.mapping, args.output_dir)
    if args.json:
        print(json.dumps({"kernel": result.kernel, "files": list(result.files), "notes": list(result.notes)},
                         indent=2))
        return 0
    print(f"kernel {result.kernel}: wrote {', '.join(result.files)}")
    for note in result.notes:
        print(f"  note: {note}")
    return 0
