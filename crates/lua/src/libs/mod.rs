//! The libraries Redis 7.0 loads into its Lua interpreter besides the
//! standard ones: `cjson`, `cmsgpack`, `struct` and `bit`, written in Rust
//! against Redis's behaviour and error texts (lua-cjson 2.1.0,
//! lua-cmsgpack 0.4.0, Roberto Ierusalimschy's struct 0.2 with Redis's
//! fixes, LuaBitOp 1.0.2).
//!
//! This module owns what the four share: how a library function is
//! registered so that its errors reach Lua exactly as the C libraries raise
//! theirs, and how arguments are read. It does not make the tables
//! read-only; the sandbox does that.
//!
//! Two things of mlua's are worked around here:
//! - A Rust callback's `Err` reaches Lua as a userdata, so `pcall` would hand
//!   scripts an object where Redis gives a string. Every function is wrapped
//!   in a small C closure ([`raise_failures`]) that raises the message as a
//!   plain string with `lua_error`, as `luaL_error` does.
//! - With `lua51`, mlua turns a number whose distance to an integer is below
//!   `f64::EPSILON` into `Value::Integer`, so `1e-300` and `-0.0` arrive as
//!   `Integer(0)`. Arguments therefore travel in a table (one small
//!   allocation a call) and numbers are read with `raw_get::<f64>`, which
//!   reads the value exactly; numbers inside tables are read again the same
//!   way ([`exact`]). A table *key* below `f64::EPSILON` still reads as 0.
//! - mlua keeps every live handle in one auxiliary stack of about 8000
//!   slots and panics past it, so nothing here holds a handle per result or
//!   per nesting level without a bound: many results are spread from a
//!   table by the C wrapper ([`Ret::Spread`]) and deep msgpack nesting is
//!   kept in a Lua table.

mod bit;
mod cjson;
mod cmsgpack;
mod structlib;

use std::ffi::c_int;

use mlua::{ffi, Function, Lua, MultiValue, Table, Value};

/// Opens every library as a global table of its name.
pub fn open_all(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    globals.raw_set("cjson", cjson::open(lua)?)?;
    globals.raw_set("cmsgpack", cmsgpack::open(lua)?)?;
    globals.raw_set("struct", structlib::open(lua)?)?;
    globals.raw_set("bit", bit::open(lua)?)?;
    Ok(())
}

/// Lua 5.1's `LUAI_MAXCSTACK`: the C libraries' `lua_checkstack` fails past
/// this many slots, which bounds how deep they nest; the Rust versions keep
/// the same bound (and with it the same error texts).
pub(crate) const MAX_C_STACK: usize = 8000;

/// Why a library function failed, raised in Lua as a string.
#[derive(Debug)]
pub(crate) enum Fail {
    /// `luaL_argerror(L, n, msg)`: "bad argument #n to 'name' (msg)",
    /// prefixed with the caller's position.
    Arg(i64, Vec<u8>),
    /// `luaL_error`: the message prefixed with the caller's position.
    Msg(Vec<u8>),
    /// A message raised without a position, as the Lua core raises
    /// "table index is nil" from inside a C function.
    Bare(Vec<u8>),
    /// An error of mlua's own (out of memory, mostly), passed on untouched.
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

impl Fail {
    pub(crate) fn arg(n: usize, msg: impl Into<Vec<u8>>) -> Self {
        Fail::Arg(n as i64, msg.into())
    }

    pub(crate) fn msg(msg: impl Into<Vec<u8>>) -> Self {
        Fail::Msg(msg.into())
    }
}

/// What a library function returns.
pub(crate) enum Ret {
    /// A few values, returned as they are.
    Values(MultiValue),
    /// `n` values held in a table (with holes for nils), spread onto the
    /// Lua stack by [`raise_failures`]. mlua keeps every live handle in one
    /// auxiliary stack of about 8000 slots, so thousands of results (an
    /// unpacked stream) must not be held as Rust values at once.
    Spread(Table, usize),
}

pub(crate) type Outcome = Result<Ret, Fail>;

/// Returns one value.
pub(crate) fn one(v: Value) -> Outcome {
    Ok(Ret::Values(MultiValue::from_iter([v])))
}

/// The arguments of one call, read exactly (see the module comment).
pub(crate) struct Args {
    table: Table,
    len: usize,
}

impl Args {
    /// How many arguments the caller passed (`lua_gettop`).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Argument `i` (1-based); `None` when the caller passed fewer.
    pub(crate) fn get(&self, i: usize) -> Result<Option<Value>, Fail> {
        if i == 0 || i > self.len {
            return Ok(None);
        }
        let v: Value = self.table.raw_get(i)?;
        Ok(Some(match v {
            Value::Integer(_) | Value::Number(_) => Value::Number(self.table.raw_get(i)?),
            v => v,
        }))
    }

    /// `lua_isnoneornil`.
    pub(crate) fn is_none_or_nil(&self, i: usize) -> Result<bool, Fail> {
        Ok(matches!(self.get(i)?, None | Some(Value::Nil)))
    }

