//! Key-space commands (DEL, EXPIRE, RENAME, COPY, ...): being written.
