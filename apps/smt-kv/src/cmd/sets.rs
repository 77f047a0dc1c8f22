//! Set commands: SADD, SREM, SPOP, SCARD, SISMEMBER, SMEMBERS.

use super::lists::{len_i64, positive};
use super::{After, CmdError, Ctx};
use crate::db::Set;
use crate::resp::reply;

/// `SADD key member [member ...]`: the number of new members.
pub(super) fn sadd(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let set = cx.store.db.collection_or_new::<Set>(args[1], cx.now)?;
    let added = args[2..].iter().filter(|m| set.insert(m)).count();
    reply::integer(cx.out, len_i64(added));
    Ok(After::Continue)
}

/// `SREM key member [member ...]`: the number removed.
pub(super) fn srem(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let removed = match cx.store.db.collection::<Set>(args[1], cx.now)? {
        None => 0,
        Some(set) => args[2..].iter().filter(|m| set.remove(m)).count(),
    };
    cx.store.db.drop_if_empty(args[1]);
    reply::integer(cx.out, len_i64(removed));
    Ok(After::Continue)
}

/// `SPOP key [count]`: one random member (or nil), or with a count an
/// array of up to `count` distinct ones; all of them, in the set's order,
/// when the count covers the set (Redis then answers with the set).
pub(super) fn spop(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let count = match args {
        [_, _] => None,
        [_, _, count] => Some(positive(count)?),
        _ => return Err(CmdError::Syntax),
    };
    let key = args[1];
    let rng = &mut cx.store.rng;
    let Some(set) = cx.store.db.collection::<Set>(key, cx.now)? else {
        match count {
            None => reply::nil(cx.out),
            Some(_) => reply::array(cx.out, 0),
        }
        return Ok(After::Continue);
    };
    match count {
        None => reply::bulk_or_nil(cx.out, set.pop_nth(rng.next_u64()).as_deref()),
        Some(n) if n >= set.len() => {
            let members = set.members();
            reply::array(cx.out, members.len());
            for m in members {
                reply::bulk(cx.out, m);
            }
            cx.store.db.remove(key, cx.now);
        }
        Some(n) => {
            reply::array(cx.out, n);
            for _ in 0..n {
                reply::bulk_or_nil(cx.out, set.pop_nth(rng.next_u64()).as_deref());
            }
        }
    }
    cx.store.db.drop_if_empty(key);
    Ok(After::Continue)
}

pub(super) fn scard(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let len = cx
        .store
        .db
        .collection::<Set>(args[1], cx.now)?
        .map_or(0, |s| s.len());
    reply::integer(cx.out, len_i64(len));
    Ok(After::Continue)
}

pub(super) fn sismember(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let set = cx.store.db.collection::<Set>(args[1], cx.now)?;
    let found = set.is_some_and(|s| s.contains(args[2]));
    reply::integer(cx.out, i64::from(found));
    Ok(After::Continue)
}

pub(super) fn smembers(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    match cx.store.db.collection::<Set>(args[1], cx.now)? {
        None => reply::array(cx.out, 0),
        Some(set) => {
            let members = set.members();
            reply::array(cx.out, members.len());
            for m in members {
                reply::bulk(cx.out, m);
            }
        }
    }
    Ok(After::Continue)
}
