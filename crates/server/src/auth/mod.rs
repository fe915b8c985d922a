//! Who a client is: the credentials AUTH, HELLO AUTH and memcached's SASL
//! line check. Today one user, `default`, with `requirepass` as its
//! password; ACL users and their command rules will live here, and
//! `exec::admission` will ask this module what a client may run.
use crate::shared::Shared;

// The ACL model comes first, with its tests against Redis's descriptions;
// ACL commands, AUTH with users and the admission check use it next
// (issue 23), until then parts of it have no caller.
#[allow(dead_code)]
pub mod acl;

/// True if `user`/`pass` name the default user with its password (any
/// password while requirepass is empty: the user is then `nopass`).
pub fn credentials_ok(shared: &Shared, user: &[u8], pass: &[u8]) -> bool {
    if user != b"default" {
        return false;
    }
    let cfg = shared.config.read();
    let want = cfg.requirepass.as_bytes();
    want.is_empty() || constant_time_eq(want, pass)
}

/// Compares without an early exit on the first differing byte, so the
/// time taken does not reveal how much of a guess was right (Redis
/// compares SHA-256 digests with `time_independent_strcmp` for the same
/// reason). The length still shows; Redis hides it by hashing first.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() != b.len()) as u8;
    for i in 0..n {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret1"));
        assert!(!constant_time_eq(b"secret", b""));
        assert!(!constant_time_eq(b"a\0", b"a"));
    }
}
