//! Redis 7.0's Lua debugger (ldb: the "LDB" part of `eval.c`, and the
//! logging in `script_lua.c`'s `redis.call`), for SCRIPT DEBUG sessions.
//!
//! While a session runs, a line and count hook (`hook`) stops the script
//! at a step, a breakpoint or `redis.breakpoint()`, sends the log lines
//! gathered so far to the client as one array of simple strings, and reads
//! the client's commands (`step`, `list`, `print`, `eval`, ...) from the
//! [`Console`] until one lets the script go on: the server's connection,
//! lent for the session, carries the bytes; this module knows the texts
//! and the protocol, byte for byte as ldb writes them. Nothing here runs
//! for a script outside a session: the hook is installed only for a
//! debugging run (`Vm::run_debug`) and `redis.call` looks at one flag.
use crate::vm::Shared;
use mlua::{ffi, Debug, DebugEvent, Lua, VmState};
use std::ffi::{c_int, CStr};
use std::ptr::NonNull;
use std::time::Instant;

/// The client's end of a debugging session.
pub trait Console {
    /// Reads what the client sent into `buf`, waiting until something
    /// comes; Ok(0) or an error once the client is gone.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Writes all of `bytes`. A failure is not reported: the next read
    /// finds the connection gone, as in Redis.
    fn write(&mut self, bytes: &[u8]);
}

const BREAKPOINTS_MAX: usize = 64;
const MAXLEN_DEFAULT: usize = 256;
/// `LDB_MAX_VALUES_DEPTH`: LUA_MINSTACK / 2.
const MAX_VALUES_DEPTH: usize = 10;
/// Bytes of unparsed input at which the session fails ("max client
/// buffer reached").
const MAX_CBUF: usize = 1 << 20;

/// A debugging session's state (Redis's `struct ldbState`).
pub(crate) struct Ldb {
    console: NonNull<dyn Console + 'static>,
    /// The script's source, one entry per line.
    src: Vec<Vec<u8>>,
    bp: Vec<i32>,
    /// Stop at the next line (and log `redis.call`s meanwhile).
    pub(crate) step: bool,
    /// `redis.breakpoint()` was called: stop at the next line.
    pub(crate) luabp: bool,
    pub(crate) currentline: i32,
    logs: Vec<Vec<u8>>,
    /// Bytes read from the client not yet parsed.
    cbuf: Vec<u8>,
    maxlen: usize,
    maxlen_hint_sent: bool,
    /// After this long without a stop the script stops with "timeout
    /// reached" (`busy-reply-threshold`, else 5 s).
    timeout_ms: u64,
    started: Instant,
}

impl Ldb {
    /// A session over `console` for a script whose source is `body`.
    ///
    /// # Safety
    /// `console` must stay valid, and be used by nothing else, until the
    /// session is dropped.
    pub(crate) unsafe fn new(console: &mut dyn Console, body: &[u8], timeout_ms: u64) -> Ldb {
        let console: NonNull<dyn Console + '_> = NonNull::from(console);
        let console: NonNull<dyn Console + 'static> = std::mem::transmute(console);
        Ldb {
            console,
            src: split_source(body),
            bp: Vec::new(),
            step: true,
            luabp: false,
            currentline: 0,
            logs: Vec::new(),
            cbuf: Vec::new(),
            maxlen: MAXLEN_DEFAULT,
            maxlen_hint_sent: false,
            timeout_ms: if timeout_ms > 0 { timeout_ms } else { 5000 },
            started: Instant::now(),
        }
    }

    pub(crate) fn log(&mut self, entry: Vec<u8>) {
        self.logs.push(entry);
    }

    /// `ldbLogWithMaxLen`: long entries are cut at `maxlen`, with a hint
    /// the first time.
    fn log_with_maxlen(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen > 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.log(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log(
                b"<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.".to_vec(),
            );
        }
    }

    /// `ldbSendLogs`: the entries so far as one array of simple strings,
    /// CR and LF turned into spaces.
    pub(crate) fn send_logs(&mut self) {
        let out = encode_logs(&std::mem::take(&mut self.logs));
        // SAFETY: `Ldb::new`'s contract.
        unsafe { self.console.as_mut() }.write(&out);
    }

    fn source_line(&self, line: i32) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn is_breakpoint(&self, line: i32) -> bool {
        self.bp.contains(&line)
    }

