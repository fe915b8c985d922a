//! The snapshot block decoder on arbitrary payloads (what lies behind a
//! block's CRC): every value type's decoding and the engine's constructors
//! it calls must refuse bad input without panicking or allocating beyond
//! the payload. Also the function section's parser, and input that starts
//! like a snapshot file is checked as a whole file (sections, counts; a CRC
//! of 0 is not checked, so the fuzzer reaches past them).
#![no_main]
use cairn_persist::snapshot::format::{parse_functions, BuildLimits, Decoder, MAGIC};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = BuildLimits::default();
    let mut d = Decoder::new(data);
    while !d.at_end() {
        if d.record(&limits).is_err() {
            break;
        }
    }
    if let Some((&n, rest)) = data.split_first() {
        let _ = parse_functions(rest, u32::from(n));
    }
    if data.starts_with(MAGIC) {
        let path = std::env::temp_dir().join(format!("cairn-fuzz-snap-{}", std::process::id()));
        std::fs::write(&path, data).expect("write the file image");
        let _ = cairn_persist::snapshot::check(&path);
    }
});
