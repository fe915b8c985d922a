//! Whole RDB files as start-up reads them (`rdb::file::Reader`), from
//! arbitrary bytes: the header, every opcode (AUX, FUNCTION2, SELECTDB,
//! RESIZEDB, expire times, IDLE, FREQ), each value's framing and object,
//! the EOF and its CRC-64. The bytes are also read behind a valid
//! `REDIS0010` header, so the fuzzer spends its time past the magic.
#![no_main]
use cairn_persist::rdb::file::Reader;
use cairn_persist::snapshot::format::BuildLimits;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fn read_all(bytes: &[u8]) {
    let limits = BuildLimits::default();
    let Ok(mut r) = Reader::new(bytes, Path::new("fuzz.rdb")) else {
        return;
    };
    while let Ok(Some(_)) = r.next(&limits) {}
}

fuzz_target!(|data: &[u8]| {
    read_all(data);
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(data);
    read_all(&file);
});
