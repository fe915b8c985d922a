//! `cairn-bench ycsb`: YCSB's CoreWorkload (workloads A–F) with a load
//! phase and a run phase, records laid out on the wire exactly as YCSB's
//! own bindings lay them out:
//!
//! * RESP (YCSB's `RedisClient`): a record is `HMSET user<hash> field0 v0 …
//!   field9 v9` followed by `ZADD _indices <String.hashCode(key)> <key>`;
//!   a read is `HGETALL` (or `HMGET` of one field without readallfields);
//!   an update `HMSET` of the written fields; a scan `ZRANGEBYSCORE
//!   _indices <hash(startkey)> +inf LIMIT 0 <len>` then a read of each key.
//! * memcached (YCSB's `MemcachedClient`): one value per record, the JSON
//!   object `{"field0":"…",…}` under `usertable-user<hash>`; insert is
//!   `add`, update `replace` of the JSON of the written fields (so, as in
//!   YCSB, an update without writeallfields leaves one field), read `get`.
//!   Scans are not implemented by YCSB's binding, so workloads with scans
//!   are refused for memcached targets.
//!
//! Differences from YCSB, all in the direction of stricter measurement: a
//! read that finds nothing is counted as a `missing` error (YCSB's memcached
//! binding reports it as OK), an operation that completes after the client
//! time-out is counted as a time-out, not timed, and the read and update
//! inside a READ-MODIFY-WRITE are timed only as part of it (YCSB also adds
//! them to READ and UPDATE), so that every operation is counted once.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::gen::{
    build_key_name, java_string_hash, random_ascii, AckCounter, Distribution, KeyChooser, Length,
    OpChooser, YcsbOp, Zipfian, ZIPFIAN_CONSTANT,
};
use crate::report::{make_run, Record};
use crate::resp::RespConn;
use crate::runner::{connect, run_threads, thread_seed, Ctx, Outcome, Start, Throttle};
use crate::stats::Recorder;
use crate::target::{Conn, Protocol, Target};
use crate::wire::OpError;

/// Operation names, indexed like [`YcsbOp`].
pub const NAMES: &[&str] = &["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"];
const LOAD_NAMES: &[&str] = &["INSERT"];

/// The key of YCSB's Redis binding's scan index.
pub const INDEX_KEY: &[u8] = b"_indices";

/// CoreWorkload's properties (YCSB names), after defaults, the workload
/// file and `-p` overrides.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub name: String,
    pub recordcount: u64,
    pub operationcount: u64,
    pub fieldcount: usize,
    pub fieldlength: u64,
    pub minfieldlength: u64,
    pub fieldlengthdistribution: String,
    pub fieldnameprefix: String,
    pub table: String,
    pub readallfields: bool,
    pub readallfieldsbyname: bool,
    pub writeallfields: bool,
    pub readproportion: f64,
    pub updateproportion: f64,
    pub insertproportion: f64,
    pub scanproportion: f64,
    pub readmodifywriteproportion: f64,
    pub requestdistribution: Distribution,
    pub minscanlength: u64,
    pub maxscanlength: u64,
    pub scanlengthdistribution: String,
    pub insertorder: String,
    pub zeropadding: usize,
    pub hotspotdatafraction: f64,
    pub hotspotopnfraction: f64,
}

/// YCSB's workload files a–f (workloads/workloada … workloadf), as
/// properties.
pub fn preset(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "a" | "workloada" => {
            "recordcount=1000\noperationcount=1000\nreadallfields=true\n\
             readproportion=0.5\nupdateproportion=0.5\nscanproportion=0\ninsertproportion=0\n\
             requestdistribution=zipfian"
        }
        "b" | "workloadb" => {
            "recordcount=1000\noperationcount=1000\nreadallfields=true\n\
             readproportion=0.95\nupdateproportion=0.05\nscanproportion=0\ninsertproportion=0\n\
             requestdistribution=zipfian"
        }
        "c" | "workloadc" => {
            "recordcount=1000\noperationcount=1000\nreadallfields=true\n\
             readproportion=1\nupdateproportion=0\nscanproportion=0\ninsertproportion=0\n\
             requestdistribution=zipfian"
        }
        "d" | "workloadd" => {
            "recordcount=1000\noperationcount=1000\nreadallfields=true\n\
             readproportion=0.95\nupdateproportion=0\nscanproportion=0\ninsertproportion=0.05\n\
             requestdistribution=latest"
        }
        "e" | "workloade" => {
            "recordcount=1000\noperationcount=1000\nreadallfields=true\n\
             readproportion=0\nupdateproportion=0\nscanproportion=0.95\ninsertproportion=0.05\n\
             requestdistribution=zipfian\nmaxscanlength=100\nscanlengthdistribution=uniform"
        }
        "f" | "workloadf" => {
            "recordcount=1000\noperationcount=1000\nreadallfields=true\n\
             readproportion=0.5\nupdateproportion=0\nscanproportion=0\ninsertproportion=0\n\
             readmodifywriteproportion=0.5\nrequestdistribution=zipfian"
        }
        _ => return None,
    })
}

