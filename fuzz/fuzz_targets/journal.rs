//! The journal's readers on arbitrary bytes: the frame reader (header,
//! frame lengths, CRCs, torn tails) over a whole file image, and the record
//! decoder over one unit, which the fuzzer reaches without forging CRCs.
#![no_main]
use cairn_engine::record::decode_unit;
use cairn_persist::journal::frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_unit(data);
    let mut frames = 0u64;
    let _ = frame::read(data, data.len() as u64, |_, records| {
        frames += 1;
        assert!(!records.is_empty() || frames > 0);
        Ok(())
    });
    // The same bytes as a file that claims to start right: behind a valid
    // header, only the frames are arbitrary.
    let mut file = frame::header().to_vec();
    file.extend_from_slice(data);
    let _ = frame::read(&file[..], file.len() as u64, |_, _| Ok(()));
});
