//! Startup loading: the config file, `include`d files and globs, stdin
//! (`-`) and `--directive value` arguments, applied in order as Redis's
//! `loadServerConfigFromString` does; and the usage text.

use super::*;

/// Redis has no limit and recurses until the stack dies; a loop of includes
/// should be a config error instead.
pub(super) const MAX_INCLUDE_DEPTH: usize = 32;

/// Applies configuration lines in order onto a Config, like Redis's
/// loadServerConfigFromString.
pub(super) struct Loader {
    pub(super) config: Config,
    /// Redis resets the default save rules at the first `save` line of a
    /// load and appends for the following ones.
    pub(super) save_seen: bool,
    pub(super) base_dir: Option<PathBuf>,
    pub(super) depth: usize,
}

impl Loader {
    pub(super) fn new() -> Loader {
        Loader {
            config: Config::default(),
            save_seen: false,
            base_dir: None,
            depth: 0,
        }
    }

    pub(super) fn load_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = fs::read(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            reason: os_error_text(&e),
        })?;
        self.load_text(&text, &Origin::File(path.display().to_string()))
    }

    pub(super) fn load_text(&mut self, text: &[u8], origin: &Origin) -> Result<(), ConfigError> {
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            self.load_line(line, origin, i + 1)?;
        }
        Ok(())
    }

    pub(super) fn load_line(
        &mut self,
        raw: &[u8],
        origin: &Origin,
        line: usize,
    ) -> Result<(), ConfigError> {
        let text = trim_line(raw);
        if text.is_empty() || text[0] == b'#' {
            return Ok(());
        }
        let fail = |reason: &str| ConfigError::Line {
            origin: origin.clone(),
            line,
            text: String::from_utf8_lossy(text).into_owned(),
            reason: reason.to_string(),
        };
        let words =
            split_args(text).ok_or_else(|| fail("Unbalanced quotes in configuration line"))?;
        if words.is_empty() {
            return Ok(());
        }
        let argv = bytes_to_strings(words).ok_or_else(|| fail("argument is not valid UTF-8"))?;
        let name = argv[0].to_ascii_lowercase();
        if name == "replicaof" || name == "slaveof" {
            // `replicaof <host> <port>` (or `no one`), kept as one
            // "host port" string the server reads at start (Redis's
            // `loadServerConfigFromString`).
            if argv.len() != 3 {
                return Err(fail("wrong number of arguments"));
            }
            if argv[1].eq_ignore_ascii_case("no") && argv[2].eq_ignore_ascii_case("one") {
                return self
                    .apply(d_replicaof(), &[String::new()])
                    .map_err(|e| fail(&e));
            }
            if !argv[2]
                .parse::<i64>()
                .is_ok_and(|p| (0..=65535).contains(&p))
            {
                return Err(fail("Invalid master port"));
            }
            let spec = format!("{} {}", argv[1], argv[2]);
            self.apply(d_replicaof(), &[spec]).map_err(|e| fail(&e))
        } else if let Some((d, _)) = lookup(&name) {
            self.apply(d, &argv[1..]).map_err(|e| fail(&e))
        } else if name == "include" && argv.len() == 2 {
            if self.depth >= MAX_INCLUDE_DEPTH {
                return Err(fail(
                    "include nesting is too deep (do included files include each other?)",
                ));
            }
            self.include(&argv[1])
        } else if name == "user" {
            // Checked when the registry is built at start (Redis checks the
            // syntax here and the commands after modules load).
            if argv.len() < 2 {
                return Err(fail("Bad directive or wrong number of arguments"));
            }
            self.config.user_lines.push(argv[1..].to_vec());
            Ok(())
        } else if name == "rename-command" {
            Err(fail("rename-command is not supported by Cairn"))
        } else {
            Err(fail("Bad directive or wrong number of arguments"))
        }
    }

    pub(super) fn apply(&mut self, d: &'static Directive, args: &[String]) -> Result<(), String> {
        let args = if d.kind.multi_arg() {
            // `--bind "a b"` arrives as one argument: split it like Redis.
            match args {
                [one] if !one.is_empty() => split_args(one.as_bytes())
                    .ok_or("Unbalanced quotes in configuration line")?
                    .into_iter()
                    .map(|w| {
                        String::from_utf8(w).map_err(|_| "argument is not valid UTF-8".to_string())
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => args.to_vec(),
            }
        } else if args.len() != 1 {
            return Err("wrong number of arguments".into());
        } else {
            args.to_vec()
        };
        let current = (d.get)(&self.config);
        let mut value = d.kind.parse(&args, &current)?;
        if let (Value::Save(new), Value::Save(old)) = (&mut value, &current) {
            if self.save_seen {
                let mut all = old.clone();
                all.append(new);
                *new = all;
            }
            self.save_seen = true;
        }
        let value = (d.refine)(
            value,
            &Ctx {
                base_dir: self.base_dir.as_deref(),
            },
        )?;
        d.store(&mut self.config, &value)?;
        if d.name == "dir" {
            self.base_dir = Some(PathBuf::from(&self.config.dir));
        }
        Ok(())
    }

    /// Redis's include: a path with wildcards includes every match in
    /// order and silently nothing when there's no match; a plain path must
    /// be readable. Relative paths resolve against the working directory
    /// at that point of the load (the last `dir`).
    pub(super) fn include(&mut self, pattern: &str) -> Result<(), ConfigError> {
        let path = match &self.base_dir {
            Some(base) if Path::new(pattern).is_relative() => base.join(pattern),
            _ => PathBuf::from(pattern),
        };
        let files = if has_glob_chars(pattern) {
            glob(&path)
        } else {
            vec![path]
        };
        for file in files {
            self.depth += 1;
            let result = self.load_file(&file);
            self.depth -= 1;
            result?;
        }
        Ok(())
    }
}

/// glob(3) for `include`: wildcards in any path component, matches sorted,
/// `*` not matching a leading dot, only regular files kept.
pub(super) fn glob(pattern: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::new()];
    for comp in pattern.components() {
        let part = comp.as_os_str();
        let part_str = part.to_string_lossy();
        if !matches!(comp, Component::Normal(_)) || !has_glob_chars(&part_str) {
            for p in &mut found {
                p.push(part);
            }
            continue;
        }
        // glob(3) negates classes with '!' as well as '^'.
        let pat = part_str.replace("[!", "[^");
        let mut next = Vec::new();
        for base in &found {
            let dir = if base.as_os_str().is_empty() {
                Path::new(".")
            } else {
                base.as_path()
            };
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let bytes = name.as_encoded_bytes();
                if bytes.first() == Some(&b'.') && !pat.starts_with('.') {
                    continue;
                }
                if string_match(pat.as_bytes(), bytes, false) {
                    next.push(base.join(&name));
                }
            }
        }
        found = next;
    }
    found.retain(|p| p.is_file());
    found.sort();
    found
}

