//! Configuration errors and where the offending line came from, worded as
//! `redis-server` words them.

use super::*;

/// Where a configuration line came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A config file (or the label given to `parse_str`).
    File(String),
    /// `-` on the command line.
    Stdin,
    /// `--directive value` arguments; lines are the synthesized
    /// `directive "value"` lines, counted from 1.
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "'{p}'"),
            Origin::Stdin => f.write_str("stdin"),
            Origin::CommandLine => f.write_str("the command line"),
        }
    }
}

/// A startup configuration error. `Display` gives the text to print before
/// exiting, in Redis's format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// A line was rejected.
    Line {
        origin: Origin,
        /// 1-based line number within `origin`.
        line: usize,
        /// The line, trimmed.
        text: String,
        /// Why, in Redis's words where Redis has them.
        reason: String,
    },
    /// A config file (the main one or an included one) couldn't be read.
    Read { path: String, reason: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Line {
                origin,
                line,
                text,
                reason,
            } => write!(
                f,
                "*** FATAL CONFIG FILE ERROR (Cairn {VERSION}) ***\n\
                 Reading the configuration file, at line {line} of {origin}\n\
                 >>> '{text}'\n\
                 {reason}"
            ),
            ConfigError::Read { path, reason } => {
                write!(f, "Fatal error, can't open config file '{path}': {reason}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}
