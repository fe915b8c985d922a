//! `cjson`: lua-cjson 2.1.0 as Redis 7.0 loads it. `encode(v)`,
//! `decode(s)`, the settings (`encode_sparse_array`, `encode_max_depth`,
//! `decode_max_depth`, `encode_number_precision`, `encode_keep_buffer`,
//! `encode_invalid_numbers`, `decode_invalid_numbers`), `new()` for an
//! instance with its own settings, `null` (a NULL light userdata, what JSON
//! null decodes to), `_NAME` and `_VERSION`.
//!
//! Encoding: a table is an array when all its keys are positive integers
//! (holes become null) unless it is "excessively sparse" (largest index
//! above both ratio * count and the safe size: an error by default), and an
//! object otherwise; the empty table is `{}`. Numbers use `%.14g`
//! (precision configurable to 1..14), NaN and infinities are an error by
//! default. `/` is escaped as `\/`, control bytes as `\u00XX`; other bytes
//! pass through, UTF-8 or not.
//!
//! Decoding follows lua-cjson's tokenizer, including what it accepts that
//! JSON does not (with `decode_invalid_numbers` on, the default: `+1`,
//! `0x10`, `01`, `inf`, `nan`), that input ends at a NUL byte, and its
//! error texts and character positions.
//!
//! One difference: both directions stop at 1000 levels of nesting even when
//! the depth settings are raised past it, with the error text of the depth
//! limit. lua-cjson stops where Lua's C stack runs out (several thousand
//! levels); recursing that deep here would need more than a thread's stack
//! and more handles than mlua keeps.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, Table, Value};

use super::{c_i32, exact, type_name, Args, Fail, Outcome, Ret};

/// The nesting bound that holds whatever the settings say (see the file
/// comment); equal to the default limits.
const DEPTH_CAP: i32 = 1000;

#[derive(Clone, Copy)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    precision: i32,
    keep_buffer: bool,
    /// 0 off, 1 on, 2 "null".
    encode_invalid: i32,
    decode_invalid: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            keep_buffer: true,
            encode_invalid: 0,
            decode_invalid: true,
        }
    }
}

type Shared = Rc<Cell<Config>>;
type Op = Box<dyn Fn(&Lua, &Args) -> Outcome>;

pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Rc::new(Cell::new(Config::default()));
    let with = |f: fn(&Lua, &Args, &Shared) -> Outcome| -> Op {
        let cfg = cfg.clone();
        Box::new(move |lua, args| f(lua, args, &cfg))
    };
    let funcs: Vec<(&str, Op)> = vec![
        ("encode", with(encode)),
        ("decode", with(decode)),
        ("encode_sparse_array", with(encode_sparse_array)),
        (
            "encode_max_depth",
            with(|lua, a, cfg| int_setting(lua, a, cfg, 1, i32::MAX, |c| &mut c.encode_max_depth)),
        ),
        (
            "decode_max_depth",
            with(|lua, a, cfg| int_setting(lua, a, cfg, 1, i32::MAX, |c| &mut c.decode_max_depth)),
        ),
        (
            "encode_number_precision",
            with(|lua, a, cfg| int_setting(lua, a, cfg, 1, 14, |c| &mut c.precision)),
        ),
        (
            "encode_keep_buffer",
            with(|lua, a, cfg| bool_setting(lua, a, cfg, |c| &mut c.keep_buffer)),
        ),
        (
            "decode_invalid_numbers",
            with(|lua, a, cfg| bool_setting(lua, a, cfg, |c| &mut c.decode_invalid)),
        ),
        ("encode_invalid_numbers", with(encode_invalid_numbers)),
        (
            "new",
            Box::new(|lua, _| super::one(Value::Table(open(lua)?))),
        ),
    ];
    let table = super::library(lua, funcs)?;
    table.raw_set("null", null())?;
    table.raw_set("_NAME", "cjson")?;
    table.raw_set("_VERSION", "2.1.0")?;
    Ok(table)
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

// ---- settings ----------------------------------------------------------

/// `json_verify_arg_count`.
fn max_args(args: &Args, n: usize) -> Result<(), Fail> {
    if args.len() > n {
        return Err(Fail::arg(n + 1, "found too many arguments"));
    }
    Ok(())
}

