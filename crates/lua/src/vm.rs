//! One Lua interpreter set up as Redis 7.0 sets up its own: the standard
//! libraries it opens, cjson, cmsgpack, struct and bit, the `redis`
//! table, the read-only sandbox (`sandbox.lua`), and compiled scripts
//! cached by name. What a script's `redis.call` runs, and everything else
//! that touches the server, goes through a [`Host`] lent for one run.
use crate::convert::{self, Top};
use cairn_protocol::resp::Protocol;
use hashbrown::HashMap;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::rc::Rc;

/// The version Redis reports to scripts (`redis.REDIS_VERSION`).
pub const REDIS_VERSION: &str = "7.0.15";
/// `redis.REDIS_VERSION_NUM`: 0x00MMmmpp.
pub const REDIS_VERSION_NUM: i64 = 0x07_00_0f;

/// How often (in Lua VM instructions) a running script asks its host
/// whether to go on (`Host::tick`): Redis checks every 100,000.
const TICK_INSTRUCTIONS: u32 = 100_000;

/// `redis.log` levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

/// What the interpreter asks of the server while a script runs.
pub trait Host {
    /// Runs one command for `redis.call`/`redis.pcall` and appends its
    /// reply, in RESP3 when `resp3` (`redis.setresp(3)`), to `out`.
    /// `Err`: the command did not run (see `Refusal`).
    fn call(&mut self, args: &[&[u8]], resp3: bool, out: &mut Vec<u8>) -> Result<(), Refusal>;

    /// `redis.log(level, msg)`.
    fn log(&mut self, level: LogLevel, msg: &[u8]);

    /// Called every `TICK_INSTRUCTIONS` instructions. `Err(text)` stops
    /// the script with that error (SCRIPT KILL, shutdown).
    fn tick(&mut self) -> Result<(), Vec<u8>>;

    /// `redis.acl_check_cmd(...)`: may the caller run this command?
    fn acl_check(&mut self, args: &[&[u8]]) -> Result<bool, Vec<u8>>;

    /// `redis.set_repl(flags)` with valid flags.
    fn set_repl(&mut self, flags: i64);
}

/// Why `Host::call` did not run a command.
#[derive(Debug)]
pub enum Refusal {
    /// Refused with this error, as Redis words it ("-CODE msg", or a bare
    /// message that gets "ERR"): raised by `redis.call`, returned by
    /// `redis.pcall`.
    Error(Vec<u8>),
    /// The whole script must stop now, as if killed, with this error
    /// (the host will run it again, or give up): no pcall can catch it.
    Abort(Vec<u8>),
}

/// The state the Rust functions of the `redis` table share with the VM.
pub(crate) struct Shared {
    /// The host of the running script. Set by `Vm::run` for the length of
    /// the run only (`HostGuard`), so a function called outside a run
    /// finds none.
    pub(crate) host: Cell<Option<NonNull<dyn Host + 'static>>>,
    pub(crate) resp3: Cell<bool>,
    /// `redis.call`'s buffers (`crate::call`).
    pub(crate) scratch: std::cell::UnsafeCell<crate::call::Scratch>,
    /// Set when the host asked to stop the script: every later tick
    /// raises again, so a `pcall` cannot swallow the kill.
    killed: RefCell<Option<Vec<u8>>>,
    /// The functions `redis.register_function` collects during a FUNCTION
    /// LOAD (None outside one).
    registry: RefCell<Option<Vec<Registered>>>,
    /// sandbox.lua's control flags (`killed`), once it has run.
    ctl: RefCell<Option<Table>>,
    /// `ctl.killed` is set: the next run clears it.
    ctl_killed: Cell<bool>,
    /// The SCRIPT DEBUG session of the running script, if any
    /// (`crate::debugger`).
    pub(crate) ldb: RefCell<Option<crate::debugger::Ldb>>,
    /// `ldb` is set: the one look `redis.call` takes outside a session.
    pub(crate) ldb_on: Cell<bool>,
    /// The scripts' environment, where the debugger's `eval` runs code.
    pub(crate) env: RefCell<Option<Table>>,
}

impl Shared {
    /// Stops the running script: every later tick, pcall and coroutine
    /// resume raises again.
    pub(crate) fn kill(&self, text: Vec<u8>) -> mlua::Result<()> {
        *self.killed.borrow_mut() = Some(text);
        if let Some(ctl) = &*self.ctl.borrow() {
            ctl.raw_set("killed", true)?;
            self.ctl_killed.set(true);
        }
        Ok(())
    }
}

/// A function registered by a library's code.
pub struct Registered {
    pub name: Vec<u8>,
    pub func: Function,
    pub flags: Vec<Vec<u8>>,
    pub description: Option<Vec<u8>>,
}

/// An EVAL's KEYS and ARGV.
type KeysArgv<'a> = (&'a [&'a [u8]], &'a [&'a [u8]]);

/// How a run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum RunError {
    /// The script raised an error or returned an error table: the error
    /// reply's text (no leading '-').
    Script(Vec<u8>),
    /// The host stopped it (`Host::tick`): its error text.
    Killed(Vec<u8>),
}

/// A Lua interpreter with Redis's environment.
pub struct Vm {
    lua: Lua,
    /// The scripts' environment: the read-only proxy of the globals.
    env: Table,
    /// The real globals, where KEYS and ARGV are set for each run.
    globals: Table,
    /// `run(f)`: xpcall with Redis's message handler.
    runner: Function,
    scripts: HashMap<Box<str>, Function>,
    shared: Rc<Shared>,
    /// sandbox.lua's control flags (`killed`).
    ctl: Table,
    memory_limit: usize,
    /// The environment of FUNCTION libraries and `set_loading(bool)`,
    /// which switches it to the library API while one loads.
    function_env: Table,
    set_loading: Function,
    /// Redis's message handler (`__redis__err__handler`).
    err_handler: Function,
}

/// Clears the host pointer when a run ends, however it ends.
struct HostGuard<'a>(&'a Shared);

impl Drop for HostGuard<'_> {
    fn drop(&mut self) {
        self.0.host.set(None);
    }
}