/// Parses a Java-properties-style workload text (`key=value`, `#` or `!`
/// comments).
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let (k, v) = l.split_once('=').or_else(|| l.split_once(':'))?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

impl Workload {
    /// Builds the workload: CoreWorkload's defaults, then the workload (a
    /// preset letter or a YCSB workload file), then `overrides`.
    pub fn build(workload: &str, overrides: &[(String, String)]) -> Result<Workload, String> {
        let (name, text) = match preset(workload) {
            Some(t) => (
                format!("workload{}", workload.trim_start_matches("workload")),
                t.to_string(),
            ),
            None => {
                let p = Path::new(workload);
                let t = std::fs::read_to_string(p).map_err(|e| {
                    format!("--workload {workload}: not a-f and not a readable file: {e}")
                })?;
                (workload.to_string(), t)
            }
        };
        let mut props: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in parse_properties(&text)
            .into_iter()
            .chain(overrides.iter().cloned())
        {
            props.insert(k, v);
        }
        let mut w = Workload {
            name,
            recordcount: 1000,
            operationcount: 1000,
            fieldcount: 10,
            fieldlength: 100,
            minfieldlength: 1,
            fieldlengthdistribution: "constant".into(),
            fieldnameprefix: "field".into(),
            table: "usertable".into(),
            readallfields: true,
            readallfieldsbyname: false,
            writeallfields: false,
            readproportion: 0.95,
            updateproportion: 0.05,
            insertproportion: 0.0,
            scanproportion: 0.0,
            readmodifywriteproportion: 0.0,
            requestdistribution: Distribution::Uniform,
            minscanlength: 1,
            maxscanlength: 1000,
            scanlengthdistribution: "uniform".into(),
            insertorder: "hashed".into(),
            zeropadding: 1,
            hotspotdatafraction: 0.2,
            hotspotopnfraction: 0.8,
        };
        for (k, v) in &props {
            let bad = |what: &str| format!("property {k}={v}: {what}");
            let u = || {
                v.parse::<u64>()
                    .map_err(|_| bad("not a non-negative integer"))
            };
            let f = || v.parse::<f64>().map_err(|_| bad("not a number"));
            let b = || v.parse::<bool>().map_err(|_| bad("not true/false"));
            match k.as_str() {
                "recordcount" => w.recordcount = u()?,
                "operationcount" => w.operationcount = u()?,
                "fieldcount" => w.fieldcount = u()? as usize,
                "fieldlength" => w.fieldlength = u()?,
                "minfieldlength" => w.minfieldlength = u()?,
                "fieldlengthdistribution" => w.fieldlengthdistribution = v.clone(),
                "fieldnameprefix" => w.fieldnameprefix = v.clone(),
                "table" => w.table = v.clone(),
                "readallfields" => w.readallfields = b()?,
                "readallfieldsbyname" => w.readallfieldsbyname = b()?,
                "writeallfields" => w.writeallfields = b()?,
                "readproportion" => w.readproportion = f()?,
                "updateproportion" => w.updateproportion = f()?,
                "insertproportion" => w.insertproportion = f()?,
                "scanproportion" => w.scanproportion = f()?,
                "readmodifywriteproportion" => w.readmodifywriteproportion = f()?,
                "requestdistribution" => w.requestdistribution = v.parse()?,
                "minscanlength" => w.minscanlength = u()?,
                "maxscanlength" => w.maxscanlength = u()?,
                "scanlengthdistribution" => w.scanlengthdistribution = v.clone(),
                "insertorder" => w.insertorder = v.clone(),
                "zeropadding" => w.zeropadding = u()? as usize,
                "hotspotdatafraction" => w.hotspotdatafraction = f()?,
                "hotspotopnfraction" => w.hotspotopnfraction = f()?,
                // Accepted for YCSB workload files; meaningless here.
                "workload"
                | "db"
                | "exporter"
                | "measurementtype"
                | "threadcount"
                | "dataintegrity"
                | "insertstart"
                | "insertcount"
                | "timeseries.granularity" => {}
                _ => return Err(format!("unknown workload property {k:?}")),
            }
        }
        w.check()?;
        Ok(w)
    }

    fn check(&self) -> Result<(), String> {
        if self.recordcount == 0 {
            return Err("recordcount must be at least 1".into());
        }
        if self.fieldcount == 0 {
            return Err("fieldcount must be at least 1".into());
        }
        if !matches!(self.insertorder.as_str(), "hashed" | "ordered") {
            return Err(format!(
                "insertorder {:?}: hashed or ordered",
                self.insertorder
            ));
        }
        if !matches!(
            self.fieldlengthdistribution.as_str(),
            "constant" | "uniform" | "zipfian"
        ) {
            return Err(format!(
                "fieldlengthdistribution {:?}: constant, uniform or zipfian",
                self.fieldlengthdistribution
            ));
        }
        if !matches!(self.scanlengthdistribution.as_str(), "uniform" | "zipfian") {
            return Err(format!(
                "scanlengthdistribution {:?}: uniform or zipfian",
                self.scanlengthdistribution
            ));
        }
        if self.minscanlength > self.maxscanlength || self.minscanlength == 0 {
            return Err("need 1 <= minscanlength <= maxscanlength".into());
        }
        if self.fieldlengthdistribution != "constant" && self.minfieldlength > self.fieldlength {
            return Err("minfieldlength is above fieldlength".into());
        }
        self.op_chooser()?;
        Ok(())
    }

