//! Keyspace commands: DEL, EXISTS, TYPE, SCAN, DBSIZE, FLUSHALL, FLUSHDB.

use super::{is_keyword, After, CmdError, Ctx};
use crate::db::glob::Glob;
use crate::num::{parse_cursor, parse_i64};
use crate::resp::reply;

/// SCAN's default page size.
const DEFAULT_COUNT: usize = 10;

pub(super) fn del(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let removed = args[1..]
        .iter()
        .filter(|key| cx.store.db.remove(key, cx.now))
        .count();
    reply::integer(cx.out, count(removed));
    Ok(After::Continue)
}

/// Counts a key each time it is named, as Redis does.
pub(super) fn exists(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let found = args[1..]
        .iter()
        .filter(|key| cx.store.db.contains(key, cx.now))
        .count();
    reply::integer(cx.out, count(found));
    Ok(After::Continue)
}

/// `TYPE key`: `string`, `hash`, `list`, `set`, `zset`, or `none`.
pub(super) fn type_of(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let name = cx
        .store
        .db
        .get(args[1], cx.now)
        .map_or(&b"none"[..], |v| v.type_name());
    // Type names are ASCII words.
    reply::simple(cx.out, std::str::from_utf8(name).unwrap_or("none"));
    Ok(After::Continue)
}

pub(super) fn dbsize(cx: &mut Ctx<'_>, _args: &[&[u8]]) -> Result<After, CmdError> {
    reply::integer(cx.out, count(cx.store.db.len()));
    Ok(After::Continue)
}

/// `FLUSHDB [ASYNC | SYNC]`: the one database is all of them.
pub(super) fn flushdb(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    flushall(cx, args)
}

/// `FLUSHALL [ASYNC | SYNC]`: both are synchronous here.
pub(super) fn flushall(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    match &args[1..] {
        [] => {}
        [mode] if is_keyword(mode, "async") || is_keyword(mode, "sync") => {}
        _ => return Err(CmdError::Syntax),
    }
    cx.store.db.flush();
    reply::ok(cx.out);
    Ok(After::Continue)
}

/// What SCAN filters on.
struct ScanFilter<'a> {
    count: usize,
    pattern: Option<Glob>,
    type_name: Option<&'a [u8]>,
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`. The cursor is
/// checked before the options, as in Redis.
pub(super) fn scan(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let cursor = parse_cursor(args[1]).ok_or(CmdError::InvalidCursor)?;
    let filter = scan_options(&args[2..])?;
    let page = cx
        .store
        .db
        .scan(cursor, filter.count, cx.now, |key, value| {
            filter.pattern.as_ref().is_none_or(|g| g.matches(key))
                && filter
                    .type_name
                    .is_none_or(|t| t.eq_ignore_ascii_case(value.type_name()))
        });
    reply::array(cx.out, 2);
    reply::bulk(cx.out, page.cursor.to_string().as_bytes());
    reply::array(cx.out, page.keys.len());
    for key in &page.keys {
        reply::bulk(cx.out, key);
    }
    Ok(After::Continue)
}

fn scan_options<'a>(opts: &[&'a [u8]]) -> Result<ScanFilter<'a>, CmdError> {
    let mut f = ScanFilter {
        count: DEFAULT_COUNT,
        pattern: None,
        type_name: None,
    };
    for pair in opts.chunks(2) {
        let [opt, value] = pair else {
            return Err(CmdError::Syntax);
        };
        if is_keyword(opt, "count") {
            let n = parse_i64(value).ok_or(CmdError::NotInteger)?;
            f.count = usize::try_from(n)
                .ok()
                .filter(|&n| n >= 1)
                .ok_or(CmdError::Syntax)?;
        } else if is_keyword(opt, "match") {
            // "*" matches everything: no pattern to test.
            f.pattern = (*value != b"*").then(|| Glob::new(value, false));
        } else if is_keyword(opt, "type") {
            f.type_name = Some(value);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(f)
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
