//! Conversions between Lua values and RESP, as Redis 7.0's `script_lua.c`
//! makes them: a command's reply read into Lua for `redis.call`
//! (`redisProtocolToLuaType`), and a script's result written as the reply
//! (`luaReplyToRedisReply`).
use cairn_protocol::resp::{Protocol, ReplyWriter};
use mlua::{Lua, Table, Value};

/// How deep a script's result may nest before the reply is refused, as
/// Redis stops at Lua's C stack limit.
const MAX_DEPTH: usize = 1000;

/// `{err = text}` from an error text as Redis normalises it
/// (`luaPushErrorBuff`): "-CODE msg" keeps its code, a bare message gets
/// "ERR", trailing CR/LF go.
pub fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", lua.create_string(normalise_error(text))?)?;
    Ok(t)
}

/// See `error_table`.
pub fn normalise_error(text: &[u8]) -> Vec<u8> {
    let (code, msg) = error_parts(text);
    let mut out = Vec::with_capacity(code.len() + 1 + msg.len());
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend_from_slice(msg);
    out
}

/// An error text's code and message as `luaPushErrorBuff` splits them:
/// "-CODE msg" keeps its code, a bare message gets "ERR"; CR/LF around
/// the message go. Allocates nothing (`crate::call` runs it between Lua
/// calls that may raise).
pub(crate) fn error_parts(text: &[u8]) -> (&[u8], &[u8]) {
    let (code, msg): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let mut msg = msg;
    while let [head @ .., b'\r' | b'\n'] = msg {
        msg = head;
    }
    while let [b'\r' | b'\n', tail @ ..] = msg {
        msg = tail;
    }
    (code, msg)
}

/// A Lua number as a RESP integer: truncated toward zero, as Redis casts
/// `lua_Number` to `long long` (out of range and NaN give i64::MIN, what
/// that cast gives on x86-64).
pub fn lua_number_to_int(n: f64) -> i64 {
    // 2^63: every i64 lies in [-2^63, 2^63).
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

/// What a script's result becomes at the top: a reply, or an error reply's
/// text (the server writes errors itself, to count them).
pub enum Top {
    Reply,
    Error(Vec<u8>),
}

/// Writes `v` as the reply to a client speaking `proto`. `script_resp3`:
/// the script switched to RESP3 (`redis.setresp(3)`), which decides how
/// booleans are written (Redis looks at the script's protocol there, at
/// the client's everywhere else).
pub fn write_result(v: &Value, proto: Protocol, script_resp3: bool, out: &mut Vec<u8>) -> Top {
    if let Value::Table(t) = v {
        if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
            return Top::Error(e.as_bytes().to_vec());
        }
    }
    write_value(v, proto, script_resp3, out, 0);
    Top::Reply
}

fn write_value(v: &Value, proto: Protocol, script_resp3: bool, out: &mut Vec<u8>, depth: usize) {
    if depth > MAX_DEPTH {
        ReplyWriter::new(out, proto).error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => ReplyWriter::new(out, proto).bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            let mut w = ReplyWriter::new(out, proto);
            match (script_resp3, proto, *b) {
                (false, _, true) => w.int(1),
                (false, _, false) => w.null(),
                (true, Protocol::Resp3, b) => w.boolean(b),
                (true, _, b) => w.int(b as i64),
            }
        }
        Value::Integer(i) => ReplyWriter::new(out, proto).int(*i),
        Value::Number(n) => ReplyWriter::new(out, proto).int(lua_number_to_int(*n)),
        Value::Table(t) => write_table(t, proto, script_resp3, out, depth),
        _ => ReplyWriter::new(out, proto).null(),
    }
}

fn write_table(t: &Table, proto: Protocol, script_resp3: bool, out: &mut Vec<u8>, depth: usize) {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        ReplyWriter::new(out, proto).error(&String::from_utf8_lossy(&e.as_bytes()));
        return;
    }
    if let Value::String(s) = field("ok") {
        let text = sanitise(&s.as_bytes());
        ReplyWriter::new(out, proto).simple(&String::from_utf8_lossy(&text));
        return;
    }
    if let Value::Number(d) = field("double") {
        ReplyWriter::new(out, proto).double(d);
        return;
    }
    if let Value::Integer(d) = field("double") {
        ReplyWriter::new(out, proto).double(d as f64);
        return;
    }
    if let Value::String(s) = field("big_number") {
        let digits = sanitise(&s.as_bytes());
        let digits = String::from_utf8_lossy(&digits);
        let mut w = ReplyWriter::new(out, proto);
        if proto == Protocol::Resp3 {
            w.big_number(&digits)
        } else {
            w.bulk(digits.as_bytes())
        }
        return;
    }
    if let Value::Table(m) = field("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        if proto == Protocol::Resp3 {
            ReplyWriter::new(out, proto).map(pairs.len());
        } else {
            ReplyWriter::new(out, proto).array(pairs.len() * 2);
        }
        for (k, v) in &pairs {
            write_value(k, proto, script_resp3, out, depth + 1);
            write_value(v, proto, script_resp3, out, depth + 1);
        }
        return;
    }
    if let Value::Table(s) = field("set") {
        let keys: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| k)
            .collect();
        if proto == Protocol::Resp3 {
            ReplyWriter::new(out, proto).set(keys.len());
        } else {
            ReplyWriter::new(out, proto).array(keys.len());
        }
        for k in &keys {
            write_value(k, proto, script_resp3, out, depth + 1);
        }
        return;
    }
    if let Value::Table(v) = field("verbatim_string") {
        let format = v.raw_get::<Value>("format").unwrap_or(Value::Nil);
        let text = v.raw_get::<Value>("string").unwrap_or(Value::Nil);
        if let (Value::String(f), Value::String(s)) = (format, text) {
            let f = String::from_utf8_lossy(&f.as_bytes()).into_owned();
            let mut w = ReplyWriter::new(out, proto);
            if proto == Protocol::Resp3 {
                w.verbatim(&f, &s.as_bytes())
            } else {
                w.bulk(&s.as_bytes())
            }
            return;
        }
    }
    // An array: elements 1, 2, ... up to the first nil.
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    ReplyWriter::new(out, proto).array(items.len());
    for v in &items {
        write_value(v, proto, script_resp3, out, depth + 1);
    }
}

