//! Connection and server commands: PING, ECHO, SELECT, QUIT, INFO,
//! CONFIG GET; the settings and counters they report.

use std::time::Instant;

use super::{arity_ok, cstr, is_keyword, After, CmdError, Ctx};
use crate::db::glob::Glob;
use crate::num::parse_i64;
use crate::resp::reply;

/// Settings a client may read with `CONFIG GET`. They describe this
/// server; the ones Redis clients probe on connect (`save`, `appendonly`)
/// say that nothing is persisted, which is true.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The plain TCP front end's port (Redis's `port`; 0: none).
    pub tcp_port: u16,
    /// The TLS front end's port (Redis's `tls-port`; 0: none).
    pub tls_port: u16,
    /// The SMT front end's UDP port (0: none).
    pub smt_port: u16,
    /// Most connections at once (Redis's `maxclients`).
    pub max_clients: usize,
    /// Largest bulk string a request may carry, in bytes.
    pub proto_max_bulk_len: u64,
    /// Most bytes of unparsed requests held per connection.
    pub client_query_buffer_limit: usize,
    /// When the server started (INFO's uptime).
    pub started: Instant,
    /// Clients must `AUTH` with it first (Redis's `requirepass`).
    pub requirepass: Option<super::Password>,
}

impl Default for Settings {
    fn default() -> Self {
        let limits = crate::resp::Limits::default();
        Self {
            tcp_port: 0,
            tls_port: 0,
            smt_port: 0,
            max_clients: 10_000,
            proto_max_bulk_len: limits.max_bulk_len,
            client_query_buffer_limit: limits.query_buffer_limit,
            started: Instant::now(),
            requirepass: None,
        }
    }
}

impl Settings {
    /// `(name, value)` for every readable setting.
    fn table(&self) -> Vec<(&'static str, String)> {
        vec![
            ("save", String::new()),
            ("appendonly", "no".into()),
            ("databases", "1".into()),
            ("maxclients", self.max_clients.to_string()),
            ("proto-max-bulk-len", self.proto_max_bulk_len.to_string()),
            (
                "client-query-buffer-limit",
                self.client_query_buffer_limit.to_string(),
            ),
            ("port", self.tcp_port.to_string()),
            ("tls-port", self.tls_port.to_string()),
            ("timeout", "0".into()),
            ("maxmemory", "0".into()),
        ]
    }
}

/// Counters for INFO, kept by the event loop and the commands.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Commands run (INFO's `total_commands_processed`).
    pub commands: u64,
    /// TCP and TLS connections accepted (`total_connections_received`).
    pub connections_received: u64,
    /// TCP and TLS connections open now.
    pub connected_clients: u64,
    /// Connections refused at `max_clients`.
    pub rejected_connections: u64,
    /// SMT requests served (each a message of one or more commands).
    pub smt_requests: u64,
    /// Input that did not parse as RESP (answered with an error, then
    /// the connection or SMT message ends).
    pub protocol_errors: u64,
}

pub(super) fn ping(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    match args {
        [_] => reply::simple(cx.out, "PONG"),
        [_, message] => reply::bulk(cx.out, message),
        _ => return Err(CmdError::WrongArity("ping")),
    }
    Ok(After::Continue)
}

pub(super) fn echo(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    reply::bulk(cx.out, args[1]);
    Ok(After::Continue)
}

/// `SELECT index`: there is one database, number 0 (Redis with
/// `databases 1` answers the same).
pub(super) fn select(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let index = parse_i64(args[1]).ok_or(CmdError::NotInteger)?;
    let index = i32::try_from(index).map_err(|_| CmdError::NotInt32)?;
    if index != 0 {
        return Err(CmdError::DbIndexOutOfRange);
    }
    reply::ok(cx.out);
    Ok(After::Continue)
}

pub(super) fn quit(cx: &mut Ctx<'_>, _args: &[&[u8]]) -> Result<After, CmdError> {
    reply::ok(cx.out);
    Ok(After::Close)
}

