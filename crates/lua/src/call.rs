//! `redis.call` and `redis.pcall` on Lua's C API: the hot path of every
//! script. Through mlua's callbacks a call cost ~2,600 instructions of
//! conversion (arguments into a `MultiValue`, strings into vectors, the
//! reply into `Value`s) on top of the command itself (callgrind, one-INCR
//! EVALSHA); here the arguments are read straight off the Lua stack and the
//! reply is pushed straight onto it, as Redis's `luaRedisGenericCommand`
//! and `redisProtocolToLuaType` do.
//!
//! Lua raises errors with `longjmp`, which must not cross a Rust frame
//! that owns something to drop. So the work is in two stages: the first
//! reads the arguments and runs the command through the host, using only
//! buffers owned by `Shared` (nothing of this frame's to drop); the second
//! only pushes onto the Lua stack (which may raise on out-of-memory) from
//! those buffers, in frames that hold plain references; the error (under
//! `redis.call`) is raised last, from the outermost C function.
use crate::vm::{Refusal, Shared};
use mlua::ffi;
use std::ffi::c_int;

/// Buffers a call uses, owned by the interpreter's `Shared` so that no
/// frame between Lua and the host owns heap memory (see the module
/// comment). Only touched by the thread that runs the interpreter.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Each argument as (start, len, in `numbers`): strings point into the
    /// Lua stack, numbers into `numbers`.
    args: Vec<(*const u8, usize, bool)>,
    numbers: Vec<u8>,
    slices: Vec<&'static [u8]>,
    pub(crate) reply: Vec<u8>,
    /// An error text to raise or return (without its leading '-').
    error: Vec<u8>,
}

const NO_ARGS: &[u8] = b"Please specify at least one argument for this redis lib call";
const BAD_ARG: &[u8] = b"Lua redis lib command arguments must be strings or integers";

/// What stage one left for stage two.
enum Ran {
    /// `Scratch::reply` holds the command's reply.
    Reply,
    /// `Scratch::error` holds an error text ("-CODE msg" or a bare one).
    Error,
    /// The script must stop (`Refusal::Abort`): the error is raised even
    /// under `redis.pcall`.
    Abort,
}

/// The C function behind `redis.call` (upvalue 2 true) and `redis.pcall`
/// (false); upvalue 1 is the interpreter's `Shared`.
pub(crate) unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    let shared = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Shared);
    let raise = ffi::lua_toboolean(state, ffi::lua_upvalueindex(2)) != 0;
    let scratch = shared.scratch.get();
    let ran = run_command(state, shared, &mut *scratch);
    // The arguments are spent (nothing borrows them now): dropping them
    // leaves room for the reply, as Redis's `luaArgsToRedisArgv` pops
    // them. Without it a call of nearly LUAI_MAXCSTACK (8000) arguments,
    // `redis.call('lpush', k, unpack(t))`, had no stack left for its reply.
    ffi::lua_settop(state, 0);
    let raise = match ran {
        Ran::Reply => {
            let reply = &(*scratch).reply;
            let mut pos = 0;
            if reply.first() == Some(&b'-') {
                push_error_line(state, reply, &mut pos);
                raise
            } else {
                push_value(state, reply, &mut pos, 0);
                false
            }
        }
        Ran::Error => {
            push_error_table(state, &(*scratch).error);
            raise
        }
        Ran::Abort => {
            push_error_table(state, &(*scratch).error);
            true
        }
    };
    if raise {
        ffi::lua_error(state);
    }
    1
}