impl Vm {
    /// A new interpreter, its heap limited to `memory_limit` bytes (0: no
    /// limit).
    pub fn new(memory_limit: usize) -> mlua::Result<Vm> {
        // SAFETY: `debug` is needed by the sandbox's message handler, which
        // keeps it in an upvalue; scripts never see it (sandbox.lua removes
        // the global). No C modules can be loaded: there is no `package`.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::new(),
            )
        };
        crate::libs::open_all(&lua)?;
        let shared = Rc::new(Shared {
            host: Cell::new(None),
            resp3: Cell::new(false),
            killed: RefCell::new(None),
            registry: RefCell::new(None),
            ctl: RefCell::new(None),
            ctl_killed: Cell::new(false),
            scratch: Default::default(),
            ldb: RefCell::new(None),
            ldb_on: Cell::new(false),
            env: RefCell::new(None),
        });
        let globals = lua.globals();
        globals.raw_set("redis", redis_table(&lua, &shared)?)?;
        type Sandbox = (
            Table,
            Function,
            Table,
            Vec<String>,
            Table,
            Function,
            Function,
        );
        let (env, runner, ctl, wrappers, function_env, set_loading, err_handler): Sandbox = lua
            .load(include_str!("sandbox.lua"))
            .set_name("=[cairn]")
            .call(globals.clone())?;
        for name in wrappers {
            let f: Function = globals.raw_get(name.as_str())?;
            globals.raw_set(name, pass_through(&lua, f)?)?;
        }
        *shared.ctl.borrow_mut() = Some(ctl.clone());
        *shared.env.borrow_mut() = Some(env.clone());
        set_tick_hook(&lua, &shared);
        if memory_limit > 0 {
            lua.set_memory_limit(memory_limit)?;
        }
        Ok(Vm {
            lua,
            env,
            globals,
            runner,
            scripts: HashMap::new(),
            shared,
            ctl,
            memory_limit,
            function_env,
            set_loading,
            err_handler,
        })
    }

    /// Bytes the interpreter's heap uses (`used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// True if the script `sha` is compiled here.
    pub fn has(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// Compiles `body` as the script `sha` (Redis's `f_<sha>`), its first
    /// line dropped if it is a shebang (`#!lua ...`; the newline stays so
    /// line numbers match). Err: Redis's compile error text.
    pub fn compile(&mut self, sha: &str, body: &[u8]) -> Result<(), Vec<u8>> {
        if self.scripts.contains_key(sha) {
            return Ok(());
        }
        let f = self.load(body, "@user_script").map_err(|e| {
            let mut msg = b"ERR Error compiling script (new function): ".to_vec();
            msg.extend_from_slice(e.as_bytes());
            msg
        })?;
        self.scripts.insert(sha.into(), f);
        Ok(())
    }

    /// Forgets every compiled script (SCRIPT FLUSH) and collects garbage.
    pub fn flush_scripts(&mut self) {
        self.scripts.clear();
        let _ = self.lua.gc_collect();
    }

    /// Loads `body` (shebang line blanked) as a function in the sandbox.
    fn load(&self, body: &[u8], name: &str) -> Result<Function, String> {
        let code = strip_shebang(body);
        self.lua
            .load(&*code)
            .set_name(name)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| lua_error_text(&e))
    }

    /// Runs the compiled script `sha` (`compile` first) with `keys` and
    /// `argv`, writing its reply for a client speaking `proto` to `out`.
    /// `name` is what an error names the script by (its SHA for EVAL).
    pub fn run(
        &mut self,
        sha: &str,
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
        proto: Protocol,
        out: &mut Vec<u8>,
    ) -> Result<(), RunError> {
        let f = self
            .scripts
            .get(sha)
            .cloned()
            .expect("Vm::run of a script not compiled");
        self.invoke(
            &f,
            MultiValue::new(),
            Some((keys, argv)),
            sha,
            host,
            proto,
            out,
        )
    }

    /// `run` as a SCRIPT DEBUG session (Redis's `ldbStartSession` to
    /// `ldbEndSession`): the script stops at its first line and at every
    /// step, breakpoint and `redis.breakpoint()`, talking with the client
    /// over `console`; `body` is its source as the debugger lists it. The
    /// session's last logs and `<endsession>` go out before the reply is
    /// written to `out`. `timeout_ms`: how long it may run without a stop
    /// (`busy-reply-threshold`; 0: 5 s).
    #[allow(clippy::too_many_arguments)]
    pub fn run_debug(
        &mut self,
        sha: &str,
        body: &[u8],
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
        console: &mut dyn crate::debugger::Console,
        timeout_ms: u64,
        proto: Protocol,
        out: &mut Vec<u8>,
    ) -> Result<(), RunError> {
        // SAFETY: the session is dropped below, before `console`'s borrow
        // ends, and nothing else uses the console meanwhile.
        let ldb = unsafe { crate::debugger::Ldb::new(console, body, timeout_ms) };
        *self.shared.ldb.borrow_mut() = Some(ldb);
        self.shared.ldb_on.set(true);
        let hook_shared = self.shared.clone();
        self.lua.set_hook(
            HookTriggers::new()
                .every_line()
                .every_nth_instruction(TICK_INSTRUCTIONS),
            move |lua, debug| crate::debugger::hook(lua, debug, &hook_shared),
        );
        let result = self.run(sha, keys, argv, host, proto, out);
        set_tick_hook(&self.lua, &self.shared);
        self.shared.ldb_on.set(false);
        if let Some(mut ldb) = self.shared.ldb.borrow_mut().take() {
            ldb.log(b"<endsession>".to_vec());
            ldb.send_logs();
        }
        result
    }

    /// Runs `f(args...)` under Redis's message handler with `host` lent,
    /// writing its result as a reply; `name` names it in errors.
    pub fn call_function(
        &mut self,
        f: &Function,
        args: MultiValue,
        name: &str,
        host: &mut dyn Host,
        proto: Protocol,
        out: &mut Vec<u8>,
    ) -> Result<(), RunError> {
        self.invoke(f, args, None, name, host, proto, out)
    }

    /// `call_function`, setting the globals KEYS and ARGV first if given
    /// (EVAL), in the same protected call.
    #[allow(clippy::too_many_arguments)]
    fn invoke(
        &mut self,
        f: &Function,
        args: MultiValue,
        globals: Option<KeysArgv>,
        name: &str,
        host: &mut dyn Host,
        proto: Protocol,
        out: &mut Vec<u8>,
    ) -> Result<(), RunError> {
        // SAFETY: the pointer is only dereferenced by the `redis` table's
        // functions while this run is on the stack (the guard clears it
        // when the run ends, unwinding included), and `host` is not used
        // by anything else meanwhile: this function holds its borrow.
        let host: NonNull<dyn Host + '_> = NonNull::from(host);
        let host: NonNull<dyn Host + 'static> = unsafe { std::mem::transmute(host) };
        self.shared.host.set(Some(host));
        let _guard = HostGuard(&self.shared);
        self.shared.resp3.set(false);
        if self.shared.killed.borrow_mut().take().is_some() || self.shared.ctl_killed.get() {
            self.shared.ctl_killed.set(false);
            self.ctl
                .raw_set("killed", false)
                .map_err(|e| RunError::Script(out_of_memory_or(&e)))?;
        }
        let result = if args.is_empty() {
            // The common case (EVAL): KEYS, ARGV and `lua_pcall` with
            // Redis's handler in one protected call of the C API. Through
            // mlua (a `raw_set` per element, the `run` wrapper) a one-key
            // EVALSHA cost ~19k more instructions (callgrind).
            // SAFETY: the closure only uses the C API on its own frame,
            // whose arguments are the globals, the handler and the
            // function; the slices outlive the call.
            unsafe {
                self.lua
                    .exec_raw::<(bool, Value)>((&self.globals, &self.err_handler, f), |state| {
                        use mlua::ffi;
                        if let Some((keys, argv)) = globals {
                            for (name, items) in [(c"KEYS", keys), (c"ARGV", argv)] {
                                ffi::lua_pushstring(state, name.as_ptr());
                                ffi::lua_createtable(state, items.len() as std::ffi::c_int, 0);
                                for (i, item) in items.iter().enumerate() {
                                    ffi::lua_pushlstring(
                                        state,
                                        item.as_ptr() as *const _,
                                        item.len(),
                                    );
                                    ffi::lua_rawseti(state, -2, (i + 1) as _);
                                }
                                ffi::lua_rawset(state, 1);
                            }
                        }
                        ffi::lua_remove(state, 1);
                        let status = ffi::lua_pcall(state, 0, 1, 1);
                        ffi::lua_pushboolean(state, (status == 0) as std::ffi::c_int);
                        ffi::lua_replace(state, 1);
                    })
            }
        } else {
            let mut call_args = MultiValue::with_capacity(args.len() + 1);
            call_args.push_back(Value::Function(f.clone()));
            call_args.extend(args);
            self.runner.call::<(bool, Value)>(call_args)
        };
        if !matches!(result, Ok((true, _)))
            && self.memory_limit > 0
            && self.lua.used_memory() > self.memory_limit / 2
        {
            // A script that failed near the heap limit (out of memory,
            // most likely) leaves its garbage behind: collect it now, or
            // the next compile would fail too. The limit is lifted while
            // the collector runs, which may allocate itself.
            let _ = self.lua.set_memory_limit(0);
            let _ = self.lua.gc_collect();
            let _ = self.lua.set_memory_limit(self.memory_limit);
        }
        let killed = self.shared.killed.borrow_mut().take();
        if let Some(text) = killed {
            // Worded as Redis words a kill: the message, then the script
            // and line it stopped at (the handler's table has them).
            if let Ok((false, Value::Table(t))) = &result {
                let mut coded = b"-".to_vec();
                coded.extend_from_slice(&text);
                let normalised = convert::normalise_error(&coded);
                if t.raw_set("err", self.lua.create_string(&normalised).ok())
                    .is_ok()
                {
                    return Err(RunError::Killed(error_reply(
                        &Value::Table(t.clone()),
                        name,
                    )));
                }
            }
            return Err(RunError::Killed(text));
        }
        let script_resp3 = self.shared.resp3.get();
        match result {
            Ok((true, v)) => match convert::write_result(&v, proto, script_resp3, out) {
                Top::Reply => Ok(()),
                Top::Error(e) => Err(RunError::Script(e)),
            },
            Ok((false, e)) => Err(RunError::Script(error_reply(&e, name))),
            Err(e) => Err(RunError::Script(
                format!(
                    "ERR Error running script {name}, {:.100}",
                    lua_error_text(&e)
                )
                .into_bytes(),
            )),
        }
    }

    /// Runs a library's code for FUNCTION LOAD: `redis.register_function`
    /// is available while it runs, and the functions it registered come
    /// back. Errors are Redis's texts.
    pub fn load_library(
        &mut self,
        code: &[u8],
        host: &mut dyn Host,
    ) -> Result<Vec<Registered>, Vec<u8>> {
        let code = strip_shebang(code);
        let f = self
            .lua
            .load(&*code)
            .set_name("@user_function")
            .set_environment(self.function_env.clone())
            .into_function()
            .map_err(|e| {
                format!("ERR Error compiling function: {}", lua_error_text(&e)).into_bytes()
            })?;
        *self.shared.registry.borrow_mut() = Some(Vec::new());
        // SAFETY: as in `call_function`: the pointer lives for this call.
        let host: NonNull<dyn Host + '_> = NonNull::from(host);
        let host: NonNull<dyn Host + 'static> = unsafe { std::mem::transmute(host) };
        self.shared.host.set(Some(host));
        let _guard = HostGuard(&self.shared);
        let loading = self.set_loading.call::<()>(true);
        let result = loading.and_then(|_| self.runner.call::<(bool, Value)>(f));
        let _ = self.set_loading.call::<()>(false);
        // A load stopped by its host (FUNCTION LOAD's timeout) must not
        // stop the next run.
        self.shared.killed.borrow_mut().take();
        let registered = self.shared.registry.borrow_mut().take().unwrap_or_default();
        match result {
            Ok((true, _)) => Ok(registered),
            Ok((false, e)) => {
                let text = match &e {
                    Value::Table(t) => match t.raw_get::<Value>("err") {
                        Ok(Value::String(s)) => s.as_bytes().to_vec(),
                        _ => b"unknown error".to_vec(),
                    },
                    Value::String(s) => s.as_bytes().to_vec(),
                    _ => b"unknown error".to_vec(),
                };
                let mut msg = b"ERR Error registering functions: ".to_vec();
                msg.extend_from_slice(&text);
                Err(msg)
            }
            Err(e) => {
                Err(format!("ERR Error registering functions: {}", lua_error_text(&e)).into_bytes())
            }
        }
    }

    /// The Lua state, for the server's function engine.
    pub fn lua(&self) -> &Lua {
        &self.lua
    }
}

