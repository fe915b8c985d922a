//! `cmsgpack`: lua-cmsgpack 0.4.0 as Redis 7.0 loads it. `pack(...)`
//! encodes each argument and concatenates them; `unpack(s)` returns every
//! value in `s`; `unpack_one(s [, offset])` and `unpack_limit(s, limit
//! [, offset])` return the offset of the next value (-1 at the end) and
//! then the values.
//!
//! What 0.4.0 does and a newer MessagePack library would not: integers take
//! the smallest encoding of their value; a number that is not an integer
//! goes out as float32 when that is exact and float64 otherwise; a table is
//! an array when its keys are exactly 1..n (the empty table too) and a map
//! otherwise; tables nested 16 deep are written as nil (so cycles end);
//! functions, threads and userdata are nil. Unpacking knows no bin or ext
//! types ("Bad data format in input."), and reads uint64 through a signed
//! integer, so values from 2^63 come back negative.

use mlua::{Lua, Table, Value};

use super::{c_i32, c_i64, exact, Args, Fail, Outcome, Ret, MAX_C_STACK};

/// lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`.
const MAX_NESTING: u32 = 16;

pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    type Op = fn(&Lua, &Args) -> Outcome;
    let funcs: Vec<(&str, Op)> = vec![
        ("pack", pack),
        ("unpack", |lua, a| unpack_full(lua, a, 0, 0)),
        ("unpack_one", |lua, a| {
            let offset = a.opt_integer(lua, 2, 0)?;
            unpack_full(lua, a, 1, offset)
        }),
        ("unpack_limit", |lua, a| {
            let limit = a.check_integer(lua, 2)?;
            let offset = a.opt_integer(lua, 3, 0)?;
            unpack_full(lua, a, limit, offset)
        }),
    ];
    let table = super::library(lua, funcs)?;
    table.raw_set("_NAME", "cmsgpack")?;
    table.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    table.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    table.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(table)
}

