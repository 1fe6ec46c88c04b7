"""Sends tasks to the queue: `python3 enqueue.py FIRST COUNT SECONDS` sends record(n,
SECONDS) for n in FIRST..FIRST+COUNT-1 (run with the app's folder as the working folder)."""

import sys

from tasks import record

first, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
for number in range(first, first + count):
    record.delay(number, seconds)
print(f"sent {count}", flush=True)
