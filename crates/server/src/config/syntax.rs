//! Line syntax: tokenizing as Redis's sds helpers do (`sdssplitargs`
//! quoting, `sdscatrepr`), and glob matching of CONFIG GET patterns.

/// C's isspace() in the C locale.
pub(super) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Redis's sdssplitargs: whitespace-separated words, "double quotes" with
/// C escapes (\n \r \t \b \a \xHH), 'single quotes' with only \'. A closing
/// quote must be followed by whitespace or the end. `None` on unbalanced
/// quotes.
pub(super) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    cairn_protocol::resp::split_inline_args(line)
}

pub(super) fn bytes_to_strings(words: Vec<Vec<u8>>) -> Option<Vec<String>> {
    words
        .into_iter()
        .map(|w| String::from_utf8(w).ok())
        .collect()
}

/// Redis's sdscatrepr: a double-quoted string that `split_args` reads back
/// as the same bytes.
pub(super) fn repr(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &c in s {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(c)),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
    out
}

/// Redis trims config lines of these.
pub(super) fn trim_line(line: &[u8]) -> &[u8] {
    let is_trim = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|c| !is_trim(c)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|c| !is_trim(c))
        .map_or(start, |e| e + 1);
    &line[start..end]
}

/// Redis's stringmatchlen: `*`, `?`, `[abc]`, `[^abc]`, `[a-z]`, and `\`
/// to escape. `nocase` folds ASCII case (CONFIG GET uses it; KEYS doesn't).
pub fn string_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    cairn_engine::util::glob::glob_match(pattern, string, nocase)
}

pub(super) fn has_glob_chars(s: &str) -> bool {
    s.contains(['*', '?', '['])
}