    /// `lua_tonumber` when it succeeds: numbers and strings Lua converts.
    pub(crate) fn to_number(&self, lua: &Lua, i: usize) -> Result<Option<f64>, Fail> {
        match self.get(i)? {
            Some(Value::Number(n)) => Ok(Some(n)),
            Some(v @ Value::String(_)) => Ok(lua.coerce_number(v)?),
            _ => Ok(None),
        }
    }

    /// `luaL_checknumber`.
    pub(crate) fn check_number(&self, lua: &Lua, i: usize) -> Result<f64, Fail> {
        match self.to_number(lua, i)? {
            Some(n) => Ok(n),
            None => Err(self.type_error(i, "number")?),
        }
    }

    /// `luaL_checkinteger`: the number truncated as C casts it to
    /// `lua_Integer`.
    pub(crate) fn check_integer(&self, lua: &Lua, i: usize) -> Result<i64, Fail> {
        self.check_number(lua, i).map(c_i64)
    }

    /// `luaL_optinteger`.
    pub(crate) fn opt_integer(&self, lua: &Lua, i: usize, default: i64) -> Result<i64, Fail> {
        if self.is_none_or_nil(i)? {
            Ok(default)
        } else {
            self.check_integer(lua, i)
        }
    }

    /// `luaL_checklstring`: strings, and numbers as Lua formats them.
    pub(crate) fn check_bytes(&self, lua: &Lua, i: usize) -> Result<mlua::String, Fail> {
        match self.get(i)? {
            Some(Value::String(s)) => Ok(s),
            Some(v @ Value::Number(_)) => match lua.coerce_string(v)? {
                Some(s) => Ok(s),
                None => Err(self.type_error(i, "string")?),
            },
            _ => Err(self.type_error(i, "string")?),
        }
    }

    /// `luaL_typerror`: "<expected> expected, got <type>".
    pub(crate) fn type_error(&self, i: usize, expected: &str) -> Result<Fail, Fail> {
        let got = match self.get(i)? {
            None => "no value",
            Some(v) => type_name(&v),
        };
        Ok(Fail::arg(i, format!("{expected} expected, got {got}")))
    }
}

/// Lua's name for a value's type (`lua_typename`).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// A value read out of `table` at `key`, its number exact: mlua hands
/// `1e-300` and `-0.0` over as `Integer(0)`, so that one case is read again
/// as `f64`. Numbers come back as `Value::Number`.
pub(crate) fn exact(table: &Table, key: &Value, v: Value) -> mlua::Result<Value> {
    Ok(match v {
        Value::Integer(0) => Value::Number(table.raw_get::<f64>(key.clone())?),
        Value::Integer(i) => Value::Number(i as f64),
        v => v,
    })
}

/// C's `(int64_t)d` as x86-64 computes it (`cvttsd2si`): truncation, and
/// `i64::MIN` for NaN and anything out of range.
pub(crate) fn c_i64(d: f64) -> i64 {
    // 2^63: every i64 lies in [-2^63, 2^63).
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// C's `(int)d` as x86-64 computes it: `i32::MIN` when out of range.
pub(crate) fn c_i32(d: f64) -> i32 {
    // Truncation keeps (-2^31 - 1, 2^31) in range.
    if d > -2_147_483_649.0 && d < 2_147_483_648.0 {
        d as i32
    } else {
        i32::MIN
    }
}

/// Builds a library table from `(name, function)` pairs.
pub(crate) fn library<F>(lua: &Lua, funcs: Vec<(&str, F)>) -> mlua::Result<Table>
where
    F: Fn(&Lua, &Args) -> Outcome + 'static,
{
    let table = lua.create_table()?;
    for (name, f) in funcs {
        table.raw_set(name, function(lua, f)?)?;
    }
    Ok(table)
}

/// Wraps a library function for Lua. `f` gets the arguments; its `Err`
/// is raised as a string that carries the caller's position and the name
/// the caller used, as `luaL_error` and `luaL_argerror` write them.
pub(crate) fn function<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, &Args) -> Outcome + 'static,
{
    let inner = lua.create_function(move |lua, (table, len): (Table, usize)| {
        let args = Args { table, len };
        let mut out = MultiValue::new();
        match f(lua, &args) {
            Ok(Ret::Values(values)) => {
                out.push_back(Value::Boolean(true));
                out.extend(values);
            }
            Ok(Ret::Spread(table, n)) => {
                out.push_back(Value::Table(table));
                out.push_back(Value::Number(n as f64));
            }
            Err(Fail::Lua(e)) => return Err(e),
            Err(fail) => {
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(render(lua, fail))?));
            }
        }
        Ok(out)
    })?;
    // SAFETY: `raise_failures` only uses the C API on its own frame, with the
    // function pushed here as its one upvalue.
    unsafe {
        lua.exec_raw(inner, |state| {
            ffi::lua_pushcclosure(state, raise_failures, 1);
        })
    }
}