fn pack(lua: &Lua, args: &Args) -> Outcome {
    if args.len() == 0 {
        return Err(Fail::arg(0, "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for i in 1..=args.len() {
        let v = args.get(i)?.unwrap_or(Value::Nil);
        encode(&mut out, &v, 0)?;
    }
    super::one(Value::String(lua.create_string(out)?))
}

/// Appends the encoding of `v`; numbers in `v` are exact (see
/// [`super::exact`]).
fn encode(out: &mut Vec<u8>, v: &Value, level: u32) -> Result<(), Fail> {
    match v {
        Value::String(s) => encode_str(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(out, *i as f64),
        Value::Number(n) => encode_number(out, *n),
        Value::Table(t) if level < MAX_NESTING => encode_table(out, t, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    // IS_INT64_EQUIVALENT: (int64_t)n == n, and not infinite.
    let i = c_i64(n);
    if !n.is_infinite() && i as f64 == n {
        encode_int(out, i);
    } else if (n as f32) as f64 == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_str(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// A header whose short form holds up to 15 entries (`fix`), then 16 and
/// 32-bit counts.
fn encode_count(out: &mut Vec<u8>, fix: u8, long: u8, n: usize) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(long);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(long + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_table(out: &mut Vec<u8>, t: &Table, level: u32) -> Result<(), Fail> {
    if is_array(t)? {
        // lua_objlen then lua_gettable 1..n: every key of 1..n is present.
        let len = t.raw_len();
        encode_count(out, 0x90, 0xdc, len);
        for j in 1..=len {
            let key = Value::Integer(j as i64);
            let v = exact(t, &key, t.raw_get(j)?)?;
            encode(out, &v, level + 1)?;
        }
    } else {
        // Counted first, then encoded pair by pair: holding every pair
        // would exhaust mlua's handle stack on a large table.
        let mut n = 0;
        t.for_each(|_: Value, _: Value| {
            n += 1;
            Ok(())
        })?;
        encode_count(out, 0x80, 0xde, n);
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair?;
            let v = exact(t, &k, v)?;
            encode(out, &k, level + 1)?;
            encode(out, &v, level + 1)?;
        }
    }
    Ok(())
}

/// lua-cmsgpack's `table_is_an_array`: every key a positive integer that
/// fits a C int, and the largest equal to the count.
fn is_array(t: &Table) -> Result<bool, Fail> {
    let (mut count, mut max) = (0i64, 0i32);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n.is_infinite() || c_i32(n) as f64 != n {
            return Ok(false);
        }
        if n > max as f64 {
            max = n as i32;
        }
        count += 1;
    }
    Ok(max as i64 == count)
}

/// `mp_unpack_full`: `limit` 0 with `offset` 0 means every value, without
/// the leading offset.
fn unpack_full(lua: &Lua, args: &Args, limit: i64, offset: i64) -> Outcome {
    let s = args.check_bytes(lua, 1)?;
    let s = s.as_bytes();
    let len = s.len() as i64;
    // The C code formats these 64-bit values with %d.
    if offset < 0 || limit < 0 {
        return Err(Fail::msg(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    } else if offset > len {
        return Err(Fail::msg(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut cur = Cursor {
        lua,
        data: &s[offset as usize..],
        pos: 0,
        path: lua.create_table()?,
    };
    // Without decode_all, slot 1 is kept for the offset.
    let values = lua.create_table()?;
    let first = if decode_all { 1 } else { 2 };
    // Slots in use on the C function's stack: the input string, then one
    // per value unpacked.
    let mut cnt = 0;
    while cur.pos < cur.data.len() && cnt < limit {
        match cur.value(1 + cnt as usize) {
            Ok(v) => values.raw_set(cnt + first, v)?,
            Err(Stop::Eof) => return Err(Fail::msg("Missing bytes in input.")),
            Err(Stop::BadFormat) => return Err(Fail::msg("Bad data format in input.")),
            Err(Stop::Fail(f)) => return Err(f),
        }
        cnt += 1;
    }
    if decode_all {
        return Ok(Ret::Spread(values, cnt as usize));
    }
    // The offset takes one more slot over the string and the values.
    check_stack(1 + cnt as usize, "in function mp_unpack_full")?;
    let left = cur.data.len() - cur.pos;
    let next = if left == 0 {
        -1
    } else {
        (len - left as i64) as i32
    };
    values.raw_set(1, next)?;
    Ok(Ret::Spread(values, cnt as usize + 1))
}

enum Stop {
    Eof,
    BadFormat,
    Fail(Fail),
}

impl From<mlua::Error> for Stop {
    fn from(e: mlua::Error) -> Self {
        Stop::Fail(Fail::Lua(e))
    }
}

struct Cursor<'a> {
    lua: &'a Lua,
    data: &'a [u8],
    pos: usize,
    /// The tables being filled, outermost first, and for a map the key
    /// waiting for its value: held in Lua, since thousands of nested
    /// tables held as mlua handles would exhaust mlua's handle stack.
    path: Table,
}

/// `luaL_checkstack(L, 1, what)` with `used` slots in use.
fn check_stack(used: usize, what: &str) -> Result<(), Fail> {
    if used + 1 > MAX_C_STACK {
        return Err(Fail::msg(format!("stack overflow ({what})")));
    }
    Ok(())
}

impl Cursor<'_> {
    /// The `n` bytes after the type byte, or `Eof` when the input holds
    /// fewer (`mp_cur_need` counts the type byte too).
    fn need(&self, n: usize) -> Result<&[u8], Stop> {
        let rest = &self.data[self.pos..];
        if rest.len() < n + 1 {
            return Err(Stop::Eof);
        }
        Ok(&rest[1..=n])
    }

    fn be(&self, n: usize) -> Result<u64, Stop> {
        Ok(self
            .need(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn int(&mut self, n: usize, v: i64) -> Result<Head, Stop> {
        self.pos += 1 + n;
        Ok(Head::Value(Value::Number(v as f64)))
    }

    fn bytes(&mut self, head: usize, len: usize) -> Result<Head, Stop> {
        let rest = &self.data[self.pos..];
        if rest.len() < head + 1 + len {
            return Err(Stop::Eof);
        }
        let s = self.lua.create_string(&rest[head + 1..head + 1 + len])?;
        self.pos += head + 1 + len;
        Ok(Head::Value(Value::String(s)))
    }

    /// One value (`mp_decode_to_lua_type`), with `used` stack slots taken
    /// below it in the C version. Nesting is kept on a heap stack, not on
    /// Rust's: the C bound (about 4000 levels) is deeper than a thread's
    /// stack would allow recursing.
    fn value(&mut self, used: usize) -> Result<Value, Stop> {
        let mut frames: Vec<Frame> = Vec::new();
        let mut used = used;
        loop {
            let mut v = match self.head(used)? {
                Head::Value(v) => v,
                Head::Array(len) => {
                    let t = self.lua.create_table()?;
                    check_stack(used + 1, "in function mp_decode_to_lua_array")
                        .map_err(Stop::Fail)?;
                    if len == 0 {
                        Value::Table(t)
                    } else {
                        // The table and the index sit on the C stack.
                        self.path.raw_set(2 * frames.len() + 1, t)?;
                        frames.push(Frame::Array { next: 1, len });
                        used += 2;
                        continue;
                    }
                }
                Head::Map(len) => {
                    let t = self.lua.create_table()?;
                    if len == 0 {
                        Value::Table(t)
                    } else {
                        self.path.raw_set(2 * frames.len() + 1, t)?;
                        frames.push(Frame::Map {
                            left: len,
                            key: false,
                        });
                        used += 1;
                        continue;
                    }
                }
            };
            // `v` is complete: store it, closing every table it completes.
            loop {
                if frames.is_empty() {
                    return Ok(v);
                }
                let slot = 2 * frames.len() - 1;
                match frames.last_mut().expect("frames is not empty") {
                    Frame::Array { next, len } => {
                        let t: Table = self.path.raw_get(slot)?;
                        t.raw_set(*next, v)?;
                        if *next < *len {
                            *next += 1;
                            break;
                        }
                        used -= 2;
                    }
                    Frame::Map { left, key } => {
                        if !*key {
                            self.path.raw_set(slot + 1, v)?;
                            *key = true;
                            used += 1;
                            break;
                        }
                        *key = false;
                        used -= 1;
                        let k: Value = self.path.raw_get(slot + 1)?;
                        self.path.raw_set(slot + 1, Value::Nil)?;
                        // lua_settable refuses these with the core's own
                        // (position-less) message.
                        match k {
                            Value::Nil => return Err(bare("table index is nil")),
                            Value::Number(n) if n.is_nan() => {
                                return Err(bare("table index is NaN"))
                            }
                            k => {
                                let t: Table = self.path.raw_get(slot)?;
                                t.raw_set(k, v)?;
                            }
                        }
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        used -= 1;
                    }
                }
                frames.pop();
                v = self.path.raw_get(slot)?;
                self.path.raw_set(slot, Value::Nil)?;
            }
        }
    }

    /// The next value's head: a whole scalar, or the count of a table.
    fn head(&mut self, used: usize) -> Result<Head, Stop> {
        if self.pos >= self.data.len() {
            return Err(Stop::Eof);
        }
        check_stack(
            used,
            "too many return values at once; use unpack_one or unpack_limit instead.",
        )
        .map_err(Stop::Fail)?;
        let tag = self.data[self.pos];
        match tag {
            0xcc => self.int(1, self.be(1)? as i64),
            0xd0 => self.int(1, self.be(1)? as u8 as i8 as i64),
            0xcd => self.int(2, self.be(2)? as i64),
            0xd1 => self.int(2, self.be(2)? as u16 as i16 as i64),
            0xce => self.int(4, self.be(4)? as i64),
            0xd2 => self.int(4, self.be(4)? as u32 as i32 as i64),
            0xcf | 0xd3 => self.int(8, self.be(8)? as i64),
            0xc0 => {
                self.pos += 1;
                Ok(Head::Value(Value::Nil))
            }
            0xc2 | 0xc3 => {
                self.pos += 1;
                Ok(Head::Value(Value::Boolean(tag == 0xc3)))
            }
            0xca => {
                let f = f32::from_bits(self.be(4)? as u32);
                self.pos += 5;
                Ok(Head::Value(Value::Number(f64::from(f))))
            }
            0xcb => {
                let d = f64::from_bits(self.be(8)?);
                self.pos += 9;
                Ok(Head::Value(Value::Number(d)))
            }
            0xd9 => {
                let len = self.be(1)? as usize;
                self.bytes(1, len)
            }
            0xda => {
                let len = self.be(2)? as usize;
                self.bytes(2, len)
            }
            0xdb => {
                let len = self.be(4)? as usize;
                self.bytes(4, len)
            }
            0xdc => {
                let len = self.be(2)? as usize;
                self.pos += 3;
                Ok(Head::Array(len))
            }
            0xdd => {
                let len = self.be(4)? as usize;
                self.pos += 5;
                Ok(Head::Array(len))
            }
            0xde => {
                let len = self.be(2)? as usize;
                self.pos += 3;
                Ok(Head::Map(len))
            }
            0xdf => {
                let len = self.be(4)? as usize;
                self.pos += 5;
                Ok(Head::Map(len))
            }
            0x00..=0x7f => self.int(0, i64::from(tag)),
            0xe0..=0xff => self.int(0, i64::from(tag as i8)),
            0xa0..=0xbf => self.bytes(0, usize::from(tag & 0x1f)),
            0x90..=0x9f => {
                self.pos += 1;
                Ok(Head::Array(usize::from(tag & 0xf)))
            }
            0x80..=0x8f => {
                self.pos += 1;
                Ok(Head::Map(usize::from(tag & 0xf)))
            }
            _ => Err(Stop::BadFormat),
        }
    }
}

fn bare(msg: &str) -> Stop {
    Stop::Fail(Fail::Bare(msg.as_bytes().to_vec()))
}

enum Head {
    Value(Value),
    Array(usize),
    Map(usize),
}

/// A table being filled by [`Cursor::value`]; the table itself is in
/// `Cursor::path`.
enum Frame {
    Array {
        next: usize,
        len: usize,
    },
    /// `key`: a key waits in `path` for its value.
    Map {
        left: usize,
        key: bool,
    },
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::golden;
    use proptest::prelude::*;

    /// Every case of `tests/golden/cmsgpack.golden`, recorded from
    /// redis-server 7.0.
    #[test]
    fn matches_redis() {
        golden::check(include_str!("../../tests/golden/cmsgpack.golden"));
    }

    /// A Lua value that survives a round trip: numbers of every encoding,
    /// strings of every length class, arrays 1..n and maps with string keys.
    pub(crate) fn lua_value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|i| format!("{i}")),
            (-70_000i64..70_000).prop_map(|i| format!("{i}")),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            any::<f32>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{:e}", f64::from(f))),
            prop::collection::vec(any::<u8>(), 0..300).prop_map(|b| lua_string(&b)),
        ];
        leaf.prop_recursive(4, 64, 20, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..20)
                    .prop_map(|v| format!("{{{}}}", v.join(","))),
                prop::collection::btree_map("[a-z]{1,8}", inner, 1..10).prop_map(|m| {
                    let fields: Vec<String> = m
                        .into_iter()
                        .map(|(k, v)| format!("[\"{k}\"]={v}"))
                        .collect();
                    format!("{{{}}}", fields.join(","))
                }),
            ]
        })
    }

    /// `b` as a Lua string literal.
    pub(crate) fn lua_string(b: &[u8]) -> String {
        let mut s = String::from("\"");
        for &c in b {
            s.push_str(&format!("\\{c}"));
        }
        s.push('"');
        s
    }

    /// Structural equality in Lua, so NaN-free values compare exactly
    /// (-0 and 0 are equal, as Lua itself says).
    pub(crate) const DEEP_EQ: &str = "local function eq(a, b) \
        if type(a) ~= type(b) then return false end \
        if type(a) ~= 'table' then return a == b end \
        for k, v in pairs(a) do if not eq(v, b[k]) then return false end end \
        for k in pairs(b) do if a[k] == nil then return false end end \
        return true end";

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn unpack_inverts_pack(v in lua_value(), w in lua_value()) {
            let lua = golden::lua();
            let src = format!(
                "{DEEP_EQ} local v, w = {v}, {w} \
                 local a, b = cmsgpack.unpack(cmsgpack.pack(v, w)) \
                 return eq(a, v) and eq(b, w)"
            );
            prop_assert!(lua.load(src).eval::<bool>().unwrap(), "{} {}", v, w);
        }
    }
}