    fn log_source_line(&mut self, line: i32) {
        let prefix = match (self.currentline == line, self.is_breakpoint(line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut s = format!("{prefix}{line:<3} ").into_bytes();
        s.extend_from_slice(self.source_line(line));
        self.log(s);
    }

    /// `ldbList`: the lines within `context` of `around` (0: all).
    fn list(&mut self, around: i32, context: i32) {
        for j in 1..=self.src.len() as i32 {
            if around != 0 && (around - j).abs() > context {
                continue;
            }
            self.log_source_line(j);
        }
    }

    /// `ldbBreak`: list, add (`n`), remove (`-n`) or clear (`0`).
    fn breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.bp.is_empty() {
                self.log(b"No breakpoints set. Use 'b <line>' to add one.".to_vec());
            } else {
                self.log(format!("{} breakpoints set:", self.bp.len()).into_bytes());
                for line in self.bp.clone() {
                    self.log_source_line(line);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = string2l(arg) else {
                let mut s = b"Invalid argument:'".to_vec();
                s.extend_from_slice(arg);
                s.push(b'\'');
                self.log(s);
                continue;
            };
            if line == 0 {
                self.bp.clear();
                self.log(b"All breakpoints removed.".to_vec());
            } else if line > 0 {
                if self.bp.len() == BREAKPOINTS_MAX {
                    self.log(b"Too many breakpoints set.".to_vec());
                } else if line <= self.src.len() as i64 && !self.is_breakpoint(line as i32) {
                    self.bp.push(line as i32);
                    self.list(line as i32, 1);
                } else {
                    self.log(b"Wrong line number.".to_vec());
                }
            } else {
                let line = line.unsigned_abs();
                match self.bp.iter().position(|&b| b as u64 == line) {
                    Some(i) => {
                        self.bp.remove(i);
                        self.log(b"Breakpoint removed.".to_vec());
                    }
                    None => self.log(b"No breakpoint in the specified line.".to_vec()),
                }
            }
        }
    }

    /// `ldbMaxlen`: show or set the trimming length (at least 60, 0: off).
    fn set_maxlen(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut v = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if v != 0 && v <= 60 {
                v = 60;
            }
            self.maxlen = v.max(0) as usize;
        }
        let s = if self.maxlen > 0 {
            format!("<value> replies are truncated at {} bytes.", self.maxlen)
        } else {
            "<value> replies are unlimited.".to_string()
        };
        self.log(s.into_bytes());
    }
}

/// The script's lines as ldb keeps them: trailing CR and LF dropped from
/// the whole, then split at each LF.
fn split_source(body: &[u8]) -> Vec<Vec<u8>> {
    let mut end = body.len();
    while end > 0 && matches!(body[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    if end == 0 {
        return Vec::new();
    }
    body[..end]
        .split(|&c| c == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// Log entries as ldb sends them.
pub fn encode_logs(logs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", logs.len()).into_bytes();
    for l in logs {
        out.push(b'+');
        out.extend(
            l.iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
        );
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// What the client's input holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Command(Vec<Vec<u8>>),
    /// Not a whole command yet.
    More,
    /// Not a command ldb accepts: the session fails.
    Error,
}

/// `ldbReplParseCommand`: one multibulk command of 1 to 1024 arguments
/// of 1 to 1024 bytes each, found from the first '*' on; forgiving in the
/// same ways.
pub fn parse_command(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::More;
    }
    let Some(star) = buf.iter().position(|&c| c == b'*') else {
        return Parsed::Error;
    };
    let Some(crlf) = find_crlf(buf, star) else {
        return Parsed::More;
    };
    let argc = atoi(&buf[star + 1..crlf]);
    if argc <= 0 || argc > 1024 {
        return Parsed::Error;
    }
    let mut p = crlf + 2;
    let mut argv = Vec::with_capacity(argc as usize);
    while argv.len() < argc as usize {
        if p >= buf.len() {
            return Parsed::More;
        }
        if buf[p] != b'$' {
            return Parsed::Error;
        }
        let Some(crlf) = find_crlf(buf, p) else {
            return Parsed::More;
        };
        let len = atoi(&buf[p + 1..crlf]);
        if len <= 0 || len > 1024 {
            return Parsed::Error;
        }
        p = crlf + 2;
        let len = len as usize;
        if p + len + 2 > buf.len() {
            return Parsed::More;
        }
        argv.push(buf[p..p + len].to_vec());
        p += len;
        if &buf[p..p + 2] != b"\r\n" {
            return Parsed::Error;
        }
        p += 2;
    }
    Parsed::Command(argv)
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

/// C's `atoi`: leading blanks, a sign, digits; 0 if none.
fn atoi(s: &[u8]) -> i64 {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = i < s.len() && s[i] == b'-';
    if i < s.len() && (s[i] == b'-' || s[i] == b'+') {
        i += 1;
    }
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.saturating_mul(10).saturating_add((s[i] - b'0') as i64);
        i += 1;
    }
    if neg {
        -v
    } else {
        v
    }
}

/// Redis's `string2l`: an optional '-' and digits, no leading zero.
fn string2l(s: &[u8]) -> Option<i64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits[0] == b'0' && s.len() > 1)
    {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// `sdscatrepr`: quoted, with C escapes for the unprintable.
pub fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// C's `%g`: six significant digits, exponent form outside 1e-4..1e6.
pub fn fmt_g(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), exp.abs())
    } else {
        strip(&format!("{:.*}", (5 - exp) as usize, x))
    }
}

/// `ldbRedisProtocolToHuman`: a reply as the `<reply>` log shows it.
pub fn reply_to_human(out: &mut Vec<u8>, reply: &[u8]) {
    let mut pos = 0;
    human(out, reply, &mut pos);
}

fn human(out: &mut Vec<u8>, r: &[u8], pos: &mut usize) {
    let Some(&kind) = r.get(*pos) else {
        return;
    };
    let start = *pos;
    let Some(end) = find_crlf(r, start) else {
        *pos = r.len();
        return;
    };
    let line = &r[start + 1..end];
    *pos = end + 2;
    let count = || atoi(line);
    match kind {
        b':' => out.extend_from_slice(line),
        b'$' => {
            let n = count();
            if n < 0 {
                out.extend_from_slice(b"NULL");
            } else {
                let n = n as usize;
                let body = &r[(*pos).min(r.len())..(*pos + n).min(r.len())];
                repr(out, body);
                *pos += n + 2;
            }
        }
        b'+' | b'-' => repr(out, &r[start..end]),
        b'*' => {
            let n = count();
            if n < 0 {
                out.extend_from_slice(b"NULL");
                return;
            }
            human_items(out, r, pos, n, b"[", b"]", false);
        }
        b'~' => {
            let n = count();
            human_items(out, r, pos, n, b"~(", b")", false);
        }
        b'%' => {
            let n = count();
            human_items(out, r, pos, n, b"{", b"}", true);
        }
        b'_' => out.extend_from_slice(b"(null)"),
        b'#' => out.extend_from_slice(if line == b"t" { b"#true" } else { b"#false" }),
        b',' => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(line);
        }
        // RESP3 types ldb does not know (big numbers, verbatim strings):
        // their line as it is.
        _ => out.extend_from_slice(&r[start..end]),
    }
}

/// `n` elements (`pairs`: `n` key => value pairs) of an aggregate, comma
/// separated between `open` and `close`, as ldb.c's
/// `ldbRedisProtocolToHuman_MultiBulk`/`_Set`/`_Map` write them.
fn human_items(
    out: &mut Vec<u8>,
    r: &[u8],
    pos: &mut usize,
    n: i64,
    open: &[u8],
    close: &[u8],
    pairs: bool,
) {
    out.extend_from_slice(open);
    for j in 0..n {
        human(out, r, pos);
        if pairs {
            out.extend_from_slice(b" => ");
            human(out, r, pos);
        }
        if j != n - 1 {
            out.push(b',');
        }
    }
    out.extend_from_slice(close);
}

/// `ldbCatStackValue`: the Lua value at `idx` in a readable form. Tables
/// show as `{1; 2}` when they are arrays, `{[k]=v; ...}` otherwise.
///
/// # Safety
/// `idx` must be a valid index of `state`, with room for three more slots.
pub(crate) unsafe fn cat_value(out: &mut Vec<u8>, state: *mut ffi::lua_State, idx: c_int) {
    let idx = if idx < 0 {
        ffi::lua_gettop(state) + idx + 1
    } else {
        idx
    };
    cat_value_rec(out, state, idx, 0);
}

unsafe fn cat_value_rec(out: &mut Vec<u8>, state: *mut ffi::lua_State, idx: c_int, level: usize) {
    if level == MAX_VALUES_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let level = level + 1;
    let t = ffi::lua_type(state, idx);
    match t {
        ffi::LUA_TSTRING => {
            let mut len = 0;
            let p = ffi::lua_tolstring(state, idx, &mut len);
            repr(out, std::slice::from_raw_parts(p as *const u8, len));
        }
        ffi::LUA_TBOOLEAN => out.extend_from_slice(if ffi::lua_toboolean(state, idx) != 0 {
            b"true"
        } else {
            b"false"
        }),
        ffi::LUA_TNUMBER => out.extend_from_slice(fmt_g(ffi::lua_tonumber(state, idx)).as_bytes()),
        ffi::LUA_TNIL => out.extend_from_slice(b"nil"),
        ffi::LUA_TTABLE => {
            let mut expected = 1.0;
            let mut is_array = true;
            let (mut as_array, mut as_map) = (Vec::new(), Vec::new());
            ffi::lua_checkstack(state, 3);
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, idx) != 0 {
                let top = ffi::lua_gettop(state);
                if is_array
                    && (ffi::lua_type(state, top - 1) != ffi::LUA_TNUMBER
                        || ffi::lua_tonumber(state, top - 1) != expected)
                {
                    is_array = false;
                }
                cat_value_rec(&mut as_array, state, top, level);
                as_array.extend_from_slice(b"; ");
                as_map.push(b'[');
                cat_value_rec(&mut as_map, state, top - 1, level);
                as_map.extend_from_slice(b"]=");
                cat_value_rec(&mut as_map, state, top, level);
                as_map.extend_from_slice(b"; ");
                ffi::lua_settop(state, top - 1);
                expected += 1.0;
            }
            let chosen = if is_array { as_array } else { as_map };
            out.push(b'{');
            out.extend_from_slice(&chosen[..chosen.len().saturating_sub(2)]);
            out.push(b'}');
        }
        ffi::LUA_TFUNCTION | ffi::LUA_TUSERDATA | ffi::LUA_TTHREAD | ffi::LUA_TLIGHTUSERDATA => {
            let name = match t {
                ffi::LUA_TFUNCTION => "function",
                ffi::LUA_TUSERDATA => "userdata",
                ffi::LUA_TTHREAD => "thread",
                _ => "light-userdata",
            };
            let p = ffi::lua_topointer(state, idx);
            out.extend_from_slice(format!("\"{name}@{p:p}\"").as_bytes());
        }
        _ => out.extend_from_slice(b"\"<unknown-lua-type>\""),
    }
}