/// Turns `redis-server`-style arguments into config lines, exactly as
/// Redis's main() does: `--name` starts a line, following arguments are
/// appended quoted until the next `--name` (an argument right after a bare
/// `--name` is always its value, even if it starts with `--`). A bare
/// `--save` followed by another option, or last, means `save ""`. `-` as
/// the first or last argument means "also read stdin".
pub(super) fn command_line_lines(
    args: &[String],
    first_index: usize,
    total: usize,
) -> (Vec<String>, bool) {
    let mut lines: Vec<String> = Vec::new();
    let mut from_stdin = false;
    let mut value_pending = false;
    for (offset, arg) in args.iter().enumerate() {
        let j = first_index + offset;
        if arg == "-" && (j == 0 || j + 1 == total) {
            from_stdin = true;
        } else if !value_pending && arg.starts_with("--") {
            let mut line = format!("{} ", &arg[2..]);
            let words = split_args(arg.as_bytes()).map_or(0, |w| w.len());
            if words == 1 {
                value_pending = true;
                if arg.eq_ignore_ascii_case("--save") {
                    let next_is_option = args.get(offset + 1).is_some_and(|a| a.starts_with("--"));
                    if next_is_option || j + 1 == total {
                        line.push_str("\"\"");
                        value_pending = false;
                    }
                }
            } else {
                // "--port 6380" as one argument carries its own value.
                value_pending = false;
            }
            lines.push(line);
        } else {
            if lines.is_empty() {
                lines.push(String::new());
            }
            if let Some(last) = lines.last_mut() {
                last.push_str(&repr(arg.as_bytes()));
                last.push(' ');
            }
            value_pending = false;
        }
    }
    (lines, from_stdin)
}

