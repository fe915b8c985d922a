// BullMQ against a Redis-compatible server (issue 22): plain, delayed,
// retried (attempts + backoff), rate-limited and parent/child (FlowProducer)
// jobs must all finish, observed through Queue, Worker and QueueEvents.
// BullMQ runs nearly everything as Lua scripts that write streams (XADD for
// its event log, XREAD BLOCK in QueueEvents), so this is a test of Cairn's
// scripting and streams together.
//
// Usage: node check.js redis://127.0.0.1:PORT/0 (or $CAIRN_CLIENTS_URL).
// Exits 0 when every check passed; otherwise prints what failed and exits 1,
// also on its own deadline (DEADLINE_MS), so a hang is reported, not waited
// out. Modules come from NODE_PATH (scripts/install_test_clients.sh installs
// the pinned package-lock.json under target/, outside the source tree).
'use strict';

const { Queue, Worker, QueueEvents, FlowProducer } = require('bullmq');

const DEADLINE_MS = 45000;
// How long one job may take to finish once added (delays and backoff included).
const JOB_WAIT_MS = 15000;

const url = new URL(process.argv[2] || process.env.CAIRN_CLIENTS_URL || '');
const connection = {
  host: url.hostname,
  port: Number(url.port),
  db: Number(url.pathname.slice(1) || 0),
  // BullMQ requires this for its blocking connections; a failure then
  // surfaces as an error instead of an endless reconnect loop.
  maxRetriesPerRequest: null,
  retryStrategy: () => null,
};
// One prefix per run, so a rerun against a server that kept data starts clean.
const prefix = `cairn-bullmq-${process.pid}`;
const closers = [];

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

const deadline = setTimeout(
  () => fail(`timed out after ${DEADLINE_MS} ms; the checks above 'ok' lines finished`),
  DEADLINE_MS,
);

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

function open(obj) {
  closers.push(obj);
  obj.on('error', (err) => fail(`${obj.constructor.name} ${obj.name || ''}: ${err.stack || err}`));
  return obj;
}

function queue(name) {
  return open(new Queue(name, { connection, prefix }));
}

function worker(name, processor, opts = {}) {
  return open(new Worker(name, processor, { connection, prefix, ...opts }));
}

async function events(name) {
  const ev = open(new QueueEvents(name, { connection, prefix }));
  // QueueEvents reads the event stream from '$' once connected: wait, or an
  // event written before its first XREAD would be missed.
  await ev.waitUntilReady();
  return ev;
}

async function plain() {
  const q = queue('plain');
  const ev = await events('plain');
  worker('plain', async (job) => job.data.n * 2);
  const jobs = await q.addBulk(
    Array.from({ length: 5 }, (_, n) => ({ name: 'double', data: { n } })),
  );
  const results = await Promise.all(jobs.map((j) => j.waitUntilFinished(ev, JOB_WAIT_MS)));
  check(JSON.stringify(results) === '[0,2,4,6,8]', `results ${JSON.stringify(results)}`);
  const counts = await q.getJobCounts('completed', 'waiting', 'active', 'failed');
  check(counts.completed === 5 && counts.waiting === 0 && counts.failed === 0,
    `job counts after completion: ${JSON.stringify(counts)}`);
  return '5 jobs, return values and counts';
}

async function delayed() {
  const q = queue('delayed');
  const ev = await events('delayed');
  const DELAY_MS = 1000;
  let startedAt = 0;
  worker('delayed', async () => {
    startedAt = Date.now();
    return 'late';
  });
  const added = Date.now();
  const job = await q.add('later', {}, { delay: DELAY_MS });
  const state = await job.getState();
  check(state === 'delayed', `state right after add is ${state}, not delayed`);
  const rv = await job.waitUntilFinished(ev, JOB_WAIT_MS);
  check(rv === 'late', `return value ${rv}`);
  const waited = startedAt - added;
  // BullMQ schedules on the server's clock in whole milliseconds: allow a
  // little skew, but a job run early means the delayed set was ignored.
  check(waited >= DELAY_MS - 50, `ran ${waited} ms after add, before its ${DELAY_MS} ms delay`);
  return `ran ${waited} ms after add (delay ${DELAY_MS} ms)`;
}

