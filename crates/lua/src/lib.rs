//! Lua 5.1 as Redis 7.0 runs it: the interpreter (PUC Lua 5.1 through
//! `mlua`), the extra libraries Redis loads, and the conversions between
//! Lua values and RESP replies. The server (`cairn-server`'s `script`
//! module) owns the commands; this crate knows nothing of the keyspace.
mod call;
pub mod convert;
pub mod debugger;
pub mod libs;
pub mod vm;

pub use mlua;

/// SHA-1 of `body` as 40 lowercase hex digits: a script's name in the
/// cache and `redis.sha1hex`.
pub fn sha1hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha1hex_matches_redis() {
        // redis-cli SCRIPT LOAD "return 1"
        assert_eq!(
            super::sha1hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
        let lua = mlua::Lua::new();
        let s: String = lua.load("return tostring(10/2)").eval().unwrap();
        assert_eq!(s, "5");
    }
}
