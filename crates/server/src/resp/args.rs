//! Parsing of argument values shared by every family, with Redis's errors.
use crate::resp::errors::CmdError;
use cairn_engine::util::num;

/// An integer argument (`getLongLongFromObjectOrReply`).
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    num::parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// A non-negative integer argument that must fit usize.
pub fn uint(arg: &[u8]) -> Result<u64, CmdError> {
    match num::parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        Some(_) => Err(CmdError::NotPositive),
        None => Err(CmdError::NotInteger),
    }
}

/// A float argument (`getDoubleFromObjectOrReply`).
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    num::parse_f64_strict(arg).ok_or(CmdError::NotFloat)
}

/// Case-insensitive comparison with an ASCII keyword.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A database index argument, checked against the configured count.
pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, CmdError> {
    let n = num::parse_i64(arg).ok_or(CmdError::NotInteger)?;
    if n < 0 || n as usize >= databases {
        return Err(CmdError::text("ERR DB index is out of range"));
    }
    Ok(n as usize)
}
