//! The value log's recovery scan on arbitrary segment files: behind a
//! valid header (so the fuzzer reaches the records without forging the
//! header's CRC) and as raw bytes. Whatever the open accepts must read
//! back: every record the scan kept is read by its pointer and equals
//! what the walk saw, and nothing panics.
#![no_main]
use cairn_persist::vlog::{format, Log, Options};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

fn dir() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    // /dev/shm when there is one: a file per input on a disk is slow.
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!(
        "cairn-fuzz-vlog-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fn check(file: &[u8]) {
    let d = dir();
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("0000000001.vlog"), file).unwrap();
    let opts = Options {
        buffer_size: 4096,
        ..Options::default()
    };
    if let Ok(log) = Log::open(&d, 0, opts) {
        let mut seen = Vec::new();
        if log
            .compact(1, |ptr, rec| {
                seen.push((ptr, rec.key.to_vec(), rec.value.to_vec()));
                false
            })
            .is_ok()
        {
            for (ptr, key, value) in seen {
                let f = log.read(ptr).unwrap();
                assert_eq!((f.key(), f.value()), (&key[..], &value[..]));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

fuzz_target!(|data: &[u8]| {
    let mut file = format::segment_header(0, 1).to_vec();
    file.extend_from_slice(data);
    check(&file);
    check(data);
});
