//! stub
pub fn command(_a: crate::cli::GetSetCmd) -> Result<(), String> { Err("todo".into()) }
