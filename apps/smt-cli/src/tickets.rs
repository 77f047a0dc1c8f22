//! 0-RTT SMT-tickets on the command line: `smt server --ticket-key FILE
//! [--ticket FILE] [--dns-listen ADDR]` answers 0-RTT hellos (and
//! publishes the ticket in DNS), `smt client --ticket FILE | --ticket-dns
//! NAME --dns-server ADDR [--forward-secrecy]` sends its first request
//! with the hello. Everything through the `smt` crate's re-exports.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use smt::dns::TicketDnsServer;
use smt::ticket::{
    KeyPool, KeyPoolRefill, ReplayCache, StaticKey, Ticket, VerifiedTicket, ZeroRttServer,
};

use crate::cli::{ClientTicketArgs, ServerTicketArgs};
use crate::error::CliError;
use crate::files;

/// Hellos remembered against replay at once (about 40 bytes each): past
/// it the server refuses hellos rather than forget (docs/handshake.md § 6).
const REPLAY_CACHE_ENTRIES: usize = 100_000;
/// Ephemeral keys kept ready for forward-secret replies.
const KEY_POOL_SIZE: usize = 64;

/// What a server serves for 0-RTT.
pub struct Served {
    pub zero_rtt: Arc<ZeroRttServer>,
    name: String,
    not_after: u64,
    /// Kept for the server's life: dropping it stops the DNS server.
    dns: Option<TicketDnsServer>,
    /// Kept for the server's life: refills the forward-secret replies'
    /// key pool in idle CPU time (else every accept past the first 64
    /// would generate its key on the hello's path).
    _refill: KeyPoolRefill,
}

impl Served {
    /// For the banner.
    pub fn describe(&self) -> String {
        let left = self.not_after.saturating_sub(unix_now());
        let dns = match &self.dns {
            Some(d) => format!(
                "; published in DNS on {} (TXT _smt-ticket.{}.)",
                d.local_addr(),
                self.name
            ),
            None => String::new(),
        };
        format!(
            "0-RTT SMT-tickets for {} (valid {left} s more){dns}",
            self.name
        )
    }
}

/// The server's ticket and static key, checked (they belong together, the
/// ticket is valid now), and its DNS zone if asked for.
pub fn serve(args: &ServerTicketArgs) -> Result<Option<Served>, CliError> {
    let Some(key_path) = &args.ticket_key else {
        return Ok(None);
    };
    let ticket_path = match &args.ticket {
        Some(p) => p.clone(),
        None => default_ticket_path(key_path)?,
    };
    let static_key = static_key(key_path)?;
    let ticket = ticket_file(&ticket_path)?;
    if ticket.not_after() <= unix_now() {
        return Err(CliError::File(format!(
            "--ticket {}: the ticket expired (tickets live at most an hour): issue a new one \
             with `smt ticket issue`",
            ticket_path.display()
        )));
    }
    let name = ticket.server_name().to_string();
    let not_after = ticket.not_after();
    let dns = args
        .dns_listen
        .map(|addr| publish(addr, &ticket))
        .transpose()?;
    let pool = Arc::new(KeyPool::new(KEY_POOL_SIZE));
    let refill = KeyPoolRefill::spawn(Arc::clone(&pool))
        .map_err(|e| CliError::Environment(format!("cannot start the key-pool thread: {e}")))?;
    let zero_rtt = ZeroRttServer::new(
        static_key,
        ticket,
        pool,
        ReplayCache::new(REPLAY_CACHE_ENTRIES),
    )
    .map_err(|e| {
        CliError::File(format!(
            "--ticket {} does not go with --ticket-key {}: {e}",
            ticket_path.display(),
            key_path.display()
        ))
    })?;
    Ok(Some(Served {
        zero_rtt: Arc::new(zero_rtt),
        name,
        not_after,
        dns,
        _refill: refill,
    }))
}

/// `smt ticket issue --out T` writes T and T-static.key.
fn default_ticket_path(key: &Path) -> Result<PathBuf, CliError> {
    let text = key.to_string_lossy();
    match text.strip_suffix("-static.key") {
        Some(ticket) if !ticket.is_empty() => Ok(PathBuf::from(ticket)),
        _ => Err(CliError::Usage(format!(
            "--ticket-key {} does not end in -static.key, so its ticket cannot be found \
             beside it: give --ticket FILE",
            key.display()
        ))),
    }
}

fn static_key(path: &Path) -> Result<StaticKey, CliError> {
    let text = files::read_text(path, "--ticket-key", "static key")?;
    let bad = |why: &str| {
        CliError::File(format!(
            "--ticket-key {}: {why} (expected 64 hex digits, as `smt ticket issue` writes \
             OUT-static.key)",
            path.display()
        ))
    };
    let bytes = hex::decode(text.trim()).map_err(|_| bad("not hex"))?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad("not 32 bytes"))?;
    StaticKey::from_bytes(&bytes).map_err(|e| bad(&e.to_string()))
}

fn ticket_file(path: &Path) -> Result<Ticket, CliError> {
    let text = files::read_text(path, "--ticket", "ticket")?;
    Ticket::from_base64(&text)
        .map_err(|e| CliError::File(format!("--ticket {}: not a ticket: {e}", path.display())))
}

/// An authoritative DNS server for the ticket's name, holding its ticket.
fn publish(addr: std::net::SocketAddr, ticket: &Ticket) -> Result<TicketDnsServer, CliError> {
    let name = ticket.server_name();
    let dns = TicketDnsServer::spawn(addr, name).map_err(|e| {
        CliError::Environment(format!("cannot serve DNS on --dns-listen {addr}: {e}"))
    })?;
    dns.publish(name, ticket.as_bytes())
        .map_err(|e| CliError::Environment(format!("cannot publish the ticket: {e}")))?;
    Ok(dns)
}

/// The client's ticket, verified against `ca` (DER) and the server's
/// name: `--ticket-dns NAME` names it; with `--ticket FILE` it is
/// `--server-name` or --server's HOST.
pub fn client_ticket(
    args: &ClientTicketArgs,
    ca_der: &[u8],
    server_name: Option<&str>,
) -> Result<Option<(VerifiedTicket, String)>, CliError> {
    let (ticket, name) = match (&args.ticket, &args.ticket_dns, args.dns_server) {
        (Some(path), None, _) => {
            let name = server_name.ok_or_else(|| {
                CliError::Usage(
                    "--ticket is for one server name, and the server is called by IP address: \
                     give --server-name (or --server HOST:PORT)"
                        .into(),
                )
            })?;
            (ticket_file(path)?, name.to_string())
        }
        (None, Some(name), Some(dns)) => {
            let bytes = smt::dns::lookup_ticket(dns, name).map_err(|e| {
                CliError::Peer(format!(
                    "no ticket for {name} from the DNS server {dns}: {e}"
                ))
            })?;
            let ticket = Ticket::decode(&bytes).map_err(|e| {
                CliError::Peer(format!("DNS server {dns}: the ticket of {name}: {e}"))
            })?;
            (ticket, name.clone())
        }
        (None, None, _) if args.forward_secrecy => {
            return Err(CliError::Usage(
                "--forward-secrecy is for 0-RTT tickets: add --ticket or --ticket-dns".into(),
            ))
        }
        _ => return Ok(None),
    };
    let verified = ticket
        .verify(ca_der, &name, SystemTime::now())
        .map_err(|e| CliError::Peer(format!("the ticket for {name} is refused: {e}")))?;
    Ok(Some((verified, name)))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