/// Loads the startup configuration from `cairn`'s arguments (without the
/// program name): an optional config file first (any first argument not
/// starting with `-`), `-` to also read config from stdin, then
/// `--directive value...` options applied on top. `--help`/`--version` are
/// the caller's. `dir` comes back as an absolute path, ready to chdir to.
pub fn load(argv: &[String]) -> Result<Config, ConfigError> {
    load_from(argv, &mut io::stdin().lock())
}

pub(super) fn load_from(argv: &[String], stdin: &mut dyn Read) -> Result<Config, ConfigError> {
    let file = argv.first().filter(|a| !a.starts_with('-'));
    let first_option = usize::from(file.is_some());
    let (lines, from_stdin) = command_line_lines(&argv[first_option..], first_option, argv.len());

    let mut loader = Loader::new();
    if let Some(f) = file {
        loader.load_file(Path::new(f))?;
    }
    if from_stdin {
        let mut text = Vec::new();
        stdin
            .read_to_end(&mut text)
            .map_err(|e| ConfigError::Read {
                path: "stdin".into(),
                reason: os_error_text(&e),
            })?;
        loader.load_text(&text, &Origin::Stdin)?;
    }
    for (i, line) in lines.iter().enumerate() {
        loader.load_line(line.as_bytes(), &Origin::CommandLine, i + 1)?;
    }

    let mut config = loader.config;
    if let Some(f) = file {
        // Absolute, because the caller will chdir to `dir`.
        config.config_file = Some(std::path::absolute(f).unwrap_or_else(|_| PathBuf::from(f)));
    }
    if Path::new(&config.dir).is_relative() {
        if let Ok(Value::Str(abs)) =
            valid_dir(Value::Str(config.dir.clone()), &Ctx { base_dir: None })
        {
            config.dir = abs;
        }
    }
    Ok(config)
}

/// Parses config-file text over the defaults. `origin` names the text in
/// errors. Unlike `load`, `dir` is left relative unless the text sets it.
// The binary loads through `load`; tests and tools parse text directly.
#[cfg_attr(not(test), allow(dead_code))]
pub fn parse_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let mut loader = Loader::new();
    loader.load_text(text.as_bytes(), &Origin::File(origin.to_string()))?;
    Ok(loader.config)
}

/// The `--help` text.
pub fn usage() -> String {
    "Usage: cairn [/path/to/cairn.conf] [options] [-]\n\
     \x20      cairn - (read config from stdin)\n\
     \x20      cairn -v or --version\n\
     \x20      cairn -h or --help\n\
     \n\
     Every configuration directive can also be given as an option:\n\
     --<directive> <value> [<value> ...], applied after the config file.\n\
     \n\
     Examples:\n\
     \x20      cairn (run the server with default conf)\n\
     \x20      echo 'maxmemory 128mb' | cairn -\n\
     \x20      cairn /etc/cairn/6379.conf\n\
     \x20      cairn --port 7777\n\
     \x20      cairn --port 6380 --maxmemory 1gb --maxmemory-policy allkeys-lru\n\
     \x20      cairn --bind \"127.0.0.1 ::1\" --save ''\n\
     \x20      cairn /etc/mycairn.conf --loglevel verbose -\n\
     \x20      cairn /etc/mycairn.conf --loglevel verbose\n"
        .to_string()
}

/// The `replicaof` directive (a line names it with two words; the table
/// holds them as one).
fn d_replicaof() -> &'static Directive {
    lookup("replicaof")
        .map(|(d, _)| d)
        .expect("replicaof is in the directive table")
}
