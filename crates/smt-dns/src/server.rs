//! An embedded authoritative DNS server for ticket records (hickory-server, in memory).

use std::{
    collections::BTreeMap,
    fmt, io,
    net::{SocketAddr, TcpListener, UdpSocket},
    sync::{
        atomic::{AtomicU32, Ordering},
        mpsc, Arc,
    },
    thread,
    time::Duration,
};

use hickory_server::{
    net::runtime::TokioRuntimeProvider,
    proto::rr::{
        rdata::{SOA, TXT},
        LowerName, Name, RData, Record, RecordSet, RecordType, RrKey,
    },
    store::in_memory::InMemoryZoneHandler,
    zone_handler::{AxfrPolicy, Catalog, ZoneHandler, ZoneType},
    Server,
};
use tokio::sync::oneshot;
use tracing::{debug, warn};

use crate::{
    error::DnsError,
    record::{ticket_name, ticket_txt_strings, MAX_TICKET_LEN},
};

/// TTL of a ticket record, in seconds: short, because servers rotate tickets.
pub const TICKET_TTL_SECS: u32 = 60;

/// How long a client may cache "no ticket here" (the SOA minimum), in seconds.
pub const NEGATIVE_TTL_SECS: u32 = 5;

/// A TCP connection that sends no query for this long is closed.
const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Responses queued per TCP connection.
const TCP_RESPONSE_BUFFER: usize = 32;

/// Tries at finding a port free for both UDP and TCP when the caller asked for port 0.
const PORT_PAIR_ATTEMPTS: usize = 16;

type Records = BTreeMap<RrKey, Arc<RecordSet>>;

/// An authoritative DNS server for one zone that serves SMT ticket records from memory.
///
/// It answers over UDP and TCP on the same address, so a resolver that gets a truncated UDP
/// answer (a typical ticket record is about 1.9 KB, above the common 1232-byte EDNS limit)
/// retries over TCP. It runs a single-threaded tokio runtime on its own thread; dropping the
/// server stops it and joins that thread.
///
/// The zone holds an SOA record and the published tickets, nothing else (no NS records): it
/// is meant to be queried directly, or delegated to from a parent zone that supplies the NS
/// and glue records.
pub struct TicketDnsServer {
    local_addr: SocketAddr,
    origin: Name,
    zone: Arc<InMemoryZoneHandler>,
    serial: Arc<AtomicU32>,
    runtime: tokio::runtime::Handle,
    /// Dropping this sender tells the server thread to stop.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl TicketDnsServer {
    /// Binds UDP and TCP on `bind` (port 0 picks a port free for both) and starts serving
    /// `zone` (e.g. `"example.test"`, the final dot optional), empty but for its SOA record.
    pub fn spawn(bind: SocketAddr, zone: &str) -> io::Result<Self> {
        let origin = zone_origin(zone)?;
        let (udp, tcp) = bind_udp_and_tcp(bind)?;
        let local_addr = udp.local_addr()?;
        let serial = Arc::new(AtomicU32::new(1));
        let zone = Arc::new(empty_zone(&origin)?);

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut server = {
            let _entered = runtime.enter();
            let mut catalog = Catalog::new();
            catalog.upsert(
                LowerName::new(&origin),
                vec![zone.clone() as Arc<dyn ZoneHandler>],
            );
            let mut server = Server::new(catalog);
            server.register_socket(tokio::net::UdpSocket::from_std(udp)?);
            let tcp = tokio::net::TcpListener::from_std(tcp)?;
            server.register_listener(tcp, TCP_IDLE_TIMEOUT, TCP_RESPONSE_BUFFER);
            server
        };
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name("smt-dns-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let token = server.shutdown_token().clone();
                    tokio::spawn(async move {
                        // Ok or Err: a send and a dropped sender both mean "stop".
                        let _ = stopped.await;
                        token.cancel();
                    });
                    if let Err(e) = server.block_until_done().await {
                        warn!(error = %e, "ticket DNS server stopped with an error");
                    }
                });
            })?;
        debug!(%local_addr, zone = %origin, "ticket DNS server started");
        Ok(Self {
            local_addr,
            origin,
            zone,
            serial,
            runtime: handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address the server answers on (UDP and TCP).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The zone the server is authoritative for, fully qualified.
    pub fn zone(&self) -> String {
        self.origin.to_ascii()
    }

    /// Publishes `ticket` for `host` at `_smt-ticket.<host>.`, replacing any earlier ticket,
    /// and bumps the zone's SOA serial. The new record is served when this returns.
    ///
    /// `host` must lie in the server's zone, and the ticket must not exceed
    /// [`MAX_TICKET_LEN`]. Blocks briefly on the server thread; fine to call from async code.
    pub fn publish(&self, host: &str, ticket: &[u8]) -> Result<(), DnsError> {
        if ticket.len() > MAX_TICKET_LEN {
            return Err(DnsError::TicketTooLarge {
                len: ticket.len(),
                max: MAX_TICKET_LEN,
            });
        }
        let name = self.name_in_zone(host)?;
        let txt = RData::TXT(TXT::new(ticket_txt_strings(ticket)));
        let mut rrset = RecordSet::with_ttl(name.clone(), RecordType::TXT, TICKET_TTL_SECS);
        rrset.insert(Record::from_rdata(name.clone(), TICKET_TTL_SECS, txt), 0);
        let key = RrKey::new(LowerName::new(&name), RecordType::TXT);
        self.edit(move |records| {
            records.insert(key, Arc::new(rrset));
        })
    }

    /// Removes the ticket published for `host`; returns whether there was one.
    pub fn withdraw(&self, host: &str) -> Result<bool, DnsError> {
        let name = self.name_in_zone(host)?;
        let key = RrKey::new(LowerName::new(&name), RecordType::TXT);
        self.edit(move |records| records.remove(&key).is_some())
    }

    /// The ticket record name for `host`, if it lies in this server's zone.
    fn name_in_zone(&self, host: &str) -> Result<Name, DnsError> {
        let name = ticket_name(host)?;
        if !self.origin.zone_of(&name) {
            return Err(DnsError::OutOfZone {
                name: name.to_ascii(),
                zone: self.zone(),
            });
        }
        Ok(name)
    }

    /// Runs `change` on the zone's records on the server thread, then installs a new SOA with
    /// the next serial, all under one write lock, and waits for the result.
    fn edit<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Records) -> T + Send + 'static,
    ) -> Result<T, DnsError> {
        let (zone, origin, serial) = (self.zone.clone(), self.origin.clone(), self.serial.clone());
        let (done, result) = mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let mut records = zone.records_mut().await;
            let out = change(&mut records);
            let serial = serial.fetch_add(1, Ordering::Relaxed) + 1;
            let soa = soa_rrset(&origin, serial);
            records.insert(
                RrKey::new(LowerName::new(&origin), RecordType::SOA),
                Arc::new(soa),
            );
            let _ = done.send(out);
        });
        // A runtime that has shut down drops the task, and with it `done`.
        result.recv().map_err(|_| DnsError::ServerStopped)
    }
}