    pub fn op_chooser(&self) -> Result<OpChooser, String> {
        OpChooser::new([
            self.readproportion,
            self.updateproportion,
            self.insertproportion,
            self.scanproportion,
            self.readmodifywriteproportion,
        ])
    }

    fn field_length(&self) -> Length {
        match self.fieldlengthdistribution.as_str() {
            "uniform" => Length::Uniform(self.minfieldlength, self.fieldlength),
            "zipfian" => Length::Zipfian(Zipfian::new(
                self.minfieldlength,
                self.fieldlength,
                ZIPFIAN_CONSTANT,
            )),
            _ => Length::Constant(self.fieldlength),
        }
    }

    fn scan_length(&self) -> Length {
        match self.scanlengthdistribution.as_str() {
            "zipfian" => Length::Zipfian(Zipfian::new(
                self.minscanlength,
                self.maxscanlength,
                ZIPFIAN_CONSTANT,
            )),
            _ => Length::Uniform(self.minscanlength, self.maxscanlength),
        }
    }

    fn ordered(&self) -> bool {
        self.insertorder == "ordered"
    }

    /// `operationcount * insertproportion * 2`, as YCSB sizes the zipfian
    /// key space.
    fn expected_new_keys(&self) -> u64 {
        let sum = self.readproportion
            + self.updateproportion
            + self.insertproportion
            + self.scanproportion
            + self.readmodifywriteproportion;
        // YCSB uses the raw property (proportions are meant to sum to 1).
        let p = if sum > 0.0 {
            self.insertproportion
        } else {
            0.0
        };
        (self.operationcount as f64 * p * 2.0) as u64
    }
}

/// Everything a client thread needs, read-only and shared.
struct Plan<'a> {
    w: &'a Workload,
    fields: Vec<Vec<u8>>,
    timeout: Duration,
}

/// A client thread's reusable buffers.
struct Scratch {
    key: Vec<u8>,
    mkey: Vec<u8>,
    json: Vec<u8>,
    keys: Vec<u8>,
    offs: Vec<(usize, usize)>,
    fieldlen: Length,
    field_pick: Vec<usize>,
}

impl Scratch {
    fn new(w: &Workload) -> Scratch {
        Scratch {
            key: Vec::with_capacity(64),
            mkey: Vec::with_capacity(80),
            json: Vec::with_capacity(w.fieldcount * (w.fieldlength as usize + 16) + 16),
            keys: Vec::new(),
            offs: Vec::new(),
            fieldlen: w.field_length(),
            field_pick: Vec::with_capacity(w.fieldcount),
        }
    }
}

