//! stub
pub fn command(_a: crate::cli::ValuesCmd) -> Result<(), String> { Err("todo".into()) }
