//! Pub/Sub commands (Redis 7.0 `pubsub.c`): SUBSCRIBE, UNSUBSCRIBE,
//! PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH and
//! PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB / HELP.
//!
//! The registry, delivery and the subscribed-state rules live in
//! `crate::pubsub`; this file parses arguments and writes the replies.
//! Subscribe confirmations are pushes (`>3` in RESP3), written through
//! `pubsub` so that CLIENT REPLY OFF does not drop them, as in Redis.
use crate::exec::table::Def;
use crate::pubsub::{self, Kind};
use crate::resp::cmd::{reply_help, subcommand_syntax_error};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;

pub const COMMANDS: &[Def] = &[
    Def::new("subscribe", subscribe),
    Def::new("unsubscribe", unsubscribe),
    Def::new("psubscribe", psubscribe),
    Def::new("punsubscribe", punsubscribe),
    Def::new("ssubscribe", ssubscribe),
    Def::new("sunsubscribe", sunsubscribe),
    Def::new("publish", publish),
    Def::new("spublish", spublish),
    Def::container(
        "pubsub",
        &[
            Def::new("channels", channels),
            Def::new("numsub", numsub),
            Def::new("numpat", numpat),
            Def::new("shardchannels", shardchannels),
            Def::new("shardnumsub", shardnumsub),
            Def::new("help", help),
        ],
    ),
];

fn sub(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    let names = ctx.args.iter_from(1);
    pubsub::subscribe(ctx.shared, ctx.client, kind, names);
    Ok(())
}

fn unsub(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    let names: Vec<&[u8]> = ctx.args.iter_from(1).collect();
    pubsub::unsubscribe(ctx.shared, ctx.client, kind, &names);
    Ok(())
}

/// SUBSCRIBE channel [channel ...] → one `subscribe` push per channel.
/// Allowed inside MULTI/EXEC, as Redis keeps it for compatibility.
fn subscribe(ctx: &mut Ctx) -> CmdResult {
    sub(ctx, Kind::Channel)
}

/// UNSUBSCRIBE [channel ...] → one `unsubscribe` push per channel left.
fn unsubscribe(ctx: &mut Ctx) -> CmdResult {
    unsub(ctx, Kind::Channel)
}

/// PSUBSCRIBE pattern [pattern ...] → one `psubscribe` push per pattern.
fn psubscribe(ctx: &mut Ctx) -> CmdResult {
    sub(ctx, Kind::Pattern)
}

/// PUNSUBSCRIBE [pattern ...] → one `punsubscribe` push per pattern left.
fn punsubscribe(ctx: &mut Ctx) -> CmdResult {
    unsub(ctx, Kind::Pattern)
}

/// SSUBSCRIBE shardchannel [shardchannel ...] → one `ssubscribe` push per
/// channel. Unlike SUBSCRIBE it is refused inside EXEC, where Redis sets
/// `CLIENT_DENY_BLOCKING` without the MULTI exemption.
fn ssubscribe(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.in_exec {
        return Err(CmdError::text(errors::SSUBSCRIBE_DENY_BLOCKING));
    }
    sub(ctx, Kind::Shard)
}

/// SUNSUBSCRIBE [shardchannel ...] → one `sunsubscribe` push per channel.
fn sunsubscribe(ctx: &mut Ctx) -> CmdResult {
    unsub(ctx, Kind::Shard)
}

/// PUBLISH channel message → integer: deliveries (channel and pattern
/// subscribers together).
fn publish(ctx: &mut Ctx) -> CmdResult {
    let (channel, message) = (ctx.arg(1), ctx.arg(2));
    let n = pubsub::publish(ctx.shared, Some(&mut *ctx.client), false, channel, message);
    ctx.int(n as i64)
}

/// SPUBLISH shardchannel message → integer: shard channel subscribers.
fn spublish(ctx: &mut Ctx) -> CmdResult {
    let (channel, message) = (ctx.arg(1), ctx.arg(2));
    let n = pubsub::publish(ctx.shared, Some(&mut *ctx.client), true, channel, message);
    ctx.int(n as i64)
}

/// PUBSUB CHANNELS [pattern] → the channels with subscribers, matching the
/// pattern if one is given (in no particular order, as Redis's dict).
fn channels(ctx: &mut Ctx) -> CmdResult {
    list_channels(ctx, Kind::Channel)
}

/// PUBSUB SHARDCHANNELS [pattern] → as CHANNELS, for shard channels.
fn shardchannels(ctx: &mut Ctx) -> CmdResult {
    list_channels(ctx, Kind::Shard)
}

fn list_channels(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    if ctx.argc() > 3 {
        return Err(subcommand_syntax_error(ctx));
    }
    let pattern = (ctx.argc() == 3).then(|| ctx.arg(2));
    let names = ctx.shared.pubsub.channels(kind, pattern);
    let mut w = ctx.reply();
    w.array(names.len());
    for n in &names {
        w.bulk(n);
    }
    Ok(())
}

/// PUBSUB NUMSUB [channel ...] → flat [channel, count, ...] (an array in
/// RESP3 too), pattern subscribers not counted.
fn numsub(ctx: &mut Ctx) -> CmdResult {
    count_subscribers(ctx, Kind::Channel)
}

/// PUBSUB SHARDNUMSUB [shardchannel ...] → as NUMSUB, for shard channels.
fn shardnumsub(ctx: &mut Ctx) -> CmdResult {
    count_subscribers(ctx, Kind::Shard)
}

fn count_subscribers(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    let names: Vec<&[u8]> = ctx.args.iter_from(2).collect();
    let counts = ctx.shared.pubsub.subscriber_counts(kind, &names);
    let mut w = ctx.reply();
    w.array(names.len() * 2);
    for (n, c) in names.iter().zip(counts) {
        w.bulk(n);
        w.int(c as i64);
    }
    Ok(())
}

/// PUBSUB NUMPAT → integer: distinct patterns with subscribers.
fn numpat(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.shared.pubsub.counts().patterns;
    ctx.int(n as i64)
}

/// PUBSUB HELP → status lines.
fn help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: \
             '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    )
}