/// Stage one: the arguments, then the command through the host. Calls no
/// Lua function that can raise.
unsafe fn run_command(state: *mut ffi::lua_State, shared: &Shared, s: &mut Scratch) -> Ran {
    let argc = ffi::lua_gettop(state);
    s.error.clear();
    if argc == 0 {
        s.error.extend_from_slice(NO_ARGS);
        if shared.ldb_on.get() {
            crate::debugger::log_error(shared, NO_ARGS);
        }
        return Ran::Error;
    }
    s.args.clear();
    s.numbers.clear();
    for i in 1..=argc {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {
                let mut len = 0;
                let p = ffi::lua_tolstring(state, i, &mut len);
                s.args.push((p as *const u8, len, false));
            }
            ffi::LUA_TNUMBER => {
                // "%.17g", as Redis formats a number argument (Lua's own
                // "%.14g" would lose digits: 2^53 as 9.007199254741e+15).
                let start = s.numbers.len();
                cairn_protocol::resp::format_g17(ffi::lua_tonumber(state, i), &mut s.numbers);
                s.args
                    .push((start as *const u8, s.numbers.len() - start, true));
            }
            _ => {
                s.error.extend_from_slice(BAD_ARG);
                if shared.ldb_on.get() {
                    crate::debugger::log_error(shared, BAD_ARG);
                }
                return Ran::Error;
            }
        }
    }
    // The slices borrow the Lua stack (alive until this C function
    // returns) and `numbers` (not touched until the next call); they are
    // cleared before either goes.
    s.slices.clear();
    for &(p, len, in_numbers) in &s.args {
        let bytes: &[u8] = if in_numbers {
            &s.numbers[p as usize..p as usize + len]
        } else {
            std::slice::from_raw_parts(p, len)
        };
        s.slices
            .push(std::mem::transmute::<&[u8], &'static [u8]>(bytes));
    }
    s.reply.clear();
    let debugging = shared.ldb_on.get();
    if debugging {
        crate::debugger::log_call(shared, &s.slices);
    }
    let Some(mut host) = shared.host.get() else {
        s.slices.clear();
        s.error
            .extend_from_slice(b"redis library function called outside a script");
        return Ran::Error;
    };
    let resp3 = shared.resp3.get();
    // A panic must not unwind through Lua's C frames: the command's own
    // panics are caught by the server's dispatcher; anything else here
    // becomes an error reply.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        host.as_mut().call(&s.slices, resp3, &mut s.reply)
    }))
    .unwrap_or_else(|_| Err(Refusal::Error(b"ERR internal error in redis.call".to_vec())));
    s.slices.clear();
    if debugging {
        match &result {
            Ok(()) => crate::debugger::log_reply(shared, &s.reply),
            Err(Refusal::Error(text) | Refusal::Abort(text)) => {
                crate::debugger::log_error(shared, text)
            }
        }
    }
    match result {
        Ok(()) => Ran::Reply,
        Err(Refusal::Error(text)) => {
            s.error.extend_from_slice(&text);
            Ran::Error
        }
        Err(Refusal::Abort(text)) => {
            s.error.extend_from_slice(&text);
            // The interpreter's kill flags (tick and pcall re-raise).
            if shared.kill(text).is_err() {
                // Setting the flag failed (out of memory): the error below
                // still stops this call.
            }
            Ran::Abort
        }
    }
}

/// Pushes `{err = text}` normalised as Redis's `luaPushErrorBuff`: "-CODE
/// msg" keeps its code, a bare message gets "ERR", trailing CR/LF go.
unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8]) {
    let (code, msg) = crate::convert::error_parts(text);
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_pushlstring(state, code.as_ptr() as *const _, code.len());
    ffi::lua_pushlstring(state, b" ".as_ptr() as *const _, 1);
    ffi::lua_pushlstring(state, msg.as_ptr() as *const _, msg.len());
    ffi::lua_concat(state, 3);
    ffi::lua_setfield(state, -2, c"err".as_ptr());
}

/// An error line ('-' ...) at `pos` as an error table.
unsafe fn push_error_line(state: *mut ffi::lua_State, buf: &[u8], pos: &mut usize) {
    let start = *pos;
    let line = line(buf, pos);
    // `line` is after the type byte; the table wants it with its '-'.
    push_error_table(state, &buf[start..start + 1 + line.len()]);
}

/// The rest of the line after the type byte at `pos`, CRLF dropped.
fn line<'a>(buf: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let start = (*pos + 1).min(buf.len());
    let end = buf[start..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(buf.len(), |i| start + i);
    *pos = (end + 2).min(buf.len());
    &buf[start..end]
}

fn int(buf: &[u8], pos: &mut usize) -> i64 {
    std::str::from_utf8(line(buf, pos))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn bulk<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let n = int(buf, pos);
    if n < 0 {
        return None;
    }
    let start = (*pos).min(buf.len());
    let end = (start + n as usize).min(buf.len());
    *pos = (end + 2).min(buf.len());
    Some(&buf[start..end])
}

unsafe fn push_bytes(state: *mut ffi::lua_State, b: &[u8]) {
    ffi::lua_pushlstring(state, b.as_ptr() as *const _, b.len());
}