/// `json_integer_option`: the value is C's `int` of the Lua integer, and
/// the range error always names argument 1.
fn int_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> Result<Value, Fail> {
    if !args.is_none_or_nil(i)? {
        let value = args.check_integer(lua, i)? as i32;
        if !(min <= value && value <= max) {
            return Err(Fail::arg(
                1,
                format!("expected integer between {min} and {max}"),
            ));
        }
        *setting = value;
    }
    Ok(Value::Number(f64::from(*setting)))
}

/// `json_enum_option` over `options`, where a boolean also sets 0 or 1
/// (every option of lua-cjson takes booleans).
fn enum_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    setting: &mut i32,
    options: &[&str],
) -> Result<Value, Fail> {
    match args.get(i)? {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = i32::from(b),
        Some(_) => {
            let name = args.check_bytes(lua, i)?;
            let name = name.as_bytes();
            match options.iter().position(|o| o.as_bytes() == &name[..]) {
                Some(n) => *setting = n as i32,
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    msg.extend_from_slice(&name);
                    msg.push(b'\'');
                    return Err(Fail::Arg(i as i64, msg));
                }
            }
        }
    }
    Ok(match *setting {
        0 | 1 => Value::Boolean(*setting == 1),
        n => Value::String(lua.create_string(options[n as usize])?),
    })
}

fn int_setting(
    lua: &Lua,
    args: &Args,
    cfg: &Shared,
    min: i32,
    max: i32,
    field: fn(&mut Config) -> &mut i32,
) -> Outcome {
    max_args(args, 1)?;
    let mut c = cfg.get();
    let v = int_option(lua, args, 1, field(&mut c), min, max)?;
    cfg.set(c);
    super::one(v)
}

fn bool_setting(
    lua: &Lua,
    args: &Args,
    cfg: &Shared,
    field: fn(&mut Config) -> &mut bool,
) -> Outcome {
    max_args(args, 1)?;
    let mut c = cfg.get();
    let mut n = i32::from(*field(&mut c));
    let v = enum_option(lua, args, 1, &mut n, &["off", "on"])?;
    *field(&mut c) = n == 1;
    cfg.set(c);
    super::one(v)
}

fn encode_invalid_numbers(lua: &Lua, args: &Args, cfg: &Shared) -> Outcome {
    max_args(args, 1)?;
    let mut c = cfg.get();
    let v = enum_option(lua, args, 1, &mut c.encode_invalid, &["off", "on", "null"])?;
    cfg.set(c);
    super::one(v)
}

/// `encode_sparse_array([convert [, ratio [, safe]]])`, returning all three.
fn encode_sparse_array(lua: &Lua, args: &Args, cfg: &Shared) -> Outcome {
    max_args(args, 3)?;
    let mut c = cfg.get();
    let mut convert = i32::from(c.sparse_convert);
    let a = enum_option(lua, args, 1, &mut convert, &["off", "on"])?;
    c.sparse_convert = convert == 1;
    let b = int_option(lua, args, 2, &mut c.sparse_ratio, 0, i32::MAX)?;
    let d = int_option(lua, args, 3, &mut c.sparse_safe, 0, i32::MAX)?;
    cfg.set(c);
    Ok(Ret::Values([a, b, d].into_iter().collect()))
}

// ---- encoding ----------------------------------------------------------

fn encode(lua: &Lua, args: &Args, cfg: &Shared) -> Outcome {
    if args.len() != 1 {
        return Err(Fail::arg(1, "expected 1 argument"));
    }
    let v = args.get(1)?.unwrap_or(Value::Nil);
    let enc = Encoder { cfg: cfg.get() };
    let mut out = Vec::new();
    enc.value(&mut out, &v, 0)?;
    super::one(Value::String(lua.create_string(out)?))
}

struct Encoder {
    cfg: Config,
}

/// "Cannot serialise <type>: <why>" (`json_encode_exception`).
fn cannot(v: &Value, why: &str) -> Fail {
    Fail::msg(format!("Cannot serialise {}: {why}", type_name(v)))
}

