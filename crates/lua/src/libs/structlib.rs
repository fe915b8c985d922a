//! `struct`: Roberto Ierusalimschy's struct library (0.2) as Redis 7.0
//! loads it, with Redis's fixes (integers up to 32 bytes, overflow-checked
//! sizes, offsets checked against the data). `pack(fmt, ...)`,
//! `unpack(fmt, s [, pos])` (the values, then the next position) and
//! `size(fmt)`.
//!
//! Formats: `>` big endian, `<` little endian (the default, x86-64's native
//! order), `![n]` maximum alignment n (8 when absent; a power of 2), space
//! ignored; `x` a zero byte; `b B h H l L T` integers of 1, 2, 8 and 8
//! bytes (`T` is size_t), `i[n] I[n]` integers of n bytes (4 by default),
//! lower case signed; `f d` float and double; `s` a zero-terminated string;
//! `c[n]` n bytes (`c0`: the whole argument when packing, a length taken
//! from the previous value when unpacking).
//!
//! Integers pass through 64 bits as in the C code: wider fields are zero
//! filled (or read from their low 8 bytes), numbers out of range wrap the
//! way x86-64 converts doubles, and `I8` above 2^53 loses precision.

use mlua::{Lua, Table, Value};

use super::{c_i64, Args, Fail, Outcome, Ret, MAX_C_STACK};

/// `MAXINTSIZE`.
const MAX_INT_SIZE: usize = 32;
/// `MAXALIGN`: the alignment `!` sets without a number.
const MAX_ALIGN: usize = 8;

pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    type Op = fn(&Lua, &Args) -> Outcome;
    let funcs: Vec<(&str, Op)> = vec![("pack", pack), ("unpack", unpack), ("size", size)];
    super::library(lua, funcs)
}

#[derive(Clone, Copy)]
struct Header {
    big: bool,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header {
            big: false,
            align: 1,
        }
    }
}

/// A walk over a format string, which ends at its end or at a NUL byte
/// (the C code reads it as a C string).
struct Format<'a> {
    fmt: &'a [u8],
    pos: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        match self.fmt.get(self.pos) {
            Some(&c) if c != 0 => {
                self.pos += 1;
                Some(c)
            }
            _ => None,
        }
    }

    /// `getnum`: a decimal number at the cursor, or `default`.
    fn number(&mut self, default: usize) -> Result<usize, Fail> {
        if !self.fmt.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i32 = 0;
        while let Some(&c) = self.fmt.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = i32::from(c - b'0');
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return Err(Fail::msg("integral size overflow"));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    /// `optsize`: the size of option `opt`, reading its number if it has one.
    fn size(&mut self, opt: u8) -> Result<usize, Fail> {
        Ok(match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let n = self.number(4)?;
                if n > MAX_INT_SIZE {
                    return Err(Fail::msg(format!(
                        "integral size {n} is larger than limit of {MAX_INT_SIZE}"
                    )));
                }
                n
            }
            _ => 0,
        })
    }

    /// `controloptions`: endianness, alignment, spaces; anything else is
    /// an invalid option.
    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), Fail> {
        match opt {
            b' ' => {}
            b'>' => h.big = true,
            b'<' => h.big = false,
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if !(a as i32 > 0 && a & (a - 1) == 0) {
                    return Err(Fail::msg(format!("alignment {a} is not a power of 2")));
                }
                h.align = a;
            }
            _ => {
                let mut msg = b"invalid format option '".to_vec();
                msg.push(opt);
                msg.push(b'\'');
                return Err(Fail::Arg(1, msg));
            }
        }
        Ok(())
    }
}

/// `gettoalign`: padding before an item of `size` at offset `len`. The C
/// formula, kept as it is: with `!` set to more than an odd size (`i3`) it
/// pads to that size's "alignment" in its own way.
fn padding(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let align = size.min(h.align);
    (align.wrapping_sub(len & (align.wrapping_sub(1)))) & (align.wrapping_sub(1))
}

/// C's `(unsigned long)d` as gcc compiles it for x86-64.
fn c_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO_63 {
        (c_i64(d - TWO_63) as u64) ^ (1 << 63)
    } else {
        c_i64(d) as u64
    }
}

fn pack(lua: &Lua, args: &Args) -> Outcome {
    let fmt = args.check_bytes(lua, 1)?;
    let fmt = fmt.as_bytes();
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let mut out = Vec::new();
    let mut arg = 2;
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        let pad = padding(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = pack_number(lua, args, arg)?;
                arg += 1;
                let mut value = if n < 0.0 { c_i64(n) as u64 } else { c_u64(n) };
                let mut field = [0u8; MAX_INT_SIZE];
                for byte in field.iter_mut().take(size) {
                    *byte = value as u8;
                    value >>= 8;
                }
                let field = &mut field[..size];
                if h.big {
                    field.reverse();
                }
                out.extend_from_slice(field);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = pack_number(lua, args, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    n.to_be_bytes()
                } else {
                    n.to_le_bytes()
                });
            }
            b'd' => {
                let n = pack_number(lua, args, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    n.to_be_bytes()
                } else {
                    n.to_le_bytes()
                });
            }
            b'c' | b's' => {
                let s = pack_string(lua, args, arg)?;
                arg += 1;
                let s = s.as_bytes();
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // luaL_argcheck after `arg++`: the next argument's number.
                    return Err(Fail::arg(arg, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h)?,
        }
    }
    super::one(Value::String(lua.create_string(out)?))
}

/// `luaL_checknumber(L, arg)` in `b_pack`, which pushed a nil just above
/// its arguments: one past the last argument reads "got nil".
fn pack_number(lua: &Lua, args: &Args, arg: usize) -> Result<f64, Fail> {
    match arg.cmp(&(args.len() + 1)) {
        std::cmp::Ordering::Equal => Err(Fail::arg(arg, "number expected, got nil")),
        _ => args.check_number(lua, arg),
    }
}

