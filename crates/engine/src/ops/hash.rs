//! Hash commands: being written.
