//! The memcached text and meta protocol decoder on arbitrary bytes: every
//! request in the buffer is decoded in turn, as the server does, and
//! nothing may panic or consume more than it was given.
#![no_main]
use cairn_protocol::memcache::{Decoded, Decoder, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_value: if knobs & 1 == 0 { 1 << 20 } else { 8 },
        no_memory: knobs & 2 != 0,
        ..Limits::default()
    };
    let mut d = Decoder::new();
    let mut pos = 0;
    // Each step consumes at least one byte or stops, so this ends.
    while pos < input.len() {
        let consumed = match d.decode(&input[pos..], &limits) {
            Decoded::Request { consumed, .. } | Decoded::Skipped { consumed } => consumed,
            Decoded::Incomplete { min_total } => {
                assert!(min_total > input.len() - pos);
                break;
            }
            Decoded::Block { .. } => unreachable!("big_value is off"),
            Decoded::Close => break,
        };
        assert!(consumed > 0 && consumed <= input.len() - pos);
        pos += consumed;
    }
});
