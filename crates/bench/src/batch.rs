//! stub
pub fn command(_a: crate::cli::BatchCmd) -> Result<(), String> { Err("todo".into()) }
