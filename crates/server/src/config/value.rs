//! Generic directive values: `Value`, the `Field` trait that moves a
//! `Config` field to and from it, and `Kind`, the syntax of a directive's
//! arguments (Redis's bool/int/memory/enum/string config types).

use super::*;

/// Redis's CONFIG_BINDADDR_MAX.
pub(super) const MAX_BIND_ADDRESSES: usize = 16;

/// A directive's value in a type-independent form, so one table can drive
/// every directive. Integers are i128 so that every Redis bound (from
/// INT_MIN to ULLONG_MAX) is representable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Value {
    Bool(bool),
    Int(i128),
    Enum(usize),
    Str(String),
    List(Vec<String>),
    Save(Vec<SaveRule>),
    Obuf(ClientOutputBufferLimits),
    Events(KeyspaceEvents),
    Oom(OomScoreAdjValues),
}

/// Conversion between a `Config` field and its `Value`.
pub(super) trait Field: Sized {
    fn to_value(&self) -> Value;
    fn from_value(v: &Value) -> Option<Self>;
}

impl Field for bool {
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn to_value(&self) -> Value {
                Value::Int(*self as i128)
            }
            fn from_value(v: &Value) -> Option<Self> {
                match v {
                    Value::Int(n) => <$t>::try_from(*n).ok(),
                    _ => None,
                }
            }
        }
    )*};
}
int_field!(u16, u32, u64, i32, i64, usize);

impl Field for String {
    fn to_value(&self) -> Value {
        Value::Str(self.clone())
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
}

impl Field for Vec<String> {
    fn to_value(&self) -> Value {
        Value::List(self.clone())
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::List(l) => Some(l.clone()),
            _ => None,
        }
    }
}

impl Field for Vec<SaveRule> {
    fn to_value(&self) -> Value {
        Value::Save(self.clone())
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Save(r) => Some(r.clone()),
            _ => None,
        }
    }
}

impl Field for ClientOutputBufferLimits {
    fn to_value(&self) -> Value {
        Value::Obuf(*self)
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Obuf(o) => Some(*o),
            _ => None,
        }
    }
}

impl Field for OomScoreAdjValues {
    fn to_value(&self) -> Value {
        Value::Oom(*self)
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Oom(o) => Some(*o),
            _ => None,
        }
    }
}

impl Field for KeyspaceEvents {
    fn to_value(&self) -> Value {
        Value::Events(*self)
    }
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Events(e) => Some(*e),
            _ => None,
        }
    }
}

/// How a directive's arguments are parsed, rendered and rewritten.
pub(super) enum Kind {
    /// yes/no.
    Bool,
    /// `string2ll` integer within bounds.
    Int { min: i128, max: i128 },
    /// `memtoull` byte count within bounds.
    Memory { min: i128, max: i128 },
    /// One of the names, case-insensitively.
    Enum(&'static [&'static str]),
    /// Any string. `null_if_empty` mirrors Redis's EMPTY_STRING_IS_NULL: an
    /// empty value is "unset", which CONFIG REWRITE expresses by dropping
    /// the directive's lines.
    Str { null_if_empty: bool },
    /// `bind`: up to 16 addresses.
    Bind,
    /// `save`: seconds/changes pairs.
    Save,
    /// `client-output-buffer-limit`: class hard soft seconds, repeated.
    Obuf,
    /// `notify-keyspace-events`: class letters.
    Events,
    /// `oom-score-adj-values`: three integers, -2000..=2000 each.
    OomValues,
    /// `latency-tracking-info-percentiles`: numbers within 0..=100, kept
    /// as Redis prints them back (`%f`, trailing zeros trimmed).
    Percentiles,
}

impl Kind {
    /// Redis's MULTI_ARG_CONFIG: the value is a list of words.
    pub(super) fn multi_arg(&self) -> bool {
        matches!(
            self,
            Kind::Bind | Kind::Save | Kind::Obuf | Kind::OomValues | Kind::Percentiles
        )
    }

    /// Parses the arguments of one directive. `current` is needed because
    /// `client-output-buffer-limit` only changes the classes it names.
    pub(super) fn parse(&self, args: &[String], current: &Value) -> Result<Value, String> {
        match self {
            Kind::Bind => parse_bind(args),
            Kind::Save => parse_save(args),
            Kind::Obuf => parse_obuf(args, current),
            Kind::OomValues => parse_oom_values(args),
            Kind::Percentiles => parse_percentiles(args),
            _ => {
                let [arg] = args else {
                    return Err("wrong number of arguments".into());
                };
                self.parse_scalar(arg)
            }
        }
    }

    pub(super) fn parse_scalar(&self, arg: &str) -> Result<Value, String> {
        match self {
            Kind::Bool => match arg.to_ascii_lowercase().as_str() {
                "yes" => Ok(Value::Bool(true)),
                "no" => Ok(Value::Bool(false)),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            Kind::Int { min, max } => {
                let n = string_to_i64(arg).ok_or("argument couldn't be parsed into an integer")?;
                check_bounds(i128::from(n), *min, *max)
            }
            Kind::Memory { min, max } => {
                let n = parse_memory(arg).ok_or("argument must be a memory value")?;
                check_bounds(i128::from(n), *min, *max)
            }
            Kind::Enum(names) => names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(arg))
                .map(Value::Enum)
                .ok_or_else(|| {
                    format!(
                        "argument(s) must be one of the following: {}",
                        names.join(", ")
                    )
                }),
            Kind::Str { .. } => Ok(Value::Str(arg.to_string())),
            Kind::Events => KeyspaceEvents::parse(arg)
                .map(Value::Events)
                .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
            Kind::Bind | Kind::Save | Kind::Obuf | Kind::OomValues | Kind::Percentiles => {
                Err("wrong number of arguments".into())
            }
        }
    }

