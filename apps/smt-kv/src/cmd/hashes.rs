//! Hash commands: HSET, HGET, HMGET, HGETALL, HDEL, HLEN.

use super::{After, CmdError, Ctx};
use crate::db::{Hash, Value};
use crate::resp::reply;

/// `HSET key field value [field value ...]`: the number of new fields.
pub(super) fn hset(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity("hset"));
    }
    let hash = cx.store.db.collection_or_new::<Hash>(args[1], cx.now)?;
    let added = args[2..]
        .chunks_exact(2)
        .filter(|pair| hash.set(pair[0], pair[1]))
        .count();
    reply::integer(cx.out, i64::try_from(added).unwrap_or(i64::MAX));
    Ok(After::Continue)
}

pub(super) fn hget(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    match cx.store.db.get(args[1], cx.now) {
        None => reply::nil(cx.out),
        Some(Value::Hash(h)) => reply::bulk_or_nil(cx.out, h.get(args[2])),
        Some(_) => return Err(CmdError::WrongType),
    }
    Ok(After::Continue)
}

pub(super) fn hmget(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let fields = &args[2..];
    match cx.store.db.get(args[1], cx.now) {
        None => {
            reply::array(cx.out, fields.len());
            fields.iter().for_each(|_| reply::nil(cx.out));
        }
        Some(Value::Hash(h)) => {
            reply::array(cx.out, fields.len());
            for f in fields {
                reply::bulk_or_nil(cx.out, h.get(f));
            }
        }
        Some(_) => return Err(CmdError::WrongType),
    }
    Ok(After::Continue)
}

pub(super) fn hgetall(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    match cx.store.db.get(args[1], cx.now) {
        None => reply::array(cx.out, 0),
        Some(Value::Hash(h)) => {
            reply::array(cx.out, h.len() * 2);
            for (f, v) in h.iter() {
                reply::bulk(cx.out, f);
                reply::bulk(cx.out, v);
            }
        }
        Some(_) => return Err(CmdError::WrongType),
    }
    Ok(After::Continue)
}

/// `HDEL key field [field ...]`: the number of fields removed; the key
/// goes with its last field.
pub(super) fn hdel(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let removed = match cx.store.db.collection::<Hash>(args[1], cx.now)? {
        None => 0,
        Some(hash) => args[2..].iter().filter(|f| hash.remove(f)).count(),
    };
    cx.store.db.drop_if_empty(args[1]);
    reply::integer(cx.out, i64::try_from(removed).unwrap_or(i64::MAX));
    Ok(After::Continue)
}

pub(super) fn hlen(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let len = cx
        .store
        .db
        .collection::<Hash>(args[1], cx.now)?
        .map_or(0, |h| h.len());
    reply::integer(cx.out, i64::try_from(len).unwrap_or(i64::MAX));
    Ok(After::Continue)
}
