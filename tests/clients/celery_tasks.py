"""Celery app for celery_check.py: Redis as broker and result backend.

The queue with x-expires makes kombu keep its binding with the REFRESH_BINDING
script; the chord makes the result backend join with its chord Lua scripts.
"""
import os

from celery import Celery
from kombu import Exchange, Queue

URL = os.environ["CAIRN_CLIENTS_URL"]

app = Celery("cairn_celery", broker=URL, backend=URL)
app.conf.update(
    task_queues=[
        Queue("celery", Exchange("celery"), routing_key="celery"),
        Queue("cairn_expiring", Exchange("cairn_expiring"), routing_key="cairn_expiring",
              expires=120),
    ],
    task_default_queue="celery",
    broker_connection_retry_on_startup=True,
    result_expires=600,
    worker_prefetch_multiplier=1,
)


@app.task
def add(x, y):
    return x + y


@app.task
def total(xs):
    return sum(xs)


@app.task
def fail(message):
    raise ValueError(message)
