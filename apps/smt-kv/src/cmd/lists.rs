//! List commands: LPUSH, RPUSH, LPOP, RPOP, LRANGE, LLEN.

use super::{After, CmdError, Ctx};
use crate::db::{End, List};
use crate::num::parse_i64;
use crate::resp::reply;

pub(super) fn lpush(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    push(cx, args, End::Head)
}

pub(super) fn rpush(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    push(cx, args, End::Tail)
}

/// `[LR]PUSH key element [element ...]`: the list's length after.
fn push(cx: &mut Ctx<'_>, args: &[&[u8]], end: End) -> Result<After, CmdError> {
    let list = cx.store.db.collection_or_new::<List>(args[1], cx.now)?;
    for item in &args[2..] {
        list.push(end, item);
    }
    reply::integer(cx.out, len_i64(list.len()));
    Ok(After::Continue)
}

pub(super) fn lpop(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    pop(cx, args, End::Head, "lpop")
}

pub(super) fn rpop(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    pop(cx, args, End::Tail, "rpop")
}

/// `[LR]POP key [count]`: one element (or nil), or with a count an array
/// of up to `count` (or a nil array when the key is absent).
fn pop(cx: &mut Ctx<'_>, args: &[&[u8]], end: End, name: &'static str) -> Result<After, CmdError> {
    let count = match args {
        [_, _] => None,
        [_, _, count] => Some(positive(count)?),
        _ => return Err(CmdError::WrongArity(name)),
    };
    let key = args[1];
    let Some(list) = cx.store.db.collection::<List>(key, cx.now)? else {
        match count {
            None => reply::nil(cx.out),
            Some(_) => reply::nil_array(cx.out),
        }
        return Ok(After::Continue);
    };
    match count {
        None => reply::bulk_or_nil(cx.out, list.pop(end).as_deref()),
        Some(n) => {
            let n = n.min(list.len());
            reply::array(cx.out, n);
            for _ in 0..n {
                reply::bulk_or_nil(cx.out, list.pop(end).as_deref());
            }
        }
    }
    cx.store.db.drop_if_empty(key);
    Ok(After::Continue)
}

/// `LRANGE key start stop`: Redis's index rules (negative from the end,
/// clamped to the list).
pub(super) fn lrange(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let start = parse_i64(args[2]).ok_or(CmdError::NotInteger)?;
    let stop = parse_i64(args[3]).ok_or(CmdError::NotInteger)?;
    let Some(list) = cx.store.db.collection::<List>(args[1], cx.now)? else {
        reply::array(cx.out, 0);
        return Ok(After::Continue);
    };
    match index_range(start, stop, list.len()) {
        None => reply::array(cx.out, 0),
        Some((first, last)) => {
            reply::array(cx.out, last - first + 1);
            for item in list.range(first, last) {
                reply::bulk(cx.out, item);
            }
        }
    }
    Ok(After::Continue)
}

pub(super) fn llen(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let len = cx
        .store
        .db
        .collection::<List>(args[1], cx.now)?
        .map_or(0, |l| l.len());
    reply::integer(cx.out, len_i64(len));
    Ok(After::Continue)
}

/// Redis's `start`/`stop` rule for LRANGE and ZRANGE: negative counts from
/// the end, start clamped to 0, stop to the last; `None` when empty.
pub(crate) fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).ok()?;
    let start = if start < 0 { len + start } else { start }.max(0);
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    let stop = stop.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

/// A count that must not be negative (Redis's `getPositiveLong`, which
/// answers the same error for a word that is no integer).
pub(crate) fn positive(arg: &[u8]) -> Result<usize, CmdError> {
    parse_i64(arg)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(CmdError::NotPositive)
}

pub(crate) fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::index_range;

    #[test]
    fn ranges_follow_redis_index_rules() {
        assert_eq!(index_range(0, -1, 5), Some((0, 4)));
        assert_eq!(index_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(index_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(index_range(3, 1, 5), None);
        assert_eq!(index_range(5, 10, 5), None);
        assert_eq!(index_range(0, -6, 5), None);
        assert_eq!(index_range(0, 0, 0), None);
        assert_eq!(index_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }
}
