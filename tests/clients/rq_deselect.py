"""pytest plugin for rq_suite.sh: leaves out the tests that
rq_suite_deselect.txt lists under the tags in $CAIRN_RQ_DESELECT_TAGS, by
exact node id (pytest's own --deselect matches prefixes, and would take
test_work_burst with test_work). A listed id that no longer exists fails the
run, so a new rq version cannot silently shrink the list's meaning."""

import os
from pathlib import Path

LIST = Path(__file__).with_name("rq_suite_deselect.txt")


def listed(tags):
    out = {}
    for line in LIST.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] in tags:
            out[fields[1]] = fields[0]
    return out


def pytest_collection_modifyitems(session, config, items):
    tags = set(os.environ.get("CAIRN_RQ_DESELECT_TAGS", "never slow").split())
    wanted = listed(tags)
    seen = {item.nodeid for item in items}
    stale = sorted(set(wanted) - seen)
    if stale:
        raise RuntimeError(f"{LIST.name} lists tests that rq does not have: {stale}")
    keep = [item for item in items if item.nodeid not in wanted]
    gone = [item for item in items if item.nodeid in wanted]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = keep
