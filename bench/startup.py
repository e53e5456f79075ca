#!/usr/bin/env python3
"""Start-up time of short commands, side by side: each NAME=COMMAND is run RUNS times,
interleaved (one run of every command per round, the order reversed every other round, so a
drift of the machine's speed falls on all alike), and the median wall time and CPU time
(user + system of the process and its children, from wait4: microseconds, not the 10 ms
ticks of `time`) are printed per command, with the quartiles. CPU time is what a busy or
shared machine distorts least; wall time is what a caller waits.

  bench/startup.py [--runs 50] [--stdin FILE] NAME='COMMAND ARGS' [NAME='...' ...]

COMMAND is split as a shell would split words (shlex), not run through a shell: the figures
are the command's own, without a shell's start-up. stdout goes to /dev/null; a command that
fails stops the run with its stderr. bench/startup.sh runs the commands of the start-up
comparison (`nightlora --version`, `nightlora tokenize`) for two builds.
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv, stdin_path):
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdin_path:
            stdin.close()
    if p.returncode != 0:
        sys.exit(f"startup.py: {shlex.join(argv)} exited {p.returncode}:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime


def quartiles(xs):
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--stdin", help="file given to every command as stdin")
    ap.add_argument("commands", nargs="+", metavar="NAME=COMMAND")
    args = ap.parse_args()
    commands = []
    for c in args.commands:
        name, sep, line = c.partition("=")
        if not sep or not line:
            sys.exit(f"startup.py: '{c}' is not NAME=COMMAND")
        commands.append((name, shlex.split(line)))
    for _, argv in commands:  # one untimed run each: page cache and CPU frequency settle
        run_once(argv, args.stdin)
    wall = {n: [] for n, _ in commands}
    cpu = {n: [] for n, _ in commands}
    for r in range(args.runs):
        for name, argv in commands if r % 2 == 0 else reversed(commands):
            w, c = run_once(argv, args.stdin)
            wall[name].append(w)
            cpu[name].append(c)
    print(f"{args.runs} runs each, interleaved; ms, median [quartiles]")
    width = max(len(n) for n, _ in commands)
    print(f"{'command':<{width}}  {'wall':>24}  {'cpu (user+sys)':>24}")
    for name, argv in commands:
        w = [x * 1e3 for x in quartiles(wall[name])]
        c = [x * 1e3 for x in quartiles(cpu[name])]
        print(f"{name:<{width}}  {w[1]:7.2f} [{w[0]:6.2f}, {w[2]:6.2f}]  {c[1]:7.2f} [{c[0]:6.2f}, {c[2]:6.2f}]")
    for name, argv in commands:
        print(f"  {name}: {shlex.join(argv)}")


if __name__ == "__main__":
    main()