/// `luaL_checklstring` in `b_pack` (see [`pack_number`]).
fn pack_string(lua: &Lua, args: &Args, arg: usize) -> Result<mlua::String, Fail> {
    match arg.cmp(&(args.len() + 1)) {
        std::cmp::Ordering::Equal => Err(Fail::arg(arg, "string expected, got nil")),
        _ => args.check_bytes(lua, arg),
    }
}

/// `getinteger`: at most the low 8 bytes survive, as in the C code's
/// 64-bit accumulator; the sign mask's shift wraps as x86-64's does.
fn get_integer(bytes: &[u8], big: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut push = |b: u8| l = (l << 8) | u64::from(b);
    if big {
        bytes.iter().copied().for_each(&mut push);
    } else {
        bytes.iter().rev().copied().for_each(&mut push);
    }
    if !signed {
        return l as f64;
    }
    let mask = u64::MAX.wrapping_shl((bytes.len() * 8).wrapping_sub(1) as u32);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &Args) -> Outcome {
    let fmt = args.check_bytes(lua, 1)?;
    let fmt = fmt.as_bytes();
    let data = args.check_bytes(lua, 2)?;
    let data = data.as_bytes();
    let ld = data.len();
    // size_t arithmetic as in C: a negative offset becomes huge and fails
    // the length check below.
    let mut pos = args.opt_integer(lua, 3, 1)? as usize;
    if pos == 0 {
        return Err(Fail::arg(3, "offset must be 1 or greater"));
    }
    pos -= 1;
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let results = lua.create_table()?;
    let mut n = 0usize;
    let too_short = || Fail::arg(2, "data string too short");
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        pos = pos.wrapping_add(padding(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(too_short());
        }
        // luaL_checkstack(L, 2, "too many results") over the arguments
        // and the results so far.
        if args.len() + n + 2 > MAX_C_STACK {
            return Err(Fail::msg("stack overflow (too many results)"));
        }
        let field = &data[pos..pos + size];
        let value = match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => Some(Value::Number(
                get_integer(field, h.big, opt.is_ascii_lowercase()),
            )),
            b'x' => None,
            b'f' => {
                let b: [u8; 4] = field.try_into().expect("size 4");
                let v = if h.big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                Some(Value::Number(f64::from(v)))
            }
            b'd' => {
                let b: [u8; 8] = field.try_into().expect("size 8");
                let v = if h.big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                Some(Value::Number(v))
            }
            b'c' => {
                if size == 0 {
                    let previous = if n == 0 {
                        None
                    } else {
                        lua.coerce_number(results.raw_get::<Value>(n)?)?
                    };
                    let Some(len) = previous else {
                        return Err(Fail::msg("format 'c0' needs a previous size"));
                    };
                    size = if len < 0.0 {
                        c_i64(len) as u64
                    } else {
                        c_u64(len)
                    } as usize;
                    results.raw_set(n, Value::Nil)?;
                    n -= 1;
                    if !(size <= ld && pos <= ld - size) {
                        return Err(too_short());
                    }
                }
                Some(Value::String(lua.create_string(&data[pos..pos + size])?))
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(Fail::msg("unfinished string in data"));
                };
                size = end + 1;
                Some(Value::String(lua.create_string(&data[pos..pos + end])?))
            }
            _ => {
                f.control(opt, &mut h)?;
                None
            }
        };
        if let Some(v) = value {
            n += 1;
            results.raw_set(n, v)?;
        }
        pos = pos.wrapping_add(size);
    }
    results.raw_set(n + 1, pos.wrapping_add(1) as f64)?;
    Ok(Ret::Spread(results, n + 1))
}

fn size(lua: &Lua, args: &Args) -> Outcome {
    let fmt = args.check_bytes(lua, 1)?;
    let fmt = fmt.as_bytes();
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let mut pos = 0usize;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos += padding(pos, &h, opt, size);
        if opt == b's' {
            return Err(Fail::arg(1, "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(Fail::arg(1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos += size;
    }
    super::one(Value::Number(pos as f64))
}

#[cfg(test)]
mod tests {
    use super::super::golden;
    use proptest::prelude::*;

    /// Every case of `tests/golden/struct.golden`, recorded from
    /// redis-server 7.0.
    #[test]
    fn matches_redis() {
        golden::check(include_str!("../../tests/golden/struct.golden"));
    }

    proptest! {
        #[test]
        fn unpack_inverts_pack(
            ints in prop::collection::vec(any::<i32>(), 1..20),
            text in "[a-z]{0,12}",
            big in any::<bool>(),
            align in prop::sample::select(vec![1usize, 2, 4, 8]),
        ) {
            let lua = golden::lua();
            let order = if big { ">" } else { "<" };
            let fmt = format!("!{align}{order}{}sd", "bi".repeat(ints.len()));
            let mut vals = Vec::new();
            for i in &ints {
                vals.push(format!("{}", *i as i8));
                vals.push(format!("{i}"));
            }
            let src = format!(
                "local t = {{struct.unpack('{fmt}', struct.pack('{fmt}', {v}, '{text}', 0.1))}} \
                 local want = {{{v}, '{text}', 0.1}} \
                 for i = 1, #want do if t[i] ~= want[i] then return false end end \
                 return t[#want + 1] == #struct.pack('{fmt}', {v}, '{text}', 0.1) + 1",
                v = vals.join(", ")
            );
            prop_assert!(lua.load(src).eval::<bool>().unwrap(), "{}", fmt);
        }
    }
}
