//! Glob-style pattern matching for KEYS, SCAN MATCH, HSCAN MATCH and friends.
//!
//! A byte-exact port of Redis 7.0 `stringmatchlen_impl` (`src/util.c`),
//! including its quirks, because clients observe them:
//!
//! * the empty string matches only the empty pattern (the main loop needs a
//!   byte of string to run, so `*` does not match ""; KEYS/SCAN special-case
//!   the one-byte pattern `*` before calling the matcher, and so must our
//!   callers);
//! * an unterminated `[` class matches using the bytes that were there
//!   (`[abc` matches "a"), and `[a-]` is the range `]`..`a`;
//! * `\` inside a class compares case-sensitively even in nocase mode;
//! * class ranges compare C `char`s, which are signed on x86_64/glibc, and in
//!   nocase mode go through glibc `tolower`, which maps negative chars other
//!   than EOF (-1) to their unsigned value;
//! * the pattern is read one byte past its end as a NUL, as Redis reads the
//!   sds terminator.
//!
//! Complexity is kept polynomial the way Redis 7.0 does it: once a `*` has
//! tried every remaining suffix without success, no earlier `*` can succeed
//! by consuming more (`skip_longer`), and recursion deeper than 1000 stars
//! simply fails (Redis's CVE-2022-36021 guard; reproduced because it changes
//! the answer for patterns with more than 1000 separated stars).

/// Redis's limit on `*` recursion (`if (nesting > 1000) return 0;`).
const MAX_NESTING: u32 = 1000;

/// Does `string` match glob `pattern`? `nocase` folds ASCII letters as
/// Redis's `nocase` flag does.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, string, nocase, &mut skip_longer, 0)
}

/// True if `pattern` has no byte the matcher treats specially, so that
/// `glob_match(pattern, s, false)` is exactly `pattern == s`. Lets KEYS and
/// SCAN turn such a pattern into a single lookup. Conservative: an escaped
/// literal such as `a\*` is reported as not literal.
pub fn is_literal(pattern: &[u8]) -> bool {
    !pattern
        .iter()
        .any(|&c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
}

/// glibc `tolower` on a C `char` promoted to `int`, in the "C" locale Redis
/// runs its ctype functions in.
fn c_tolower(c: i32) -> i32 {
    match c {
        0x41..=0x5a => c + 32,
        // glibc's table answers negative non-EOF inputs with the unsigned
        // byte value.
        -128..=-2 => c + 256,
        _ => c,
    }
}

/// A byte as a (signed) C `char` promoted to `int`, as Redis's class ranges
/// see it.
fn c_char(b: u8) -> i32 {
    i32::from(b as i8)
}

fn eq_byte(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        c_tolower(c_char(a)) == c_tolower(c_char(b))
    } else {
        a == b
    }
}

