//! DUMP / FUNCTION DUMP payloads as RESTORE reads them, from arbitrary
//! bytes: the footer check, then RDB lengths, integers and LZF strings.
//! The CRC is skipped when it is 0 (as Redis does), so a fuzzer-made
//! payload gets past the footer with its last 8 bytes zeroed.
#![no_main]
use cairn_persist::rdb;
use libfuzzer_sys::fuzz_target;

fn read_all(body: &[u8]) {
    let mut r = rdb::Reader::new(body);
    while !r.is_empty() {
        if r.byte().is_err() || r.string().is_err() {
            break;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(body) = rdb::open_dump(data) {
        read_all(body);
    }
    let mut payload = data.to_vec();
    payload.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
    payload.extend_from_slice(&[0u8; 8]);
    let body = rdb::open_dump(&payload).expect("an unchecked footer opens");
    read_all(body);
});
