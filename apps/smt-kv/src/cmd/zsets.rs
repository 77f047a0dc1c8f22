//! Sorted set commands: ZADD, ZINCRBY, ZSCORE, ZCARD, ZREM, ZRANGE (by
//! rank), ZPOPMIN, ZPOPMAX.

use super::lists::{index_range, len_i64, positive};
use super::{is_keyword, After, CmdError, Ctx};
use crate::db::{Score, ZSet};
use crate::num::{parse_f64, parse_i64};
use crate::resp::reply;

/// ZADD's options, as parsed.
#[derive(Clone, Copy, Debug, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What adding one member did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Added {
    New,
    Updated,
    /// Present with the same score.
    Same,
    /// A condition (NX, XX, GT, LT) said no.
    Skipped,
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
///
/// Order of checks, as Redis: options (up to the first other word), an
/// even, non-zero number of the rest, the incompatible options, INCR with
/// one pair, every score, then the key's type.
pub(super) fn zadd(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let mut flags = AddFlags::default();
    let mut at = 2;
    while let Some(opt) = args.get(at) {
        match () {
            () if is_keyword(opt, "nx") => flags.nx = true,
            () if is_keyword(opt, "xx") => flags.xx = true,
            () if is_keyword(opt, "ch") => flags.ch = true,
            () if is_keyword(opt, "incr") => flags.incr = true,
            () if is_keyword(opt, "gt") => flags.gt = true,
            () if is_keyword(opt, "lt") => flags.lt = true,
            () => break,
        }
        at += 1;
    }
    let pairs = &args[at..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    check_flags(flags, pairs.len() / 2)?;
    let scores = pairs
        .chunks_exact(2)
        .map(|p| parse_f64(p[0]).ok_or(CmdError::NotFloat))
        .collect::<Result<Vec<f64>, _>>()?;
    add_all(cx, args[1], flags, pairs, &scores)
}

fn check_flags(f: AddFlags, pairs: usize) -> Result<(), CmdError> {
    if f.nx && f.xx {
        return Err(CmdError::Message(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::Message(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && pairs > 1 {
        return Err(CmdError::Message(
            "INCR option supports a single increment-element pair",
        ));
    }
    Ok(())
}

/// Adds the (already parsed) pairs and replies: the count of new (with
/// CH, also changed) members, or with INCR the new score (nil if a
/// condition said no).
fn add_all(
    cx: &mut Ctx<'_>,
    key: &[u8],
    flags: AddFlags,
    pairs: &[&[u8]],
    scores: &[f64],
) -> Result<After, CmdError> {
    if cx.store.db.collection::<ZSet>(key, cx.now)?.is_none() && flags.xx {
        reply_added(cx.out, flags, 0, None);
        return Ok(After::Continue);
    }
    let zset = cx.store.db.collection_or_new::<ZSet>(key, cx.now)?;
    let (mut counted, mut last) = (0, None);
    for (pair, &score) in pairs.chunks_exact(2).zip(scores) {
        let (added, now) = add_one(zset, pair[1], score, flags)?;
        counted += usize::from(added == Added::New || (flags.ch && added == Added::Updated));
        last = (added != Added::Skipped).then_some(now);
    }
    cx.store.db.drop_if_empty(key);
    reply_added(cx.out, flags, counted, last);
    Ok(After::Continue)
}

fn reply_added(out: &mut Vec<u8>, flags: AddFlags, counted: usize, last: Option<f64>) {
    match (flags.incr, last) {
        (true, Some(score)) => reply::double(out, score),
        (true, None) => reply::nil(out),
        (false, _) => reply::integer(out, len_i64(counted)),
    }
}

/// Redis's `zsetAdd` for one member: what happened and the member's score.
fn add_one(
    zset: &mut ZSet,
    member: &[u8],
    score: f64,
    f: AddFlags,
) -> Result<(Added, f64), CmdError> {
    let Some(current) = zset.score(member).map(Score::get) else {
        if f.xx {
            return Ok((Added::Skipped, score));
        }
        zset.insert(member, Score::new(score).ok_or(CmdError::NanScore)?);
        return Ok((Added::New, score));
    };
    if f.nx {
        return Ok((Added::Skipped, current));
    }
    let new = if f.incr { current + score } else { score };
    let new_score = Score::new(new).ok_or(CmdError::NanScore)?;
    if (f.lt && new >= current) || (f.gt && new <= current) {
        return Ok((Added::Skipped, current));
    }
    // Redis compares with `!=`: -0 and 0 are the same score.
    if new == current {
        return Ok((Added::Same, new));
    }
    zset.insert(member, new_score);
    Ok((Added::Updated, new))
}

/// `ZINCRBY key increment member`: ZADD INCR.
pub(super) fn zincrby(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let by = parse_f64(args[2]).ok_or(CmdError::NotFloat)?;
    let flags = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    add_all(cx, args[1], flags, &[args[2], args[3]], &[by])
}

pub(super) fn zscore(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let zset = cx.store.db.collection::<ZSet>(args[1], cx.now)?;
    match zset.and_then(|z| z.score(args[2])) {
        Some(score) => reply::double(cx.out, score.get()),
        None => reply::nil(cx.out),
    }
    Ok(After::Continue)
}

pub(super) fn zcard(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let len = cx
        .store
        .db
        .collection::<ZSet>(args[1], cx.now)?
        .map_or(0, |z| z.len());
    reply::integer(cx.out, len_i64(len));
    Ok(After::Continue)
}

/// `ZREM key member [member ...]`: the number removed.
pub(super) fn zrem(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let removed = match cx.store.db.collection::<ZSet>(args[1], cx.now)? {
        None => 0,
        Some(z) => args[2..].iter().filter(|m| z.remove(m)).count(),
    };
    cx.store.db.drop_if_empty(args[1]);
    reply::integer(cx.out, len_i64(removed));
    Ok(After::Continue)
}

/// ZRANGE's options, as parsed.
#[derive(Debug, Default)]
struct RangeOptions {
    rev: bool,
    with_scores: bool,
    limit: bool,
    by_score: bool,
    by_lex: bool,
}

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count]
/// [WITHSCORES]`, by rank: BYSCORE and BYLEX are parsed (so that errors
/// match Redis's) but not served.
pub(super) fn zrange(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let o = range_options(&args[4..], false)?;
    range(cx, args, o)
}

/// `ZREVRANGE key start stop [WITHSCORES]`: ZRANGE ... REV.
pub(super) fn zrevrange(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let o = range_options(&args[4..], true)?;
    range(cx, args, o)
}

fn range(cx: &mut Ctx<'_>, args: &[&[u8]], o: RangeOptions) -> Result<After, CmdError> {
    if o.limit && !o.by_score && !o.by_lex {
        return Err(CmdError::Message(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if o.with_scores && o.by_lex {
        return Err(CmdError::Message(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    if o.by_score || o.by_lex {
        return Err(CmdError::Message(
            "ZRANGE BYSCORE and BYLEX are not served by smt-kv (ranks only)",
        ));
    }
    let start = parse_i64(args[2]).ok_or(CmdError::NotInteger)?;
    let stop = parse_i64(args[3]).ok_or(CmdError::NotInteger)?;
    let Some(zset) = cx.store.db.collection::<ZSet>(args[1], cx.now)? else {
        reply::array(cx.out, 0);
        return Ok(After::Continue);
    };
    let Some((first, last)) = index_range(start, stop, zset.len()) else {
        reply::array(cx.out, 0);
        return Ok(After::Continue);
    };
    let per_member = if o.with_scores { 2 } else { 1 };
    reply::array(cx.out, (last - first + 1) * per_member);
    for (member, score) in zset.range(first, last, o.rev) {
        reply::bulk(cx.out, member);
        if o.with_scores {
            reply::double(cx.out, score.get());
        }
    }
    Ok(After::Continue)
}

/// ZRANGE's options; `rev` for ZREVRANGE, whose direction and kind of
/// range are fixed (REV, BYSCORE and BYLEX are then no options, as in
/// Redis).
fn range_options(opts: &[&[u8]], rev: bool) -> Result<RangeOptions, CmdError> {
    let fixed = rev;
    let mut o = RangeOptions {
        rev,
        ..RangeOptions::default()
    };
    let mut i = 0;
    while let Some(opt) = opts.get(i) {
        let left = opts.len() - i - 1;
        if is_keyword(opt, "withscores") {
            o.with_scores = true;
        } else if is_keyword(opt, "limit") && left >= 2 {
            parse_i64(opts[i + 1]).ok_or(CmdError::NotInteger)?;
            parse_i64(opts[i + 2]).ok_or(CmdError::NotInteger)?;
            o.limit = true;
            i += 2;
        } else if is_keyword(opt, "rev") && !o.rev {
            o.rev = true;
        } else if is_keyword(opt, "bylex") && !fixed && !o.by_lex && !o.by_score {
            o.by_lex = true;
        } else if is_keyword(opt, "byscore") && !fixed && !o.by_lex && !o.by_score {
            o.by_score = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

pub(super) fn zpopmin(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    pop(cx, args, false)
}

pub(super) fn zpopmax(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    pop(cx, args, true)
}

/// `ZPOP{MIN,MAX} key [count]`: up to `count` (default 1) members with
/// their scores, lowest (highest) first; an empty array when none.
fn pop(cx: &mut Ctx<'_>, args: &[&[u8]], max: bool) -> Result<After, CmdError> {
    let count = match args {
        [_, _] => 1,
        [_, _, count] => positive(count)?,
        _ => return Err(CmdError::Syntax),
    };
    let key = args[1];
    let zset = match cx.store.db.collection::<ZSet>(key, cx.now)? {
        Some(zset) if count > 0 => zset,
        _ => {
            reply::array(cx.out, 0);
            return Ok(After::Continue);
        }
    };
    let n = count.min(zset.len());
    reply::array(cx.out, n * 2);
    for _ in 0..n {
        if let Some((member, score)) = zset.pop(max) {
            reply::bulk(cx.out, &member);
            reply::double(cx.out, score.get());
        }
    }
    cx.store.db.drop_if_empty(key);
    Ok(After::Continue)
}