/// Redis's reply for a script error: "<err> script: <name>, on
/// <source>:<line>." from the handler's table, else "Error running
/// script".
fn error_reply(e: &Value, name: &str) -> Vec<u8> {
    let Value::Table(t) = e else {
        let msg = match e {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            _ => "execution failure".to_string(),
        };
        return format!("ERR Error running script {name}, {msg:.100}").into_bytes();
    };
    let get = |k: &str| t.raw_get::<Value>(k).unwrap_or(Value::Nil);
    let mut msg = match get("err") {
        Value::String(s) => s.as_bytes().to_vec(),
        _ => b"ERR unknown error".to_vec(),
    };
    let line = match get("line") {
        Value::Number(n) => Some(n as i64),
        Value::Integer(n) => Some(n),
        _ => None,
    };
    if let (Value::String(source), Some(line)) = (get("source"), line) {
        msg.extend_from_slice(b" script: ");
        msg.extend_from_slice(name.as_bytes());
        msg.extend_from_slice(b", on ");
        msg.extend_from_slice(&source.as_bytes());
        msg.push(b':');
        msg.extend_from_slice(line.to_string().as_bytes());
        msg.push(b'.');
    }
    msg
}

/// An mlua error as the text Lua would give (no traceback).
fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

fn out_of_memory_or(e: &mlua::Error) -> Vec<u8> {
    format!("ERR {}", lua_error_text(e)).into_bytes()
}

/// `body` with a first line starting with "#!" blanked, its newline kept.
fn strip_shebang(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if body.starts_with(b"#!") {
        let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
        std::borrow::Cow::Owned(body[end..].to_vec())
    } else {
        std::borrow::Cow::Borrowed(body)
    }
}

/// The hook of every run outside a debugging session: `tick` every
/// `TICK_INSTRUCTIONS` instructions.
fn set_tick_hook(lua: &Lua, shared: &Rc<Shared>) {
    let hook_shared = shared.clone();
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(TICK_INSTRUCTIONS),
        move |_, _| tick(&hook_shared),
    );
}

