"""Jobs for rq_check.py: the worker imports them by dotted name, so they live
in a module of their own on the worker's path (tests/clients)."""


def add(a, b):
    return a + b


def shout(word):
    return {"word": word.upper(), "len": len(word)}


def explode(n):
    raise ValueError(f"boom {n}")
