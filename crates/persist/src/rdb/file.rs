//! Whole RDB files, version 10, as Redis 7.0's `rdbSaveRio` writes them
//! and `rdbLoadRio` reads them (`dump.rdb`; later, a full resync's payload):
//!
//! ```text
//! file     "REDIS0010"  aux*  function*  (db-section)*  0xff  crc64:u64le
//! aux      0xfa key:string value:string     redis-ver redis-bits ctime used-mem
//!                                           [repl-stream-db repl-id repl-offset] aof-base
//! function 0xf5 code:string                 RDB_OPCODE_FUNCTION2, one per library
//! db       0xfe db:len  [0xfb keys:len expires:len]  key*
//! key      [0xfc unix-ms:u64le | 0xfd unix-s:u32le]  [0xf8 idle-s:len | 0xf9 freq:u8]
//!          type:u8  key:string  object            (`super::object`)
//! ```
//! The CRC-64 covers every byte before it; 0 means "not computed" and is
//! accepted, as Redis accepts it.
//!
//! `Writer` writes over any `io::Write` (a file, or a replica's socket
//! with the caller's `$EOF:` framing), counting bytes and the CRC as it
//! goes; `put_key` and `put_select_db` serialize records into a buffer for
//! writers that assemble blocks elsewhere (the snapshot queue).
//!
//! `Reader` reads a file as a stream: one record at a time, holding only
//! the record being read (a value's raw bytes, then the value built from
//! them), so memory beyond the values themselves stays bounded. Every
//! error names the file and the byte offset; a short file, an unknown
//! opcode, a value that does not decode, or a CRC mismatch is refused.
use super::object::{self, Type};
use super::{
    crc64, put_len, put_string_redis, Malformed, OPCODE_FUNCTION2, OPCODE_FUNCTION_PRE_GA,
};
use crate::snapshot::format::BuildLimits;
use crate::{Error, ErrorKind};
use cairn_engine::value::Value;
use cairn_engine::Ref;
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// The file's first bytes, before the four version digits.
pub const MAGIC: &[u8; 5] = b"REDIS";
/// The version this writer writes; the reader takes 1 to this.
pub const VERSION: u16 = super::RDB_VERSION;
/// The `redis-ver` AUX field Cairn writes: the Redis whose format and
/// commands it follows.
pub const REDIS_VER: &str = "7.0.15";

/// Opcodes (`rdb.h`). On disk: never renumber.
pub const OP_MODULE_AUX: u8 = 247;
pub const OP_IDLE: u8 = 248;
pub const OP_FREQ: u8 = 249;
pub const OP_AUX: u8 = 250;
pub const OP_RESIZEDB: u8 = 251;
pub const OP_EXPIRETIME_MS: u8 = 252;
pub const OP_EXPIRETIME: u8 = 253;
pub const OP_SELECTDB: u8 = 254;
pub const OP_EOF: u8 = 255;

/// The AUX fields Redis 7.0 writes in every file (`rdbSaveInfoAuxFields`).
#[derive(Clone, Debug)]
pub struct Aux {
    /// The `redis-ver` Cairn announces (the Redis it is compatible with).
    pub redis_ver: String,
    /// Unix seconds of the data's point in time.
    pub ctime_secs: u64,
    pub used_mem: u64,
    /// `repl-stream-db`, `repl-id`, `repl-offset` (Redis writes them when
    /// it has a replication history to save: `rdbPopulateSaveInfo`).
    pub repl: Option<crate::snapshot::ReplInfo>,
}

/// Appends `AUX key value`, the value integer-encoded when it is one.
fn put_aux(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    out.push(OP_AUX);
    put_string_redis(out, key.as_bytes());
    put_string_redis(out, value);
}

/// The magic, version and AUX fields: a file's opening.
pub fn header(aux: &Aux) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(format!("{VERSION:04}").as_bytes());
    put_aux(&mut out, "redis-ver", aux.redis_ver.as_bytes());
    put_aux(&mut out, "redis-bits", b"64");
    put_aux(&mut out, "ctime", aux.ctime_secs.to_string().as_bytes());
    put_aux(&mut out, "used-mem", aux.used_mem.to_string().as_bytes());
    if let Some(r) = &aux.repl {
        put_aux(
            &mut out,
            "repl-stream-db",
            r.stream_db.to_string().as_bytes(),
        );
        put_aux(&mut out, "repl-id", r.replid.as_bytes());
        put_aux(&mut out, "repl-offset", r.offset.to_string().as_bytes());
    }
    put_aux(&mut out, "aof-base", b"0");
    out
}

