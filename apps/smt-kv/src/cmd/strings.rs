//! String commands: GET, SET, SETEX, PSETEX, MGET, MSET, INCR, INCRBY,
//! DECR, DECRBY.

use super::{is_keyword, After, CmdError, Ctx};
use crate::db::{Ttl, UnixMs, Value};
use crate::num::{parse_i64, push_i64};
use crate::resp::reply;

pub(super) fn get(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    match cx.store.db.get(args[1], cx.now) {
        None => reply::nil(cx.out),
        Some(Value::Str(v)) => reply::bulk(cx.out, v),
        Some(_) => return Err(CmdError::WrongType),
    }
    Ok(After::Continue)
}

/// `SET`'s options, as parsed.
#[derive(Debug, Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    expire: Option<(Expire, &'a [u8])>,
}

/// How an expire argument counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expire {
    /// `EX` seconds from now.
    Ex,
    /// `PX` milliseconds from now.
    Px,
    /// `EXAT` Unix time in seconds.
    ExAt,
    /// `PXAT` Unix time in milliseconds.
    PxAt,
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT t | PXAT t | KEEPTTL]`.
///
/// Order of checks, as Redis: option syntax, the expire time, the old
/// value's type (with GET), the NX/XX condition, then the write.
pub(super) fn set(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let (key, value) = (args[1], args[2]);
    let opts = set_options(&args[3..])?;
    let ttl = match opts.expire {
        Some((unit, arg)) => Ttl::At(expire_at(unit, arg, cx.now, "set")?),
        None if opts.keep_ttl => Ttl::Keep,
        None => Ttl::Clear,
    };
    if opts.get {
        get(cx, args)?;
    }
    let found = cx.store.db.contains(key, cx.now);
    if (opts.nx && found) || (opts.xx && !found) {
        if !opts.get {
            reply::nil(cx.out);
        }
        return Ok(After::Continue);
    }
    // EXAT/PXAT in the past store a key that is already expired: reads
    // miss it, and DBSIZE counts it until it is collected, as in Redis 7.0.
    cx.store.db.set(key, Value::Str(value.to_vec()), ttl);
    if !opts.get {
        reply::ok(cx.out);
    }
    Ok(After::Continue)
}

/// Redis accepts each option where it does not clash with one already
/// given (NX with XX, two different expire forms, an expire with
/// KEEPTTL), and an expire keyword only if a value follows it.
fn set_options<'a>(opts: &[&'a [u8]]) -> Result<SetOptions<'a>, CmdError> {
    let mut o = SetOptions::default();
    let mut i = 0;
    while i < opts.len() {
        let (opt, next) = (opts[i], opts.get(i + 1).copied());
        let expire_kind = o.expire.map(|(kind, _)| kind);
        let expire_free = |kind| !o.keep_ttl && expire_kind.is_none_or(|k| k == kind);
        if is_keyword(opt, "nx") && !o.xx {
            o.nx = true;
        } else if is_keyword(opt, "xx") && !o.nx {
            o.xx = true;
        } else if is_keyword(opt, "get") {
            o.get = true;
        } else if is_keyword(opt, "keepttl") && o.expire.is_none() {
            o.keep_ttl = true;
        } else if let Some(kind) = expire_keyword(opt).filter(|&k| expire_free(k)) {
            let value = next.ok_or(CmdError::Syntax)?;
            o.expire = Some((kind, value));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

fn expire_keyword(opt: &[u8]) -> Option<Expire> {
    [
        ("ex", Expire::Ex),
        ("px", Expire::Px),
        ("exat", Expire::ExAt),
        ("pxat", Expire::PxAt),
    ]
    .into_iter()
    .find(|(word, _)| is_keyword(opt, word))
    .map(|(_, kind)| kind)
}

/// The absolute deadline an expire argument of `command` names: a
/// positive integer, small enough not to overflow in milliseconds.
fn expire_at(
    unit: Expire,
    arg: &[u8],
    now: UnixMs,
    command: &'static str,
) -> Result<UnixMs, CmdError> {
    let n = parse_i64(arg).ok_or(CmdError::NotInteger)?;
    let invalid = CmdError::InvalidExpire(command);
    let seconds = matches!(unit, Expire::Ex | Expire::ExAt);
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(invalid);
    }
    let ms = if seconds { n * 1000 } else { n };
    let ms = match unit {
        Expire::Ex | Expire::Px => ms.checked_add_unsigned(now).ok_or(invalid)?,
        Expire::ExAt | Expire::PxAt => ms,
    };
    u64::try_from(ms).map_err(|_| invalid)
}

/// `SETEX key seconds value`.
pub(super) fn setex(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    set_with_ttl(cx, args, Expire::Ex, "setex")
}

/// `PSETEX key milliseconds value`.
pub(super) fn psetex(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    set_with_ttl(cx, args, Expire::Px, "psetex")
}

fn set_with_ttl(
    cx: &mut Ctx<'_>,
    args: &[&[u8]],
    unit: Expire,
    command: &'static str,
) -> Result<After, CmdError> {
    let at = expire_at(unit, args[2], cx.now, command)?;
    cx.store
        .db
        .set(args[1], Value::Str(args[3].to_vec()), Ttl::At(at));
    reply::ok(cx.out);
    Ok(After::Continue)
}

pub(super) fn mget(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    reply::array(cx.out, args.len() - 1);
    for key in &args[1..] {
        match cx.store.db.get(key, cx.now) {
            Some(Value::Str(v)) => reply::bulk(cx.out, v),
            _ => reply::nil(cx.out),
        }
    }
    Ok(After::Continue)
}

pub(super) fn mset(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity("mset"));
    }
    for pair in args[1..].chunks_exact(2) {
        cx.store
            .db
            .set(pair[0], Value::Str(pair[1].to_vec()), Ttl::Clear);
    }
    reply::ok(cx.out);
    Ok(After::Continue)
}

/// `INCR key`: the value as a strict 64-bit integer, plus one; the TTL
/// stays.
pub(super) fn incr(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    add(cx, args[1], 1)
}

pub(super) fn decr(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    add(cx, args[1], -1)
}

/// `INCRBY key increment`: the increment is checked before the value.
pub(super) fn incrby(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let by = parse_i64(args[2]).ok_or(CmdError::NotInteger)?;
    add(cx, args[1], by)
}

/// `DECRBY key decrement`; a decrement of `i64::MIN` cannot be negated.
pub(super) fn decrby(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let by = parse_i64(args[2]).ok_or(CmdError::NotInteger)?;
    let by = by
        .checked_neg()
        .ok_or(CmdError::Message("decrement would overflow"))?;
    add(cx, args[1], by)
}

/// Adds `by` to the integer at `key` (0 when absent); the TTL stays.
fn add(cx: &mut Ctx<'_>, key: &[u8], by: i64) -> Result<After, CmdError> {
    let n = match cx.store.db.get_mut(key, cx.now) {
        None => {
            let mut v = Vec::new();
            push_i64(&mut v, by);
            cx.store.db.set(key, Value::Str(v), Ttl::Clear);
            by
        }
        Some(Value::Str(v)) => {
            let n = parse_i64(v).ok_or(CmdError::NotInteger)?;
            let n = n.checked_add(by).ok_or(CmdError::Overflow)?;
            v.clear();
            push_i64(v, n);
            n
        }
        Some(_) => return Err(CmdError::WrongType),
    };
    reply::integer(cx.out, n);
    Ok(After::Continue)
}