async function retried() {
  const q = queue('retried');
  const ev = await events('retried');
  const BACKOFF_MS = 300;
  const calls = [];
  const w = worker('retried', async (job) => {
    calls.push(Date.now());
    if (job.attemptsMade < 2) throw new Error(`attempt ${job.attemptsMade + 1} fails`);
    return `done after ${calls.length}`;
  });
  let failedEvents = 0;
  w.on('failed', () => {
    failedEvents += 1;
  });
  const job = await q.add('flaky', {}, {
    attempts: 3,
    backoff: { type: 'fixed', delay: BACKOFF_MS },
  });
  const rv = await job.waitUntilFinished(ev, JOB_WAIT_MS);
  check(rv === 'done after 3', `return value ${rv}`);
  check(calls.length === 3, `processor called ${calls.length} times, not 3`);
  check(failedEvents === 2, `${failedEvents} failed events, not 2`);
  for (let i = 1; i < calls.length; i++) {
    const gap = calls[i] - calls[i - 1];
    check(gap >= BACKOFF_MS - 50, `attempt ${i + 1} ran ${gap} ms after the last, within the ${BACKOFF_MS} ms backoff`);
  }
  const fresh = await q.getJob(job.id);
  check(fresh.attemptsMade === 3, `attemptsMade ${fresh.attemptsMade}, not 3`);
  const failed = await q.getFailedCount();
  check(failed === 0, `${failed} jobs in the failed set`);
  return 'failed twice, backed off, succeeded on attempt 3';
}

async function rateLimited() {
  const q = queue('limited');
  const ev = await events('limited');
  const MAX = 2;
  const DURATION_MS = 500;
  const JOBS = 6;
  let ran = 0;
  worker('limited', async () => {
    ran += 1;
  }, { limiter: { max: MAX, duration: DURATION_MS }, concurrency: 4 });
  const jobs = await q.addBulk(Array.from({ length: JOBS }, (_, n) => ({ name: 'tick', data: { n } })));
  await Promise.all(jobs.map((j) => j.waitUntilFinished(ev, JOB_WAIT_MS)));
  check(ran === JOBS, `${ran} jobs ran, not ${JOBS}`);
  // processedOn is stamped when the worker asks the server for the job,
  // before the limiter counts it: unlike the processor's own start time it
  // does not drift later when this process is slow to run the callback.
  const starts = [];
  for (const j of jobs) starts.push((await q.getJob(j.id)).processedOn);
  starts.sort((a, b) => a - b);
  // No more than MAX starts in any window of DURATION_MS, less a margin: a
  // stamp is the client's clock when it sent the request, which the server
  // may run a moment later (a limiter that does not limit gives gaps near 0).
  for (let i = MAX; i < starts.length; i++) {
    const gap = starts[i] - starts[i - MAX];
    check(gap >= DURATION_MS - 100, `jobs ${i - MAX + 1} and ${i + 1} started ${gap} ms apart, limit ${MAX} per ${DURATION_MS} ms`);
  }
  return `${JOBS} jobs over ${starts[JOBS - 1] - starts[0]} ms at ${MAX} per ${DURATION_MS} ms`;
}

async function flow() {
  const parents = queue('flow-parents');
  const ev = await events('flow-parents');
  const flows = open(new FlowProducer({ connection, prefix }));
  worker('flow-children', async (job) => job.data.x * 10);
  worker('flow-parents', async (job) => {
    const values = Object.values(await job.getChildrenValues());
    return values.reduce((a, b) => a + b, 0);
  });
  const tree = await flows.add({
    name: 'sum',
    queueName: 'flow-parents',
    children: [1, 2, 3].map((x) => ({ name: 'times-ten', queueName: 'flow-children', data: { x } })),
  });
  check(tree.children.length === 3, `flow has ${tree.children.length} children`);
  const rv = await tree.job.waitUntilFinished(ev, JOB_WAIT_MS);
  check(rv === 60, `parent returned ${rv}, not 60 (the children's values summed)`);
  const parentState = await parents.getJobState(tree.job.id);
  check(parentState === 'completed', `parent state ${parentState}`);
  return 'parent ran after its 3 children and saw their values';
}

async function main() {
  const checks = { plain, delayed, retried, rateLimited, flow };
  let failures = 0;
  // One after another: the timing checks (delay, backoff, limiter) would
  // measure each other's load otherwise.
  for (const [name, fn] of Object.entries(checks)) {
    const t0 = Date.now();
    try {
      const what = await fn();
      console.log(`ok: ${name}: ${what} (${Date.now() - t0} ms)`);
    } catch (err) {
      failures += 1;
      console.error(`FAIL: ${name}: ${err.stack || err}`);
    }
  }
  await Promise.all(closers.reverse().map((c) => c.close()));
  clearTimeout(deadline);
  if (failures) fail(`${failures} of ${Object.keys(checks).length} BullMQ checks failed`);
  console.log('all BullMQ checks passed');
  process.exit(0);
}

main().catch((err) => fail(err.stack || String(err)));