/// Appends a function library (`rdbSaveFunctions`).
pub fn put_function(out: &mut Vec<u8>, code: &[u8]) {
    out.push(OPCODE_FUNCTION2);
    put_string_redis(out, code);
}

/// Appends `SELECTDB db`.
pub fn put_select_db(out: &mut Vec<u8>, db: usize) {
    out.push(OP_SELECTDB);
    put_len(out, db as u64);
}

/// Appends `RESIZEDB keys expires`, the sizing hint after `SELECTDB`.
pub fn put_resize_db(out: &mut Vec<u8>, keys: u64, expires: u64) {
    out.push(OP_RESIZEDB);
    put_len(out, keys);
    put_len(out, expires);
}

/// Appends one key (`rdbSaveKeyValuePair`): its expire time if it has
/// one, then type, key and object.
pub fn put_key(out: &mut Vec<u8>, r: Ref<'_>) {
    let at = r.expire_at();
    if at != 0 {
        out.push(OP_EXPIRETIME_MS);
        out.extend_from_slice(&at.to_le_bytes());
    }
    // The type byte comes first, the key between it and the object.
    let start = out.len();
    object::put_ref(out, r);
    let mut key = Vec::with_capacity(r.key().len() + 5);
    put_string_redis(&mut key, r.key());
    out.splice(start + 1..start + 1, key).for_each(drop);
}

/// Writes an RDB file over `W`, with the CRC-64 and a byte count kept as
/// it goes.
pub struct Writer<W: Write> {
    w: W,
    crc: u64,
    bytes: u64,
}

impl<W: Write> Writer<W> {
    /// Starts a file: magic, version and `aux`.
    pub fn new(w: W, aux: &Aux) -> io::Result<Writer<W>> {
        let mut wr = Writer {
            w,
            crc: 0,
            bytes: 0,
        };
        wr.raw(&header(aux))?;
        Ok(wr)
    }