/// The session of the running script, for a short use (no Lua code may
/// run meanwhile: it could reach the session too).
fn with_ldb<R>(shared: &Shared, f: impl FnOnce(&mut Ldb) -> R) -> Option<R> {
    shared.ldb.borrow_mut().as_mut().map(f)
}

/// Raises `text` from the hook as an error no pcall catches (the way a
/// SCRIPT KILL stops a script), as ldb's `luaError` ends the script.
fn raise(shared: &Shared, text: &str) -> mlua::Result<VmState> {
    shared.kill(text.as_bytes().to_vec())?;
    Err(mlua::Error::RuntimeError(text.to_string()))
}

/// `luaLdbLineHook`: on each line of the user's script, stop if stepping,
/// at a breakpoint, after `redis.breakpoint()`, or when the script has run
/// too long without a stop; on count events, also the host's tick.
pub(crate) fn hook(lua: &Lua, debug: Debug, shared: &Shared) -> mlua::Result<VmState> {
    let event = debug.event();
    if event == DebugEvent::Count {
        crate::vm::tick(shared)?;
    }
    let in_script = debug
        .source()
        .short_src
        .is_some_and(|s| s.contains("user_script"));
    if !in_script {
        return Ok(VmState::Continue);
    }
    let line = debug.curr_line();
    let Some(stop) = with_ldb(shared, |ldb| {
        ldb.currentline = line;
        let bp = ldb.is_breakpoint(line) || ldb.luabp;
        let mut timeout = false;
        if event == DebugEvent::Count && !ldb.step && !bp {
            if ldb.started.elapsed().as_millis() as u64 >= ldb.timeout_ms {
                timeout = true;
                ldb.step = true;
            } else {
                return None;
            }
        }
        if !ldb.step && !bp {
            return None;
        }
        let reason = if bp {
            if ldb.luabp {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        ldb.step = false;
        ldb.luabp = false;
        ldb.log(format!("* Stopped at {line}, stop reason = {reason}").into_bytes());
        ldb.log_source_line(line);
        ldb.send_logs();
        Some(timeout)
    })
    .flatten() else {
        return Ok(VmState::Continue);
    };
    let timeout = stop;
    let connected = repl(lua, shared)?;
    if !connected && timeout {
        return raise(
            shared,
            "ERR timeout during Lua debugging with client closing connection",
        );
    }
    with_ldb(shared, |ldb| ldb.started = Instant::now());
    Ok(VmState::Continue)
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// `ldbRepl`: runs the client's commands until one lets the script go on.
/// Ok(false): the client is gone (the script then runs without stops).
fn repl(lua: &Lua, shared: &Shared) -> mlua::Result<bool> {
    loop {
        let argv = loop {
            let parsed = with_ldb(shared, |ldb| parse_command(&ldb.cbuf));
            match parsed {
                Some(Parsed::Command(argv)) => break argv,
                Some(Parsed::Error) => {
                    raise(shared, "ERR protocol error")?;
                }
                Some(Parsed::More) => {}
                None => return Ok(false),
            }
            let mut buf = [0u8; 1024];
            let console = with_ldb(shared, |ldb| ldb.console).expect("a session");
            // SAFETY: `Ldb::new`'s contract; no borrow of the session is
            // held while the console blocks.
            let n = unsafe { (*console.as_ptr()).read(&mut buf) }.unwrap_or(0);
            if n == 0 {
                with_ldb(shared, |ldb| {
                    ldb.step = false;
                    ldb.bp.clear();
                });
                return Ok(false);
            }
            let too_big = with_ldb(shared, |ldb| {
                ldb.cbuf.extend_from_slice(&buf[..n]);
                if ldb.cbuf.len() > MAX_CBUF {
                    ldb.cbuf.clear();
                    true
                } else {
                    false
                }
            });
            if too_big == Some(true) {
                raise(shared, "ERR max client buffer reached")?;
            }
        };
        // Whatever followed the command in the input is dropped, as ldb
        // does.
        with_ldb(shared, |ldb| ldb.cbuf.clear());
        let cmd = argv[0].to_ascii_lowercase();
        let is = |short: &str, long: &str| cmd == short.as_bytes() || cmd == long.as_bytes();
        if is("h", "help") {
            with_ldb(shared, |ldb| {
                for l in HELP {
                    ldb.log(l.as_bytes().to_vec());
                }
            });
        } else if is("s", "step") || is("n", "next") {
            with_ldb(shared, |ldb| ldb.step = true);
            return Ok(true);
        } else if is("c", "continue") {
            return Ok(true);
        } else if is("t", "trace") {
            trace(lua, shared)?;
        } else if is("m", "maxlen") {
            with_ldb(shared, |ldb| ldb.set_maxlen(&argv));
        } else if is("b", "break") {
            with_ldb(shared, |ldb| ldb.breakpoints(&argv));
        } else if is("e", "eval") {
            eval(lua, shared, &argv)?;
        } else if is("a", "abort") {
            raise(shared, "ERR script aborted for user request")?;
        } else if argv.len() > 1 && is("r", "redis") {
            redis(lua, shared, &argv)?;
        } else if is("p", "print") {
            print(lua, shared, argv.get(1).filter(|_| argv.len() == 2))?;
        } else if is("l", "list") {
            with_ldb(shared, |ldb| {
                let mut around = ldb.currentline;
                let mut ctx = 5;
                if argv.len() > 1 {
                    let n = atoi(&argv[1]);
                    if n > 0 {
                        around = n as i32;
                    }
                }
                if argv.len() > 2 {
                    ctx = atoi(&argv[2]) as i32;
                }
                ldb.list(around, ctx);
            });
        } else if is("w", "whole") {
            with_ldb(shared, |ldb| ldb.list(1, 1_000_000));
        } else {
            with_ldb(shared, |ldb| {
                ldb.log(
                    b"<error> Unknown Redis Lua debugger command or wrong number of arguments."
                        .to_vec(),
                )
            });
        }
        with_ldb(shared, Ldb::send_logs);
    }
}

// Inside `Lua::exec_raw` the hooked function is one level up: level 0 is
// the C function `exec_raw` calls through.
const HOOKED_LEVEL: c_int = 1;

unsafe fn short_src(ar: &ffi::lua_Debug) -> bool {
    CStr::from_ptr(ar.short_src.as_ptr())
        .to_bytes()
        .windows(11)
        .any(|w| w == b"user_script")
}

/// `ldbPrint` (a variable, from the current frame outwards, then the
/// globals KEYS and ARGV) and `ldbPrintAll` (the current frame's locals).
fn print(lua: &Lua, shared: &Shared, var: Option<&Vec<u8>>) -> mlua::Result<()> {
    // SAFETY: only the C API on the running thread's stack, through
    // frames that own nothing to drop (lines are logged as they are found).
    unsafe {
        lua.exec_raw::<()>((), |state| {
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            match var {
                Some(name) => {
                    let mut level = HOOKED_LEVEL;
                    while ffi::lua_getstack(state, level, &mut ar) != 0 {
                        level += 1;
                        // Frames of the sandbox's own Lua functions stand
                        // for Redis's C builtins, which have no locals.
                        ffi::lua_getinfo(state, c"S".as_ptr(), &mut ar);
                        if !short_src(&ar) {
                            continue;
                        }
                        let mut i = 1;
                        loop {
                            let n = ffi::lua_getlocal(state, &ar, i);
                            if n.is_null() {
                                break;
                            }
                            i += 1;
                            if CStr::from_ptr(n).to_bytes() == name.as_slice() {
                                log_value(shared, state, b"<value> ".to_vec());
                                ffi::lua_pop(state, 1);
                                return;
                            }
                            ffi::lua_pop(state, 1);
                        }
                    }
                    if name == b"ARGV" || name == b"KEYS" {
                        let cname = if name == b"ARGV" { c"ARGV" } else { c"KEYS" };
                        ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, cname.as_ptr());
                        log_value(shared, state, b"<value> ".to_vec());
                        ffi::lua_pop(state, 1);
                    } else {
                        with_ldb(shared, |ldb| ldb.log(b"No such variable.".to_vec()));
                    }
                }
                None => {
                    let mut vars = 0;
                    if ffi::lua_getstack(state, HOOKED_LEVEL, &mut ar) != 0 {
                        let mut i = 1;
                        loop {
                            let n = ffi::lua_getlocal(state, &ar, i);
                            if n.is_null() {
                                break;
                            }
                            i += 1;
                            let n = CStr::from_ptr(n).to_bytes();
                            if !n.windows(12).any(|w| w == b"(*temporary)") {
                                let mut prefix = b"<value> ".to_vec();
                                prefix.extend_from_slice(n);
                                prefix.extend_from_slice(b" = ");
                                log_value(shared, state, prefix);
                                vars += 1;
                            }
                            ffi::lua_pop(state, 1);
                        }
                    }
                    if vars == 0 {
                        with_ldb(shared, |ldb| {
                            ldb.log(b"No local variables in the current context.".to_vec())
                        });
                    }
                }
            }
        })
    }
}

/// `ldbLogStackValue`: the value on top of the stack after `prefix`,
/// trimmed to `maxlen`.
unsafe fn log_value(shared: &Shared, state: *mut ffi::lua_State, mut prefix: Vec<u8>) {
    cat_value(&mut prefix, state, -1);
    with_ldb(shared, |ldb| ldb.log_with_maxlen(prefix));
}

/// `ldbTrace`: the user script's frames from the current one outwards.
fn trace(lua: &Lua, shared: &Shared) -> mlua::Result<()> {
    // SAFETY: as in `print`.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            let mut level = 0;
            while ffi::lua_getstack(state, HOOKED_LEVEL + level, &mut ar) != 0 {
                ffi::lua_getinfo(state, c"Snl".as_ptr(), &mut ar);
                if short_src(&ar) {
                    let name = if ar.name.is_null() {
                        "top level".to_string()
                    } else {
                        CStr::from_ptr(ar.name).to_string_lossy().into_owned()
                    };
                    let line = ar.currentline;
                    with_ldb(shared, |ldb| {
                        let word = if level == 0 { "In" } else { "From" };
                        ldb.log(format!("{word} {name}:").into_bytes());
                        ldb.log_source_line(line);
                    });
                }
                level += 1;
            }
            if level == 0 {
                with_ldb(shared, |ldb| {
                    ldb.log(b"<error> Can't retrieve Lua stack.".to_vec())
                });
            }
        })
    }
}