/// Wraps the value on top as `{field = value}`.
unsafe fn wrap(state: *mut ffi::lua_State, field: &std::ffi::CStr) {
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_insert(state, -2);
    ffi::lua_setfield(state, -2, field.as_ptr());
}

/// Redis's reply-to-Lua conversion (`redisProtocolToLuaType`) of the
/// reply at `pos`, pushed as one value. Deep nesting beyond Lua's C stack
/// pushes nil, as there is no room for more.
unsafe fn push_value(state: *mut ffi::lua_State, buf: &[u8], pos: &mut usize, depth: usize) {
    if depth > 1000 || ffi::lua_checkstack(state, 4) == 0 {
        ffi::lua_pushnil(state);
        return;
    }
    let Some(&kind) = buf.get(*pos) else {
        ffi::lua_pushnil(state);
        return;
    };
    match kind {
        b'+' => {
            let s = line(buf, pos);
            push_bytes(state, s);
            wrap(state, c"ok");
        }
        b'-' => push_error_line(state, buf, pos),
        b':' => ffi::lua_pushnumber(state, int(buf, pos) as f64),
        b'$' => match bulk(buf, pos) {
            Some(b) => push_bytes(state, b),
            None => ffi::lua_pushboolean(state, 0),
        },
        b'*' => {
            let n = int(buf, pos);
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return;
            }
            ffi::lua_createtable(state, n.min(1 << 16) as c_int, 0);
            for i in 1..=n {
                push_value(state, buf, pos, depth + 1);
                ffi::lua_rawseti(state, -2, i as _);
            }
        }
        b'%' => {
            let n = int(buf, pos);
            ffi::lua_createtable(state, 0, n.clamp(0, 1 << 16) as c_int);
            for _ in 0..n {
                push_value(state, buf, pos, depth + 1);
                push_value(state, buf, pos, depth + 1);
                set_pair(state);
            }
            wrap(state, c"map");
        }
        b'~' => {
            let n = int(buf, pos);
            ffi::lua_createtable(state, 0, n.clamp(0, 1 << 16) as c_int);
            for _ in 0..n {
                push_value(state, buf, pos, depth + 1);
                ffi::lua_pushboolean(state, 1);
                set_pair(state);
            }
            wrap(state, c"set");
        }
        b'_' => {
            line(buf, pos);
            ffi::lua_pushnil(state);
        }
        b'#' => {
            let t = line(buf, pos) == b"t";
            ffi::lua_pushboolean(state, t as c_int);
        }
        b',' => {
            let d = match line(buf, pos) {
                b"inf" => f64::INFINITY,
                b"-inf" => f64::NEG_INFINITY,
                b"nan" => f64::NAN,
                s => std::str::from_utf8(s)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0.0),
            };
            ffi::lua_pushnumber(state, d);
            wrap(state, c"double");
        }
        b'(' => {
            let s = line(buf, pos);
            push_bytes(state, s);
            wrap(state, c"big_number");
        }
        b'=' => {
            let b = bulk(buf, pos).unwrap_or_default();
            let (format, text) = if b.len() >= 4 && b[3] == b':' {
                (&b[..3], &b[4..])
            } else {
                (&b"txt"[..], b)
            };
            ffi::lua_createtable(state, 0, 2);
            push_bytes(state, format);
            ffi::lua_setfield(state, -2, c"format".as_ptr());
            push_bytes(state, text);
            ffi::lua_setfield(state, -2, c"string".as_ptr());
            wrap(state, c"verbatim_string");
        }
        b'|' => {
            // Attributes are dropped (Redis ignores them too); the value
            // they annotate follows.
            let n = int(buf, pos);
            for _ in 0..2 * n {
                push_value(state, buf, pos, depth + 1);
                ffi::lua_settop(state, -2);
            }
            push_value(state, buf, pos, depth);
        }
        _ => {
            line(buf, pos);
            ffi::lua_pushnil(state);
        }
    }
}

/// `t[k] = v` for the table below a key and a value; a nil key (a null
/// map key) is skipped, as Lua cannot index by nil.
unsafe fn set_pair(state: *mut ffi::lua_State) {
    if ffi::lua_type(state, -2) == ffi::LUA_TNIL {
        ffi::lua_settop(state, -3);
        return;
    }
    ffi::lua_rawset(state, -3);
}