impl Plan<'_> {
    fn key(&self, keynum: u64, s: &mut Scratch) {
        s.key.clear();
        build_key_name(keynum, self.w.zeropadding, self.w.ordered(), &mut s.key);
    }

    /// The memcached key: `<table>-<key>`, as YCSB's createQualifiedKey.
    fn mc_key(&self, s: &mut Scratch) {
        s.mkey.clear();
        s.mkey.extend_from_slice(self.w.table.as_bytes());
        s.mkey.push(b'-');
        s.mkey.extend_from_slice(&s.key);
    }

    /// Chooses the fields an update writes (all with writeallfields, else
    /// one at random) into `s.field_pick`.
    fn pick_write_fields(&self, s: &mut Scratch, rng: &mut SmallRng) {
        s.field_pick.clear();
        if self.w.writeallfields {
            s.field_pick.extend(0..self.w.fieldcount);
        } else {
            s.field_pick
                .push(rand::Rng::random_range(rng, 0..self.w.fieldcount));
        }
    }

    /// Encodes the write of `s.field_pick` for `s.key` into the connection's
    /// output buffer (HMSET, or a memcached `verb` of the JSON document).
    fn encode_write(&self, conn: &mut Conn, verb: &[u8], s: &mut Scratch, rng: &mut SmallRng) {
        match conn {
            Conn::Resp(c) => {
                c.arr(2 + 2 * s.field_pick.len());
                c.bulk(b"HMSET");
                c.bulk(&s.key);
                for &f in &s.field_pick {
                    c.bulk(&self.fields[f]);
                    let len = s.fieldlen.next(rng) as usize;
                    c.bulk_header(len);
                    random_ascii(rng, len, &mut c.wire.out);
                    c.crlf();
                }
            }
            Conn::Mc(c) => {
                // Jackson's JSON of the field map: only '"' and '\\' need
                // escaping in YCSB's alphabet (bytes 32..=95).
                s.json.clear();
                s.json.push(b'{');
                for (i, &f) in s.field_pick.iter().enumerate() {
                    if i > 0 {
                        s.json.push(b',');
                    }
                    s.json.push(b'"');
                    s.json.extend_from_slice(&self.fields[f]);
                    s.json.extend_from_slice(b"\":\"");
                    let len = s.fieldlen.next(rng) as usize;
                    let start = s.json.len();
                    random_ascii(rng, len, &mut s.json);
                    escape_json_tail(&mut s.json, start);
                    s.json.push(b'"');
                }
                s.json.push(b'}');
                self.mc_key(s);
                c.queue_store(verb, &s.mkey, 0, 0, &s.json);
            }
        }
    }

    /// Encodes a read of `s.key`.
    fn encode_read(&self, conn: &mut Conn, s: &mut Scratch, rng: &mut SmallRng) {
        match conn {
            Conn::Resp(c) => encode_resp_read(c, self, &s.key, rng),
            Conn::Mc(c) => {
                self.mc_key(s);
                c.queue_get(&[&s.mkey]);
            }
        }
    }

    fn insert(
        &self,
        conn: &mut Conn,
        keynum: u64,
        s: &mut Scratch,
        rng: &mut SmallRng,
    ) -> Result<(), OpError> {
        self.insert_send(conn, keynum, s, rng)?;
        if self.insert_second(conn, &s.key)? {
            conn_resp(conn)?.read_int()?;
        }
        Ok(())
    }

    /// An insert's first request: the record (HMSET, or memcached `add`),
    /// sent.
    fn insert_send(
        &self,
        conn: &mut Conn,
        keynum: u64,
        s: &mut Scratch,
        rng: &mut SmallRng,
    ) -> Result<(), OpError> {
        self.key(keynum, s);
        s.field_pick.clear();
        s.field_pick.extend(0..self.w.fieldcount);
        self.encode_write(conn, b"add", s, rng);
        match conn {
            Conn::Resp(c) => c.send(),
            Conn::Mc(c) => c.wire.send(),
        }
    }

    /// Reads the record's reply; on RESP, sends the index's ZADD of `key`
    /// and answers true (its reply is still to be read, an integer).
    fn insert_second(&self, conn: &mut Conn, key: &[u8]) -> Result<bool, OpError> {
        match conn {
            Conn::Resp(c) => {
                c.read_ok()?;
                c.arr(4);
                c.bulk(b"ZADD");
                c.bulk(INDEX_KEY);
                c.bulk_int(java_string_hash(key) as i64);
                c.bulk(key);
                c.send()?;
                Ok(true)
            }
            Conn::Mc(c) => {
                c.read_store_reply()?;
                Ok(false)
            }
        }
    }

    fn finish_read(&self, conn: &mut Conn) -> Result<(), OpError> {
        send(conn)?;
        self.read_reply(conn)
    }

    /// Reads a read's reply: a record that is not there is an error.
    fn read_reply(&self, conn: &mut Conn) -> Result<(), OpError> {
        let found = match conn {
            Conn::Resp(c) => c.read_array_present()?,
            Conn::Mc(c) => c.read_values(|_, _| {})?,
        };
        if found == 0 {
            return Err(OpError::Missing);
        }
        Ok(())
    }

    fn finish_write(&self, conn: &mut Conn) -> Result<(), OpError> {
        send(conn)?;
        self.write_reply(conn)
    }

    fn write_reply(&self, conn: &mut Conn) -> Result<(), OpError> {
        match conn {
            Conn::Resp(c) => c.read_ok(),
            Conn::Mc(c) => c.read_store_reply(),
        }
    }

    /// ZRANGEBYSCORE then a read of every key returned, one round trip each
    /// (as Jedis does it).
    fn scan(
        &self,
        conn: &mut Conn,
        len: u64,
        s: &mut Scratch,
        rng: &mut SmallRng,
    ) -> Result<(), OpError> {
        let Conn::Resp(c) = conn else {
            return Err(OpError::Server(
                "scan is not implemented for memcached".into(),
            ));
        };
        c.arr(7);
        c.bulk(b"ZRANGEBYSCORE");
        c.bulk(INDEX_KEY);
        c.bulk_int(java_string_hash(&s.key) as i64);
        c.bulk(b"+inf");
        c.bulk(b"LIMIT");
        c.bulk(b"0");
        c.bulk_int(len as i64);
        c.send()?;
        let n = c.read_bulk_array(&mut s.keys, &mut s.offs)?;
        for i in 0..n {
            let (a, b) = s.offs[i];
            encode_resp_read(c, self, &s.keys[a..b], rng);
            c.send()?;
            // YCSB ignores the result of each read inside a scan.
            c.read_array_present()?;
        }
        Ok(())
    }
}

/// Sends what the connection's output buffer holds.
fn send(conn: &mut Conn) -> Result<(), OpError> {
    match conn {
        Conn::Resp(c) => c.send(),
        Conn::Mc(c) => c.wire.send(),
    }
}

