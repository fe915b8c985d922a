//! Build script for cairn-engine: compiles `csrc/ldouble.c`, the one piece of
//! C in the engine. Redis does INCRBYFLOAT/HINCRBYFLOAT arithmetic in C
//! `long double` (80-bit x87 on x86_64) and parses floats with libc
//! `strtod`/`strtold`; Rust has neither an f80 type nor a byte-compatible
//! `strtod`, so the exact behaviour is obtained by calling the same libc
//! functions Redis calls.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/ldouble.c");
    cc::Build::new()
        .file("csrc/ldouble.c")
        // Redis is built with the default FP model; keep the C compiler from
        // contracting or reassociating, which could change rounding.
        .flag_if_supported("-ffp-contract=off")
        .warnings(true)
        .compile("cairn_ldouble");
}