/// The hook: asks the host whether to go on; once told to stop, raises
/// at every later tick.
pub(crate) fn tick(shared: &Shared) -> mlua::Result<VmState> {
    if let Some(text) = &*shared.killed.borrow() {
        return Err(mlua::Error::RuntimeError(
            String::from_utf8_lossy(text).into_owned(),
        ));
    }
    let Some(mut host) = shared.host.get() else {
        return Ok(VmState::Continue);
    };
    // SAFETY: see `Vm::call_function`.
    if let Err(text) = unsafe { host.as_mut() }.tick() {
        let msg = String::from_utf8_lossy(&text).into_owned();
        shared.kill(text)?;
        return Err(mlua::Error::RuntimeError(msg));
    }
    Ok(VmState::Continue)
}

/// The host of the running script, or the Lua error for a call outside
/// a run.
fn with_host<R>(shared: &Shared, f: impl FnOnce(&mut dyn Host) -> R) -> mlua::Result<R> {
    let Some(mut host) = shared.host.get() else {
        return Err(mlua::Error::RuntimeError(
            "redis library function called outside a script".into(),
        ));
    };
    // SAFETY: see `Vm::call_function`.
    Ok(f(unsafe { host.as_mut() }))
}

/// What a `redis` library function answers: a value, or an error text
/// raised as Redis raises it (an `{err=...}` table, normalised by
/// `convert::error_table`).
type LibResult = mlua::Result<Result<Value, Vec<u8>>>;

/// A `redis` library function: `f`'s error texts are raised as error
/// tables from a C frame (`raise_tables`), as Redis's C functions raise
/// them, so the message handler finds the script's line one level up, a
/// `return redis.call(...)` tail call keeps the script's frame, and
/// `pcall` sees the table (and turns it into its text, as Redis does).
fn lib_fn(
    lua: &Lua,
    f: impl Fn(&Lua, MultiValue) -> LibResult + 'static,
) -> mlua::Result<Function> {
    let inner = lua.create_function(move |lua, args: MultiValue| {
        Ok(match f(lua, args)? {
            Ok(v) => (v, false),
            Err(text) => (Value::Table(convert::error_table(lua, &text)?), true),
        })
    })?;
    // SAFETY: `raise_tables` only uses the C API on its own frame, with the
    // function pushed here as its one upvalue.
    unsafe {
        lua.exec_raw(inner, |state| {
            mlua::ffi::lua_pushcclosure(state, raise_tables, 1);
        })
    }
}

/// `f` called through a C function. The sandbox's wrappers (pcall, load,
/// rawset...) are Lua functions; a script's `return load(...)` would be a
/// tail call that drops the script's frame, and errors would lose its
/// line. A C function in between keeps it, as for Redis's C builtins.
fn pass_through(lua: &Lua, f: Function) -> mlua::Result<Function> {
    // SAFETY: `call_upvalue` only uses the C API on its own frame.
    unsafe {
        lua.exec_raw(f, |state| {
            mlua::ffi::lua_pushcclosure(state, call_upvalue, 1);
        })
    }
}

/// Calls upvalue 1 with every argument and returns all it returns.
unsafe extern "C-unwind" fn call_upvalue(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let nargs = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, nargs, ffi::LUA_MULTRET);
    ffi::lua_gettop(state)
}

/// The C side of `lib_fn`: calls the Rust function in upvalue 1 with the
/// arguments, which answers (value, raise); raises the value if asked,
/// else returns it. No Rust value with a destructor is alive here, so the
/// `longjmp` of `lua_error` skips nothing that needs dropping.
unsafe extern "C-unwind" fn raise_tables(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let nargs = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, nargs, 2);
    let raise = ffi::lua_toboolean(state, -1) != 0;
    ffi::lua_settop(state, -2);
    if raise {
        ffi::lua_error(state);
    }
    1
}

/// `redis.call` (`raise`) or `redis.pcall`: `crate::call::redis_call` with
/// the interpreter's `Shared` as a light userdata. `shared` outlives the
/// function: the `Vm` keeps it, and the Lua state goes with the `Vm`.
fn call_fn(lua: &Lua, shared: &Rc<Shared>, raise: bool) -> mlua::Result<Function> {
    let ptr = Rc::as_ptr(shared) as *mut std::ffi::c_void;
    // SAFETY: only pushes two upvalues and the closure on this frame.
    unsafe {
        lua.exec_raw((), |state| {
            mlua::ffi::lua_pushlightuserdata(state, ptr);
            mlua::ffi::lua_pushboolean(state, raise as std::ffi::c_int);
            mlua::ffi::lua_pushcclosure(state, crate::call::redis_call, 2);
        })
    }
}

/// A C function with the interpreter's `Shared` as its light userdata
/// upvalue (as `call_fn`).
fn shared_c_fn(
    lua: &Lua,
    shared: &Rc<Shared>,
    f: unsafe extern "C-unwind" fn(*mut mlua::ffi::lua_State) -> std::ffi::c_int,
) -> mlua::Result<Function> {
    let ptr = Rc::as_ptr(shared) as *mut std::ffi::c_void;
    // SAFETY: only pushes the upvalue and the closure on this frame.
    unsafe {
        lua.exec_raw((), |state| {
            mlua::ffi::lua_pushlightuserdata(state, ptr);
            mlua::ffi::lua_pushcclosure(state, f, 1);
        })
    }
}