fn match_impl(
    pattern: &[u8],
    string: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: u32,
) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let plen = pattern.len();
    let slen = string.len();
    // Redis reads pattern[patternLen] (the sds NUL terminator) in a few
    // places; every recursive call gets a suffix of the original pattern, so
    // "past the end" is always that terminator.
    let at = |i: usize| pattern.get(i).copied().unwrap_or(0);
    let mut p = 0usize;
    let mut s = 0usize;

    while p < plen && s < slen {
        match pattern[p] {
            b'*' => {
                while at(p + 1) == b'*' {
                    p += 1;
                }
                if p + 1 == plen {
                    return true; // trailing star eats the rest
                }
                while s < slen {
                    if match_impl(
                        &pattern[p + 1..],
                        &string[s..],
                        nocase,
                        skip_longer,
                        nesting + 1,
                    ) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s += 1;
                }
                // The rest of the pattern matches no suffix of the string,
                // so no earlier star can help by consuming more.
                *skip_longer = true;
                return false;
            }
            b'?' => s += 1,
            b'[' => {
                p += 1;
                let not = at(p) == b'^';
                if not {
                    p += 1;
                }
                let sc = string[s];
                let mut matched = false;
                loop {
                    // `p <= plen` holds throughout: every advance below is
                    // guarded by a remaining-length test.
                    let rem = plen - p;
                    let c = at(p);
                    if c == b'\\' && rem >= 2 {
                        p += 1;
                        // Case-sensitive even with nocase, as in Redis.
                        if pattern[p] == sc {
                            matched = true;
                        }
                    } else if c == b']' {
                        break;
                    } else if rem == 0 {
                        // Unterminated class: step back so the increment
                        // after the match lands exactly on the end.
                        p -= 1;
                        break;
                    } else if rem >= 3 && pattern[p + 1] == b'-' {
                        let mut start = c_char(pattern[p]);
                        let mut end = c_char(pattern[p + 2]);
                        let mut ch = c_char(sc);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            start = c_tolower(start);
                            end = c_tolower(end);
                            ch = c_tolower(ch);
                        }
                        p += 2;
                        if ch >= start && ch <= end {
                            matched = true;
                        }
                    } else if eq_byte(pattern[p], sc, nocase) {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s += 1;
            }
            b => {
                let mut lit = b;
                if b == b'\\' && plen - p >= 2 {
                    p += 1;
                    lit = pattern[p];
                }
                if !eq_byte(lit, string[s], nocase) {
                    return false;
                }
                s += 1;
            }
        }
        p += 1;
        if s == slen {
            // Trailing stars match the empty rest of the string.
            while at(p) == b'*' {
                p += 1;
            }
            break;
        }
    }
    p == plen && s == slen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (pattern, string, matches) triples, each answer taken from Redis
    /// 7.0.15: the string was SET as the only key and the pattern run with
    /// KEYS. ("*" alone is left out: KEYS short-circuits it.)
    const REDIS_CASES: &[(&[u8], &[u8], bool)] = &[
        (b"", b"", true),
        (b"**", b"", false),
        (b"?", b"", false),
        (b"**", b"a", true),
        (b"h?llo", b"hello", true),
        (b"h?llo", b"hllo", false),
        (b"h*llo", b"hllo", true),
        (b"h*llo", b"heeeello", true),
        (b"h[ae]llo", b"hello", true),
        (b"h[ae]llo", b"hillo", false),
        (b"h[^e]llo", b"hallo", true),
        (b"h[^e]llo", b"hello", false),
        (b"h[a-b]llo", b"hbllo", true),
        (b"h[b-a]llo", b"hbllo", true),
        (b"h[b-a]llo", b"hcllo", false),
        (b"h\\*llo", b"h*llo", true),
        (b"h\\*llo", b"hello", false),
        (b"a*", b"a", true),
        (b"a**", b"a", true),
        (b"a*b", b"ab", true),
        (b"a*b", b"axxb", true),
        (b"a*b", b"axxbc", false),
        (b"*a", b"a", true),
        (b"*a", b"ba", true),
        (b"*a", b"b", false),
        (b"[abc", b"a", true),
        (b"[abc", b"d", false),
        (b"[", b"a", false),
        (b"[", b"[", false),
        (b"[^", b"a", true),
        (b"[^", b"^", true),
        (b"[a-]", b"]", true),
        (b"[a-]", b"-", false),
        (b"[a-]", b"b", false),
        (b"[]", b"]", false),
        (b"[]]", b"]", false),
        (b"[\\]]", b"]", true),
        (b"[\\", b"\\", true),
        (b"\\", b"\\", true),
        (b"a\\", b"a\\", true),
        (b"[a-z", b"q", true),
        (b"[a-", b"a", true),
        (b"[a-", b"-", true),
        (b"[a-", b"b", false),
        (b"x*[a-", b"xyz-", true),
        (b"?*?", b"ab", true),
        (b"?*?", b"a", false),
        (b"*?", b"a", true),
        (b"*?", b"", false),
        (b"a*", b"", false),
        (b"[\xff-a]", b"a", true),
        (b"[\xff-a]", b"b", false),
        (b"[\xff-a]", b"\xff", true),
        (b"[\xff-a]", b"\xc0", false),
        (b"[a-\x80]", b"\x90", true),
        (b"[a-\x80]", b"b", false),
        (b"[\\a-c]", b"b", false),
        (b"[\\a-c]", b"-", true),
        (b"\\[a]", b"[a]", true),
        (b"[[]", b"[", true),
        (b"[^]]", b"a", false),
        (b"[^]]", b"]", false),
        (b"*[", b"x", false),
        (b"a[", b"a", false),
        (b"h\\", b"h", false),
        (b"\x00", b"\x00", true),
        (b"?\x00", b"a\x00", true),
    ];

    #[test]
    fn matches_redis_table() {
        for &(p, s, want) in REDIS_CASES {
            assert_eq!(
                glob_match(p, s, false),
                want,
                "pattern {:?} string {:?}",
                p,
                s
            );
        }
    }

    #[test]
    fn nocase() {
        assert!(glob_match(b"HELLO", b"hello", true));
        assert!(glob_match(b"h[A-Z]llo", b"hello", true));
        assert!(!glob_match(b"h[A-Z]llo", b"hello", false));
        // Escapes inside a class stay case-sensitive.
        assert!(!glob_match(b"[\\A]", b"a", true));
        // Signed chars: case-sensitively `[\x80-a]` is -128..=97, so it
        // holds 0x80 and 'Z' but not 'z'. With nocase, glibc tolower maps
        // -128 to 128 and the range becomes 128..=97: empty. 0xff is -1
        // (EOF), which tolower leaves alone. (Checked against the C code.)
        assert!(glob_match(b"[\x80-a]", b"\x80", false));
        assert!(glob_match(b"[\x80-a]", b"Z", false));
        assert!(!glob_match(b"[\x80-a]", b"z", false));
        assert!(!glob_match(b"[\x80-a]", b"\x80", true));
        assert!(!glob_match(b"[\x80-a]", b"a", true));
        assert!(glob_match(b"[\xff-a]", b"A", true));
        assert!(glob_match(b"[\xff-a]", b"\xff", true));
    }

    #[test]
    fn pathological_patterns_are_fast() {
        let s = vec![b'a'; 5000];
        let mut p = Vec::new();
        for _ in 0..200 {
            p.extend_from_slice(b"a*");
        }
        p.push(b'b');
        let t = std::time::Instant::now();
        assert!(!glob_match(&p, &s, false));
        assert!(t.elapsed().as_secs() < 5);
    }

    #[test]
    fn nesting_guard() {
        // Checked against Redis 7.0.15 KEYS: 1000 separated stars match,
        // 1001 exceed the nesting guard and fail.
        let mk = |n: usize| {
            let mut p = Vec::new();
            for _ in 0..n {
                p.extend_from_slice(b"*a");
            }
            p
        };
        let s = vec![b'a'; 1100];
        assert!(glob_match(&mk(999), &s, false));
        assert!(glob_match(&mk(1000), &s, false));
        assert!(!glob_match(&mk(1001), &s, false));
    }

    #[test]
    fn literal() {
        assert!(is_literal(b"user:1000"));
        assert!(is_literal(b""));
        assert!(is_literal(b"a]b^c-"));
        assert!(!is_literal(b"user:*"));
        assert!(!is_literal(b"a?"));
        assert!(!is_literal(b"[a]"));
        assert!(!is_literal(b"a\\b"));
    }
}