/// `ldbEval`: the arguments joined as Lua code, tried first as an
/// expression, run in the scripts' environment; its value or error logged.
fn eval(lua: &Lua, shared: &Shared, argv: &[Vec<u8>]) -> mlua::Result<()> {
    let code = argv[1..].join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    let env = shared.env.borrow().clone();
    // SAFETY: the C API on the running thread's stack; the chunk runs
    // under `lua_pcall`, so its errors stop there.
    unsafe {
        lua.exec_raw::<()>(env, |state| {
            // Stack: the environment at 1.
            let name = c"@ldb_eval".as_ptr();
            let error = |state: *mut ffi::lua_State| {
                let mut s = b"<error> ".to_vec();
                let mut len = 0;
                let p = ffi::lua_tolstring(state, -1, &mut len);
                if !p.is_null() {
                    s.extend_from_slice(std::slice::from_raw_parts(p as *const u8, len));
                }
                with_ldb(shared, |ldb| ldb.log(s));
                ffi::lua_pop(state, 1);
            };
            if ffi::luaL_loadbuffer(state, expr.as_ptr() as *const _, expr.len(), name) != 0 {
                ffi::lua_pop(state, 1);
                if ffi::luaL_loadbuffer(state, code.as_ptr() as *const _, code.len(), name) != 0 {
                    error(state);
                    return;
                }
            }
            if ffi::lua_type(state, 1) == ffi::LUA_TTABLE {
                ffi::lua_pushvalue(state, 1);
                ffi::lua_setfenv(state, -2);
            }
            if ffi::lua_pcall(state, 0, 1, 0) != 0 {
                error(state);
                return;
            }
            log_value(shared, state, b"<retval> ".to_vec());
            ffi::lua_pop(state, 1);
        })
    }
}

