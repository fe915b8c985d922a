//! Bitmap commands (Redis 7.0 `bitops.c`): SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP, BITFIELD and BITFIELD_RO. Arguments are checked in
//! Redis's order, which for BITCOUNT and BITPOS interleaves with the key
//! lookup (a missing key answers before the range is parsed), so those
//! hand their parser to the engine op as a closure. The keyspace work is
//! `cairn_engine::ops::bitmap`.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::ops::bitmap::{
    self as op, BitOp, BitfieldOp, CountArgs, FieldOp, Overflow, PosArgs, Unit,
};
use cairn_engine::util::num;
use cairn_engine::{Error, Key};
use smallvec::SmallVec;

pub const COMMANDS: &[Def] = &[
    Def::new("setbit", setbit),
    Def::new("getbit", getbit),
    Def::new("bitcount", bitcount),
    Def::new("bitpos", bitpos),
    Def::new("bitop", bitop),
    Def::new("bitfield", bitfield),
    Def::new("bitfield_ro", bitfield_ro),
];

/// `strcasecmp(arg, word) == 0` on the argument as C sees it: it ends at
/// its first NUL byte, as Redis's option parsers read `argv[j]->ptr`.
pub(crate) fn c_eq(arg: &[u8], word: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// The argument up to its first NUL byte.
pub(crate) fn c_str(arg: &[u8]) -> &[u8] {
    let end = memchr::memchr(0, arg).unwrap_or(arg.len());
    &arg[..end]
}

/// A bit offset argument, bounded by proto-max-bulk-len.
fn offset(ctx: &Ctx, i: usize, hash_bits: u32) -> Result<u64, CmdError> {
    let max = ctx.engine().limits.max_string();
    op::parse_bit_offset(ctx.arg(i), hash_bits, max)
        .ok_or(CmdError::Engine(Error::BitOffsetOutOfRange))
}

/// BYTE or BIT, as the last argument of BITCOUNT and BITPOS.
fn unit(arg: &[u8]) -> Result<Unit, CmdError> {
    if c_eq(arg, "bit") {
        Ok(Unit::Bit)
    } else if c_eq(arg, "byte") {
        Ok(Unit::Byte)
    } else {
        Err(CmdError::Syntax)
    }
}

/// SETBIT key offset 0|1 → the bit's old value.
fn setbit(ctx: &mut Ctx) -> CmdResult {
    let off = offset(ctx, 2, 0)?;
    let on = match num::parse_i64(ctx.arg(3)) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(CmdError::text(errors::BIT_NOT_BINARY)),
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let old = op::setbit(&mut g, ctx.db(), &k, off, on)?;
    drop(g);
    ctx.int(old as i64)
}

/// GETBIT key offset → the bit (0 past the end or for a missing key).
fn getbit(ctx: &mut Ctx) -> CmdResult {
    let off = offset(ctx, 2, 0)?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let bit = op::getbit(&mut g, ctx.db(), &k, off)?;
    drop(g);
    ctx.int(bit as i64)
}

/// BITCOUNT key [start end [BYTE|BIT]] → the number of set bits in the
/// range. Redis 7.0 order: missing key (0), type, start, end, the
/// negative-range shortcut (0), then the unit; any other argument count
/// is a syntax error once the key is known to be a string.
fn bitcount(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let argc = ctx.argc();
    let a = ctx.args;
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::bitcount(&mut g, ctx.db(), &k, || match argc {
        2 => Ok(CountArgs::Whole),
        4 | 5 => {
            let start = args::int(a.get(2))?;
            let end = args::int(a.get(3))?;
            if start < 0 && end < 0 && start > end {
                return Ok(CountArgs::Zero);
            }
            let unit = if argc == 5 {
                unit(a.get(4))?
            } else {
                Unit::Byte
            };
            Ok(CountArgs::Range { start, end, unit })
        }
        _ => Err(CmdError::Syntax),
    })?;
    drop(g);
    ctx.int(n)
}

/// BITPOS key bit [start [end [BYTE|BIT]]] → the first position of the
/// bit, or -1. The bit is checked first; then, for an existing string,
/// start, the unit, end.
fn bitpos(ctx: &mut Ctx) -> CmdResult {
    let bit = match args::int(ctx.arg(2))? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::text(errors::BITPOS_BIT)),
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let argc = ctx.argc();
    let a = ctx.args;
    let mut g = e.lock(&ctx.cx, &k);
    let pos = op::bitpos(&mut g, ctx.db(), &k, bit, || match argc {
        3 => Ok(None),
        4..=6 => {
            let start = args::int(a.get(3))?;
            let unit = if argc == 6 {
                unit(a.get(5))?
            } else {
                Unit::Byte
            };
            let end = if argc >= 5 {
                Some(args::int(a.get(4))?)
            } else {
                None
            };
            Ok(Some(PosArgs { start, end, unit }))
        }
        _ => Err(CmdError::Syntax),
    })?;
    drop(g);
    ctx.int(pos)
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...] → the length of the
/// result stored at destkey (deleted when 0).
fn bitop(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.arg(1);
    let bop = if c_eq(name, "and") {
        BitOp::And
    } else if c_eq(name, "or") {
        BitOp::Or
    } else if c_eq(name, "xor") {
        BitOp::Xor
    } else if c_eq(name, "not") {
        BitOp::Not
    } else {
        return Err(CmdError::Syntax);
    };
    if bop == BitOp::Not && ctx.argc() != 4 {
        return Err(CmdError::text(errors::BITOP_NOT_ONE_SOURCE));
    }
    let e = ctx.engine();
    let keys: SmallVec<[Key; 8]> = ctx.args.iter_from(2).map(|a| e.key(a)).collect();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    let len = op::bitop(&mut g, ctx.db(), &keys[0], bop, &keys[1..])?;
    drop(g);
    ctx.int(len as i64)
}

