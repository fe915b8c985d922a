//! The RESP request parser on arbitrary bytes: it must never panic, and a
//! request fed in reads of arbitrary sizes (the parser resuming where it
//! stopped, as the server feeds it) must parse exactly as the whole buffer
//! does. The first byte picks the read size, the second the limits.
#![no_main]
use cairn_protocol::resp::{parse_request, ArgList, Limits, Parsed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let step = usize::from(data[0] % 64) + 1;
    let limits = Limits {
        max_inline_len: if data[1] & 1 == 0 { 64 * 1024 } else { 32 },
        max_bulk_len: if data[1] & 2 == 0 { 512 << 20 } else { 16 },
        unauthenticated: data[1] & 4 != 0,
        ..Limits::default()
    };
    let input = &data[2..];

    let mut whole = ArgList::new();
    let want = parse_request(input, &limits, &mut whole);

    let mut args = ArgList::new();
    let (mut have, mut wait_for) = (0usize, 0usize);
    let got = loop {
        have = (have + step).min(input.len());
        if have < wait_for && have < input.len() {
            continue;
        }
        match parse_request(&input[..have], &limits, &mut args) {
            Ok(Parsed::Incomplete { min_total }) if have < input.len() => {
                assert!(min_total > have, "min_total {min_total} at {have}");
                wait_for = min_total;
            }
            other => break other,
        }
    };
    assert_eq!(got, want, "split reads disagree with one read");
    if let Ok(Parsed::Complete { .. }) = want {
        let a: Vec<&[u8]> = whole.iter(input).collect();
        let b: Vec<&[u8]> = args.iter(input).collect();
        assert_eq!(a, b);
    }
});
