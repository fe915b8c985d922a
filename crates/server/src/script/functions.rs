//! FUNCTION and FCALL: libraries of named Lua functions, loaded once and
//! kept with the dataset (Redis 7.0 `functions.c`, `function_lua.c`).
//!
//! The registry is server-wide: each library's name, code and the
//! functions it registered (names, flags, descriptions). Each worker's
//! interpreter loads every library's code itself (`Loaded::sync`) when the
//! registry's generation changed, so FCALL finds a compiled Lua function
//! on whatever worker it arrives. A library's code runs at load time with
//! only the library API (`redis.register_function`, `redis.log`, the
//! constants) in sight, as in Redis.
use super::flag;
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One function a library registered.
pub struct FunctionMeta {
    pub name: String,
    pub flags: u32,
    pub description: Option<Vec<u8>>,
}

/// A loaded library.
pub struct Library {
    pub name: String,
    pub code: Arc<[u8]>,
    pub functions: Vec<FunctionMeta>,
    /// What its functions' runs taught of their keys (`run::footprint`).
    pub footprint: std::sync::atomic::AtomicU8,
}

#[derive(Default)]
struct Libraries {
    by_name: BTreeMap<String, Arc<Library>>,
    /// Function name, lower case (FCALL is case-insensitive) -> library.
    functions: HashMap<String, String>,
    code_bytes: usize,
}

/// The libraries every worker's interpreter loads (server-wide).
#[derive(Default)]
pub struct Registry {
    libs: RwLock<Libraries>,
    /// Bumped whenever the set of libraries changes.
    generation: AtomicU64,
}

/// What FUNCTION RESTORE does with libraries already there.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Flush,
    Append,
    Replace,
}

impl Registry {
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> usize {
        self.libs.read().code_bytes
    }

    pub fn function_count(&self) -> usize {
        self.libs.read().functions.len()
    }