/// BITFIELD key [GET type offset] [SET type offset value]
/// [INCRBY type offset increment] [OVERFLOW WRAP|SAT|FAIL] ...
/// → one reply per GET/SET/INCRBY: an integer, or null where OVERFLOW
/// FAIL refused the write.
fn bitfield(ctx: &mut Ctx) -> CmdResult {
    bitfield_generic(ctx, false)
}

/// BITFIELD_RO key [GET type offset ...]: BITFIELD limited to GET.
fn bitfield_ro(ctx: &mut Ctx) -> CmdResult {
    bitfield_generic(ctx, true)
}

/// `getBitfieldTypeFromArgument`: `i1`..`i64` or `u1`..`u63` (lower case
/// letter, the number read up to a NUL as `strlen` does).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(CmdError::text(errors::BITFIELD_TYPE)),
    };
    let max = if signed { 64 } else { 63 };
    match num::parse_i64(c_str(&arg[1..])) {
        Some(n) if (1..=max).contains(&n) => Ok((signed, n as u32)),
        _ => Err(CmdError::text(errors::BITFIELD_TYPE)),
    }
}

/// Parses every operation first, as `bitfieldGeneric` does, so a bad
/// argument anywhere fails the command before the key is touched.
fn bitfield_generic(ctx: &mut Ctx, readonly: bool) -> CmdResult {
    let argc = ctx.argc();
    let mut ops: SmallVec<[BitfieldOp; 4]> = SmallVec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < argc {
        let rem = argc - j - 1;
        let sub = ctx.arg(j);
        let kind = if c_eq(sub, "get") && rem >= 2 {
            FieldOp::Get
        } else if c_eq(sub, "set") && rem >= 3 {
            FieldOp::Set(0)
        } else if c_eq(sub, "incrby") && rem >= 3 {
            FieldOp::IncrBy(0)
        } else if c_eq(sub, "overflow") && rem >= 1 {
            let t = ctx.arg(j + 1);
            overflow = if c_eq(t, "wrap") {
                Overflow::Wrap
            } else if c_eq(t, "sat") {
                Overflow::Sat
            } else if c_eq(t, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::text(errors::BITFIELD_OVERFLOW));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(ctx.arg(j + 1))?;
        let offset = offset(ctx, j + 2, bits)?;
        let kind = match kind {
            FieldOp::Get => kind,
            FieldOp::Set(_) => FieldOp::Set(args::int(ctx.arg(j + 3))?),
            FieldOp::IncrBy(_) => FieldOp::IncrBy(args::int(ctx.arg(j + 3))?),
        };
        ops.push(BitfieldOp {
            op: kind,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if kind == FieldOp::Get { 3 } else { 4 };
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let replies = op::bitfield(&mut g, ctx.db(), &k, &ops, readonly)?;
    drop(g);
    let mut w = ctx.reply();
    w.array(replies.len());
    for r in replies {
        match r {
            Some(n) => w.int(n),
            None => w.null(),
        }
    }
    Ok(())
}