    /// Writes serialized records (`put_*`) as they are.
    pub fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.w.write_all(b)?;
        self.crc = crc64(self.crc, b);
        self.bytes += b.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Ends the file (EOF opcode and CRC-64) and gives the sink back,
    /// flushed.
    pub fn finish(mut self) -> io::Result<W> {
        self.raw(&[OP_EOF])?;
        let crc = self.crc;
        self.w.write_all(&crc.to_le_bytes())?;
        self.bytes += 8;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// One record of a file, as `Reader::next` returns them.
#[derive(Debug)]
pub enum Item {
    /// An AUX field (`redis-ver`, `ctime`, ...; unknown ones too).
    Aux {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// A function library's code.
    Function(Vec<u8>),
    /// `RESIZEDB`'s hint for the current database.
    ResizeDb {
        db: usize,
        keys: u64,
        expires: u64,
    },
    Key(KeyRecord),
}

/// One key read from a file.
#[derive(Debug)]
pub struct KeyRecord {
    pub db: usize,
    pub key: Vec<u8>,
    pub value: Value,
    /// Unix ms; None without an expire time.
    pub expire_at_ms: Option<u64>,
    /// `IDLE` (seconds since last access), if the file has it.
    pub idle_secs: Option<u64>,
    /// `FREQ` (the LFU counter), if the file has it.
    pub freq: Option<u8>,
}

/// The bytes of a file, counted, checksummed and, while a value is read,
/// kept (`capture`).
struct Source<R> {
    r: R,
    offset: u64,
    crc: u64,
    capture: Option<Vec<u8>>,
}

/// Why reading stopped: where, and why.
type Fail = (u64, String);

impl<R: BufRead> Source<R> {
    fn eof(&self, what: &str) -> Fail {
        (
            self.offset,
            format!("unexpected end of file reading {what}"),
        )
    }

    fn io(&self, e: io::Error) -> Fail {
        (self.offset, format!("read error: {e}"))
    }

    fn consumed(&mut self, b: &[u8]) {
        self.offset += b.len() as u64;
        self.crc = crc64(self.crc, b);
        if let Some(c) = &mut self.capture {
            c.extend_from_slice(b);
        }
    }

    /// Exactly `n` bytes. They are read in pieces, so a corrupt length
    /// fails at the end of the file instead of allocating it up front.
    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>, Fail> {
        let mut v = Vec::with_capacity(n.min(1 << 20) as usize);
        let read = (&mut self.r).take(n).read_to_end(&mut v);
        let got = read.map_err(|e| self.io(e))?;
        self.consumed(&v);
        if (got as u64) < n {
            return Err(self.eof(what));
        }
        Ok(v)
    }

    /// Skips `n` bytes (inside a value being captured: they are kept),
    /// straight from the reader's buffer.
    fn skip(&mut self, mut n: u64, what: &str) -> Result<(), Fail> {
        while n > 0 {
            let offset = self.offset;
            let buf = self
                .r
                .fill_buf()
                .map_err(|e| (offset, format!("read error: {e}")))?;
            if buf.is_empty() {
                return Err((offset, format!("unexpected end of file reading {what}")));
            }
            let k = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            self.offset += k as u64;
            self.crc = crc64(self.crc, &buf[..k]);
            if let Some(c) = &mut self.capture {
                c.extend_from_slice(&buf[..k]);
            }
            self.r.consume(k);
            n -= k as u64;
        }
        Ok(())
    }

    fn byte(&mut self, what: &str) -> Result<u8, Fail> {
        let offset = self.offset;
        let buf = self
            .r
            .fill_buf()
            .map_err(|e| (offset, format!("read error: {e}")))?;
        let Some(&b) = buf.first() else {
            return Err((offset, format!("unexpected end of file reading {what}")));
        };
        self.r.consume(1);
        self.consumed(&[b]);
        Ok(b)
    }

    /// A length, or (true, encoding) for a specially encoded string.
    fn len_or_enc(&mut self, what: &str) -> Result<(bool, u64), Fail> {
        let at = self.offset;
        let first = self.byte(what)?;
        Ok(match first >> 6 {
            0 => (false, u64::from(first & 0x3f)),
            1 => (
                false,
                (u64::from(first & 0x3f) << 8) | u64::from(self.byte(what)?),
            ),
            2 => match first {
                0x80 => {
                    let b = self.bytes(4, what)?;
                    (
                        false,
                        u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
                    )
                }
                0x81 => {
                    let b = self.bytes(8, what)?;
                    (
                        false,
                        u64::from_be_bytes(b.try_into().expect("read 8 bytes")),
                    )
                }
                _ => return Err((at, format!("bad length encoding {first:#04x} in {what}"))),
            },
            _ => (true, u64::from(first & 0x3f)),
        })
    }

    fn len(&mut self, what: &str) -> Result<u64, Fail> {
        let at = self.offset;
        match self.len_or_enc(what)? {
            (false, n) => Ok(n),
            (true, _) => Err((at, format!("an encoded string where {what} should be"))),
        }
    }

    /// Passes over one RDB string (raw, integer or LZF); a value being
    /// captured keeps its bytes.
    fn skip_string(&mut self, what: &str) -> Result<(), Fail> {
        let at = self.offset;
        let n = match self.len_or_enc(what)? {
            (false, n) => n,
            (true, 0) => 1,
            (true, 1) => 2,
            (true, 2) => 4,
            (true, 3) => {
                let clen = self.len(what)?;
                self.len(what)?;
                clen
            }
            (true, enc) => return Err((at, format!("bad string encoding {enc} in {what}"))),
        };
        self.skip(n, what)
    }

    /// One RDB string, decoded (integer and LZF forms too).
    fn string(&mut self, what: &str) -> Result<Vec<u8>, Fail> {
        let at = self.offset;
        let outer = self.capture.replace(Vec::new());
        let r = self.skip_string(what);
        let raw = std::mem::replace(&mut self.capture, outer).unwrap_or_default();
        if let Some(c) = &mut self.capture {
            c.extend_from_slice(&raw);
        }
        r?;
        super::Reader::new(&raw)
            .string()
            .map_err(|_| (at, format!("bad {what} (string encoding)")))
    }
}

/// Passes over the object of type `t`, following only its framing
/// (counts and strings), so the caller captures exactly its bytes.
fn scan_object<R: BufRead>(s: &mut Source<R>, t: Type) -> Result<(), Fail> {
    let what = "a value";
    match t {
        Type::String
        | Type::HashZipmap
        | Type::ListZiplist
        | Type::SetIntset
        | Type::ZSetZiplist
        | Type::HashZiplist
        | Type::HashListpack
        | Type::ZSetListpack => s.skip_string(what),
        Type::List | Type::Set | Type::ListQuicklist => {
            for _ in 0..s.len(what)? {
                s.skip_string(what)?;
            }
            Ok(())
        }
        Type::Hash => {
            for _ in 0..s.len(what)? {
                s.skip_string(what)?;
                s.skip_string(what)?;
            }
            Ok(())
        }
        Type::ZSet => {
            for _ in 0..s.len(what)? {
                s.skip_string(what)?;
                let n = s.byte(what)?;
                if n < 253 {
                    s.skip(u64::from(n), what)?;
                }
            }
            Ok(())
        }
        Type::ZSet2 => {
            for _ in 0..s.len(what)? {
                s.skip_string(what)?;
                s.skip(8, what)?;
            }
            Ok(())
        }
        Type::ListQuicklist2 => {
            for _ in 0..s.len(what)? {
                s.len(what)?;
                s.skip_string(what)?;
            }
            Ok(())
        }
        Type::StreamListpacks | Type::StreamListpacks2 => {
            // Type 19 adds first ID, max deleted ID and entries added
            // (5 lengths) to the metadata and entries read to each group.
            let (meta, group_ids) = if t == Type::StreamListpacks2 {
                (8, 3)
            } else {
                (3, 2)
            };
            for _ in 0..s.len(what)? {
                s.skip_string(what)?;
                s.skip_string(what)?;
            }
            for _ in 0..meta {
                s.len(what)?;
            }
            for _ in 0..s.len(what)? {
                s.skip_string(what)?;
                for _ in 0..group_ids {
                    s.len(what)?;
                }
                for _ in 0..s.len(what)? {
                    s.skip(24, what)?;
                    s.len(what)?;
                }
                for _ in 0..s.len(what)? {
                    s.skip_string(what)?;
                    s.skip(8, what)?;
                    let n = s.len(what)?;
                    s.skip(n.saturating_mul(16), what)?;
                }
            }
            Ok(())
        }
        Type::ModulePreGa | Type::Module2 => Err((
            s.offset,
            "module data (Cairn loads no Redis modules)".to_string(),
        )),
    }
}

/// Reads an RDB file record by record (see the module comment).
pub struct Reader<R> {
    src: Source<R>,
    path: PathBuf,
    version: u16,
    db: usize,
    done: bool,
}

impl<R: BufRead> Reader<R> {
    /// Checks the magic and version; `path` names the file in errors.
    pub fn new(r: R, path: &Path) -> Result<Reader<R>, Error> {
        let mut rd = Reader {
            src: Source {
                r,
                offset: 0,
                crc: 0,
                capture: None,
            },
            path: path.to_path_buf(),
            version: 0,
            db: 0,
            done: false,
        };
        let head = rd.src.bytes(9, "the header").map_err(|f| rd.fail(f))?;
        if &head[..5] != MAGIC {
            return Err(rd.fail((0, "not an RDB file (bad magic)".into())));
        }
        let version = std::str::from_utf8(&head[5..])
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|v| (1..=VERSION).contains(v));
        let Some(version) = version else {
            return Err(rd.fail((
                5,
                format!(
                    "RDB version {}; this Cairn reads versions 1 to {VERSION}",
                    String::from_utf8_lossy(&head[5..])
                ),
            )));
        };
        rd.version = version;
        Ok(rd)
    }

    /// The file's RDB version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.src.offset
    }

    fn fail(&self, (offset, reason): Fail) -> Error {
        Error {
            path: self.path.clone(),
            offset: Some(offset),
            kind: ErrorKind::Corrupt(reason),
        }
    }

    /// The next record, or None once the EOF opcode and the CRC-64 after
    /// it are read and checked.
    pub fn next(&mut self, limits: &BuildLimits) -> Result<Option<Item>, Error> {
        if self.done {
            return Ok(None);
        }
        self.item(limits).map_err(|f| self.fail(f))
    }

    fn item(&mut self, limits: &BuildLimits) -> Result<Option<Item>, Fail> {
        let s = &mut self.src;
        let mut expire_at_ms = None;
        let mut idle_secs = None;
        let mut freq = None;
        loop {
            let at = s.offset;
            let op = s.byte("an opcode")?;
            match op {
                OP_EOF => {
                    let computed = s.crc;
                    if self.version >= 5 {
                        let b = s.bytes(8, "the checksum")?;
                        let stored = u64::from_le_bytes(b.try_into().expect("read 8 bytes"));
                        if stored != 0 && stored != computed {
                            return Err((
                                at + 1,
                                format!(
                                    "checksum mismatch: the file says {stored:#018x}, its bytes give {computed:#018x}"
                                ),
                            ));
                        }
                    }
                    self.done = true;
                    return Ok(None);
                }
                OP_SELECTDB => {
                    let db = s.len("a database number")?;
                    self.db = usize::try_from(db)
                        .map_err(|_| (at, format!("database number {db} out of range")))?;
                }
                OP_RESIZEDB => {
                    let keys = s.len("RESIZEDB")?;
                    let expires = s.len("RESIZEDB")?;
                    return Ok(Some(Item::ResizeDb {
                        db: self.db,
                        keys,
                        expires,
                    }));
                }
                OP_AUX => {
                    let key = s.string("an AUX field name")?;
                    let value = s.string("an AUX field value")?;
                    return Ok(Some(Item::Aux { key, value }));
                }
                OPCODE_FUNCTION2 => {
                    let code = s.string("a function library")?;
                    return Ok(Some(Item::Function(code)));
                }
                OPCODE_FUNCTION_PRE_GA => {
                    return Err((
                        at,
                        "pre-release (7.0 RC) function format not supported".into(),
                    ))
                }
                OP_MODULE_AUX => {
                    return Err((at, "module data (Cairn loads no Redis modules)".into()))
                }
                OP_EXPIRETIME_MS => {
                    let b = s.bytes(8, "an expire time")?;
                    expire_at_ms = Some(u64::from_le_bytes(b.try_into().expect("read 8 bytes")));
                }
                OP_EXPIRETIME => {
                    let b = s.bytes(4, "an expire time")?;
                    let secs = u32::from_le_bytes(b.try_into().expect("read 4 bytes"));
                    expire_at_ms = Some(u64::from(secs) * 1000);
                }
                OP_IDLE => idle_secs = Some(s.len("an idle time")?),
                OP_FREQ => freq = Some(s.byte("an LFU frequency")?),
                t => {
                    let Some(ty) = Type::from_u8(t) else {
                        return Err((at, format!("unknown opcode or value type {t}")));
                    };
                    let key = s.string("a key")?;
                    let vat = s.offset;
                    s.capture = Some(Vec::new());
                    let scanned = scan_object(s, ty);
                    let raw = s.capture.take().unwrap_or_default();
                    scanned?;
                    let mut r = super::Reader::new(&raw);
                    let value = object::read(&mut r, t, limits).map_err(|Malformed| {
                        (
                            vat,
                            format!(
                                "bad value (type {t}) for key '{}'",
                                String::from_utf8_lossy(&key[..key.len().min(128)])
                            ),
                        )
                    })?;
                    return Ok(Some(Item::Key(KeyRecord {
                        db: self.db,
                        key,
                        value,
                        expire_at_ms,
                        idle_secs,
                        freq,
                    })));
                }
            }
        }
    }
}

/// True if the file at `path` starts with RDB's magic (`REDIS`).
pub fn is_rdb(path: &Path) -> bool {
    let mut head = [0u8; 5];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == MAGIC)
}