    /// The CONFIG GET text.
    pub(super) fn render(&self, v: &Value) -> String {
        match v {
            Value::Bool(b) => yes_no(*b).to_string(),
            Value::Int(n) => n.to_string(),
            Value::Enum(i) => match self {
                Kind::Enum(names) => names.get(*i).copied().unwrap_or_default().to_string(),
                _ => String::new(),
            },
            Value::Str(s) => s.clone(),
            Value::List(l) => l.join(" "),
            Value::Save(rules) => rules
                .iter()
                .map(|r| format!("{} {}", r.seconds, r.changes))
                .collect::<Vec<_>>()
                .join(" "),
            Value::Obuf(o) => o
                .classes()
                .iter()
                .map(|(class, l)| {
                    format!(
                        "{class} {} {} {}",
                        l.hard_bytes, l.soft_bytes, l.soft_seconds
                    )
                })
                .collect::<Vec<_>>()
                .join(" "),
            Value::Events(e) => e.to_string(),
            Value::Oom(o) => o.0.map(|n| n.to_string()).join(" "),
        }
    }
}

pub(super) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

pub(super) fn check_bounds(n: i128, min: i128, max: i128) -> Result<Value, String> {
    if n < min || n > max {
        Err(format!(
            "argument must be between {min} and {max} inclusive"
        ))
    } else {
        Ok(Value::Int(n))
    }
}

pub(super) fn parse_bind(args: &[String]) -> Result<Value, String> {
    if args.len() > MAX_BIND_ADDRESSES {
        return Err("Too many bind addresses specified.".into());
    }
    // A single empty argument means "no addresses", as in Redis.
    if let [only] = args {
        if only.is_empty() {
            return Ok(Value::List(Vec::new()));
        }
    }
    // Redis only notices an empty address when listen() fails; refusing it
    // here keeps a bad CONFIG SET from reaching the listener.
    if args.iter().any(String::is_empty) {
        return Err("Failed to bind to specified addresses.".into());
    }
    Ok(Value::List(args.to_vec()))
}

pub(super) fn parse_save(args: &[String]) -> Result<Value, String> {
    let args: &[String] = match args {
        [only] if only.is_empty() => &[],
        _ => args,
    };
    const INVALID: &str = "Invalid save parameters";
    if args.len() % 2 == 1 {
        return Err(INVALID.into());
    }
    let mut rules = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks(2) {
        let seconds = strtoll_whole(&pair[0]).filter(|&s| s >= 1).ok_or(INVALID)?;
        let changes = strtoll_whole(&pair[1]).filter(|&c| c >= 0).ok_or(INVALID)?;
        rules.push(SaveRule {
            seconds: seconds.unsigned_abs(),
            changes: changes.unsigned_abs(),
        });
    }
    Ok(Value::Save(rules))
}

pub(super) fn parse_obuf(args: &[String], current: &Value) -> Result<Value, String> {
    let Value::Obuf(mut limits) = current.clone() else {
        return Err("internal error: client-output-buffer-limit has no current value".into());
    };
    if !args.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    // Validate everything before changing anything, as Redis does.
    for group in args.chunks(4) {
        let slot = match group[0].to_ascii_lowercase().as_str() {
            "normal" => &mut limits.normal,
            "slave" | "replica" => &mut limits.replica,
            "pubsub" => &mut limits.pubsub,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let hard = parse_memory(&group[1]);
        let soft = parse_memory(&group[2]);
        let seconds = strtoll_whole(&group[3]).filter(|&s| s >= 0);
        let (Some(hard), Some(soft), Some(seconds)) = (hard, soft, seconds) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into(),
            );
        };
        *slot = ClientBufferLimit {
            hard_bytes: hard,
            soft_bytes: soft,
            soft_seconds: seconds.unsigned_abs(),
        };
    }
    Ok(Value::Obuf(limits))
}

/// Redis's setConfigOOMScoreAdjValuesOption: exactly three `strtoll`
/// integers within -2000..=2000 (an empty word is 0, as strtoll reads it).
pub(super) fn parse_oom_values(args: &[String]) -> Result<Value, String> {
    let [a, b, c] = args else {
        return Err("wrong number of arguments".into());
    };
    let mut values = [0i32; 3];
    for (slot, arg) in values.iter_mut().zip([a, b, c]) {
        *slot = strtoll_whole(arg)
            .filter(|n| (-2000..=2000).contains(n))
            .and_then(|n| i32::try_from(n).ok())
            .ok_or("Invalid oom-score-adj-values, elements must be between -2000 and 2000.")?;
    }
    Ok(Value::Oom(OomScoreAdjValues(values)))
}

/// Redis's setConfigLatencyTrackingInfoPercentilesOutputOption: each word a
/// `string2d` number within 0..=100; one empty word is no percentiles.
pub(super) fn parse_percentiles(args: &[String]) -> Result<Value, String> {
    if let [only] = args {
        if only.is_empty() {
            return Ok(Value::List(Vec::new()));
        }
    }
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        let p = string_to_f64(a).ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&p) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            );
        }
        let text = format!("{p:.6}");
        let text = text.trim_end_matches('0');
        out.push(text.strip_suffix('.').unwrap_or(text).to_string());
    }
    Ok(Value::List(out))
}

/// Redis's `string2d`: the whole word is a number (no spaces around it),
/// not NaN.
fn string_to_f64(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.is_empty() || b[0].is_ascii_whitespace() || b[b.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}