impl Encoder {
    /// Appends `v`, whose numbers are exact (see [`super::exact`]).
    fn value(&self, out: &mut Vec<u8>, v: &Value, depth: i32) -> Result<(), Fail> {
        match v {
            Value::String(s) => append_string(out, &s.as_bytes()),
            Value::Number(n) => self.number(out, *n, v)?,
            Value::Integer(i) => self.number(out, *i as f64, v)?,
            Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Nil => out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
            Value::Table(t) => {
                let depth = depth + 1;
                if depth > self.cfg.encode_max_depth || depth > DEPTH_CAP {
                    return Err(Fail::msg(format!(
                        "Cannot serialise, excessive nesting ({depth})"
                    )));
                }
                let len = self.array_length(t)?;
                if len > 0 {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let key = Value::Integer(i64::from(i));
                        let v = exact(t, &key, t.raw_get(i)?)?;
                        self.value(out, &v, depth)?;
                    }
                    out.push(b']');
                } else {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, v) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match k {
                            Value::Integer(_) | Value::Number(_) => {
                                let n = match k {
                                    Value::Integer(i) => i as f64,
                                    Value::Number(n) => n,
                                    _ => unreachable!("matched a number"),
                                };
                                out.push(b'"');
                                self.number(out, n, &k)?;
                                out.extend_from_slice(b"\":");
                            }
                            Value::String(ref s) => {
                                append_string(out, &s.as_bytes());
                                out.push(b':');
                            }
                            _ => return Err(cannot(&k, "table key must be a number or string")),
                        }
                        let v = exact(t, &k, v)?;
                        self.value(out, &v, depth)?;
                    }
                    out.push(b'}');
                }
            }
            _ => return Err(cannot(v, "type not supported")),
        }
        Ok(())
    }

    fn number(&self, out: &mut Vec<u8>, n: f64, v: &Value) -> Result<(), Fail> {
        if !n.is_finite() {
            match self.cfg.encode_invalid {
                0 => return Err(cannot(v, "must not be NaN or Inf")),
                2 => {
                    out.extend_from_slice(b"null");
                    return Ok(());
                }
                _ => {}
            }
        }
        out.extend_from_slice(format_g(n, self.cfg.precision as usize).as_bytes());
        Ok(())
    }

    /// `lua_array_length`: the largest key when every key is an integer
    /// of at least 1, -1 otherwise (or when too sparse and conversion is
    /// on). The largest key goes through C's `int`, as in lua-cjson.
    fn array_length(&self, t: &Table) -> Result<i32, Fail> {
        let (mut max, mut items) = (0i32, 0i32);
        for pair in t.pairs::<Value, Value>() {
            let (k, _) = pair?;
            let k = match k {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => return Ok(-1),
            };
            if k == 0.0 || k.floor() != k || k < 1.0 {
                return Ok(-1);
            }
            if k > f64::from(max) {
                max = c_i32(k);
            }
            items = items.wrapping_add(1);
        }
        let c = &self.cfg;
        if c.sparse_ratio > 0 && max > items.wrapping_mul(c.sparse_ratio) && max > c.sparse_safe {
            if !c.sparse_convert {
                return Err(Fail::msg(
                    "Cannot serialise table: excessively sparse array",
                ));
            }
            return Ok(-1);
        }
        Ok(max)
    }
}

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

/// C's `%.<precision>g`, with NaN written "nan" whatever its sign, as
/// Redis's cjson writes it.
fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0");
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} writes an exponent");
    let exp: i32 = exp.parse().expect("{:e} writes a decimal exponent");
    if exp < -4 || exp >= p as i32 {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!(
            "{sign}{}e{exp_sign}{:02}",
            trim_zeros(mantissa),
            exp.unsigned_abs()
        )
    } else {
        let fixed = format!("{:.*}", (p as i32 - 1 - exp) as usize, x.abs());
        format!("{sign}{}", trim_zeros(&fixed))
    }
}

/// `%g` drops trailing zeros of the fraction, and the point with them.
fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

// ---- decoding ----------------------------------------------------------

