//! stub
pub fn command(_a: crate::cli::MemoryCmd) -> Result<(), String> { Err("todo".into()) }