/// `ldbRedis`: the command through `redis.call` with stepping on, so the
/// call and its reply are logged as a stepped call's are.
fn redis(lua: &Lua, shared: &Shared, argv: &[Vec<u8>]) -> mlua::Result<()> {
    // SAFETY: the C API on the running thread's stack; `redis.call`'s
    // errors stop at the `lua_pcall`.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            if ffi::lua_checkstack(state, argv.len() as c_int + 1) == 0 {
                with_ldb(shared, |ldb| {
                    ldb.log_with_maxlen(b"<reply> max lua stack reached".to_vec())
                });
                return;
            }
            ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
            ffi::lua_getfield(state, -1, c"call".as_ptr());
            for a in &argv[1..] {
                ffi::lua_pushlstring(state, a.as_ptr() as *const _, a.len());
            }
            with_ldb(shared, |ldb| ldb.step = true);
            ffi::lua_pcall(state, argv.len() as c_int - 1, 1, 0);
            with_ldb(shared, |ldb| ldb.step = false);
            ffi::lua_pop(state, 2);
        })
    }
}

/// `redis.call` logging while stepping (`script_lua.c`): the command...
pub(crate) fn log_call(shared: &Shared, args: &[&[u8]]) {
    with_ldb(shared, |ldb| {
        if !ldb.step {
            return;
        }
        let mut s = b"<redis>".to_vec();
        for (j, a) in args.iter().enumerate() {
            if j == 10 {
                s.extend_from_slice(format!(" ... ({} more)", args.len() - j - 1).as_bytes());
                break;
            }
            s.push(b' ');
            s.extend_from_slice(a);
        }
        ldb.log(s);
    });
}