fn conn_resp(conn: &mut Conn) -> Result<&mut RespConn, OpError> {
    match conn {
        Conn::Resp(c) => Ok(c),
        Conn::Mc(_) => Err(OpError::Protocol(
            "a RESP reply on a memcached connection".into(),
        )),
    }
}

fn encode_resp_read(c: &mut RespConn, p: &Plan, key: &[u8], rng: &mut SmallRng) {
    let w = p.w;
    if w.readallfields && !w.readallfieldsbyname {
        c.arr(2);
        c.bulk(b"HGETALL");
        c.bulk(key);
    } else if w.readallfields {
        c.arr(2 + w.fieldcount);
        c.bulk(b"HMGET");
        c.bulk(key);
        for f in &p.fields {
            c.bulk(f);
        }
    } else {
        c.arr(3);
        c.bulk(b"HMGET");
        c.bulk(key);
        c.bulk(&p.fields[rand::Rng::random_range(rng, 0..w.fieldcount)]);
    }
}

/// Escapes `"` and `\` in `buf[start..]` in place (JSON string body).
fn escape_json_tail(buf: &mut Vec<u8>, start: usize) {
    let extra = buf[start..]
        .iter()
        .filter(|b| **b == b'"' || **b == b'\\')
        .count();
    if extra == 0 {
        return;
    }
    let old = buf.len();
    buf.resize(old + extra, 0);
    let (mut r, mut w) = (old, old + extra);
    while r > start {
        r -= 1;
        let b = buf[r];
        w -= 1;
        buf[w] = b;
        if b == b'"' || b == b'\\' {
            w -= 1;
            buf[w] = b'\\';
        }
    }
}

/// The open connection, reconnecting first if an error dropped it.
fn ensure<'c>(
    conn: &'c mut Option<Conn>,
    t: &Target,
    timeout: Duration,
) -> Result<&'c mut Conn, OpError> {
    if conn.is_none() {
        *conn = Some(connect(t, timeout)?);
    }
    Ok(conn.as_mut().expect("just connected"))
}

/// Records one operation's outcome: a success slower than the time-out is a
/// time-out; an error that leaves the connection unusable drops it.
#[inline]
fn account(
    rec: &mut Recorder,
    op: usize,
    res: Result<(), OpError>,
    t0: Instant,
    timeout: Duration,
    conn: &mut Option<Conn>,
) -> bool {
    let now = Instant::now();
    let lat = now.duration_since(t0);
    match res {
        Ok(()) if lat <= timeout => {
            rec.ok(op, lat, 1, 1, now);
            true
        }
        Ok(()) => {
            rec.err(op, &OpError::Timeout, 1);
            false
        }
        Err(e) => {
            if e.breaks_connection() {
                *conn = None;
            }
            rec.err(op, &e, 1);
            false
        }
    }
}

/// How a run's clients (YCSB threads: one connection each) map onto OS
/// threads. YCSB runs one thread per client; with `per_thread` above 1 an
/// OS thread drives that many connections in *waves*: it sends one
/// operation on each of its connections, then reads their replies in turn.
/// The servers see the same number of connections with one request
/// outstanding on each; the client wakes once per wave instead of once
/// per operation, so it leaves the servers more of a small machine's
/// cores. An operation's latency runs from its send to its reply's read.
#[derive(Debug, Clone, Copy)]
pub struct Clients {
    pub total: usize,
    pub per_thread: usize,
}

impl Clients {
    pub fn os_threads(self) -> usize {
        self.total.div_ceil(self.per_thread.max(1)).max(1)
    }

    /// `i`'s share of `n` among the OS threads.
    fn share(self, n: u64, i: usize) -> u64 {
        let t = self.os_threads() as u64;
        n / t + u64::from((i as u64) < n % t)
    }

    /// The connections OS thread `i` drives.
    fn conns(self, i: usize) -> usize {
        self.share(self.total as u64, i) as usize
    }
}