/// A status or big number text with CR and LF made spaces, so the reply
/// stays one line.
fn sanitise(b: &[u8]) -> Vec<u8> {
    b.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua_to_resp(code: &str, proto: Protocol) -> (Vec<u8>, Option<Vec<u8>>) {
        let lua = Lua::new();
        let v: Value = lua.load(code).eval().unwrap();
        let mut out = Vec::new();
        match write_result(&v, proto, proto == Protocol::Resp3, &mut out) {
            Top::Reply => (out, None),
            Top::Error(e) => (out, Some(e)),
        }
    }

    #[test]
    fn lua_values_become_resp2_as_in_redis() {
        let cases: &[(&str, &[u8])] = &[
            ("return 'x'", b"$1\r\nx\r\n"),
            ("return 3.99", b":3\r\n"),
            ("return -3.99", b":-3\r\n"),
            ("return 1e20", b":-9223372036854775808\r\n"),
            ("return true", b":1\r\n"),
            ("return false", b"$-1\r\n"),
            ("return nil", b"$-1\r\n"),
            (
                "return {1,2,3,'x',nil,4}",
                b"*4\r\n:1\r\n:2\r\n:3\r\n$1\r\nx\r\n",
            ),
            ("return {ok='FINE'}", b"+FINE\r\n"),
            ("return {ok='a\\r\\nb'}", b"+a  b\r\n"),
            ("return {double=3.5}", b"$3\r\n3.5\r\n"),
            ("return {big_number='123'}", b"$3\r\n123\r\n"),
            ("return {set={a=true}}", b"*1\r\n$1\r\na\r\n"),
            ("return {map={a=1}}", b"*2\r\n$1\r\na\r\n:1\r\n"),
            (
                "return {1,{err='E x'},{ok='y'}}",
                b"*3\r\n:1\r\n-E x\r\n+y\r\n",
            ),
            (
                "return {verbatim_string={format='txt', string='hi'}}",
                b"$2\r\nhi\r\n",
            ),
            ("return print", b"$-1\r\n"),
        ];
        for (code, want) in cases {
            let (got, err) = lua_to_resp(code, Protocol::Resp2);
            assert_eq!(err, None, "{code}");
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(want),
                "{code}"
            );
        }
        assert_eq!(
            lua_to_resp("return {err='x'}", Protocol::Resp2).1,
            Some(b"x".to_vec())
        );
    }

    #[test]
    fn lua_values_become_resp3_as_in_redis() {
        let cases: &[(&str, &[u8])] = &[
            ("return true", b"#t\r\n"),
            ("return false", b"#f\r\n"),
            ("return nil", b"_\r\n"),
            ("return {double=3.5}", b",3.5\r\n"),
            ("return {big_number='123'}", b"(123\r\n"),
            ("return {set={a=true}}", b"~1\r\n$1\r\na\r\n"),
            ("return {map={a=1}}", b"%1\r\n$1\r\na\r\n:1\r\n"),
            (
                "return {verbatim_string={format='txt', string='hi'}}",
                b"=6\r\ntxt:hi\r\n",
            ),
        ];
        for (code, want) in cases {
            let (got, _) = lua_to_resp(code, Protocol::Resp3);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(want),
                "{code}"
            );
        }
    }

    #[test]
    fn error_texts_are_normalised_as_redis_does() {
        assert_eq!(normalise_error(b"-ERR x\r\n"), b"ERR x");
        assert_eq!(normalise_error(b"-x"), b"ERR x");
        assert_eq!(normalise_error(b"-My Error"), b"My Error");
        assert_eq!(normalise_error(b"Unknown thing"), b"ERR Unknown thing");
    }
}
