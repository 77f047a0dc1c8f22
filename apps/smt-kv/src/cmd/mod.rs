//! Commands: the table, arity checks, errors in Redis's words, and the
//! store they run against.
//!
//! A command is looked up by its first argument without regard to case,
//! its arity checked, then its handler writes exactly one reply. Option
//! keywords are compared as C strings (up to a NUL byte), and names are
//! echoed in errors the same way, as Redis's C code does, so replies match
//! its own even for odd input.

mod hashes;
mod keys;
mod server;
mod strings;

use crate::db::{Db, UnixMs};
use crate::resp::reply;

pub use server::{Settings, Stats};

/// Everything commands act on: the database, the counters INFO shows,
/// and the settings CONFIG GET reports. One per server, owned by its event
/// loop and shared by all front ends.
#[derive(Debug, Default)]
pub struct Store {
    pub db: Db,
    pub stats: Stats,
    pub settings: Settings,
}

/// What the connection does after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    Continue,
    /// Close once the reply is written (`QUIT`).
    Close,
}

/// A command failed; the reply is an error in Redis's words. Each variant
/// is the client's doing (a typo, a wrong type), never fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmdError {
    UnknownCommand,
    UnknownSubcommand,
    /// The command's full name (`set`, `config|get`).
    WrongArity(&'static str),
    Syntax,
    NotInteger,
    Overflow,
    WrongType,
    /// The command's name.
    InvalidExpire(&'static str),
    InvalidCursor,
    DbIndexOutOfRange,
    /// An integer that must fit 32 bits does not.
    NotInt32,
}

impl From<crate::db::WrongType> for CmdError {
    fn from(_: crate::db::WrongType) -> Self {
        Self::WrongType
    }
}

type Handler = fn(&mut Ctx<'_>, &[&[u8]]) -> Result<After, CmdError>;

/// A command: name, arity (Redis's convention: `n` exactly n arguments
/// counting the name, `-n` at least n) and handler.
struct Spec {
    name: &'static str,
    arity: i32,
    run: Handler,
}

/// The commands, most frequent first (lookup is a linear scan).
const COMMANDS: &[Spec] = &[
    spec("get", 2, strings::get),
    spec("hgetall", 2, hashes::hgetall),
    spec("hset", -4, hashes::hset),
    spec("set", -3, strings::set),
    spec("hget", 3, hashes::hget),
    spec("hmget", -3, hashes::hmget),
    spec("mget", -2, strings::mget),
    spec("mset", -3, strings::mset),
    spec("incr", 2, strings::incr),
    spec("del", -2, keys::del),
    spec("exists", -2, keys::exists),
    spec("scan", -2, keys::scan),
    spec("dbsize", 1, keys::dbsize),
    spec("flushall", -1, keys::flushall),
    spec("ping", -1, server::ping),
    spec("echo", 2, server::echo),
    spec("info", -1, server::info),
    spec("select", 2, server::select),
    spec("quit", -1, server::quit),
    spec("config", -2, server::config),
];

const fn spec(name: &'static str, arity: i32, run: Handler) -> Spec {
    Spec { name, arity, run }
}

/// A running command's view of the store.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub store: &'a mut Store,
    pub now: UnixMs,
    pub out: &'a mut Vec<u8>,
}

/// Runs one command (`args[0]` is its name) and writes its reply.
pub fn execute(store: &mut Store, args: &[&[u8]], now: UnixMs, out: &mut Vec<u8>) -> After {
    store.stats.commands += 1;
    let Some(&name) = args.first() else {
        return After::Continue;
    };
    let mut ctx = Ctx { store, now, out };
    let result = match find(name) {
        None => Err(CmdError::UnknownCommand),
        Some(spec) if !arity_ok(spec.arity, args.len()) => Err(CmdError::WrongArity(spec.name)),
        Some(spec) => (spec.run)(&mut ctx, args),
    };
    result.unwrap_or_else(|e| {
        write_error(ctx.out, e, args);
        After::Continue
    })
}

/// Redis finds commands by all their bytes (without case); only the
/// error message that echoes an unknown name stops at a NUL.
fn find(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Redis's arity rule.
pub(crate) fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = i64::try_from(argc).unwrap_or(i64::MAX);
    let arity = i64::from(arity);
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// The bytes before the first NUL: how Redis's C code sees an argument
/// it compares or prints with `%s`.
pub(crate) fn cstr(arg: &[u8]) -> &[u8] {
    arg.iter().position(|&b| b == 0).map_or(arg, |n| &arg[..n])
}

/// Whether `arg`, as a C string, is `keyword` in any case.
pub(crate) fn is_keyword(arg: &[u8], keyword: &str) -> bool {
    cstr(arg).eq_ignore_ascii_case(keyword.as_bytes())
}

/// The one place an error becomes a reply.
pub fn write_error(out: &mut Vec<u8>, e: CmdError, args: &[&[u8]]) {
    let text: Vec<u8> = match e {
        CmdError::UnknownCommand => unknown_command(args),
        CmdError::UnknownSubcommand => unknown_subcommand(args),
        CmdError::WrongArity(name) => {
            format!("ERR wrong number of arguments for '{name}' command").into_bytes()
        }
        CmdError::Syntax => b"ERR syntax error".to_vec(),
        CmdError::NotInteger => b"ERR value is not an integer or out of range".to_vec(),
        CmdError::Overflow => b"ERR increment or decrement would overflow".to_vec(),
        CmdError::WrongType => {
            b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec()
        }
        CmdError::InvalidExpire(name) => {
            format!("ERR invalid expire time in '{name}' command").into_bytes()
        }
        CmdError::InvalidCursor => b"ERR invalid cursor".to_vec(),
        CmdError::DbIndexOutOfRange => b"ERR DB index is out of range".to_vec(),
        CmdError::NotInt32 => {
            b"ERR value is out of range, value must between -2147483648 and 2147483647".to_vec()
        }
    };
    reply::error(out, &text);
}

/// Redis quotes the name (128 bytes at most) and its first arguments (128
/// bytes of quoted text in all).
fn unknown_command(args: &[&[u8]]) -> Vec<u8> {
    const SHOWN: usize = 128;
    let name = args.first().map_or(&[][..], |a| cstr(a));
    let mut quoted = Vec::new();
    for arg in args.iter().skip(1) {
        if quoted.len() >= SHOWN {
            break;
        }
        let room = SHOWN - quoted.len();
        let arg = cstr(arg);
        quoted.push(b'\'');
        quoted.extend_from_slice(&arg[..arg.len().min(room)]);
        quoted.extend_from_slice(b"' ");
    }
    [
        &b"ERR unknown command '"[..],
        &name[..name.len().min(SHOWN)],
        b"', with args beginning with: ",
        &quoted,
    ]
    .concat()
}

fn unknown_subcommand(args: &[&[u8]]) -> Vec<u8> {
    let container = args
        .first()
        .map_or(&[][..], |a| cstr(a))
        .to_ascii_uppercase();
    let sub = args.get(1).map_or(&[][..], |a| cstr(a));
    [
        &b"ERR unknown subcommand '"[..],
        &sub[..sub.len().min(128)],
        b"'. Try ",
        &container,
        b" HELP.",
    ]
    .concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(store: &mut Store, line: &[&str]) -> String {
        let args: Vec<&[u8]> = line.iter().map(|a| a.as_bytes()).collect();
        let mut out = Vec::new();
        execute(store, &args, 1_000, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn names_are_found_in_any_case_and_arity_is_checked() {
        let mut s = Store::default();
        assert_eq!(run(&mut s, &["pInG"]), "+PONG\r\n");
        assert_eq!(
            run(&mut s, &["get"]),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert_eq!(
            run(&mut s, &["nope", "a", "b"]),
            "-ERR unknown command 'nope', with args beginning with: 'a' 'b' \r\n"
        );
        assert_eq!(
            run(&mut s, &["config", "nope"]),
            "-ERR unknown subcommand 'nope'. Try CONFIG HELP.\r\n"
        );
    }
}
