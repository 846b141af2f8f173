"""The long fuzz run of issue 14: ``python tests/fuzz/run.py --cases 10000 [--seed S] [--budget B]``.

Runs seeded cases (:mod:`fuzz.harness`) in this process, one after the
other, and prints how many of each command ran, their exit statuses and the
slowest, then every case that broke the contract (a traceback, an exit
outside 0-2, an answer beyond the budget) with its seed, to rerun alone with
``--cases 1 --seed SEED``. Exit status 1 when any did.
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the fuzz package

from fuzz.harness import COMMANDS, make_case, run_case  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0, help="the first seed")
    p.add_argument("--budget", type=float, default=20.0, help="--budget given to every case")
    p.add_argument("--commands", default=",".join(COMMANDS))
    args = p.parse_args(argv)
    commands = tuple(c for c in args.commands.split(",") if c)
    ran: collections.Counter = collections.Counter()
    statuses: collections.Counter = collections.Counter()
    bad, slowest = [], []
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for k, seed in enumerate(range(args.seed, args.seed + args.cases)):
            case = make_case(seed, commands=commands, budget=args.budget)
            outcome = run_case(case, Path(tmp) / str(seed % 64), budget=args.budget)
            ran[case.command] += 1
            statuses[(case.command, outcome.status)] += 1
            slowest = sorted(slowest + [(outcome.seconds, seed, case.command)], reverse=True)[:5]
            if outcome.problem:
                bad.append(outcome)
                print(f"problem at seed {seed}: polymap {' '.join(case.argv)}\n{outcome.problem}", file=sys.stderr,
                      flush=True)
            if (k + 1) % 500 == 0:
                print(f"{k + 1} cases, {len(bad)} problems, {time.monotonic() - start:.0f} s", file=sys.stderr)
    print(f"{args.cases} cases (seeds {args.seed}..{args.seed + args.cases - 1}) in {time.monotonic() - start:.0f} s")
    for c in COMMANDS:
        if ran[c]:
            by = ", ".join(f"exit {s}: {statuses[(c, s)]}" for s in sorted({s for (cc, s) in statuses if cc == c},
                                                                            key=str))
            print(f"  {c:10s} {ran[c]:6d}   {by}")
    print("slowest: " + ", ".join(f"{cmd} seed {s} {t:.1f} s" for t, s, cmd in slowest))
    print(f"problems: {len(bad)}")
    for o in bad:
        print(f"\nseed {o.case.seed}: polymap {' '.join(o.case.argv)}\n{o.problem}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