impl Drop for TicketDnsServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                warn!("ticket DNS server thread panicked");
            }
        }
    }
}

impl fmt::Debug for TicketDnsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketDnsServer")
            .field("local_addr", &self.local_addr)
            .field("zone", &self.origin.to_ascii())
            .field("serial", &self.serial.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Parses the zone name given to [`TicketDnsServer::spawn`] as a fully qualified name.
fn zone_origin(zone: &str) -> io::Result<Name> {
    let fqdn = if zone.ends_with('.') {
        zone.to_owned()
    } else {
        format!("{zone}.")
    };
    Name::from_ascii(&fqdn).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid zone name {zone:?}: {e}"),
        )
    })
}

/// Binds a UDP socket and a TCP listener to the same address; with port 0, retries until a
/// port is free for both.
fn bind_udp_and_tcp(bind: SocketAddr) -> io::Result<(UdpSocket, TcpListener)> {
    let attempts = if bind.port() == 0 {
        PORT_PAIR_ATTEMPTS
    } else {
        1
    };
    let mut last = None;
    for _ in 0..attempts {
        let udp = UdpSocket::bind(bind)?;
        match TcpListener::bind(udp.local_addr()?) {
            Ok(tcp) => {
                udp.set_nonblocking(true)?;
                tcp.set_nonblocking(true)?;
                return Ok((udp, tcp));
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    // NOTE(unwrap): the loop runs at least once and only falls through after storing an error.
    Err(last.unwrap())
}

/// A zone that holds only its SOA record.
fn empty_zone(origin: &Name) -> io::Result<InMemoryZoneHandler> {
    let mut records = BTreeMap::new();
    records.insert(
        RrKey::new(LowerName::new(origin), RecordType::SOA),
        soa_rrset(origin, 1),
    );
    InMemoryZoneHandler::<TokioRuntimeProvider>::new(
        origin.clone(),
        records,
        ZoneType::Primary,
        AxfrPolicy::Deny,
    )
    .map_err(io::Error::other)
}

/// The zone's SOA record set with `serial`.
fn soa_rrset(origin: &Name, serial: u32) -> RecordSet {
    // A zone name too long to take another label names itself as the contact.
    let rname = Name::from_labels(["hostmaster"])
        .and_then(|mailbox| mailbox.append_domain(origin))
        .unwrap_or_else(|_| origin.clone());
    let soa = SOA::new(
        origin.clone(),
        rname,
        serial,
        3600,
        600,
        86_400,
        NEGATIVE_TTL_SECS,
    );
    let record = Record::from_rdata(origin.clone(), NEGATIVE_TTL_SECS, RData::SOA(soa));
    let mut rrset = RecordSet::with_ttl(origin.clone(), RecordType::SOA, NEGATIVE_TTL_SECS);
    rrset.insert(record, serial);
    rrset
}
