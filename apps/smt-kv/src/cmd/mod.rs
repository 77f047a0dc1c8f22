//! Commands: the table, arity checks, errors in Redis's words, and the
//! store they run against.
//!
//! A command is looked up by its first argument without regard to case,
//! its arity checked, then (when the server has a password) the client's
//! authentication, as Redis orders these checks; then its handler writes
//! exactly one reply. Option
//! keywords are compared as C strings (up to a NUL byte), and names are
//! echoed in errors the same way, as Redis's C code does, so replies match
//! its own even for odd input.

mod auth;
mod expire;
mod hashes;
mod keys;
mod lists;
mod server;
mod sets;
mod strings;
mod zsets;

use crate::db::{Db, UnixMs};
use crate::resp::reply;
use crate::ycsb::zipf::Rng;

pub use auth::Password;
pub use server::{Settings, Stats};

/// Everything commands act on: the database, the counters INFO shows,
/// the settings CONFIG GET reports, and the random numbers SPOP draws.
/// One per server, owned by its event loop and shared by all front ends.
#[derive(Debug)]
pub struct Store {
    /// The keys and their values.
    pub db: Db,
    /// The counters INFO reports.
    pub stats: Stats,
    /// What CONFIG GET reports, and the password AUTH checks.
    pub settings: Settings,
    /// The random numbers SPOP draws.
    pub rng: Rng,
}

impl Store {
    /// An empty store whose random choices come from `seed`.
    pub fn new(settings: Settings, seed: u64) -> Self {
        Self {
            db: Db::default(),
            stats: Stats::default(),
            settings,
            rng: Rng::new(seed),
        }
    }
}

impl Default for Store {
    /// Default settings and a fixed seed (tests).
    fn default() -> Self {
        Self::new(Settings::default(), 0x5eed)
    }
}

/// What the server knows about one client between its commands (a TCP or
/// TLS connection, or one SMT message).
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientState {
    /// The client sent the right password (`AUTH`).
    pub authenticated: bool,
}

/// What the connection does after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Close once the reply is written (`QUIT`).
    Close,
}

