//! Per-directive checks and adjustments after the generic parse (Redis's
//! `is_valid_fn` and apply functions), and the values Cairn cannot honour
//! yet.

use super::*;

/// What validation may depend on besides the value.
pub(super) struct Ctx<'a> {
    /// Directory relative `dir` values resolve against: the previous `dir`
    /// of the same startup load (Redis chdir()s as it parses), else the
    /// process's working directory.
    pub(super) base_dir: Option<&'a Path>,
}

pub(super) type Refine = fn(Value, &Ctx) -> Result<Value, String>;

pub(super) fn keep(v: Value, _: &Ctx) -> Result<Value, String> {
    Ok(v)
}

/// Redis accepts any hz but runs between 1 and 500, and shows the clamped
/// value in CONFIG GET.
pub(super) fn clamp_hz(v: Value, _: &Ctx) -> Result<Value, String> {
    match v {
        Value::Int(n) => Ok(Value::Int(n.clamp(1, 500))),
        other => Ok(other),
    }
}

/// `oom-score-adj relative` is `yes` (Redis maps both names to one value
/// and CONFIG GET shows the first, `yes`).
pub(super) fn fold_oom_relative(v: Value, _: &Ctx) -> Result<Value, String> {
    match v {
        Value::Enum(i) if i == OomScoreAdj::RelativeName as usize => {
            Ok(Value::Enum(OomScoreAdj::Relative as usize))
        }
        other => Ok(other),
    }
}

/// Redis's isValidProcTitleTemplate: the template must expand (known
/// variables, closed braces) to something non-blank with an empty title.
pub(super) fn valid_proc_title_template(v: Value, _: &Ctx) -> Result<Value, String> {
    match &v {
        Value::Str(s) if !proc_title_template_is_valid(s) => {
            Err("template format is invalid or contains unknown variables".into())
        }
        _ => Ok(v),
    }
}

/// Redis's validateProcTitleTemplate: `sdstemplate` with `{{` for a
/// literal `{`, `{name}` for one of the variables, then trimmed of spaces;
/// invalid when expansion fails or leaves nothing. The variables expand as
/// they would before listening (`title` empty, `server-mode` empty in a
/// server that is neither a cluster node nor a sentinel; the others to
/// something non-empty).
pub(super) fn proc_title_template_is_valid(template: &str) -> bool {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return false;
        }
        if let Some(tail) = after.strip_prefix('{') {
            out.push('{');
            rest = tail;
            continue;
        }
        let Some(close) = after.find('}') else {
            return false;
        };
        match &after[..close] {
            "title" | "server-mode" | "unixsocket" => {}
            "listen-addr" | "port" | "tls-port" | "config-file" => out.push('x'),
            _ => return false,
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    !out.trim_matches(' ').is_empty()
}

/// Redis's isValidAOFdirname.
pub(super) fn valid_appenddirname(v: Value, _: &Ctx) -> Result<Value, String> {
    match &v {
        Value::Str(s) if s.is_empty() => Err("appenddirname can't be empty".into()),
        Value::Str(s) if !is_base_name(s) => {
            Err("appenddirname can't be a path, just a dirname".into())
        }
        _ => Ok(v),
    }
}

/// Redis's pathIsBaseName.
pub(super) fn is_base_name(s: &str) -> bool {
    !s.contains('/') && !s.contains('\\')
}

pub(super) fn valid_dbfilename(v: Value, _: &Ctx) -> Result<Value, String> {
    match &v {
        Value::Str(s) if !is_base_name(s) => {
            Err("dbfilename can't be a path, just a filename".into())
        }
        _ => Ok(v),
    }
}

pub(super) fn valid_appendfilename(v: Value, _: &Ctx) -> Result<Value, String> {
    match &v {
        Value::Str(s) if s.is_empty() => Err("appendfilename can't be empty".into()),
        Value::Str(s) if !is_base_name(s) => {
            Err("appendfilename can't be a path, just a filename".into())
        }
        _ => Ok(v),
    }
}

/// Redis chdir()s here and reports strerror on failure. Cairn leaves the
/// chdir to the caller, so this only checks the directory exists and stores
/// its absolute path, which is what Redis's CONFIG GET dir shows (getcwd).
pub(super) fn valid_dir(v: Value, ctx: &Ctx) -> Result<Value, String> {
    let Value::Str(s) = &v else { return Ok(v) };
    let path = match ctx.base_dir {
        Some(base) if Path::new(s).is_relative() => base.join(s),
        _ => PathBuf::from(s),
    };
    let abs = fs::canonicalize(&path).map_err(|e| os_error_text(&e))?;
    if !abs.is_dir() {
        return Err("Not a directory".into());
    }
    abs.into_os_string()
        .into_string()
        .map(Value::Str)
        .map_err(|_| "dir is not valid UTF-8".into())
}

/// io::Error's text without Rust's " (os error N)" suffix, i.e. strerror().
pub fn os_error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// `tls-protocols`: TLSv1.2 and/or TLSv1.3; the older versions are refused
/// here, with the reason, since rustls has none of them.
pub(super) fn valid_tls_protocols(v: Value, _: &Ctx) -> Result<Value, String> {
    if let Value::Str(s) = &v {
        crate::net::tls_config::parse_protocols(s)?;
    }
    Ok(v)
}

/// `tls-ciphers`: OpenSSL TLS 1.2 names that rustls implements.
pub(super) fn valid_tls_ciphers(v: Value, _: &Ctx) -> Result<Value, String> {
    if let Value::Str(s) = &v {
        crate::net::tls_config::parse_ciphers(s)?;
    }
    Ok(v)
}

/// `tls-ciphersuites`: TLS 1.3 names that rustls implements.
pub(super) fn valid_tls_ciphersuites(v: Value, _: &Ctx) -> Result<Value, String> {
    if let Value::Str(s) = &v {
        crate::net::tls_config::parse_ciphersuites(s)?;
    }
    Ok(v)
}

/// Redis's isValidAnnouncedHostname (branch cluster): `cluster-announce-hostname`.
pub(super) fn valid_announced_hostname(v: Value, _: &Ctx) -> Result<Value, String> {
    match &v {
        Value::Str(s) if s.len() >= 256 => Err("Hostnames must be less than 256 characters".into()),
        Value::Str(s)
            if !s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') =>
        {
            Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into())
        }
        _ => Ok(v),
    }
}