/// CONFIG's subcommand exists and has its arguments: checked before
/// authentication, as Redis checks a command's own.
pub(super) fn config_subcommand(args: &[&[u8]]) -> Result<(), CmdError> {
    // A subcommand is found by all its bytes, as a command is.
    if !args[1].eq_ignore_ascii_case(b"get") {
        return Err(CmdError::UnknownSubcommand);
    }
    if !arity_ok(-3, args.len()) {
        return Err(CmdError::WrongArity("config|get"));
    }
    Ok(())
}

/// `CONFIG GET pattern [pattern ...]`, the one CONFIG subcommand served.
pub(super) fn config(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    config_subcommand(args)?;
    let table = cx.store.settings.table();
    let mut found: Vec<(&[u8], &str)> = Vec::new();
    for &pattern in &args[2..] {
        config_matches(&table, pattern, &mut found);
    }
    reply::array(cx.out, found.len() * 2);
    for (name, value) in found {
        reply::bulk(cx.out, name);
        reply::bulk(cx.out, value.as_bytes());
    }
    Ok(After::Continue)
}

/// Adds the settings `pattern` names to `found`, once each. A plain name
/// is looked up without case and answered with the name as the client
/// wrote it; a glob answers with the settings' own names (Redis's rules).
fn config_matches<'a>(
    table: &'a [(&'static str, String)],
    pattern: &'a [u8],
    found: &mut Vec<(&'a [u8], &'a str)>,
) {
    let seen = |found: &Vec<(&[u8], &str)>, name: &[u8]| {
        found.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    let pattern = cstr(pattern);
    if !pattern.iter().any(|b| b"[*?".contains(b)) {
        let hit = table
            .iter()
            .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(pattern));
        if let Some((_, value)) = hit {
            if !seen(found, pattern) {
                found.push((pattern, value));
            }
        }
        return;
    }
    let glob = Glob::new(pattern, true);
    for (name, value) in table {
        if glob.matches(name.as_bytes()) && !seen(found, name.as_bytes()) {
            found.push((name.as_bytes(), value));
        }
    }
}

/// `INFO [section ...]`: sections `server`, `clients`, `stats`,
/// `keyspace` (all by default, or with `all`/`everything`/`default`).
/// The contents are this server's, not Redis's; the format is Redis's.
pub(super) fn info(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let wanted = |section: &str| {
        args.len() == 1
            || args[1..].iter().any(|a| {
                ["all", "everything", "default", section]
                    .iter()
                    .any(|w| is_keyword(a, w))
            })
    };
    let mut sections = Vec::new();
    let s = &cx.store;
    if wanted("server") {
        sections.push(format!(
            "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\
             smt_kv_version:{}\r\nmultiplexing_api:epoll\r\nuptime_in_seconds:{}\r\n\
             tcp_port:{}\r\ntls_port:{}\r\nsmt_port:{}\r\n",
            env!("CARGO_PKG_VERSION"),
            s.settings.started.elapsed().as_secs(),
            s.settings.tcp_port,
            s.settings.tls_port,
            s.settings.smt_port,
        ));
    }
    if wanted("clients") {
        sections.push(format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n",
            s.stats.connected_clients, s.settings.max_clients
        ));
    }
    if wanted("stats") {
        sections.push(format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nsmt_requests_processed:{}\r\nprotocol_errors:{}\r\n",
            s.stats.connections_received,
            s.stats.commands,
            s.stats.rejected_connections,
            s.stats.smt_requests,
            s.stats.protocol_errors,
        ));
    }
    if wanted("keyspace") {
        let mut text = "# Keyspace\r\n".to_owned();
        if !s.db.is_empty() {
            text += &format!(
                "db0:keys={},expires={},avg_ttl=0\r\n",
                s.db.len(),
                s.db.volatile_len()
            );
        }
        sections.push(text);
    }
    reply::bulk(cx.out, sections.join("\r\n").as_bytes());
    Ok(After::Continue)
}
