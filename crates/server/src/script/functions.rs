//! FUNCTION and FCALL: libraries of named Lua functions, loaded once and
//! kept with the dataset (Redis 7.0 `functions.c`, `function_lua.c`).
use std::sync::atomic::{AtomicU64, Ordering};

/// The libraries every worker's interpreter loads (server-wide).
#[derive(Default)]
pub struct Registry {
    /// Bumped whenever the set of libraries changes.
    generation: AtomicU64,
}

impl Registry {
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> usize {
        0
    }

    pub fn function_count(&self) -> usize {
        0
    }

    pub fn library_count(&self) -> usize {
        0
    }
}

/// What one worker's interpreter has loaded of the registry.
#[derive(Default)]
pub struct Loaded {
    pub generation: u64,
}