/// The `redis` table: Redis 7.0's functions and constants. `call` and
/// `pcall` are completed in sandbox.lua from `__call`.
fn redis_table(lua: &Lua, shared: &Rc<Shared>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("call", call_fn(lua, shared, true)?)?;
    t.raw_set("pcall", call_fn(lua, shared, false)?)?;
    t.raw_set(
        "sha1hex",
        lib_fn(lua, |lua, args| {
            if args.len() != 1 {
                return Ok(Err(b"wrong number of arguments".to_vec()));
            }
            let v = args.into_iter().next().unwrap_or(Value::Nil);
            let bytes = match lua.coerce_string(v)? {
                Some(s) => s.as_bytes().to_vec(),
                None => Vec::new(),
            };
            Ok(Ok(Value::String(
                lua.create_string(crate::sha1hex(&bytes))?,
            )))
        })?,
    )?;
    t.raw_set(
        "error_reply",
        lib_fn(lua, |lua, args| {
            let Some(text) = single_string(args) else {
                // Returned, not raised, as Redis does.
                return Ok(Ok(Value::Table(convert::error_table(
                    lua,
                    b"wrong number or type of arguments",
                )?)));
            };
            let mut e = text;
            if !e.starts_with(b"-") {
                e.insert(0, b'-');
            }
            Ok(Ok(Value::Table(convert::error_table(lua, &e)?)))
        })?,
    )?;
    t.raw_set(
        "status_reply",
        lib_fn(lua, |lua, args| {
            let Some(text) = single_string(args) else {
                return Ok(Ok(Value::Table(convert::error_table(
                    lua,
                    b"wrong number or type of arguments",
                )?)));
            };
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("ok", lua.create_string(&text)?)?;
            Ok(Ok(Value::Table(t)))
        })?,
    )?;
    let s = shared.clone();
    t.raw_set(
        "log",
        lib_fn(lua, move |lua, args| {
            if args.len() < 2 {
                return Ok(Err(b"redis.log() requires two arguments or more.".to_vec()));
            }
            let mut it = args.into_iter();
            let level = match it.next().and_then(|v| number(&v)) {
                Some(n) => n as i64,
                None => return Ok(Err(b"First argument must be a number (log level).".to_vec())),
            };
            let level = match level {
                0 => LogLevel::Debug,
                1 => LogLevel::Verbose,
                2 => LogLevel::Notice,
                3 => LogLevel::Warning,
                _ => return Ok(Err(b"Invalid debug level.".to_vec())),
            };
            let mut msg = Vec::new();
            for (i, v) in it.enumerate() {
                if i > 0 {
                    msg.push(b' ');
                }
                if let Some(s) = lua.coerce_string(v)? {
                    msg.extend_from_slice(&s.as_bytes());
                }
            }
            with_host(&s, |h| h.log(level, &msg))?;
            Ok(Ok(Value::Nil))
        })?,
    )?;
    let s = shared.clone();
    t.raw_set(
        "setresp",
        lib_fn(lua, move |_, args| {
            let v = match args.iter().next().and_then(number) {
                Some(n) if args.len() == 1 => n as i64,
                _ => return Ok(Err(b"redis.setresp() requires one argument.".to_vec())),
            };
            match v {
                2 | 3 => {
                    s.resp3.set(v == 3);
                    Ok(Ok(Value::Nil))
                }
                _ => Ok(Err(b"RESP version must be 2 or 3.".to_vec())),
            }
        })?,
    )?;
    let s = shared.clone();
    t.raw_set(
        "set_repl",
        lib_fn(lua, move |_, args| {
            let flags = match args.iter().next().and_then(number) {
                Some(n) if args.len() == 1 => n as i64,
                _ => return Ok(Err(b"redis.set_repl() requires two arguments.".to_vec())),
            };
            if flags & !3 != 0 {
                return Ok(Err(b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.".to_vec()));
            }
            with_host(&s, |h| h.set_repl(flags))?;
            Ok(Ok(Value::Nil))
        })?,
    )?;
    t.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    t.raw_set(
        "breakpoint",
        shared_c_fn(lua, shared, crate::debugger::lua_breakpoint)?,
    )?;
    t.raw_set(
        "debug",
        shared_c_fn(lua, shared, crate::debugger::lua_debug)?,
    )?;
    let s = shared.clone();
    t.raw_set(
        "acl_check_cmd",
        lib_fn(lua, move |lua, args| {
            if args.is_empty() {
                return Ok(Err(
                    b"Please specify at least one argument for this redis lib call".to_vec(),
                ));
            }
            let strs = match arg_strings(lua, args)? {
                Ok(v) => v,
                Err(msg) => return Ok(Err(msg.as_bytes().to_vec())),
            };
            let bytes: Vec<mlua::BorrowedBytes> = strs.iter().map(|s| s.as_bytes()).collect();
            let slices: Vec<&[u8]> = bytes.iter().map(|b| &b[..]).collect();
            Ok(with_host(&s, |h| h.acl_check(&slices))?.map(Value::Boolean))
        })?,
    )?;
    let s = shared.clone();
    t.raw_set(
        "register_function",
        lib_fn(lua, move |lua, args| register_function(lua, &s, args))?,
    )?;
    t.raw_set("LOG_DEBUG", LogLevel::Debug as i64)?;
    t.raw_set("LOG_VERBOSE", LogLevel::Verbose as i64)?;
    t.raw_set("LOG_NOTICE", LogLevel::Notice as i64)?;
    t.raw_set("LOG_WARNING", LogLevel::Warning as i64)?;
    t.raw_set("REPL_NONE", 0)?;
    t.raw_set("REPL_AOF", 1)?;
    t.raw_set("REPL_SLAVE", 2)?;
    t.raw_set("REPL_REPLICA", 2)?;
    t.raw_set("REPL_ALL", 3)?;
    t.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    t.raw_set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    Ok(t)
}

/// A Lua number argument (mlua hands integral ones over as Integer).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Integer(n) => Some(*n as f64),
        _ => None,
    }
}