/// The load phase: `count` inserts of records `first..first + count`,
/// spread over the clients by a shared counter (YCSB's keysequence).
#[allow(clippy::too_many_arguments)]
pub fn load(
    ctx: &Ctx,
    t: &Target,
    w: &Workload,
    first: u64,
    count: u64,
    clients: Clients,
    seed: u64,
    label: &str,
) -> Outcome {
    let plan = Plan {
        w,
        fields: field_names(w),
        timeout: ctx.timeout,
    };
    let next = AtomicU64::new(first);
    let end = first + count;
    let threads = clients.os_threads();
    run_threads(
        ctx,
        t,
        label,
        threads,
        Some(count),
        LOAD_NAMES,
        |i, start: &mut Start, rec| {
            let m = clients.conns(i);
            let mut rng = SmallRng::seed_from_u64(thread_seed(seed, 0, i));
            let mut s = Scratch::new(w);
            let mut conns: Vec<Option<Conn>> =
                (0..m).map(|_| connect(t, plan.timeout).ok()).collect();
            // Per connection: its record's key and when its insert began,
            // while the insert is in flight.
            let mut keys: Vec<Vec<u8>> = vec![Vec::new(); m];
            let mut began: Vec<Option<Instant>> = vec![None; m];
            let mut second: Vec<bool> = vec![false; m];
            let mut throttle = Throttle::new(ctx.target_rate, threads);
            start.ready(rec);
            throttle.restart();
            let mut more = true;
            while more {
                for j in 0..m {
                    let keynum = next.fetch_add(1, Ordering::Relaxed);
                    if keynum >= end {
                        more = false;
                        break;
                    }
                    throttle.wait();
                    let c = match ensure(&mut conns[j], t, plan.timeout) {
                        Ok(c) => c,
                        Err(e) => {
                            rec.err(0, &e, 1);
                            continue;
                        }
                    };
                    let t0 = Instant::now();
                    match plan.insert_send(c, keynum, &mut s, &mut rng) {
                        Ok(()) => {
                            keys[j].clear();
                            keys[j].extend_from_slice(&s.key);
                            began[j] = Some(t0);
                        }
                        Err(e) => {
                            account(rec, 0, Err(e), t0, plan.timeout, &mut conns[j]);
                        }
                    }
                }
                for j in 0..m {
                    let (Some(t0), Some(c)) = (began[j], conns[j].as_mut()) else {
                        continue;
                    };
                    match plan.insert_second(c, &keys[j]) {
                        Ok(true) => second[j] = true,
                        r => {
                            began[j] = None;
                            account(rec, 0, r.map(|_| ()), t0, plan.timeout, &mut conns[j]);
                        }
                    }
                }
                for j in 0..m {
                    if !std::mem::take(&mut second[j]) {
                        continue;
                    }
                    let (Some(t0), Some(c)) = (began[j].take(), conns[j].as_mut()) else {
                        continue;
                    };
                    let r = conn_resp(c).and_then(|c| c.read_int()).map(|_| ());
                    account(rec, 0, r, t0, plan.timeout, &mut conns[j]);
                }
            }
        },
    )
}

/// One thread's inserter of YCSB records laid out as the load phase lays
/// them out (`cairn-bench load-curve`, E5, drives its own loop).
pub struct Inserter<'a> {
    plan: Plan<'a>,
    scratch: Scratch,
    rng: SmallRng,
}

