"""dramatiq actors for dramatiq_check.py: the Redis broker (its dispatch is
one Lua script, run for every enqueue, fetch, ack and nack) and the Redis
results backend.
"""
import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend

URL = os.environ["CAIRN_CLIENTS_URL"]

broker = RedisBroker(url=URL)
broker.add_middleware(Results(backend=RedisBackend(url=URL)))
dramatiq.set_broker(broker)


@dramatiq.actor(store_results=True, max_retries=0)
def multiply(x, y):
    return x * y


@dramatiq.actor(store_results=True, max_retries=0)
def fail(message):
    raise ValueError(message)