/// The C side of [`function`]: packs the arguments into a table (so numbers
/// survive exactly), calls the Rust function in upvalue 1, and either
/// returns its results (`true, values...`, or a table and a count to
/// spread) or raises its message (`false, message`) with `lua_error`.
///
/// No Rust value with a destructor is alive here, so the `longjmp` of
/// `lua_error` (and of an error inside `lua_call`) skips nothing that needs
/// dropping.
unsafe extern "C-unwind" fn raise_failures(state: *mut ffi::lua_State) -> c_int {
    let nargs = ffi::lua_gettop(state);
    ffi::lua_createtable(state, nargs, 0);
    for i in 1..=nargs {
        ffi::lua_pushvalue(state, i);
        ffi::lua_rawseti(state, -2, i as _);
    }
    ffi::lua_insert(state, 1);
    ffi::lua_settop(state, 1);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_pushinteger(state, nargs as ffi::lua_Integer);
    ffi::lua_call(state, 2, ffi::LUA_MULTRET);
    if ffi::lua_type(state, 1) == ffi::LUA_TTABLE {
        let n = ffi::lua_tointeger(state, 2) as c_int;
        ffi::lua_settop(state, 1);
        if ffi::lua_checkstack(state, n) == 0 {
            ffi::lua_pushstring(state, c"too many results to unpack".as_ptr());
            ffi::lua_error(state);
        }
        for i in 1..=n {
            ffi::lua_rawgeti(state, 1, i as _);
        }
        ffi::lua_remove(state, 1);
        return n;
    }
    if ffi::lua_toboolean(state, 1) == 0 {
        ffi::lua_settop(state, 2);
        ffi::lua_error(state);
    }
    ffi::lua_gettop(state) - 1
}

/// The text of a failure. From inside the Rust function, stack level 1 is
/// [`raise_failures`] and level 2 its caller, whose line `luaL_where(L, 1)`
/// names from inside a C library.
fn render(lua: &Lua, fail: Fail) -> Vec<u8> {
    let mut text = Vec::new();
    if !matches!(fail, Fail::Bare(_)) {
        if let Some(caller) = lua.inspect_stack(2) {
            let line = caller.curr_line();
            if line > 0 {
                let src = caller.source().short_src.unwrap_or_default().into_owned();
                text.extend_from_slice(format!("{src}:{line}: ").as_bytes());
            }
        }
    }
    match fail {
        Fail::Arg(mut n, msg) => {
            let (name, what) = match lua.inspect_stack(1) {
                Some(d) => {
                    let names = d.names();
                    let name = names.name.map(|s| s.into_owned());
                    (name, names.name_what)
                }
                None => (None, None),
            };
            if what == Some("method") {
                n -= 1;
                if n == 0 {
                    let name = name.unwrap_or_else(|| "?".into());
                    text.extend_from_slice(format!("calling '{name}' on bad self (").as_bytes());
                    text.extend_from_slice(&msg);
                    text.push(b')');
                    return text;
                }
            }
            let name = name.unwrap_or_else(|| "?".into());
            text.extend_from_slice(format!("bad argument #{n} to '{name}' (").as_bytes());
            text.extend_from_slice(&msg);
            text.push(b')');
        }
        Fail::Msg(msg) | Fail::Bare(msg) => text.extend_from_slice(&msg),
        Fail::Lua(_) => unreachable!("mlua errors are passed on before rendering"),
    }
    text
}

#[cfg(test)]
pub(crate) mod golden {
    //! Runs the golden cases recorded from redis-server 7.0 by
    //! `tests/golden/regen.py`: each line is a Lua expression list and what
    //! Redis printed for `all(pcall(function() return <case> end))`.
    use mlua::Lua;

    const SHOW: &str = include_str!("../../tests/golden/show.lua");

    /// A fresh interpreter with the four libraries, as each case ran after
    /// SCRIPT FLUSH in Redis.
    pub(crate) fn lua() -> Lua {
        let lua = Lua::new();
        super::open_all(&lua).unwrap();
        lua
    }

    /// Evaluates `case` as the generator did, on one line named
    /// `@user_script` so positions read "user_script:1:" as in Redis.
    pub(crate) fn eval(case: &str) -> Vec<u8> {
        let lua = lua();
        let body = format!(
            "{} return all(pcall(function() return {case} end))",
            SHOW.trim()
        );
        let out: mlua::String = lua
            .load(body)
            .set_name("@user_script")
            .eval()
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        out.as_bytes().to_vec()
    }

    /// Checks every case of a golden file; reports all mismatches at once.
    pub(crate) fn check(file: &str) {
        let mut bad = Vec::new();
        let mut n = 0;
        for line in file.lines().filter(|l| !l.is_empty()) {
            let (case, want) = line.split_once('\t').expect("case<TAB>result");
            let got = eval(case);
            n += 1;
            // The generator reads replies as latin-1; the file is UTF-8.
            let want: Vec<u8> = want.chars().map(|c| c as u32 as u8).collect();
            if got != want {
                bad.push(format!(
                    "{case}\n   redis: {}\n   cairn: {}",
                    String::from_utf8_lossy(&want),
                    String::from_utf8_lossy(&got)
                ));
            }
        }
        assert!(n > 0, "empty golden file");
        assert!(
            bad.is_empty(),
            "{} of {n} cases differ:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }
}