impl<'a> Inserter<'a> {
    pub fn new(w: &'a Workload, timeout: Duration, seed: u64) -> Inserter<'a> {
        Inserter {
            plan: Plan {
                w,
                fields: field_names(w),
                timeout,
            },
            scratch: Scratch::new(w),
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Inserts record `keynum` and waits for the answer(s).
    pub fn insert(&mut self, conn: &mut Conn, keynum: u64) -> Result<(), OpError> {
        self.plan
            .insert(conn, keynum, &mut self.scratch, &mut self.rng)
    }
}

fn field_names(w: &Workload) -> Vec<Vec<u8>> {
    (0..w.fieldcount)
        .map(|i| format!("{}{i}", w.fieldnameprefix).into_bytes())
        .collect()
}

/// The run phase against a store holding records `0..records`; returns the
/// outcome and the number of records afterwards.
#[allow(clippy::too_many_arguments)]
pub fn run_phase(
    ctx: &Ctx,
    t: &Target,
    w: &Workload,
    records: u64,
    clients: Clients,
    max_time: Option<Duration>,
    seed: u64,
    label: &str,
) -> (Outcome, u64) {
    let plan = Plan {
        w,
        fields: field_names(w),
        timeout: ctx.timeout,
    };
    let ops = w.op_chooser().expect("checked");
    let ack = AckCounter::new(records);
    // Built once (zeta for `latest` is O(records)), cloned per thread.
    let chooser = KeyChooser::new(
        w.requestdistribution,
        records,
        w.expected_new_keys(),
        w.hotspotdatafraction,
        w.hotspotopnfraction,
    );
    let scanlen = w.scan_length();
    let total = w.operationcount;
    let threads = clients.os_threads();
    let out = run_threads(
        ctx,
        t,
        label,
        threads,
        Some(total),
        NAMES,
        |i, start, rec| {
            let mine = clients.share(total, i);
            let m = clients.conns(i);
            let mut rng = SmallRng::seed_from_u64(thread_seed(seed, 1, i));
            let mut s = Scratch::new(w);
            let mut chooser = chooser.clone();
            chooser.offset(i, threads);
            let mut scanlen = scanlen.clone();
            let mut conns: Vec<Option<Conn>> =
                (0..m).map(|_| connect(t, plan.timeout).ok()).collect();
            // Per connection, the read or update in flight and when it
            // was sent.
            let mut pending: Vec<Option<(YcsbOp, Instant)>> = vec![None; m];
            let mut throttle = Throttle::new(ctx.target_rate, threads);
            start.ready(rec);
            throttle.restart();
            let deadline = max_time.map(|d| Instant::now() + d);
            let mut n = 0u64;
            while n < mine {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                for j in 0..m {
                    if n >= mine {
                        break;
                    }
                    n += 1;
                    throttle.wait();
                    let op = ops.next(&mut rng);
                    let idx = op as usize;
                    let c = match ensure(&mut conns[j], t, plan.timeout) {
                        Ok(c) => c,
                        Err(e) => {
                            rec.err(idx, &e, 1);
                            continue;
                        }
                    };
                    match op {
                        YcsbOp::Read | YcsbOp::Update => {
                            let k = chooser.next_keynum(ack.last(), &mut rng);
                            plan.key(k, &mut s);
                            if op == YcsbOp::Read {
                                plan.encode_read(c, &mut s, &mut rng);
                            } else {
                                plan.pick_write_fields(&mut s, &mut rng);
                                plan.encode_write(c, b"replace", &mut s, &mut rng);
                            }
                            let t0 = Instant::now();
                            match send(c) {
                                Ok(()) => pending[j] = Some((op, t0)),
                                Err(e) => {
                                    account(rec, idx, Err(e), t0, plan.timeout, &mut conns[j]);
                                }
                            }
                        }
                        YcsbOp::Insert => {
                            let k = ack.next_value();
                            let t0 = Instant::now();
                            let r = plan.insert(c, k, &mut s, &mut rng);
                            account(rec, idx, r, t0, plan.timeout, &mut conns[j]);
                            // As YCSB, acknowledged whatever the outcome.
                            ack.acknowledge(k);
                        }
                        YcsbOp::Scan => {
                            let k = chooser.next_keynum(ack.last(), &mut rng);
                            plan.key(k, &mut s);
                            let len = scanlen.next(&mut rng);
                            let t0 = Instant::now();
                            let r = plan.scan(c, len, &mut s, &mut rng);
                            account(rec, idx, r, t0, plan.timeout, &mut conns[j]);
                        }
                        YcsbOp::ReadModifyWrite => {
                            // Timed as one operation (YCSB's READ-MODIFY-WRITE);
                            // its read and update are not counted again as READ
                            // and UPDATE, so every operation is counted once.
                            let k = chooser.next_keynum(ack.last(), &mut rng);
                            plan.key(k, &mut s);
                            plan.encode_read(c, &mut s, &mut rng);
                            let t0 = Instant::now();
                            let mut r = plan.finish_read(c);
                            if r.is_ok() {
                                plan.pick_write_fields(&mut s, &mut rng);
                                plan.encode_write(c, b"replace", &mut s, &mut rng);
                                r = plan.finish_write(c);
                            }
                            account(rec, idx, r, t0, plan.timeout, &mut conns[j]);
                        }
                    }
                }
                for j in 0..m {
                    let Some((op, t0)) = pending[j].take() else {
                        continue;
                    };
                    let Some(c) = conns[j].as_mut() else {
                        continue;
                    };
                    let r = if op == YcsbOp::Read {
                        plan.read_reply(c)
                    } else {
                        plan.write_reply(c)
                    };
                    account(rec, op as usize, r, t0, plan.timeout, &mut conns[j]);
                }
            }
        },
    );
    (out, ack.issued())
}

/// `cairn-bench ycsb`.
pub struct YcsbArgs {
    pub workload: Workload,
    pub threads: Vec<usize>,
    pub load_threads: usize,
    pub skip_load: bool,
    pub no_flush: bool,
    pub max_time: Option<Duration>,
    /// Connections one OS thread drives (1: YCSB's thread per client).
    pub conns_per_thread: usize,
}

pub fn command(ctx: &Ctx, a: &YcsbArgs) -> Result<(Vec<Record>, Vec<String>), String> {
    let w = &a.workload;
    for t in &ctx.targets {
        if t.protocol == Protocol::Memcached && w.scanproportion > 0.0 {
            return Err(format!(
                "target {}: workload {} has scans, which memcached (and YCSB's memcached binding) cannot do",
                t.name, w.name
            ));
        }
    }
    let seed = crate::runner::seed_base(ctx);
    let mut records = Vec::new();
    let mut notes = Vec::new();
    let mut counts: Vec<u64> = vec![w.recordcount; ctx.targets.len()];
    if !a.skip_load {
        for (ti, t) in ctx.targets.iter().enumerate() {
            if !a.no_flush {
                let mut c = connect(t, ctx.timeout.max(Duration::from_secs(5)))
                    .map_err(|e| format!("{}: {e}", t.name))?;
                c.flush_all()
                    .map_err(|e| format!("{}: flush: {e}", t.name))?;
            }
            let label = format!("{} load", t.name);
            let clients = Clients {
                total: a.load_threads,
                per_thread: a.conns_per_thread,
            };
            let out = load(ctx, t, w, 0, w.recordcount, clients, seed, &label);
            let run = make_run(
                &t.name,
                "load",
                1,
                a.load_threads as u32,
                out.started_unix,
                out.duration_s,
                &out.merged,
                "ops",
                out.server_cpu,
            );
            if run.errors > 0 {
                notes.push(format!(
                    "{}: {} of {} inserts failed during the load",
                    t.name, run.errors, w.recordcount
                ));
            }
            ctx.say(&format!(
                "{}: loaded {} records in {:.1} s ({} ops/s)",
                t.name,
                run.ops,
                run.duration_s,
                crate::report::thousands(run.ops_per_sec)
            ));
            counts[ti] = w.recordcount;
            records.push(Record {
                run,
                merged: Some(out.merged),
            });
        }
    }
    for round in 1..=ctx.rounds {
        for &threads in &a.threads {
            for (ti, t) in ctx.targets.iter().enumerate() {
                let label = format!("{} {} r{round} t{threads}", t.name, w.name);
                let (out, after) = run_phase(
                    ctx,
                    t,
                    w,
                    counts[ti],
                    Clients {
                        total: threads,
                        per_thread: a.conns_per_thread,
                    },
                    a.max_time,
                    seed ^ round as u64,
                    &label,
                );
                counts[ti] = after;
                let run = make_run(
                    &t.name,
                    "run",
                    round,
                    threads as u32,
                    out.started_unix,
                    out.duration_s,
                    &out.merged,
                    "ops",
                    out.server_cpu,
                );
                ctx.say(&format!(
                    "{}: {} threads, round {round}: {} ops/s, {} errors",
                    t.name,
                    threads,
                    crate::report::thousands(run.ops_per_sec),
                    run.errors
                ));
                records.push(Record {
                    run,
                    merged: Some(out.merged),
                });
            }
        }
    }
    Ok((records, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_spread_over_threads() {
        let c = Clients {
            total: 32,
            per_thread: 8,
        };
        assert_eq!(c.os_threads(), 4);
        assert_eq!((0..4).map(|i| c.conns(i)).sum::<usize>(), 32);
        assert_eq!((0..4).map(|i| c.share(1003, i)).sum::<u64>(), 1003);
        let odd = Clients {
            total: 10,
            per_thread: 4,
        };
        assert_eq!(odd.os_threads(), 3);
        assert_eq!(
            (0..3).map(|i| odd.conns(i)).collect::<Vec<_>>(),
            vec![4, 3, 3]
        );
        let one = Clients {
            total: 8,
            per_thread: 1,
        };
        assert_eq!(one.os_threads(), 8);
        assert!((0..8).all(|i| one.conns(i) == 1));
    }

    #[test]
    fn presets_match_ycsb() {
        let a = Workload::build("a", &[]).unwrap();
        assert_eq!((a.readproportion, a.updateproportion), (0.5, 0.5));
        assert_eq!(a.requestdistribution, Distribution::Zipfian);
        assert_eq!((a.fieldcount, a.fieldlength), (10, 100));
        assert!(a.readallfields && !a.writeallfields);
        let d = Workload::build("d", &[]).unwrap();
        assert_eq!(d.requestdistribution, Distribution::Latest);
        assert_eq!(d.insertproportion, 0.05);
        let e = Workload::build("e", &[]).unwrap();
        assert_eq!((e.scanproportion, e.maxscanlength), (0.95, 100));
        let f = Workload::build("f", &[]).unwrap();
        assert_eq!(f.readmodifywriteproportion, 0.5);
        let over = Workload::build(
            "a",
            &[
                ("recordcount".into(), "42".into()),
                ("writeallfields".into(), "true".into()),
            ],
        )
        .unwrap();
        assert_eq!(over.recordcount, 42);
        assert!(over.writeallfields);
        assert!(Workload::build("a", &[("nosuch".into(), "1".into())]).is_err());
        assert!(Workload::build("a", &[("recordcount".into(), "x".into())]).is_err());
        assert!(Workload::build("zz-not-a-file", &[]).is_err());
    }

    #[test]
    fn workload_files_parse() {
        let p = parse_properties("# c\nrecordcount=5\n  readproportion = 1 \n!x\nworkload=site.ycsb.workloads.CoreWorkload\n");
        assert_eq!(p[0], ("recordcount".into(), "5".into()));
        assert_eq!(p[1], ("readproportion".into(), "1".into()));
        let dir = std::env::temp_dir().join(format!("cairn-bench-wl-{}", std::process::id()));
        std::fs::write(&dir, "recordcount=7\nreadproportion=1\nupdateproportion=0\nworkload=site.ycsb.workloads.CoreWorkload\n").unwrap();
        let w = Workload::build(dir.to_str().unwrap(), &[]).unwrap();
        assert_eq!(w.recordcount, 7);
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn json_escaping() {
        let mut v = b"{\"f\":\"".to_vec();
        let start = v.len();
        v.extend_from_slice(b"a\"b\\c");
        escape_json_tail(&mut v, start);
        assert_eq!(&v[start..], b"a\\\"b\\\\c");
        let mut plain = b"abc".to_vec();
        escape_json_tail(&mut plain, 0);
        assert_eq!(plain, b"abc");
    }

    #[test]
    fn expected_new_keys_as_ycsb() {
        let mut w = Workload::build("d", &[]).unwrap();
        w.operationcount = 1000;
        assert_eq!(w.expected_new_keys(), 100);
    }
}
