"""The child processes of the exercises' command line (graders.run_child starts them): `grade` grades one exercise
of one source and writes its Verdict as JSON; `device` runs kernels on the device for a grader."""

from __future__ import annotations

import argparse
import json
import sys

import exercises  # noqa: F401 (the project's modules before the student's folder on sys.path)
from exercises import BY_NUMBER
from exercises.graders import device_worker, grade
from exercises.splice import Source


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m exercises.worker")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade")
    for name in ("number", "path", "qualname", "result"):
        g.add_argument(name, type=int if name == "number" else str)
    g.add_argument("--all", action="store_true")
    g.add_argument("--quick", action="store_true")
    g.add_argument("--hidden", type=int)
    d = sub.add_parser("device")
    d.add_argument("spec")
    d.add_argument("progress")
    args = p.parse_args(argv)
    if args.command == "device":
        device_worker(args.spec, args.progress)
        return 0
    source = Source(args.path, args.qualname)
    verdict = grade(BY_NUMBER[args.number], source, quick=args.quick, all_failures=args.all, hidden=args.hidden)
    with open(args.result, "w") as f:
        json.dump(verdict.to_json(), f, default=repr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
