//! `bit`: LuaBitOp 1.0.2 as Redis 7.0 loads it. Operands are Lua numbers
//! (or strings Lua converts) taken to 32 bits; results are signed 32-bit
//! integers returned as Lua numbers.
//!
//! Operands are normalised the way LuaBitOp does it on a double build:
//! adding 2^52 + 2^51 and keeping the low 32 bits of the sum's
//! representation. That rounds fractions to the nearest even integer and
//! wraps modulo 2^32, and it is also what gives `tobit(1e300)` its value.

use mlua::{Lua, Table, Value};

use super::{Args, Fail, Outcome};

pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    type Op = fn(&Lua, &Args) -> Outcome;
    let funcs: Vec<(&str, Op)> = vec![
        ("tobit", |lua, a| one(barg(lua, a, 1)?)),
        ("bnot", |lua, a| one(!barg(lua, a, 1)?)),
        ("band", |lua, a| fold(lua, a, |x, y| x & y)),
        ("bor", |lua, a| fold(lua, a, |x, y| x | y)),
        ("bxor", |lua, a| fold(lua, a, |x, y| x ^ y)),
        ("lshift", |lua, a| shift(lua, a, |b, n| b << n)),
        ("rshift", |lua, a| shift(lua, a, |b, n| b >> n)),
        ("arshift", |lua, a| {
            shift(lua, a, |b, n| ((b as i32) >> n) as u32)
        }),
        ("rol", |lua, a| shift(lua, a, u32::rotate_left)),
        ("ror", |lua, a| shift(lua, a, u32::rotate_right)),
        ("bswap", |lua, a| one(barg(lua, a, 1)?.swap_bytes())),
        ("tohex", tohex),
    ];
    super::library(lua, funcs)
}

/// Argument `i` as 32 bits (LuaBitOp's `barg`).
fn barg(lua: &Lua, args: &Args, i: usize) -> Result<u32, Fail> {
    match args.to_number(lua, i)? {
        Some(n) => Ok(tobit(n)),
        None => Err(args.type_error(i, "number")?),
    }
}

/// The 2^52 + 2^51 normalisation (see the file comment).
fn tobit(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn one(b: u32) -> Outcome {
    super::one(Value::Number(b as i32 as f64))
}

/// band/bor/bxor: LuaBitOp reads argument 1 first, then the others from
/// the last down, which decides which bad argument is reported.
fn fold(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> Outcome {
    let mut b = barg(lua, args, 1)?;
    for i in (2..=args.len()).rev() {
        b = op(b, barg(lua, args, i)?);
    }
    one(b)
}

fn shift(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> Outcome {
    let b = barg(lua, args, 1)?;
    let n = barg(lua, args, 2)? & 31;
    one(op(b, n))
}

/// `tohex(x [, n])`: the low `|n|` nibbles (8 at most, 8 by default),
/// upper case when `n` is negative.
fn tohex(lua: &Lua, args: &Args) -> Outcome {
    let mut b = barg(lua, args, 1)?;
    let mut n = if args.get(2)?.is_none() {
        8
    } else {
        barg(lua, args, 2)? as i32
    };
    let digits: &[u8; 16] = if n < 0 {
        n = n.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    // -(-2^31) stays negative in C too; Redis's build prints 8 digits.
    if !(0..=8).contains(&n) {
        n = 8;
    }
    let mut buf = vec![0u8; n as usize];
    for slot in buf.iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    super::one(Value::String(lua.create_string(buf)?))
}

#[cfg(test)]
mod tests {
    use super::super::golden;

    /// Every case of `tests/golden/bit.golden`, recorded from redis-server 7.0.
    #[test]
    fn matches_redis() {
        golden::check(include_str!("../../tests/golden/bit.golden"));
    }

    #[test]
    fn normalisation_rounds_half_to_even_and_wraps() {
        assert_eq!(super::tobit(2.5), 2);
        assert_eq!(super::tobit(3.5), 4);
        assert_eq!(super::tobit(-1.0), u32::MAX);
        assert_eq!(super::tobit(4_294_967_296.0 + 7.0), 7);
        assert_eq!(super::tobit(f64::INFINITY), 0);
    }
}