fn decode(lua: &Lua, args: &Args, cfg: &Shared) -> Outcome {
    if args.len() != 1 {
        return Err(Fail::arg(1, "expected 1 argument"));
    }
    let s = args.check_bytes(lua, 1)?;
    let data = s.as_bytes();
    // lua-cjson's guard against UTF-16/32 input: only the first character
    // is known to be ASCII.
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(Fail::msg("JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser {
        lua,
        data: &data,
        pos: 0,
        tmp: Vec::new(),
        depth: 0,
        cfg: cfg.get(),
    };
    let tok = p.next_token();
    let v = p.value(tok)?;
    let tok = p.next_token();
    if !matches!(tok.kind, Kind::End) {
        return Err(p.parse_error("the end", &tok));
    }
    super::one(v)
}

#[derive(Debug)]
enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    /// The decoded string is in `Parser::tmp`.
    Str,
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Kind {
    /// lua-cjson's `json_token_type_name`, as Redis's build prints it.
    fn name(&self) -> &'static str {
        match self {
            Kind::ObjBegin => "T_OBJ_BEGIN",
            Kind::ObjEnd => "T_OBJ_END",
            Kind::ArrBegin => "T_ARR_BEGIN",
            Kind::ArrEnd => "T_ARR_END",
            Kind::Str => "T_STRING",
            Kind::Number(_) => "T_NUMBER",
            Kind::Boolean(_) => "T_BOOLEAN",
            Kind::Null => "T_NULL",
            Kind::Colon => "T_COLON",
            Kind::Comma => "T_COMMA",
            Kind::End => "T_END",
            Kind::Error(msg) => msg,
        }
    }
}

struct Token {
    kind: Kind,
    /// 0-based offset of the token (of the fault, for an error token).
    index: usize,
}

struct Parser<'a> {
    lua: &'a Lua,
    data: &'a [u8],
    pos: usize,
    tmp: Vec<u8>,
    depth: i32,
    cfg: Config,
}

