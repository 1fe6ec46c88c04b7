"""A Celery app for drover's background-pool tests (tests/scenarios/program/celery.rs).

No broker service: kombu's filesystem transport keeps the queue as files under
$CELERY_QUEUE_DIR (the test's site). Each task run leaves a file of its own in
$CELERY_QUEUE_DIR/done, named by the task's number, the worker's pid and the run, so that
the test sees which tasks ran, where, and whether one ran twice.
"""

import os
import time
import uuid

from celery import Celery

base = os.environ["CELERY_QUEUE_DIR"]
queue = os.path.join(base, "queue")
processed = os.path.join(base, "processed")
done = os.path.join(base, "done")
for folder in (queue, processed, done):
    os.makedirs(folder, exist_ok=True)

app = Celery("tasks")
app.conf.update(
    broker_url="filesystem://",
    broker_transport_options={
        # Producer and consumers share one folder.
        "data_folder_in": queue,
        "data_folder_out": queue,
        # A taken message is renamed into this folder of the same filesystem: one
        # rename wins, so two workers never take the same message.
        "store_processed": True,
        "processed_folder": processed,
        "polling_interval": 0.1,
    },
    # A task is acknowledged when it has run, not when it is taken: a worker stopped in the
    # middle of one gives it back.
    task_acks_late=True,
    # Each worker holds only the task it runs.
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task
def record(number, seconds=0.0):
    """Works for `seconds`, then leaves its file in done/."""
    started = time.monotonic()
    time.sleep(seconds)
    name = f"{number}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    with open(os.path.join(done, name + ".tmp"), "w") as out:
        out.write(f"{time.monotonic() - started:.3f}\n")
    os.rename(os.path.join(done, name + ".tmp"), os.path.join(done, name))
    print(f"task {number} done by {os.getpid()}", flush=True)
    return number
