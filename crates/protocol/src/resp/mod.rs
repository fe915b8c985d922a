//! RESP2/RESP3 codec (Redis serialization protocol,
//! redis/redis-specifications `protocol/RESP2.md` and `RESP3.md`), with
//! Redis 7.0 as the reference for every byte the server reads or writes.
//!
//! - `request`: server side, requests in (multibulk and inline).
//! - `reply`: server side, replies out.
//! - `frame`: client side, any frame in, commands and frames out.
//! - `float`: `%.17g` double formatting shared by replies.

mod float;
mod frame;
mod reply;
mod request;

pub use float::format_g17;
pub use frame::{
    decode_frame, encode_command, encode_frame, frame_len, Frame, FrameError, MAX_DEPTH, MAX_LEN,
};
pub use reply::{Protocol, ReplyWriter};
pub use request::{parse_request, split_inline_args, ArgList, Limits, Parsed, ProtocolError};