fn single_string(args: MultiValue) -> Option<Vec<u8>> {
    if args.len() != 1 {
        return None;
    }
    match args.into_iter().next() {
        Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// The arguments of a redis lib call as Lua strings (numbers converted as
/// Lua does), or Redis's error for another type.
fn arg_strings(
    lua: &Lua,
    args: MultiValue,
) -> mlua::Result<Result<Vec<mlua::String>, &'static str>> {
    let mut out = Vec::with_capacity(args.len());
    let mut num = Vec::new();
    for v in args {
        let n = match v {
            Value::String(s) => {
                out.push(s);
                continue;
            }
            Value::Number(n) => n,
            Value::Integer(i) => i as f64,
            _ => {
                return Ok(Err(
                    "Lua redis lib command arguments must be strings or integers",
                ))
            }
        };
        // "%.17g", as Redis formats a number argument: Lua's own "%.14g"
        // would lose digits (2^53 would become 9.007199254741e+15).
        num.clear();
        cairn_protocol::resp::format_g17(n, &mut num);
        out.push(lua.create_string(&num)?);
    }
    Ok(Ok(out))
}

/// `redis.register_function(name, f)` or `redis.register_function{
/// function_name=, callback=, flags=, description=}` during FUNCTION LOAD.
fn register_function(lua: &Lua, shared: &Shared, args: MultiValue) -> LibResult {
    let mut registry = shared.registry.borrow_mut();
    let Some(list) = registry.as_mut() else {
        return Ok(Err(
            b"redis.register_function can only be called on FUNCTION LOAD command".to_vec(),
        ));
    };
    let err = |m: &str| Ok(Err(m.as_bytes().to_vec()));
    let (name, func, flags, description) = match args.len() {
        2 => {
            let mut it = args.into_iter();
            let name = match it
                .next()
                .map(|v| lua.coerce_string(v))
                .transpose()?
                .flatten()
            {
                Some(s) => s.as_bytes().to_vec(),
                None => return err("first argument to redis.register_function must be a string"),
            };
            let func = match it.next() {
                Some(Value::Function(f)) => f,
                _ => return err("second argument to redis.register_function must be a function"),
            };
            (name, func, Vec::new(), None)
        }
        1 => {
            let Some(Value::Table(t)) = args.into_iter().next() else {
                return err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut func, mut flags, mut description) = (None, None, Vec::new(), None);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Value::String(k) = k else {
                    return err(
                        "named argument key given to redis.register_function is not a string",
                    );
                };
                match &*k.as_bytes() {
                    // Numbers pass as strings (`lua_isstring`), as in Redis.
                    b"function_name" => match lua.coerce_string(v)? {
                        Some(s) => name = Some(s.as_bytes().to_vec()),
                        None => return err("function_name argument given to redis.register_function must be a string"),
                    },
                    b"description" => match lua.coerce_string(v)? {
                        Some(s) => description = Some(s.as_bytes().to_vec()),
                        None => return err("description argument given to redis.register_function must be a string"),
                    },
                    b"callback" => match v {
                        Value::Function(f) => func = Some(f),
                        _ => return err("callback argument given to redis.register_function must be a function"),
                    },
                    b"flags" => match v {
                        Value::Table(ft) => {
                            for f in ft.sequence_values::<Value>() {
                                match f? {
                                    Value::String(s) => flags.push(s.as_bytes().to_vec()),
                                    _ => return err("unknown flag given"),
                                }
                            }
                        }
                        _ => return err("flags argument to redis.register_function must be a table representing function flags"),
                    },
                    _ => return err("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return err("redis.register_function must get a function name argument");
            };
            let Some(func) = func else {
                return err("redis.register_function must get a callback argument");
            };
            (name, func, flags, description)
        }
        _ => return err("wrong number of arguments to redis.register_function"),
    };
    list.push(Registered {
        name,
        func,
        flags,
        description,
    });
    Ok(Ok(Value::Nil))
}

#[cfg(test)]
pub(crate) mod tests_support {
    pub(crate) use super::tests::Mock;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host answering a few commands the way the server would.
    #[derive(Default)]
    pub(crate) struct Mock {
        calls: Vec<Vec<Vec<u8>>>,
        logged: Vec<(LogLevel, Vec<u8>)>,
        ticks: usize,
        kill_after: Option<usize>,
    }

    impl Host for Mock {
        fn call(&mut self, args: &[&[u8]], resp3: bool, out: &mut Vec<u8>) -> Result<(), Refusal> {
            self.calls.push(args.iter().map(|a| a.to_vec()).collect());
            match &*args[0].to_ascii_lowercase() {
                b"incr" => {
                    out.extend_from_slice(b"-ERR value is not an integer or out of range\r\n")
                }
                b"get" => out.extend_from_slice(b"$3\r\nbar\r\n"),
                b"set" => out.extend_from_slice(b"+OK\r\n"),
                b"hgetall" if resp3 => out.extend_from_slice(b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"),
                b"hgetall" => out.extend_from_slice(b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
                b"abort" => return Err(Refusal::Abort(b"ERR start again".to_vec())),
                // Answers its argument as the reply, bytes as they are.
                b"raw" => out.extend_from_slice(args[1]),
                _ => {
                    return Err(Refusal::Error(
                        b"Unknown Redis command called from script".to_vec(),
                    ))
                }
            }
            Ok(())
        }
        fn log(&mut self, level: LogLevel, msg: &[u8]) {
            self.logged.push((level, msg.to_vec()));
        }
        fn tick(&mut self) -> Result<(), Vec<u8>> {
            self.ticks += 1;
            match self.kill_after {
                Some(n) if self.ticks > n => {
                    Err(b"ERR Script killed by user with SCRIPT KILL...".to_vec())
                }
                _ => Ok(()),
            }
        }
        fn acl_check(&mut self, _: &[&[u8]]) -> Result<bool, Vec<u8>> {
            Ok(true)
        }
        fn set_repl(&mut self, _: i64) {}
    }

    fn eval_with(
        vm: &mut Vm,
        host: &mut Mock,
        body: &str,
        keys: &[&str],
        proto: Protocol,
    ) -> Result<String, String> {
        let sha = crate::sha1hex(body.as_bytes());
        vm.compile(&sha, body.as_bytes())
            .map_err(|e| String::from_utf8_lossy(&e).into_owned())?;
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let mut out = Vec::new();
        match vm.run(&sha, &keys, &[], host, proto, &mut out) {
            Ok(()) => Ok(String::from_utf8_lossy(&out).into_owned()),
            Err(RunError::Script(e) | RunError::Killed(e)) => {
                Err(String::from_utf8_lossy(&e).into_owned())
            }
        }
    }

    fn eval(body: &str) -> Result<String, String> {
        let mut vm = Vm::new(0).unwrap();
        eval_with(&mut vm, &mut Mock::default(), body, &[], Protocol::Resp2)
    }

    fn script_err(body: &str, msg: &str, line: u32) -> Result<String, String> {
        Err(format!(
            "{msg} script: {}, on @user_script:{line}.",
            crate::sha1hex(body.as_bytes())
        ))
    }

    #[test]
    fn errors_are_worded_as_redis_words_them() {
        let b = "return redis.call('incr','s')";
        assert_eq!(
            eval(b),
            script_err(b, "ERR value is not an integer or out of range", 1)
        );
        let b = "return error('x')";
        assert_eq!(eval(b), script_err(b, "ERR user_script:1: x", 1));
        let b = "error({err='MYERR boom'})";
        assert_eq!(eval(b), script_err(b, "MYERR boom", 1));
        let b = "\nreturn redis.call('nosuch')";
        assert_eq!(
            eval(b),
            script_err(b, "ERR Unknown Redis command called from script", 2)
        );
        let b = "error('x',0)";
        assert_eq!(eval(b), script_err(b, "ERR x", 1));
        let b = "return redis.call()";
        assert_eq!(
            eval(b),
            script_err(
                b,
                "ERR Please specify at least one argument for this redis lib call",
                1
            )
        );
        let b = "return redis.call('get',{})";
        assert_eq!(
            eval(b),
            script_err(
                b,
                "ERR Lua redis lib command arguments must be strings or integers",
                1
            )
        );
        let b = "return redis.setresp(4)";
        assert_eq!(
            eval(b),
            script_err(b, "ERR RESP version must be 2 or 3.", 1)
        );
        assert_eq!(
            eval("return x y"),
            Err("ERR Error compiling script (new function): user_script:1: '<eof>' expected near 'y'".into())
        );
        assert_eq!(
            eval("return redis.pcall('incr','s')"),
            Err("ERR value is not an integer or out of range".into())
        );
        assert_eq!(eval("return {err='x'}"), Err("x".into()));
        assert_eq!(
            eval("return redis.error_reply('My Error')"),
            Err("My Error".into())
        );
        assert_eq!(eval("return redis.error_reply('x')"), Err("ERR x".into()));
        assert_eq!(
            eval("return redis.status_reply('FINE')"),
            Ok("+FINE\r\n".into())
        );
    }

    #[test]
    fn pcall_turns_error_tables_into_strings_as_redis_7_does() {
        assert_eq!(
            eval("local ok, e = pcall(redis.call,'incr','s') return {tostring(ok), type(e), e}"),
            Ok("*3\r\n$5\r\nfalse\r\n$6\r\nstring\r\n$43\r\nERR value is not an integer or out of range\r\n".into())
        );
        assert_eq!(
            eval("local ok, e = pcall(error,{err='x'}) return type(e)"),
            Ok("$6\r\nstring\r\n".into())
        );
        let b = "local ok, e = pcall(redis.call,'incr','s') error(e)";
        assert_eq!(
            eval(b),
            script_err(
                b,
                "ERR user_script:1: ERR value is not an integer or out of range",
                1
            )
        );
    }

    #[test]
    fn the_sandbox_is_read_only_and_lacks_what_redis_removes() {
        let b = "a=1";
        assert_eq!(
            eval(b),
            script_err(
                b,
                "ERR user_script:1: Attempt to modify a readonly table",
                1
            )
        );
        let b = "string.foo=1";
        assert_eq!(
            eval(b),
            script_err(
                b,
                "ERR user_script:1: Attempt to modify a readonly table",
                1
            )
        );
        let b = "redis.call=1";
        assert_eq!(
            eval(b),
            script_err(
                b,
                "ERR user_script:1: Attempt to modify a readonly table",
                1
            )
        );
        let b = "rawset(_G,'x',1)";
        assert_eq!(
            eval(b),
            script_err(b, "ERR Attempt to modify a readonly table", 1)
        );
        let b = "setmetatable(_G,nil)";
        assert_eq!(
            eval(b),
            script_err(b, "ERR Attempt to modify a readonly table", 1)
        );
        for g in [
            "print", "getfenv", "setfenv", "newproxy", "module", "require", "debug", "dofile",
            "loadfile", "os", "io", "package",
        ] {
            let b = format!("return type({g})");
            assert_eq!(
                eval(&b),
                script_err(&b, &format!("ERR user_script:1: Script attempted to access nonexistent global variable '{g}'"), 1),
                "{g}"
            );
        }
        for g in [
            "loadstring",
            "collectgarbage",
            "gcinfo",
            "unpack",
            "load",
            "rawset",
            "rawget",
            "pcall",
            "xpcall",
            "select",
        ] {
            assert_eq!(
                eval(&format!("return type({g})")),
                Ok("$8\r\nfunction\r\n".into()),
                "{g}"
            );
        }
        assert_eq!(eval("return _VERSION"), Ok("$7\r\nLua 5.1\r\n".into()));
        assert_eq!(eval("return tostring(10/2)"), Ok("$1\r\n5\r\n".into()));
        // pairs sees through the proxies.
        assert_eq!(
            eval("local n=0 for k in pairs(redis) do n=n+1 end return n > 20"),
            Ok(":1\r\n".into())
        );
        assert_eq!(
            eval("local s = 'ab' return s:upper()"),
            Ok("$2\r\nAB\r\n".into())
        );
        // A chunk loaded by a script cannot write globals either.
        let b = "loadstring('x=1')()";
        assert_eq!(
            eval(b),
            Err(format!(
                "ERR [string \"x=1\"]:1: Attempt to modify a readonly table script: {}, on x=1:1.",
                crate::sha1hex(b.as_bytes())
            ))
        );
    }

    #[test]
    fn calls_reach_the_host_with_keys_and_converted_numbers() {
        let mut vm = Vm::new(0).unwrap();
        let mut host = Mock::default();
        let r = eval_with(
            &mut vm,
            &mut host,
            "redis.call('set', KEYS[1], 1.5, 100000000000000000) return redis.call('get', KEYS[1])",
            &["k"],
            Protocol::Resp2,
        );
        assert_eq!(r, Ok("$3\r\nbar\r\n".into()));
        assert_eq!(
            host.calls[0],
            vec![
                b"set".to_vec(),
                b"k".to_vec(),
                b"1.5".to_vec(),
                b"1e+17".to_vec()
            ]
        );
        let r = eval_with(
            &mut vm,
            &mut host,
            "redis.setresp(3) return redis.call('hgetall','h').map.f",
            &[],
            Protocol::Resp2,
        );
        assert_eq!(r, Ok("$1\r\nv\r\n".into()));
        // setresp lasts for one run only.
        let r = eval_with(
            &mut vm,
            &mut host,
            "return redis.call('hgetall','h')",
            &[],
            Protocol::Resp2,
        );
        assert_eq!(r, Ok("*2\r\n$1\r\nf\r\n$1\r\nv\r\n".into()));
        let r = eval_with(
            &mut vm,
            &mut host,
            "redis.log(redis.LOG_WARNING, 'hi', 3) return 1",
            &[],
            Protocol::Resp2,
        );
        assert_eq!(r, Ok(":1\r\n".into()));
        assert_eq!(host.logged, vec![(LogLevel::Warning, b"hi 3".to_vec())]);
    }

    #[test]
    fn a_killed_script_stops_even_inside_pcall() {
        let mut vm = Vm::new(0).unwrap();
        let mut host = Mock {
            kill_after: Some(3),
            ..Mock::default()
        };
        let r = eval_with(
            &mut vm,
            &mut host,
            "while true do pcall(function() while true do end end) end",
            &[],
            Protocol::Resp2,
        );
        let b = "while true do pcall(function() while true do end end) end";
        assert_eq!(
            r,
            script_err(b, "ERR Script killed by user with SCRIPT KILL...", 1)
        );
        // The next run is not killed.
        let mut host = Mock::default();
        assert_eq!(
            eval_with(&mut vm, &mut host, "return 1", &[], Protocol::Resp2),
            Ok(":1\r\n".into())
        );
    }

    #[test]
    fn replies_become_lua_values_as_in_redis() {
        let show = r#"
            local function show(v)
              if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
              local keys = {}
              for k in pairs(v) do keys[#keys + 1] = k end
              table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
              local parts = {}
              for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. '=' .. show(v[k]) end
              return '{' .. table.concat(parts, ',') .. '}'
            end
            return show(redis.pcall('raw', ARGV[1]))"#;
        let cases: &[(&[u8], &str)] = &[
            (b"+OK\r\n", "{ok=string:OK}"),
            (b":42\r\n", "number:42"),
            (b"$3\r\nabc\r\n", "string:abc"),
            (b"$-1\r\n", "boolean:false"),
            (b"*-1\r\n", "boolean:false"),
            (
                b"*3\r\n:1\r\n$1\r\nx\r\n*-1\r\n",
                "{1=number:1,2=string:x,3=boolean:false}",
            ),
            (
                b"-WRONGTYPE Operation against a key\r\n",
                "{err=string:WRONGTYPE Operation against a key}",
            ),
            (b"-oops\r\n", "{err=string:ERR oops}"),
            (
                b"*2\r\n:1\r\n-E bad\r\n",
                "{1=number:1,2={err=string:E bad}}",
            ),
            (b"%1\r\n$1\r\na\r\n:1\r\n", "{map={a=number:1}}"),
            (b"~1\r\n$1\r\na\r\n", "{set={a=boolean:true}}"),
            (b"_\r\n", "nil:nil"),
            (b"#t\r\n", "boolean:true"),
            (b",3.5\r\n", "{double=number:3.5}"),
            (b"(123\r\n", "{big_number=string:123}"),
            (
                b"=6\r\ntxt:hi\r\n",
                "{verbatim_string={format=string:txt,string=string:hi}}",
            ),
        ];
        let mut vm = Vm::new(0).unwrap();
        let sha = crate::sha1hex(show.as_bytes());
        vm.compile(&sha, show.as_bytes()).unwrap();
        for (reply, want) in cases {
            let mut out = Vec::new();
            vm.run(
                &sha,
                &[],
                &[reply],
                &mut Mock::default(),
                Protocol::Resp2,
                &mut out,
            )
            .unwrap();
            let want = format!("${}\r\n{want}\r\n", want.len());
            assert_eq!(
                String::from_utf8_lossy(&out),
                want,
                "{}",
                String::from_utf8_lossy(reply)
            );
        }
    }

    #[test]
    fn an_abort_stops_the_script_through_pcall() {
        let mut vm = Vm::new(0).unwrap();
        let mut host = Mock::default();
        let sha = crate::sha1hex(b"x");
        vm.compile(
            &sha,
            b"pcall(redis.call, 'abort') redis.pcall('get', 'k') return 1",
        )
        .unwrap();
        let mut out = Vec::new();
        let r = vm.run(&sha, &[], &[], &mut host, Protocol::Resp2, &mut out);
        let want = format!("ERR start again script: {sha}, on @user_script:1.");
        assert_eq!(r, Err(RunError::Killed(want.into_bytes())));
        assert_eq!(host.calls.len(), 1, "nothing ran after the abort");
    }

    #[test]
    fn the_heap_limit_stops_a_runaway_script() {
        let mut vm = Vm::new(32 << 20).unwrap();
        let mut host = Mock::default();
        let r = eval_with(
            &mut vm,
            &mut host,
            "local t = {} for i=1,1e8 do t[i] = string.rep('x', 100) .. i end return 1",
            &[],
            Protocol::Resp2,
        );
        assert!(r.unwrap_err().contains("not enough memory"));
        assert_eq!(
            eval_with(&mut vm, &mut host, "return 2", &[], Protocol::Resp2),
            Ok(":2\r\n".into())
        );
    }
}

#[cfg(test)]
mod debug_tests {
    use super::tests_support::Mock;
    use super::*;
    use crate::debugger::Console;

    /// A client that sends `commands` one per read and keeps what it got.
    struct Scripted {
        commands: std::collections::VecDeque<Vec<u8>>,
        got: Vec<u8>,
    }

    impl Console for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some(c) = self.commands.pop_front() else {
                return Ok(0);
            };
            buf[..c.len()].copy_from_slice(&c);
            Ok(c.len())
        }
        fn write(&mut self, bytes: &[u8]) {
            self.got.extend_from_slice(bytes);
        }
    }

    fn session(body: &str, commands: &[&str]) -> (String, Result<String, String>) {
        let mut vm = Vm::new(0).unwrap();
        let sha = crate::sha1hex(body.as_bytes());
        vm.compile(&sha, body.as_bytes()).unwrap();
        let mut console = Scripted {
            commands: commands
                .iter()
                .map(|c| {
                    let parts: Vec<&str> = c.split(' ').collect();
                    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
                    for p in parts {
                        out.extend_from_slice(format!("${}\r\n{p}\r\n", p.len()).as_bytes());
                    }
                    out
                })
                .collect(),
            got: Vec::new(),
        };
        let mut out = Vec::new();
        let r = vm.run_debug(
            &sha,
            body.as_bytes(),
            &[b"k"],
            &[b"v"],
            &mut Mock::default(),
            &mut console,
            0,
            Protocol::Resp2,
            &mut out,
        );
        let r = match r {
            Ok(()) => Ok(String::from_utf8_lossy(&out).into_owned()),
            Err(RunError::Script(e) | RunError::Killed(e)) => {
                Err(String::from_utf8_lossy(&e).into_owned())
            }
        };
        (String::from_utf8_lossy(&console.got).into_owned(), r)
    }

    #[test]
    fn a_session_steps_prints_and_lists_as_ldb_does() {
        let body = "local a = 1\nlocal b = {1,2,'x'}\nredis.call('set', KEYS[1], ARGV[1])\nlocal c = redis.call('get', KEYS[1])\nredis.debug('hi', a, b)\nreturn c\n";
        let (got, r) = session(
            body,
            &[
                "s", "n", "p", "p b", "p KEYS", "p zz", "l 1 1", "b 5", "t", "e a", "e 1.5", "s",
                "c",
            ],
        );
        assert_eq!(r, Ok("$3\r\nbar\r\n".into()));
        let want = concat!(
            "*2\r\n+* Stopped at 1, stop reason = step over\r\n+-> 1   local a = 1\r\n",
            "*2\r\n+* Stopped at 2, stop reason = step over\r\n+-> 2   local b = {1,2,'x'}\r\n",
            "*2\r\n+* Stopped at 3, stop reason = step over\r\n+-> 3   redis.call('set', KEYS[1], ARGV[1])\r\n",
            "*2\r\n+<value> a = 1\r\n+<value> b = {1; 2; \"x\"}\r\n",
            "*1\r\n+<value> {1; 2; \"x\"}\r\n",
            "*1\r\n+<value> {\"k\"}\r\n",
            "*1\r\n+No such variable.\r\n",
            "*2\r\n+   1   local a = 1\r\n+   2   local b = {1,2,'x'}\r\n",
            "*3\r\n+   4   local c = redis.call('get', KEYS[1])\r\n+  #5   redis.debug('hi', a, b)\r\n+   6   return c\r\n",
            "*2\r\n+In top level:\r\n+-> 3   redis.call('set', KEYS[1], ARGV[1])\r\n",
            "*1\r\n+<error> ldb_eval:1: Script attempted to access nonexistent global variable 'a'\r\n",
            "*1\r\n+<retval> 1.5\r\n",
            "*4\r\n+<redis> set k v\r\n+<reply> \"+OK\"\r\n+* Stopped at 4, stop reason = step over\r\n+-> 4   local c = redis.call('get', KEYS[1])\r\n",
            "*2\r\n+* Stopped at 5, stop reason = break point\r\n+->#5   redis.debug('hi', a, b)\r\n",
        );
        assert_eq!(&got[..want.len().min(got.len())], want);
        // The client is gone after "c": the script runs to its end.
        assert_eq!(
            &got[want.len()..],
            "*2\r\n+<debug> line 5: \"hi\", 1, {1; 2; \"x\"}\r\n+<endsession>\r\n"
        );
    }

    #[test]
    fn abort_and_breakpoints_end_as_in_redis() {
        let body = "local a = 1\nredis.breakpoint()\nlocal b = 2\nreturn a";
        let (got, r) = session(body, &["c", "a"]);
        assert_eq!(
            got,
            concat!(
                "*2\r\n+* Stopped at 1, stop reason = step over\r\n+-> 1   local a = 1\r\n",
                "*2\r\n+* Stopped at 3, stop reason = redis.breakpoint() called\r\n+-> 3   local b = 2\r\n",
                "*1\r\n+<endsession>\r\n",
            )
        );
        let sha = crate::sha1hex(body.as_bytes());
        assert_eq!(
            r,
            Err(format!(
                "ERR script aborted for user request script: {sha}, on @user_script:3."
            ))
        );
        // Outside a session redis.breakpoint() answers false.
        let mut vm = Vm::new(0).unwrap();
        let sha = crate::sha1hex(b"x");
        vm.compile(&sha, b"return tostring(redis.breakpoint())")
            .unwrap();
        let mut out = Vec::new();
        vm.run(
            &sha,
            &[],
            &[],
            &mut Mock::default(),
            Protocol::Resp2,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, b"$5\r\nfalse\r\n");
    }
}
