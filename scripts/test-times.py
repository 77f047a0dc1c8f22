#!/usr/bin/env python3
"""Where `cargo test`'s time went, from a log whose lines start with a Unix time.

    scripts/test-times.py LOG [N]

LOG holds `cargo test` output lines prefixed with the second they were read
(`.ci/run` writes it: `<seconds> <line>`). Prints the compile phase (start to
the first `Running`), the run phase, and the N (default 15) test binaries and
doc-test sets that took longest, each from its `Running`/`Doc-tests` line to
the next one. One-second resolution: enough to find the binaries worth a look.
"""
import re
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    start = None
    marks = []  # (time, label)
    crate = None  # the last crate whose unit tests ran
    end = None
    with open(sys.argv[1], errors="replace") as log:
        for raw in log:
            stamp, _, line = raw.rstrip("\n").partition(" ")
            if not stamp.isdigit():
                continue
            t = int(stamp)
            start = t if start is None else start
            end = t
            text = line.strip()
            m = re.match(r"Running (unittests )?(\S+) \((.+)\)", text)
            if m:
                exe = re.sub(r"-[0-9a-f]{16}$", "", m.group(3).rsplit("/", 1)[-1])
                if m.group(1):
                    crate = exe
                # Every crate's merged test binary is `integration`: name
                # its crate, from the unit tests cargo ran just before.
                who = f"{crate} " if exe == "integration" and crate else ""
                marks.append((t, f"{who}{m.group(2)} [{exe}]"))
            elif text.startswith("Doc-tests "):
                marks.append((t, "doc-tests " + text.split()[1]))
    if start is None:
        print("test-times: no timed lines in the log", file=sys.stderr)
        return 1
    if not marks:
        print(f"test-times: {end - start} s, no test binary ran")
        return 0
    spans = []
    for i, (t, label) in enumerate(marks):
        nxt = marks[i + 1][0] if i + 1 < len(marks) else end
        spans.append((nxt - t, label))
    compile_s = marks[0][0] - start
    run_s = end - marks[0][0]
    print(f"test-times: compile {compile_s} s (to the first binary), run {run_s} s, "
          f"{len(spans)} binaries/doc-test sets")
    for secs, label in sorted(spans, reverse=True)[:top]:
        print(f"  {secs:5d} s  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