/// A command failed; the reply is an error in Redis's words. Each variant
/// is the client's doing (a typo, a wrong type), never fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmdError {
    /// No such command (`ERR unknown command ...`).
    UnknownCommand,
    /// No such subcommand of CONFIG, CLIENT, ... (`ERR unknown subcommand ...`).
    UnknownSubcommand,
    /// The command's full name (`set`, `config|get`).
    WrongArity(&'static str),
    /// Arguments in a shape the command does not take (`ERR syntax error`).
    Syntax,
    /// An argument that must be a 64-bit integer is not.
    NotInteger,
    /// INCR, DECR and friends would leave the 64-bit range.
    Overflow,
    /// The key holds another type than the command works on (`WRONGTYPE`).
    WrongType,
    /// The command's name.
    InvalidExpire(&'static str),
    /// A SCAN cursor that is not an unsigned integer.
    InvalidCursor,
    /// SELECT of a database other than 0 (there is one).
    DbIndexOutOfRange,
    /// An integer that must fit 32 bits does not.
    NotInt32,
    /// A count that must be zero or more is negative.
    NotPositive,
    /// An argument that must be a float (a score) is not.
    NotFloat,
    /// An increment made a score NaN (`inf` plus `-inf`).
    NanScore,
    /// Redis's error text for one case, after `ERR `.
    Message(&'static str),
    /// An option word Redis names in its error: the argument's position.
    UnsupportedOption(usize),
    /// The server has a password and the client has not sent it.
    NoAuth,
    /// AUTH with a password that is not the server's (`WRONGPASS`).
    WrongPass,
    /// `AUTH password` to a server without one.
    NoPasswordSet,
}

impl From<crate::db::WrongType> for CmdError {
    fn from(_: crate::db::WrongType) -> Self {
        Self::WrongType
    }
}

type Handler = fn(&mut Ctx<'_>, &[&[u8]]) -> Result<After, CmdError>;

/// A command: name, arity (Redis's convention: `n` exactly n arguments
/// counting the name, `-n` at least n), handler, and whether it runs
/// before the client has authenticated.
struct Spec {
    name: &'static str,
    arity: i32,
    run: Handler,
    no_auth: bool,
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
    spec("lpush", -3, lists::lpush),
    spec("rpush", -3, lists::rpush),
    spec("lpop", -2, lists::lpop),
    spec("rpop", -2, lists::rpop),
    spec("lrange", 4, lists::lrange),
    spec("sadd", -3, sets::sadd),
    spec("spop", -2, sets::spop),
    spec("zadd", -4, zsets::zadd),
    spec("zpopmin", -2, zsets::zpopmin),
    spec("del", -2, keys::del),
    spec("exists", -2, keys::exists),
    spec("expire", -3, expire::expire),
    spec("pexpire", -3, expire::pexpire),
    spec("expireat", -3, expire::expireat),
    spec("pexpireat", -3, expire::pexpireat),
    spec("ttl", 2, expire::ttl),
    spec("pttl", 2, expire::pttl),
    spec("expiretime", 2, expire::expiretime),
    spec("pexpiretime", 2, expire::pexpiretime),
    spec("persist", 2, expire::persist),
    spec("type", 2, keys::type_of),
    spec("setex", 4, strings::setex),
    spec("psetex", 4, strings::psetex),
    spec("incrby", 3, strings::incrby),
    spec("decr", 2, strings::decr),
    spec("decrby", 3, strings::decrby),
    spec("hdel", -3, hashes::hdel),
    spec("hlen", 2, hashes::hlen),
    spec("llen", 2, lists::llen),
    spec("srem", -3, sets::srem),
    spec("scard", 2, sets::scard),
    spec("sismember", 3, sets::sismember),
    spec("smembers", 2, sets::smembers),
    spec("zincrby", 4, zsets::zincrby),
    spec("zscore", 3, zsets::zscore),
    spec("zcard", 2, zsets::zcard),
    spec("zrem", -3, zsets::zrem),
    spec("zrange", -4, zsets::zrange),
    spec("zrevrange", -4, zsets::zrevrange),
    spec("zpopmax", -2, zsets::zpopmax),
    spec("scan", -2, keys::scan),
    spec("dbsize", 1, keys::dbsize),
    spec("flushall", -1, keys::flushall),
    spec("flushdb", -1, keys::flushdb),
    spec("ping", -1, server::ping),
    spec("echo", 2, server::echo),
    spec("info", -1, server::info),
    spec("select", 2, server::select),
    Spec {
        no_auth: true,
        ..spec("quit", -1, server::quit)
    },
    Spec {
        no_auth: true,
        ..spec("auth", -2, auth::auth)
    },
    spec("config", -2, server::config),
];

const fn spec(name: &'static str, arity: i32, run: Handler) -> Spec {
    Spec {
        name,
        arity,
        run,
        no_auth: false,
    }
}

/// A running command's view of the store and of its client.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The server's store.
    pub store: &'a mut Store,
    /// The calling client's connection state.
    pub client: &'a mut ClientState,
    /// The time the command runs at, for TTLs.
    pub now: UnixMs,
    /// Where the command writes its RESP reply.
    pub out: &'a mut Vec<u8>,
}

/// Runs one command (`args[0]` is its name) for `client` and writes its
/// reply.
pub fn execute(
    store: &mut Store,
    client: &mut ClientState,
    args: &[&[u8]],
    now: UnixMs,
    out: &mut Vec<u8>,
) -> After {
    store.stats.commands += 1;
    let Some(&name) = args.first() else {
        return After::Continue;
    };
    let mut ctx = Ctx {
        store,
        client,
        now,
        out,
    };
    let result = match find(name) {
        None => Err(CmdError::UnknownCommand),
        Some(spec) if !arity_ok(spec.arity, args.len()) => Err(CmdError::WrongArity(spec.name)),
        Some(spec) => admit(&ctx, spec, args).and_then(|()| (spec.run)(&mut ctx, args)),
    };
    result.unwrap_or_else(|e| {
        write_error(ctx.out, e, args);
        After::Continue
    })
}

/// Redis's checks between arity and the command itself: a known
/// subcommand (CONFIG's), then authentication.
fn admit(cx: &Ctx<'_>, spec: &Spec, args: &[&[u8]]) -> Result<(), CmdError> {
    if spec.name == "config" {
        server::config_subcommand(args)?;
    }
    let needs_auth = cx.store.settings.requirepass.is_some() && !cx.client.authenticated;
    if needs_auth && !spec.no_auth {
        return Err(CmdError::NoAuth);
    }
    Ok(())
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
        CmdError::NotPositive => b"ERR value is out of range, must be positive".to_vec(),
        CmdError::NotFloat => b"ERR value is not a valid float".to_vec(),
        CmdError::NanScore => b"ERR resulting score is not a number (NaN)".to_vec(),
        CmdError::Message(text) => format!("ERR {text}").into_bytes(),
        CmdError::UnsupportedOption(at) => {
            let opt = args.get(at).map_or(&[][..], |a| cstr(a));
            [&b"ERR Unsupported option "[..], opt].concat()
        }
        CmdError::NoAuth => b"NOAUTH Authentication required.".to_vec(),
        CmdError::WrongPass => {
            b"WRONGPASS invalid username-password pair or user is disabled.".to_vec()
        }
        CmdError::NoPasswordSet => b"ERR AUTH <password> called without any password configured \
            for the default user. Are you sure your configuration is correct?"
            .to_vec(),
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
        run_as(store, &mut ClientState::default(), line)
    }

    fn run_as(store: &mut Store, client: &mut ClientState, line: &[&str]) -> String {
        let args: Vec<&[u8]> = line.iter().map(|a| a.as_bytes()).collect();
        let mut out = Vec::new();
        execute(store, client, &args, 1_000, &mut out);
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

    #[test]
    fn with_a_password_only_auth_and_quit_run_before_it_is_given() {
        let mut s = Store::default();
        s.settings.requirepass = Some(Password::new(b"sesame".to_vec()));
        let mut c = ClientState::default();
        assert_eq!(
            run_as(&mut s, &mut c, &["GET", "k"]),
            "-NOAUTH Authentication required.\r\n"
        );
        // Unknown commands and arity errors come first, as in Redis.
        assert!(run_as(&mut s, &mut c, &["nope"]).starts_with("-ERR unknown command"));
        assert!(run_as(&mut s, &mut c, &["get"]).starts_with("-ERR wrong number"));
        assert!(run_as(&mut s, &mut c, &["AUTH", "wrong"]).starts_with("-WRONGPASS"));
        assert_eq!(run_as(&mut s, &mut c, &["AUTH", "sesame"]), "+OK\r\n");
        assert_eq!(run_as(&mut s, &mut c, &["GET", "k"]), "$-1\r\n");
        let mut other = ClientState::default();
        assert!(run_as(&mut s, &mut other, &["PING"]).starts_with("-NOAUTH"));
        assert_eq!(run_as(&mut s, &mut other, &["QUIT"]), "+OK\r\n");
    }
}