/// ... an error it raised or answered (`luaPushError`'s log) ...
pub(crate) fn log_error(shared: &Shared, text: &[u8]) {
    with_ldb(shared, |ldb| {
        if ldb.step {
            let mut s = b"<error> ".to_vec();
            s.extend_from_slice(text);
            ldb.log(s);
        }
    });
}

/// ... and its reply.
pub(crate) fn log_reply(shared: &Shared, reply: &[u8]) {
    with_ldb(shared, |ldb| {
        if ldb.step {
            if reply.first() == Some(&b'-') {
                let end = find_crlf(reply, 0).unwrap_or(reply.len());
                let mut s = b"<error> ".to_vec();
                s.extend_from_slice(&reply[..end]);
                ldb.log(s);
            }
            let mut s = b"<reply> ".to_vec();
            reply_to_human(&mut s, reply);
            ldb.log_with_maxlen(s);
        }
    });
}

/// `redis.debug(...)`: its arguments logged with the current line.
///
/// # Safety
/// A C function's frame: the arguments are its stack.
pub(crate) unsafe extern "C-unwind" fn lua_debug(state: *mut ffi::lua_State) -> c_int {
    let shared = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Shared);
    let Some(line) = with_ldb(shared, |ldb| ldb.currentline) else {
        return 0;
    };
    let argc = ffi::lua_gettop(state);
    let mut s = format!("<debug> line {line}: ").into_bytes();
    for i in 1..=argc {
        cat_value(&mut s, state, i);
        if i != argc {
            s.extend_from_slice(b", ");
        }
    }
    with_ldb(shared, |ldb| ldb.log(s));
    0
}