/// Reads the RDB file at `path` into `engine` (empty), as
/// `snapshot::load` does a Cairn snapshot: keys expired by now are left
/// out (unless `opts.keep_expired`), a key twice or in a database this
/// server lacks stops the load, the function libraries are returned for
/// the server to load. One thread: the file is parsed as a stream.
pub fn load(
    engine: &cairn_engine::Engine,
    path: &Path,
    opts: &crate::snapshot::LoadOptions,
    progress: &mut dyn FnMut(&crate::snapshot::LoadProgress),
) -> Result<crate::snapshot::LoadStats, Error> {
    use cairn_engine::{Cx, Expiry};
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, "open", e))?;
    let total = file
        .metadata()
        .map_err(|e| Error::io(path, "stat", e))?
        .len();
    let mut r = Reader::new(io::BufReader::with_capacity(1 << 20, file), path)?;
    let limits = BuildLimits::of(engine);
    let dbs = engine.databases();
    let now = cairn_engine::clock::now_ms();
    let mut stats = crate::snapshot::LoadStats {
        bytes: total,
        ..Default::default()
    };
    let mut last_report = 0u64;
    let (mut repl_db, mut repl_id, mut repl_offset) = (None, None, None);
    loop {
        let at = r.offset();
        let Some(item) = r.next(&limits)? else {
            break;
        };
        match item {
            Item::Aux { key, value } => {
                let num = || {
                    std::str::from_utf8(&value)
                        .ok()
                        .and_then(|v| v.parse::<i64>().ok())
                };
                match &key[..] {
                    b"ctime" => {
                        stats.cut_ms = (num().unwrap_or(0).max(0) as u64).saturating_mul(1000)
                    }
                    b"repl-stream-db" => repl_db = num(),
                    b"repl-id" if value.len() == 40 => {
                        repl_id = Some(String::from_utf8_lossy(&value).into_owned())
                    }
                    b"repl-offset" => repl_offset = num(),
                    _ => {}
                }
            }
            Item::Function(code) => stats.functions.push(code),
            Item::ResizeDb { .. } => {}
            Item::Key(k) => {
                if k.db >= dbs {
                    return Err(Error::corrupt(
                        path,
                        at,
                        format!(
                            "key in database {} but this server has {dbs} databases (raise `databases`)",
                            k.db
                        ),
                    ));
                }
                let expire_at = k.expire_at_ms.unwrap_or(0);
                if !opts.keep_expired && expire_at != 0 && expire_at < now {
                    stats.expired += 1;
                    continue;
                }
                let key = engine.key(&k.key);
                let mut g = engine.lock(&Cx::DETACHED, &key);
                let expiry = match expire_at {
                    0 => Expiry::Clear,
                    t => Expiry::At(t),
                };
                if g.set(k.db, &key, k.value, expiry).is_some() {
                    return Err(Error::corrupt(
                        path,
                        at,
                        format!(
                            "duplicate key '{}' in database {}",
                            String::from_utf8_lossy(&k.key[..k.key.len().min(128)]),
                            k.db
                        ),
                    ));
                }
                drop(g);
                stats.keys += 1;
                if !opts.key_delay.is_zero() {
                    std::thread::sleep(opts.key_delay);
                }
                if r.offset() - last_report >= 1 << 20 || !opts.key_delay.is_zero() {
                    last_report = r.offset();
                    progress(&crate::snapshot::LoadProgress {
                        bytes_read: r.offset(),
                        total_bytes: total,
                        keys: stats.keys,
                    });
                }
            }
        }
    }
    // Redis 7.0 `loadDataFromDisk`: only the three together, with no -1.
    if let (Some(db), Some(replid), Some(offset)) = (repl_db, repl_id, repl_offset) {
        if db >= 0 && offset >= 0 {
            stats.repl = Some(crate::snapshot::ReplInfo {
                stream_db: db as usize,
                replid,
                offset: offset as u64,
            });
        }
    }
    Ok(stats)
}

/// Reads and verifies the whole RDB file at `path` without loading it
/// (every value decoded with Redis's default encoding limits, the CRC).
pub fn check(path: &Path) -> Result<crate::snapshot::LoadStats, Error> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, "open", e))?;
    let mut r = Reader::new(io::BufReader::new(file), path)?;
    let mut stats = crate::snapshot::LoadStats::default();
    let limits = BuildLimits::default();
    while let Some(item) = r.next(&limits)? {
        match item {
            Item::Key(_) => stats.keys += 1,
            Item::Function(code) => stats.functions.push(code),
            _ => {}
        }
    }
    stats.bytes = r.offset();
    Ok(stats)
}