impl Parser<'_> {
    /// The byte at `i`, 0 past the end: lua-cjson reads a C string.
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn starts_with(&self, s: &[u8]) -> bool {
        self.data.get(self.pos..).is_some_and(|d| d.starts_with(s))
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let single = |kind| Token { kind, index };
        let ch = self.at(self.pos);
        let kind = match ch {
            b'{' => Kind::ObjBegin,
            b'}' => Kind::ObjEnd,
            b'[' => Kind::ArrBegin,
            b']' => Kind::ArrEnd,
            b',' => Kind::Comma,
            b':' => Kind::Colon,
            0 => return single(Kind::End),
            b'"' => return self.string(),
            b'-' | b'0'..=b'9' => {
                if !self.cfg.decode_invalid && self.is_invalid_number() {
                    return single(Kind::Error("invalid number"));
                }
                return self.number();
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                let (kind, len) = if self.starts_with(b"true") {
                    (Kind::Boolean(true), 4)
                } else if self.starts_with(b"false") {
                    (Kind::Boolean(false), 5)
                } else if self.starts_with(b"null") {
                    (Kind::Null, 4)
                } else if self.cfg.decode_invalid && self.is_invalid_number() {
                    return self.number();
                } else {
                    return single(Kind::Error("invalid token"));
                };
                self.pos += len;
                return Token { kind, index };
            }
            _ => return single(Kind::Error("invalid token")),
        };
        self.pos += 1;
        Token { kind, index }
    }

    /// `json_is_invalid_number`: what JSON forbids but strtod reads.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        if self.at(p) == b'0' {
            let c = self.at(p + 1);
            return c | 0x20 == b'x' || c.is_ascii_digit();
        }
        if self.at(p) <= b'9' {
            return false;
        }
        let word = |w: &[u8]| (0..3).all(|i| self.at(p + i).to_ascii_lowercase() == w[i]);
        word(b"inf") || word(b"nan")
    }

    fn number(&mut self) -> Token {
        let index = self.pos;
        match strtod(self.data, self.pos) {
            Some((n, end)) => {
                self.pos = end;
                Token {
                    kind: Kind::Number(n),
                    index,
                }
            }
            None => Token {
                kind: Kind::Error("invalid number"),
                index,
            },
        }
    }

    /// A string token; its bytes go to `tmp`. An error's index is where
    /// the fault is.
    fn string(&mut self) -> Token {
        let index = self.pos;
        self.pos += 1;
        self.tmp.clear();
        loop {
            let mut ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            let fail = |pos, msg| Token {
                kind: Kind::Error(msg),
                index: pos,
            };
            if ch == 0 {
                return fail(self.pos, "unexpected end of string");
            }
            if ch == b'\\' {
                ch = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => b'\x08',
                    b'f' => b'\x0c',
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        if self.unicode_escape() {
                            continue;
                        }
                        return fail(self.pos, "invalid unicode escape code");
                    }
                    _ => return fail(self.pos, "invalid escape code"),
                };
                self.pos += 1;
            }
            self.tmp.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        Token {
            kind: Kind::Str,
            index,
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, i| {
            let d = (self.at(at + i) as char).to_digit(16)?;
            Some(acc << 4 | d)
        })
    }

    /// `json_append_unicode_escape` at the backslash of `\uXXXX`: a
    /// surrogate pair must be high then low.
    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let c = char::from_u32(cp).expect("no surrogate reaches here");
        let mut buf = [0u8; 4];
        self.tmp
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.pos += len;
        true
    }

    /// "Expected <what> but found <token> at character <n>".
    fn parse_error(&self, expected: &str, tok: &Token) -> Fail {
        Fail::msg(format!(
            "Expected {expected} but found {} at character {}",
            tok.kind.name(),
            tok.index + 1
        ))
    }

    fn value(&mut self, tok: Token) -> Result<Value, Fail> {
        Ok(match tok.kind {
            Kind::Str => Value::String(self.lua.create_string(&self.tmp)?),
            Kind::Number(n) => Value::Number(n),
            Kind::Boolean(b) => Value::Boolean(b),
            Kind::Null => null(),
            Kind::ObjBegin => self.object()?,
            Kind::ArrBegin => self.array()?,
            _ => return Err(self.parse_error("value", &tok)),
        })
    }

    /// `json_decode_descend`: the position reported is just past the
    /// opening bracket.
    fn descend(&mut self) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth || self.depth > DEPTH_CAP {
            return Err(Fail::msg(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            )));
        }
        Ok(())
    }

    fn object(&mut self) -> Result<Value, Fail> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let mut tok = self.next_token();
        if !matches!(tok.kind, Kind::ObjEnd) {
            loop {
                if !matches!(tok.kind, Kind::Str) {
                    return Err(self.parse_error("object key string", &tok));
                }
                let key = self.lua.create_string(&self.tmp)?;
                tok = self.next_token();
                if !matches!(tok.kind, Kind::Colon) {
                    return Err(self.parse_error("colon", &tok));
                }
                let tok_v = self.next_token();
                let v = self.value(tok_v)?;
                t.raw_set(key, v)?;
                tok = self.next_token();
                if matches!(tok.kind, Kind::ObjEnd) {
                    break;
                }
                if !matches!(tok.kind, Kind::Comma) {
                    return Err(self.parse_error("comma or object end", &tok));
                }
                tok = self.next_token();
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }

    fn array(&mut self) -> Result<Value, Fail> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let mut tok = self.next_token();
        if !matches!(tok.kind, Kind::ArrEnd) {
            for i in 1.. {
                let v = self.value(tok)?;
                t.raw_set(i, v)?;
                tok = self.next_token();
                if matches!(tok.kind, Kind::ArrEnd) {
                    break;
                }
                if !matches!(tok.kind, Kind::Comma) {
                    return Err(self.parse_error("comma or array end", &tok));
                }
                tok = self.next_token();
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }
}

/// C's `strtod` at `start` (glibc's grammar: decimal, hex with a binary
/// exponent, inf/infinity, nan with an optional `(chars)`), reading up to
/// the first NUL. `None` when nothing converts; otherwise the value and
/// where it ends.
fn strtod(data: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| data.get(i).copied().unwrap_or(0);
    let word = |i: usize, w: &[u8]| (0..w.len()).all(|k| at(i + k).to_ascii_lowercase() == w[k]);
    let mut p = start;
    let negative = at(p) == b'-';
    if matches!(at(p), b'+' | b'-') {
        p += 1;
    }
    let signed = |v: f64| if negative { -v } else { v };
    if word(p, b"inf") {
        let end = if word(p, b"infinity") { p + 8 } else { p + 3 };
        return Some((signed(f64::INFINITY), end));
    }
    if word(p, b"nan") {
        let mut end = p + 3;
        if at(end) == b'(' {
            let mut q = end + 1;
            while at(q).is_ascii_alphanumeric() || at(q) == b'_' {
                q += 1;
            }
            if at(q) == b')' {
                end = q + 1;
            }
        }
        return Some((signed(f64::NAN), end));
    }
    if at(p) == b'0' && at(p + 1) | 0x20 == b'x' {
        let hex_start = p + 2;
        let has_digit = at(hex_start).is_ascii_hexdigit()
            || (at(hex_start) == b'.' && at(hex_start + 1).is_ascii_hexdigit());
        if has_digit {
            let (v, end) = hex_float(data, hex_start);
            return Some((signed(v), end));
        }
        // "0x" alone: the "0" converts.
        return Some((signed(0.0), p + 1));
    }
    let mut q = p;
    let mut digits = 0;
    while at(q).is_ascii_digit() {
        q += 1;
        digits += 1;
    }
    if at(q) == b'.' {
        q += 1;
        while at(q).is_ascii_digit() {
            q += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if at(q) | 0x20 == b'e' {
        let mut e = q + 1;
        if matches!(at(e), b'+' | b'-') {
            e += 1;
        }
        if at(e).is_ascii_digit() {
            while at(e).is_ascii_digit() {
                e += 1;
            }
            q = e;
        }
    }
    let text = std::str::from_utf8(&data[p..q]).expect("ASCII digits");
    // Rust's parser wants a digit before the exponent: "1.e5", ".5".
    let v: f64 = text
        .parse()
        .or_else(|_| text.replacen('.', ".0", 1).parse())
        .or_else(|_| format!("0{text}").parse())
        .expect("a valid decimal number");
    Some((signed(v), q))
}

/// The hex digits (with an optional point) and `p` exponent of a hex float
/// starting at `start`; rounding is correct up to 30 significant digits,
/// beyond which later digits only set a sticky bit.
fn hex_float(data: &[u8], start: usize) -> (f64, usize) {
    let at = |i: usize| data.get(i).copied().unwrap_or(0);
    let mut mantissa: u128 = 0;
    let mut scale: i64 = 0;
    let mut sticky = false;
    let mut q = start;
    let mut seen_point = false;
    loop {
        let c = at(q);
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            if mantissa >> 120 == 0 {
                mantissa = mantissa << 4 | u128::from(d);
                if seen_point {
                    scale -= 4;
                }
            } else {
                sticky |= d != 0;
                if !seen_point {
                    scale += 4;
                }
            }
        } else {
            break;
        }
        q += 1;
    }
    if at(q) | 0x20 == b'p' {
        let mut e = q + 1;
        let neg = at(e) == b'-';
        if matches!(at(e), b'+' | b'-') {
            e += 1;
        }
        if at(e).is_ascii_digit() {
            let mut exp: i64 = 0;
            while at(e).is_ascii_digit() {
                exp = (exp * 10 + i64::from(at(e) - b'0')).min(100_000);
                e += 1;
            }
            scale += if neg { -exp } else { exp };
            q = e;
        }
    }
    if sticky {
        mantissa |= 1;
    }
    let v = mantissa as f64 * 2f64.powi(scale.clamp(-2000, 2000) as i32);
    (v, q)
}

#[cfg(test)]
mod tests {
    use super::super::golden;
    use super::format_g;
    use proptest::prelude::*;

    /// Every case of `tests/golden/cjson.golden`, recorded from
    /// redis-server 7.0.
    #[test]
    fn matches_redis() {
        golden::check(include_str!("../../tests/golden/cjson.golden"));
    }

    /// `%.14g` and friends, against glibc's printf.
    #[test]
    fn format_g_matches_printf() {
        let cases: &[(f64, usize, &str)] = &[
            (0.1, 14, "0.1"),
            (1.0 / 3.0, 14, "0.33333333333333"),
            (1e300, 14, "1e+300"),
            (123456789012345.0, 14, "1.2345678901234e+14"),
            (12345678901234.5, 14, "12345678901234"),
            (12345678901235.5, 14, "12345678901236"),
            (99999999999999.5, 14, "1e+14"),
            (0.0001, 14, "0.0001"),
            (0.00001, 14, "1e-05"),
            (2.5, 1, "2"),
            (3.5, 1, "4"),
            (25.0, 1, "2e+01"),
            (0.15, 1, "0.1"),
            (-0.0, 14, "-0"),
            (5e-324, 14, "4.9406564584125e-324"),
            (1.7976931348623157e308, 14, "1.7976931348623e+308"),
            (100.0, 14, "100"),
            (-1.5e-10, 14, "-1.5e-10"),
        ];
        for &(x, p, want) in cases {
            assert_eq!(format_g(x, p), want, "{x:e} at {p}");
        }
    }

    #[test]
    fn decode_keeps_key_order_of_lua() {
        // The order pairs() sees depends on how the table was built;
        // building it as lua-cjson does gives Redis's order on re-encoding.
        let lua = golden::lua();
        let s: String = lua
            .load(r#"return cjson.encode(cjson.decode('{"z":1,"a":2,"m":3,"b":4,"y":5}'))"#)
            .eval()
            .unwrap();
        // redis-cli EVAL "return cjson.encode(cjson.decode('{...}'))" 0
        assert_eq!(s, r#"{"a":2,"z":1,"m":3,"y":5,"b":4}"#);
    }

    /// The deepest nesting either direction allows (the recursion is about
    /// 600 bytes a level at the dev profile's opt-level) fits in 768 KiB,
    /// well inside the 2 MiB a spawned thread gets; and mlua's handles
    /// (about three a level) stay far below its 8000.
    #[test]
    fn deepest_nesting_fits_a_small_stack() {
        let run = std::thread::Builder::new()
            .stack_size(768 * 1024)
            .spawn(|| {
                let lua = golden::lua();
                let src = "cjson.encode_max_depth(100000) cjson.decode_max_depth(100000) \
                    local t = {} for i = 1, 999 do t = {a = {t}} end \
                    local ok, e = pcall(cjson.encode, t) \
                    local s = cjson.encode({}) for i = 1, 999 do s = '[' .. s .. ']' end \
                    local v = cjson.decode(s) \
                    local ok2, e2 = pcall(cjson.decode, '[' .. s .. ']') \
                    return e .. ' | ' .. #cjson.encode(v) .. ' | ' .. e2";
                lua.load(src).eval::<String>().unwrap()
            })
            .unwrap();
        assert_eq!(
            run.join().unwrap(),
            "Cannot serialise, excessive nesting (1001) | 2000 | \
             Found too many nested data structures (1001) at character 1001"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn decode_inverts_encode(v in super::super::cmsgpack::tests::lua_value()) {
            // Floats come back at 14 digits, so the first round may round
            // them; from then on decode(encode(x)) must be x. Key order may
            // differ (it depends on how a table grew), so compare as tables.
            let lua = golden::lua();
            let src = format!(
                "{} local a = cjson.decode(cjson.encode({v})) \
                 return eq(a, cjson.decode(cjson.encode(a)))",
                super::super::cmsgpack::tests::DEEP_EQ
            );
            prop_assert!(lua.load(src).eval::<bool>().unwrap(), "{}", v);
        }

        #[test]
        fn decode_inverts_encode_exactly_for_integers_and_strings(
            ints in prop::collection::vec(-1_000_000_000_000i64..1_000_000_000_000, 0..20),
            words in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..10),
        ) {
            let lua = golden::lua();
            let ints: Vec<String> = ints.iter().map(|i| i.to_string()).collect();
            let words: Vec<String> =
                words.iter().map(|w| super::super::cmsgpack::tests::lua_string(w)).collect();
            let src = format!(
                "{} local v = {{ints = {{{}}}, words = {{{}}}}} \
                 return eq(v, cjson.decode(cjson.encode(v)))",
                super::super::cmsgpack::tests::DEEP_EQ,
                ints.join(","),
                words.join(",")
            );
            prop_assert!(lua.load(src).eval::<bool>().unwrap());
        }
    }
}
