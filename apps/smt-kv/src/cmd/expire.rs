//! Time to live: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (with NX, XX, GT,
//! LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST.
//!
//! Deadlines are wall-clock milliseconds, as in Redis. A deadline at or
//! before now deletes the key at once (and the command still answers 1).

use super::{is_keyword, After, CmdError, Ctx};
use crate::db::UnixMs;
use crate::num::parse_i64;
use crate::resp::reply;

/// How a command's time argument counts.
#[derive(Clone, Copy, Debug)]
struct Unit {
    /// The argument is in seconds (else milliseconds).
    seconds: bool,
    /// Relative to now (else a Unix time).
    relative: bool,
    /// The command's name in errors.
    name: &'static str,
}

pub(super) fn expire(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    set_expiry(cx, args, unit(true, true, "expire"))
}

pub(super) fn pexpire(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    set_expiry(cx, args, unit(false, true, "pexpire"))
}

pub(super) fn expireat(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    set_expiry(cx, args, unit(true, false, "expireat"))
}

pub(super) fn pexpireat(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    set_expiry(cx, args, unit(false, false, "pexpireat"))
}

const fn unit(seconds: bool, relative: bool, name: &'static str) -> Unit {
    Unit {
        seconds,
        relative,
        name,
    }
}

/// The conditions of `EXPIRE ... [NX | XX | GT | LT]`.
#[derive(Clone, Copy, Debug, Default)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl Conditions {
    /// Whether a key whose deadline is `current` (`None`: no TTL, which
    /// counts as infinite) may get `new`.
    fn allow(self, current: Option<i64>, new: i64) -> bool {
        match current {
            None => !self.xx && !self.gt,
            Some(current) => {
                let refused = self.nx || (self.gt && new <= current) || (self.lt && new >= current);
                !refused
            }
        }
    }
}

/// The options are checked first, then the time, then the key, as Redis
/// does.
fn set_expiry(cx: &mut Ctx<'_>, args: &[&[u8]], unit: Unit) -> Result<After, CmdError> {
    let conditions = conditions(args)?;
    let at = deadline(args[2], unit, cx.now)?;
    let Some(current) = cx.store.db.deadline(args[1], cx.now) else {
        reply::integer(cx.out, 0);
        return Ok(After::Continue);
    };
    let current = current.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
    if !conditions.allow(current, at) {
        reply::integer(cx.out, 0);
        return Ok(After::Continue);
    }
    match UnixMs::try_from(at) {
        Ok(at) if at > cx.now => {
            cx.store.db.set_deadline(args[1], Some(at), cx.now);
        }
        _ => {
            cx.store.db.remove(args[1], cx.now);
        }
    }
    reply::integer(cx.out, 1);
    Ok(After::Continue)
}

fn conditions(args: &[&[u8]]) -> Result<Conditions, CmdError> {
    let mut c = Conditions::default();
    for (i, opt) in args.iter().enumerate().skip(3) {
        match () {
            () if is_keyword(opt, "nx") => c.nx = true,
            () if is_keyword(opt, "xx") => c.xx = true,
            () if is_keyword(opt, "gt") => c.gt = true,
            () if is_keyword(opt, "lt") => c.lt = true,
            () => return Err(CmdError::UnsupportedOption(i)),
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(CmdError::Message(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if c.gt && c.lt {
        return Err(CmdError::Message(
            "GT and LT options at the same time are not compatible",
        ));
    }
    Ok(c)
}

/// The deadline in Unix milliseconds (possibly negative: already past),
/// refusing times that overflow in milliseconds or when added to now.
fn deadline(arg: &[u8], unit: Unit, now: UnixMs) -> Result<i64, CmdError> {
    let n = parse_i64(arg).ok_or(CmdError::NotInteger)?;
    let invalid = CmdError::InvalidExpire(unit.name);
    let ms = if unit.seconds {
        n.checked_mul(1000).ok_or(invalid)?
    } else {
        n
    };
    let base = if unit.relative {
        i64::try_from(now).unwrap_or(i64::MAX)
    } else {
        0
    };
    ms.checked_add(base).ok_or(invalid)
}

pub(super) fn ttl(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    report(cx, args[1], |at, now| (at.saturating_sub(now) + 500) / 1000)
}

pub(super) fn pttl(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    report(cx, args[1], |at, now| at.saturating_sub(now))
}

pub(super) fn expiretime(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    report(cx, args[1], |at, _| at / 1000)
}

pub(super) fn pexpiretime(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    report(cx, args[1], |at, _| at)
}

/// -2 for no key, -1 for no TTL, else `show(deadline, now)`.
fn report(
    cx: &mut Ctx<'_>,
    key: &[u8],
    show: impl Fn(UnixMs, UnixMs) -> UnixMs,
) -> Result<After, CmdError> {
    let n = match cx.store.db.deadline(key, cx.now) {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => i64::try_from(show(at, cx.now)).unwrap_or(i64::MAX),
    };
    reply::integer(cx.out, n);
    Ok(After::Continue)
}

/// `PERSIST key`: 1 if a TTL was removed.
pub(super) fn persist(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let had_ttl = matches!(cx.store.db.deadline(args[1], cx.now), Some(Some(_)));
    if had_ttl {
        cx.store.db.set_deadline(args[1], None, cx.now);
    }
    reply::integer(cx.out, i64::from(had_ttl));
    Ok(After::Continue)
}

#[cfg(test)]
mod tests {
    use crate::cmd::{execute, ClientState, Store};

    fn run(store: &mut Store, now: u64, line: &str) -> String {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let mut out = Vec::new();
        execute(store, &mut ClientState::default(), &words, now, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn ttls_are_set_read_and_removed_on_a_virtual_clock() {
        let mut s = Store::default();
        let t0 = 1_000_000;
        assert_eq!(run(&mut s, t0, "EXPIRE k 10"), ":0\r\n");
        run(&mut s, t0, "SET k v");
        assert_eq!(run(&mut s, t0, "TTL k"), ":-1\r\n");
        assert_eq!(run(&mut s, t0, "EXPIRE k 10"), ":1\r\n");
        assert_eq!(run(&mut s, t0 + 2_400, "TTL k"), ":8\r\n");
        assert_eq!(run(&mut s, t0 + 2_600, "TTL k"), ":7\r\n");
        assert_eq!(run(&mut s, t0 + 2_600, "PTTL k"), ":7400\r\n");
        assert_eq!(run(&mut s, t0, "PEXPIRETIME k"), ":1010000\r\n");
        assert_eq!(run(&mut s, t0, "EXPIRE k 5 GT"), ":0\r\n");
        assert_eq!(run(&mut s, t0, "EXPIRE k 5 LT"), ":1\r\n");
        assert_eq!(run(&mut s, t0, "EXPIRE k 50 NX"), ":0\r\n");
        assert_eq!(run(&mut s, t0, "PERSIST k"), ":1\r\n");
        assert_eq!(run(&mut s, t0, "PERSIST k"), ":0\r\n");
        assert_eq!(run(&mut s, t0, "EXPIRE k 5 XX"), ":0\r\n");
        assert_eq!(run(&mut s, t0, "PEXPIRE k 100"), ":1\r\n");
        assert_eq!(run(&mut s, t0 + 100, "GET k"), "$-1\r\n");
        assert_eq!(run(&mut s, t0, "TTL k"), ":-2\r\n");
        run(&mut s, t0, "SET k v");
        assert_eq!(run(&mut s, t0, "EXPIRE k 0"), ":1\r\n");
        assert_eq!(run(&mut s, t0, "EXISTS k"), ":0\r\n");
    }
}
