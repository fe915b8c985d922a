//! DUMP / FUNCTION DUMP payloads as RESTORE reads them, from arbitrary
//! bytes: the footer check, then every RDB object encoding a value can
//! come in (strings with integers and LZF, listpacks, ziplists, intsets,
//! zipmaps, quicklists, skiplist sorted sets), building values through the
//! engine's constructors. The bytes are also sealed with a real footer
//! (version and CRC-64), so the fuzzer reaches the decoders past it.
#![no_main]
use cairn_persist::rdb;
use cairn_persist::snapshot::format::BuildLimits;
use libfuzzer_sys::fuzz_target;

fn read_strings(body: &[u8]) {
    let mut r = rdb::Reader::new(body);
    while !r.is_empty() {
        if r.byte().is_err() || r.string().is_err() {
            break;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = BuildLimits::default();
    if let Some(body) = rdb::open_dump(data) {
        read_strings(body);
    }
    let _ = rdb::object::restore(data, &limits);
    let mut payload = data.to_vec();
    rdb::seal_dump(&mut payload);
    let body = rdb::open_dump(&payload).expect("a sealed payload opens");
    read_strings(body);
    let _ = rdb::object::restore(&payload, &limits);
});
