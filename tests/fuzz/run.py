"""The long fuzz run of issue 14: ``python tests/fuzz/run.py --cases 10000 [--seed S] [--jobs 2] [--log F]``.

Every seeded case (:mod:`fuzz.harness`) runs in a forked child of this
process, in a session of its own, so that a case that hangs is killed (with
everything it started) after ``--hard-timeout`` seconds and recorded as a
problem instead of stopping the run. ``--jobs N`` runs N cases at once.
Each finished case is appended to the log (JSON lines, ``--log``, default
``fuzz-SEED-CASES.jsonl`` in the current directory); a run given the same
log skips the seeds already in it, so an interrupted run resumes.

At the end it prints how many of each command ran, their exit statuses and
the slowest, then every case that broke the contract (a traceback, an exit
outside 0-2, an answer beyond the budget, a hang) with its seed, to rerun alone
with ``--cases 1 --seed SEED --log /dev/null``. Exit status 1 when any did.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the fuzz package

from fuzz.harness import COMMANDS, make_case, run_case  # noqa: E402


def _child(seed: int, commands: tuple[str, ...], budget: float, workdir: Path, write_fd: int) -> None:
    """In the forked child: run one case and write its outcome as one JSON line to ``write_fd``."""
    os.setsid()  # its own process group: a hang is killed with everything it started (cc, ISL children)
    case = make_case(seed, commands=commands, budget=budget)
    outcome = run_case(case, workdir, budget=budget)
    record = {"seed": seed, "command": case.command, "argv": list(case.argv), "status": outcome.status,
              "seconds": round(outcome.seconds, 3), "problem": outcome.problem, "said": outcome.last_line}
    with os.fdopen(write_fd, "w") as f:
        f.write(json.dumps(record))


def _start(seed: int, commands: tuple[str, ...], budget: float, tmp: Path) -> tuple[int, int, float]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into the parent's loop
        code = 0
        try:
            os.close(read_fd)
            _child(seed, commands, budget, tmp / str(seed), write_fd)
        except BaseException:  # noqa: BLE001 - whatever happens, the child must end here
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd, time.monotonic()


def _finish(pid: int, read_fd: int, seed: int, started: float, commands: tuple[str, ...], budget: float,
            killed: bool) -> dict:
    if killed:
        with_group = True
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            with_group = False
        if not with_group:
            os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with os.fdopen(read_fd) as f:
        text = f.read()
    if text:
        return json.loads(text)
    case = make_case(seed, commands=commands, budget=budget)
    seconds = time.monotonic() - started
    why = f"killed after {seconds:.0f} s (a hang)" if killed else "the case's process died without an answer"
    return {"seed": seed, "command": case.command, "argv": list(case.argv), "status": None,
            "seconds": round(seconds, 3), "problem": why}


def _read_log(path: Path) -> dict[int, dict]:
    done = {}
    if path.exists() and path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                done[record["seed"]] = record
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0, help="the first seed")
    p.add_argument("--budget", type=float, default=20.0, help="--budget given to every case")
    p.add_argument("--commands", default=",".join(COMMANDS))
    p.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    p.add_argument("--log", default=None, help="JSON-lines log, read to resume and appended to "
                   "(default fuzz-SEED-CASES.jsonl)")
    p.add_argument("--hard-timeout", type=float, default=None,
                   help="kill a case after this many seconds (default: 3 budgets + 60)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds to run instead of a range")
    args = p.parse_args(argv)
    commands = tuple(c for c in args.commands.split(",") if c)
    hard = args.hard_timeout if args.hard_timeout is not None else 3 * args.budget + 60
    seeds = ([int(s) for s in args.seeds.split(",") if s] if args.seeds
             else list(range(args.seed, args.seed + args.cases)))
    log_path = Path(args.log or f"fuzz-{args.seed}-{args.cases}.jsonl")
    done = _read_log(log_path)
    todo = [s for s in seeds if s not in done]
    if len(todo) < len(seeds):
        print(f"resuming: {len(seeds) - len(todo)} of {len(seeds)} cases already in {log_path}", file=sys.stderr)
    records = {s: done[s] for s in seeds if s in done}
    start = time.monotonic()
    running: dict[int, tuple[int, int, float]] = {}  # seed -> (pid, read fd, start)
    with tempfile.TemporaryDirectory() as tmp, open(log_path, "a") as log:
        pending = list(reversed(todo))
        while pending or running:
            while pending and len(running) < max(1, args.jobs):
                seed = pending.pop()
                running[seed] = _start(seed, commands, args.budget, Path(tmp))
            time.sleep(0.02)
            for seed, (pid, fd, started) in list(running.items()):
                ended, _ = os.waitpid(pid, os.WNOHANG)
                over = time.monotonic() - started > hard
                if not ended and not over:
                    continue
                if ended:  # reaped already: read what it wrote
                    with os.fdopen(fd) as f:
                        text = f.read()
                    record = json.loads(text) if text else {
                        "seed": seed, "command": make_case(seed, commands=commands, budget=args.budget).command,
                        "argv": list(make_case(seed, commands=commands, budget=args.budget).argv), "status": None,
                        "seconds": round(time.monotonic() - started, 3),
                        "problem": "the case's process died without an answer"}
                    _kill_group(pid)
                else:
                    record = _finish(pid, fd, seed, started, commands, args.budget, killed=True)
                del running[seed]
                shutil.rmtree(Path(tmp) / str(seed), ignore_errors=True)
                records[seed] = record
                log.write(json.dumps(record) + "\n")
                log.flush()
                if record["problem"]:
                    print(f"problem at seed {seed}: polymap {' '.join(record['argv'])}\n{record['problem']}",
                          file=sys.stderr, flush=True)
                if len(records) % 500 == 0:
                    nbad = sum(1 for r in records.values() if r["problem"])
                    print(f"{len(records)} cases, {nbad} problems, {time.monotonic() - start:.0f} s",
                          file=sys.stderr, flush=True)
    return _report(records, seeds, time.monotonic() - start)


def _kill_group(pid: int) -> None:
    """Whatever the case left running in its session (a C compiler, a budget's child)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _report(records: dict[int, dict], seeds: list[int], seconds: float) -> int:
    ran: collections.Counter = collections.Counter()
    statuses: collections.Counter = collections.Counter()
    for r in records.values():
        ran[r["command"]] += 1
        statuses[(r["command"], r["status"])] += 1
    bad = [r for r in records.values() if r["problem"]]
    slowest = sorted(records.values(), key=lambda r: -r["seconds"])[:5]
    print(f"{len(records)} cases (seeds {min(seeds)}..{max(seeds)}), this run {seconds:.0f} s")
    for c in COMMANDS:
        if ran[c]:
            by = ", ".join(f"exit {s}: {statuses[(c, s)]}"
                           for s in sorted({s for (cc, s) in statuses if cc == c}, key=str))
            print(f"  {c:10s} {ran[c]:6d}   {by}")
    print("slowest: " + ", ".join(f"{r['command']} seed {r['seed']} {r['seconds']:.1f} s" for r in slowest))
    print(f"problems: {len(bad)}")
    for r in sorted(bad, key=lambda r: r["seed"]):
        print(f"\nseed {r['seed']}: polymap {' '.join(r['argv'])}\n{r['problem']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