    /// The flags function `name` registered with (FCALL is
    /// case-insensitive), None if there is no such function.
    pub fn flags_of(&self, name: &[u8]) -> Option<u32> {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let libs = self.libs.read();
        let lib = libs.by_name.get(libs.functions.get(&name)?)?;
        lib.functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&name))
            .map(|f| f.flags)
    }

    pub fn library_count(&self) -> usize {
        self.libs.read().by_name.len()
    }

    /// Every library, by name.
    pub fn libraries(&self) -> Vec<Arc<Library>> {
        self.libs.read().by_name.values().cloned().collect()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.libs.read().by_name.contains_key(name)
    }

    /// Adds libraries (replacing same-named ones when `replace`), all or
    /// none: Redis's errors for a name or function collision.
    pub fn add(&self, new: Vec<Library>, policy: Policy) -> Result<(), String> {
        let mut libs = self.libs.write();
        let mut next = if policy == Policy::Flush {
            Libraries::default()
        } else {
            Libraries {
                by_name: libs.by_name.clone(),
                functions: libs.functions.clone(),
                code_bytes: libs.code_bytes,
            }
        };
        // Redis's `libraryJoin`: every library name first, then every
        // function. FUNCTION LOAD refused a name already there before
        // running the code, with quotes; this text (FUNCTION RESTORE, a
        // load racing another) has none, as Redis's.
        for lib in &new {
            if let Some(old) = next.by_name.get(&lib.name).cloned() {
                if policy != Policy::Replace {
                    return Err(format!("ERR Library {} already exists", lib.name));
                }
                next.remove(&old);
            }
        }
        for lib in new {
            for f in &lib.functions {
                if next.functions.contains_key(&f.name.to_ascii_lowercase()) {
                    return Err(format!("ERR Function {} already exists", f.name));
                }
            }
            next.insert(lib);
        }
        *libs = next;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// FUNCTION DELETE: false if there is no such library.
    pub fn delete(&self, name: &str) -> bool {
        let mut libs = self.libs.write();
        let Some(lib) = libs.by_name.get(name).cloned() else {
            return false;
        };
        libs.remove(&lib);
        self.generation.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// FUNCTION FLUSH.
    pub fn flush(&self) {
        *self.libs.write() = Libraries::default();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

impl Libraries {
    fn insert(&mut self, lib: Library) {
        for f in &lib.functions {
            self.functions
                .insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        self.code_bytes += lib.code.len();
        self.by_name.insert(lib.name.clone(), Arc::new(lib));
    }

    fn remove(&mut self, lib: &Library) {
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        self.code_bytes -= lib.code.len();
        self.by_name.remove(&lib.name);
    }
}

/// The library name in a FUNCTION LOAD code's first line
/// (`#!lua name=<name>`), or Redis's error.
pub fn library_name(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let end = code.iter().position(|&c| c == b'\n').unwrap_or(code.len());
    // Redis splits the first line with `sdssplitargs`, so a value may be
    // quoted (`name="foo"`), and takes the engine from the first word
    // after its `#!` (empty for `#! name=x`).
    let parts = cairn_protocol::resp::split_inline_args(&code[..end])
        .filter(|p| !p.is_empty())
        .ok_or("ERR Invalid library metadata")?;
    let mut parts = parts
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let first = parts.next().unwrap_or_default();
    let engine = first.get(2..).unwrap_or_default();
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for part in parts {
        let part = part.as_str();
        // `strncasecmp(part, "name=", 5)`
        let value = part
            .get(..5)
            .filter(|p| p.eq_ignore_ascii_case("name="))
            .map(|_| &part[5..]);
        match value {
            Some(_) if name.is_some() => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            Some(n) => name = Some(n.to_string()),
            None => return Err(format!("ERR Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(&name) {
        return Err(LIBRARY_NAME_ERROR.into());
    }
    Ok(name)
}

const LIBRARY_NAME_ERROR: &str = "ERR Library names can only contain letters, numbers, \
or underscores(_) and must be at least one character long";

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A library's functions as its code registered them, checked as Redis
/// checks them (names, flags, duplicates).
pub fn describe(registered: &[cairn_lua::vm::Registered]) -> Result<Vec<FunctionMeta>, String> {
    let mut out: Vec<FunctionMeta> = Vec::new();
    for r in registered {
        let name = String::from_utf8_lossy(&r.name).into_owned();
        if !valid_name(&name) {
            // Redis words a bad function name with the library message.
            return Err(format!(
                "ERR Error registering functions: {LIBRARY_NAME_ERROR}"
            ));
        }
        if out.iter().any(|f| f.name == name) {
            return Err(
                "ERR Error registering functions: ERR Function already exists in the library"
                    .into(),
            );
        }
        let mut flags = 0;
        for f in &r.flags {
            flags |=
                flag::parse(f).ok_or("ERR Error registering functions: ERR unknown flag given")?;
        }
        out.push(FunctionMeta {
            name,
            flags,
            description: r.description.clone(),
        });
    }
    if out.is_empty() {
        return Err("ERR No functions registered".into());
    }
    Ok(out)
}

/// The host of a library's code while it loads: only `redis.log` and the
/// tick reach it (the library API has no `redis.call`). `quiet` when a
/// worker reloads a library it already loaded once elsewhere, so its log
/// lines appear once.
pub struct LoadHost {
    pub quiet: bool,
    /// When a client's FUNCTION LOAD is stopped (None: never).
    pub deadline: Option<std::time::Instant>,
}

/// How long a client's FUNCTION LOAD may run (Redis's LOAD_TIMEOUT_MS).
pub const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

impl cairn_lua::vm::Host for LoadHost {
    fn call(
        &mut self,
        _: &[&[u8]],
        _: bool,
        _: &mut Vec<u8>,
    ) -> Result<(), cairn_lua::vm::Refusal> {
        Err(cairn_lua::vm::Refusal::Error(
            crate::resp::errors::SCRIPT_NOT_ALLOWED.as_bytes().to_vec(),
        ))
    }

    fn log(&mut self, level: cairn_lua::vm::LogLevel, msg: &[u8]) {
        if !self.quiet {
            super::run::log(level, msg);
        }
    }

    fn tick(&mut self) -> Result<(), Vec<u8>> {
        match self.deadline {
            Some(d) if std::time::Instant::now() > d => Err(b"ERR FUNCTION LOAD timeout".to_vec()),
            _ => Ok(()),
        }
    }

    fn acl_check(&mut self, _: &[&[u8]]) -> Result<bool, Vec<u8>> {
        Ok(true)
    }

    fn set_repl(&mut self, _: i64) {}
}

/// A function compiled in a worker's interpreter.
pub struct LoadedFunction {
    pub func: cairn_lua::mlua::Function,
    pub name: String,
    pub flags: u32,
    pub library: Arc<Library>,
}

/// What one worker's interpreter has loaded of the registry.
#[derive(Default)]
pub struct Loaded {
    generation: u64,
    functions: HashMap<String, LoadedFunction>,
}

impl Loaded {
    /// Loads every library of `registry` into `vm` if it changed since.
    pub fn sync(&mut self, vm: &mut cairn_lua::vm::Vm, registry: &Registry) {
        let generation = registry.generation();
        if self.generation == generation {
            return;
        }
        self.functions.clear();
        for lib in registry.libraries() {
            let Ok(registered) = vm.load_library(
                &lib.code,
                &mut LoadHost {
                    quiet: true,
                    deadline: None,
                },
            ) else {
                // It loaded when it was added; a failure now (the heap
                // limit) leaves its functions out until the next change.
                crate::log::warning(&format!(
                    "library '{}' failed to load into a worker's interpreter",
                    lib.name
                ));
                continue;
            };
            for r in registered {
                let name = String::from_utf8_lossy(&r.name).into_owned();
                let Some(meta) = lib.functions.iter().find(|f| f.name == name) else {
                    continue;
                };
                self.functions.insert(
                    name.to_ascii_lowercase(),
                    LoadedFunction {
                        func: r.func,
                        name: meta.name.clone(),
                        flags: meta.flags,
                        library: lib.clone(),
                    },
                );
            }
        }
        self.generation = generation;
    }

    pub fn get(&self, name: &[u8]) -> Option<&LoadedFunction> {
        self.functions
            .get(&String::from_utf8_lossy(name).to_ascii_lowercase())
    }
}

/// Loads libraries read back from a snapshot (or a journal's base file),
/// replacing any of the same name, on this thread's interpreter first to
/// learn their functions.
pub fn load_codes(shared: &crate::shared::Shared, codes: &[Vec<u8>]) -> Result<(), String> {
    load_codes_as(shared, codes, Policy::Replace)
}

/// `load_codes` with the rule for the libraries already there:
/// `Policy::Flush` drops them first (DEBUG RELOAD, as Redis's `emptyData`
/// empties the functions with the data), `Policy::Append` refuses a name
/// already there (DEBUG RELOAD NOFLUSH without MERGE, as Redis's load
/// without RDBFLAGS_ALLOW_DUP does).
pub fn load_codes_as(
    shared: &crate::shared::Shared,
    codes: &[Vec<u8>],
    policy: Policy,
) -> Result<(), String> {
    if codes.is_empty() && policy != Policy::Flush {
        return Ok(());
    }
    let mut libs = Vec::with_capacity(codes.len());
    for code in codes {
        let name = library_name(code)?;
        let mut host = LoadHost {
            quiet: false,
            deadline: None,
        };
        let registered = super::run::with_vm(shared, |wvm| wvm.vm.load_library(code, &mut host))
            .map_err(|e| String::from_utf8_lossy(&e.message_bytes()).into_owned())?
            .map_err(|e| String::from_utf8_lossy(&e).into_owned())?;
        libs.push(Library {
            name,
            code: Arc::from(&code[..]),
            functions: describe(&registered)?,
            footprint: Default::default(),
        });
    }
    shared.scripts.functions.add(libs, policy)
}

/// FUNCTION DUMP's payload: each library's code as Redis writes it
/// (`RDB_OPCODE_FUNCTION2` and an RDB string), then Redis's footer, so a
/// dump moves between Cairn and Redis 7.0 both ways.
pub fn dump(registry: &Registry) -> Vec<u8> {
    use cairn_persist::rdb;
    let mut out = Vec::new();
    for lib in registry.libraries() {
        out.push(rdb::OPCODE_FUNCTION2);
        rdb::put_string(&mut out, &lib.code);
    }
    rdb::seal_dump(&mut out);
    out
}

/// The library codes in a FUNCTION RESTORE payload, or Redis's error.
pub fn undump(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    use cairn_persist::rdb;
    let body = rdb::open_dump(payload).ok_or("ERR DUMP payload version or checksum are wrong")?;
    let mut r = rdb::Reader::new(body);
    let mut codes = Vec::new();
    while !r.is_empty() {
        match r.byte() {
            Ok(rdb::OPCODE_FUNCTION2) => {}
            Ok(rdb::OPCODE_FUNCTION_PRE_GA) => {
                return Err("ERR Pre-GA function format not supported")
            }
            _ => return Err("ERR given type is not a function"),
        }
        codes.push(r.string().map_err(|_| "ERR Failed loading library")?);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_metadata_is_read_as_redis_reads_it() {
        assert_eq!(library_name(b"#!lua name=lib1\nx"), Ok("lib1".into()));
        assert_eq!(library_name(b"#!LUA name=up\nx"), Ok("up".into()));
        // Redis splits the line with sdssplitargs: quotes are taken off,
        // the key is matched in any case, and `#!` alone names engine "".
        assert_eq!(library_name(b"#!lua name=\"foo\"\nx"), Ok("foo".into()));
        assert_eq!(library_name(b"#!lua NAME=foo\nx"), Ok("foo".into()));
        assert_eq!(
            library_name(b"#! name=test\nx"),
            Err("ERR Engine '' not found".into())
        );
        assert_eq!(
            library_name(b"#!lua name=\"foo\nx"),
            Err("ERR Invalid library metadata".into())
        );
        assert_eq!(
            library_name(b"redis.register_function()"),
            Err("ERR Missing library metadata".into())
        );
        assert_eq!(
            library_name(b"#!lua\nx"),
            Err("ERR Library name was not given".into())
        );
        assert_eq!(
            library_name(b"#!js name=lx\nfoo"),
            Err("ERR Engine 'js' not found".into())
        );
        assert_eq!(
            library_name(b"#!lua name=lx foo=bar\nx"),
            Err("ERR Invalid metadata value given: foo=bar".into())
        );
        assert_eq!(
            library_name(b"#!lua name=bad-name!\nx"),
            Err(LIBRARY_NAME_ERROR.into())
        );
    }

    #[test]
    fn a_dump_restores_what_it_held() {
        let r = Registry::default();
        r.add(
            vec![Library {
                name: "a".into(),
                code: Arc::from(&b"#!lua name=a\ncode"[..]),
                functions: vec![FunctionMeta {
                    name: "f".into(),
                    flags: 0,
                    description: None,
                }],
                footprint: Default::default(),
            }],
            Policy::Append,
        )
        .unwrap();
        let payload = dump(&r);
        assert_eq!(undump(&payload), Ok(vec![b"#!lua name=a\ncode".to_vec()]));
        assert!(undump(b"bad").is_err());
    }

    #[test]
    fn a_redis_dump_restores_here() {
        // FUNCTION DUMP from redis-server 7.0.15 after FUNCTION LOAD of the
        // code below: the code is LZF-compressed, the footer is Redis's.
        let hex = "f5c3408d40aa1f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f0b66756e6374696f6e28276d79400b02272c2040066012186b6579732c2061726773292072657475726e2027746869732020020c6120726174686572206c6f6e67c01d1876616c756520746f206d616b65206c7a6620636f6d70726573203201742ce0100c052720656e64290a006e6d98b206adf58d";
        let payload: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let code = "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 'this is a rather long return value to make lzf compress it, compress it, compress it' end)";
        assert_eq!(undump(&payload), Ok(vec![code.as_bytes().to_vec()]));
    }
}
