//! Every error a command can answer, and its exact Redis text. This is the
//! one place error wording lives; handlers return values, never strings
//! scattered through the code.
use cairn_engine::Error as EngineError;
use std::borrow::Cow;

/// A command's failure, turned into a `-` reply by the dispatcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    Engine(EngineError),
    /// `ERR syntax error`
    Syntax,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire(&'static str),
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand {
        sub: Vec<u8>,
        parent: &'static str,
    },
    /// `ERR wrong number of arguments for '<cmd>' command`
    WrongArity(&'static str),
    /// A complete reply text (without the leading `-`) that has no variant
    /// of its own, such as `ERR Client names cannot contain spaces, ...`.
    Text(Cow<'static, str>),
    /// Like `Text`, for texts that quote client bytes verbatim (which need
    /// not be UTF-8), such as the unknown-command error.
    Bytes(Vec<u8>),
}

impl From<EngineError> for CmdError {
    fn from(e: EngineError) -> Self {
        CmdError::Engine(e)
    }
}

impl CmdError {
    pub fn text(msg: impl Into<Cow<'static, str>>) -> CmdError {
        CmdError::Text(msg.into())
    }

    /// The error line without the leading `-` and trailing CRLF.
    pub fn message(&self) -> Cow<'static, str> {
        match self {
            CmdError::Engine(e) => Cow::Borrowed(engine_text(*e)),
            CmdError::Syntax => Cow::Borrowed("ERR syntax error"),
            CmdError::NotInteger => Cow::Borrowed("ERR value is not an integer or out of range"),
            CmdError::NotFloat => Cow::Borrowed("ERR value is not a valid float"),
            CmdError::InvalidExpire(cmd) => {
                Cow::Owned(format!("ERR invalid expire time in '{cmd}' command"))
            }
            CmdError::UnknownSubcommand { sub, parent } => Cow::Owned(format!(
                "ERR unknown subcommand '{}'. Try {} HELP.",
                truncate_lossy(sub, 128),
                parent.to_ascii_uppercase()
            )),
            CmdError::WrongArity(cmd) => {
                Cow::Owned(format!("ERR wrong number of arguments for '{cmd}' command"))
            }
            CmdError::Text(t) => t.clone(),
            CmdError::Bytes(b) => Cow::Owned(String::from_utf8_lossy(b).into_owned()),
        }
    }

    /// The error line as bytes, exactly as it goes on the wire (between
    /// `-` and CRLF, before CR/LF are replaced).
    pub fn message_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            CmdError::Bytes(b) => Cow::Borrowed(b),
            other => match other.message() {
                Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            },
        }
    }
}

/// Redis's text for each engine error.
pub fn engine_text(e: EngineError) -> &'static str {
    match e {
        EngineError::WrongType => {
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        }
        EngineError::NotInteger => "ERR value is not an integer or out of range",
        EngineError::NotFloat => "ERR value is not a valid float",
        EngineError::HashNotInteger => "ERR hash value is not an integer",
        EngineError::HashNotFloat => "ERR hash value is not a float",
        EngineError::Overflow => "ERR increment or decrement would overflow",
        EngineError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
        EngineError::NoSuchKey => "ERR no such key",
        EngineError::SameObject => "ERR source and destination objects are the same",
        EngineError::StringTooLong => {
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
        }
        EngineError::DbIndexOutOfRange => "ERR DB index is out of range",
        EngineError::InvalidExpireTime => "ERR invalid expire time",
        EngineError::LcsTooLarge => {
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
        }
        EngineError::Msg(m) => m,
    }
}

/// `%.Ns` of possibly non-UTF-8 bytes, as Redis prints arguments in errors.
pub fn truncate_lossy(b: &[u8], n: usize) -> String {
    String::from_utf8_lossy(&b[..b.len().min(n)]).into_owned()
}

/// `%.Ns` of client bytes: C-string semantics, so a NUL ends it.
fn c_str(b: &[u8], n: usize) -> &[u8] {
    let b = &b[..b.len().min(n)];
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// Redis 7.0's unknown-command text (server.c `processCommand`): the name
/// and the first arguments, each quoted, the argument list capped near 128
/// bytes, every piece printed with `%.*s`, so bytes go out as sent and a
/// NUL cuts the piece short.
pub fn unknown_command<'a>(name: &[u8], args: impl Iterator<Item = &'a [u8]>) -> CmdError {
    let mut list: Vec<u8> = Vec::new();
    for a in args {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push(b'\'');
        list.extend_from_slice(c_str(a, room));
        list.extend_from_slice(b"' ");
    }
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(c_str(name, 128));
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend_from_slice(&list);
    CmdError::Bytes(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_command_quotes_bytes_like_printf() {
        let e = unknown_command(b"fo\0o", [&b"a\xffb"[..], b"c\0d"].into_iter());
        assert_eq!(
            &*e.message_bytes(),
            &b"ERR unknown command 'fo', with args beginning with: 'a\xffb' 'c' "[..]
        );
    }
}