/// `redis.breakpoint()`: in a session, stop at the next line (true);
/// false outside one.
///
/// # Safety
/// A C function's frame.
pub(crate) unsafe extern "C-unwind" fn lua_breakpoint(state: *mut ffi::lua_State) -> c_int {
    let shared = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Shared);
    let on = with_ldb(shared, |ldb| ldb.luabp = true).is_some();
    ffi::lua_pushboolean(state, on as c_int);
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    #[test]
    fn commands_parse_as_ldb_parses_them() {
        let whole = cmd(&["b", "12"]);
        assert_eq!(
            parse_command(&whole),
            Parsed::Command(vec![b"b".to_vec(), b"12".to_vec()])
        );
        for cut in 0..whole.len() {
            assert_eq!(parse_command(&whole[..cut]), Parsed::More, "cut at {cut}");
        }
        // Garbage before the '*' is skipped; an inline command is not one.
        assert!(matches!(
            parse_command(b"xx*1\r\n$1\r\ns\r\n"),
            Parsed::Command(_)
        ));
        assert_eq!(parse_command(b"step\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*0\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1025\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1\r\n:1\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1\r\n$1\r\nsXX"), Parsed::Error);
        let long = "x".repeat(1025);
        assert_eq!(parse_command(&cmd(&[&long])), Parsed::Error);
    }

    #[test]
    fn values_and_replies_read_as_in_redis() {
        let mut s = Vec::new();
        repr(&mut s, b"a\"b\\\n\r\t\x07\x08\x01\xff");
        assert_eq!(s, br#""a\"b\\\n\r\t\a\b\x01\xff""#);
        for (x, want) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (-0.25, "-0.25"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (123456789.0, "1.23457e+08"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (1.23456789, "1.23457"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(fmt_g(x), want);
        }
        let cases: &[(&[u8], &str)] = &[
            (b"+OK\r\n", "\"+OK\""),
            (b"-ERR x\r\n", "\"-ERR x\""),
            (b":12\r\n", "12"),
            (b"$-1\r\n", "NULL"),
            (b"$3\r\na\nb\r\n", "\"a\\nb\""),
            (b"*-1\r\n", "NULL"),
            (b"*0\r\n", "[]"),
            (b"*2\r\n$1\r\nb\r\n:1\r\n", "[\"b\",1]"),
            (b"%1\r\n$1\r\nk\r\n#t\r\n", "{\"k\" => #true}"),
            (b"~1\r\n,1.5\r\n", "~((double) 1.5)"),
            (b"_\r\n", "(null)"),
        ];
        for (reply, want) in cases {
            let mut out = Vec::new();
            reply_to_human(&mut out, reply);
            assert_eq!(String::from_utf8_lossy(&out), *want);
        }
    }

    #[test]
    fn logs_go_out_as_simple_strings() {
        assert_eq!(
            encode_logs(&[b"a\r\nb".to_vec(), b"".to_vec()]),
            b"*2\r\n+a  b\r\n+\r\n"
        );
        assert_eq!(
            split_source(b"a\nb\n\n\r\n"),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(string2l(b"-5"), Some(-5));
        assert_eq!(string2l(b"05"), None);
        assert_eq!(string2l(b"x"), None);
        assert_eq!(atoi(b" 12x"), 12);
    }

    proptest::proptest! {
        /// The client's bytes are untrusted: any input parses without a
        /// panic, and a command ldb accepts, sent whole, reads back as
        /// itself, each shorter prefix of it as "more".
        #[test]
        fn any_input_parses_and_commands_round_trip(
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            args in proptest::collection::vec(
                proptest::collection::vec(proptest::num::u8::ANY, 1..40), 1..6),
        ) {
            let _ = parse_command(&junk);
            let mut wire = format!("*{}\r\n", args.len()).into_bytes();
            for a in &args {
                wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                wire.extend_from_slice(a);
                wire.extend_from_slice(b"\r\n");
            }
            proptest::prop_assert_eq!(parse_command(&wire), Parsed::Command(args.clone()));
            for cut in 1..wire.len() {
                proptest::prop_assert_eq!(parse_command(&wire[..cut]), Parsed::More);
            }
        }
    }
}
