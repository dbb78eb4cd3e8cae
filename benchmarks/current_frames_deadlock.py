"""Hang 2's cause without ctxrag or Dask: does ``sys._current_frames()`` deadlock this Python when a garbage collection
inside it frees a ``threading.local``? (CPython 3.11 does: the call holds the runtime's thread-list lock while it
allocates, and clearing a ``threading.local`` takes that lock again, with the GIL held.)

    .venv/bin/python benchmarks/current_frames_deadlock.py [--seconds 20] [--plain]

Runs the probe in a child process and kills it at the deadline; ``--plain`` frees a plain object instead (the control).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

PROBE = """
import gc, sys, threading, time
stop = False
def busy():  # frames without a frame object yet: _current_frames() allocates them (GC-tracked objects)
    def leaf(n):
        return n + 1
    while not stop:
        leaf(1)
def garbage():  # cyclic garbage holding a threading.local, like tenacity's Retrying (self._local) after each call
    while not stop:
        class Holder: pass
        holder = Holder(); holder.me = holder; holder.local = LOCAL()
        del holder
        time.sleep(0)
LOCAL = object if sys.argv[2] == "plain" else threading.local
for target in [busy, busy, busy, garbage]:
    threading.Thread(target=target, daemon=True).start()
gc.set_threshold(50)
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    sys._current_frames()  # what Dask's worker profiler calls every 10 ms
stop = True
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--plain", action="store_true", help="free plain objects, not threading.local ones (control)")
    args = parser.parse_args()
    try:
        subprocess.run([sys.executable, "-c", PROBE, str(args.seconds), "plain" if args.plain else "local"], timeout=args.seconds + 15)
        print(f"Python {sys.version.split()[0]}: no deadlock in {args.seconds:g} s")
    except subprocess.TimeoutExpired:
        print(f"Python {sys.version.split()[0]}: DEADLOCK (sys._current_frames() + a collected threading.local)")
        sys.exit(1)


if __name__ == "__main__":
    main()
