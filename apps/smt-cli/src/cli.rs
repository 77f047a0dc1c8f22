//! Command-line arguments. Values are checked while parsing (see
//! `crate::values`), so a bad one stops `smt` before anything starts, with
//! the option's name and its limits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::values::{byte_count, count, host_port, seconds, server_addr, ServerAddr};

/// Encrypted message-based RPCs over UDP or raw IP (Secure Message
/// Transport): TLS 1.3 record protection inside a Homa-style transport.
#[derive(Debug, Parser)]
#[command(
    name = "smt",
    version,
    after_help = "Run `smt demo` to see it work. Across two processes or hosts:\n  \
        smt ca init --dir ca\n  \
        smt cert issue --ca ca --name 10.0.0.5 --out server\n  \
        smt server --listen 10.0.0.5:7878 --cert server.pem --key server-key.pem\n  \
        smt client --server 10.0.0.5:7878 --ca ca/ca.pem\n\
        or, with a pre-shared key instead of TLS: `smt keygen --out psk.key`, then \
        --psk \"$(cat psk.key)\" on both sides. 0-RTT: `smt ticket issue --cert server.pem \
        --key server-key.pem --name NAME`, then `smt server ... --ticket-key \
        smt-ticket-static.key` and `smt client ... --server-name NAME --ticket smt-ticket`."
)]
pub struct Cli {
    /// More logging (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Server and client in one process on loopback (TLS 1.3 with a
    /// throwaway CA, or fresh keys), RPCs of 64 B to 1 MiB; prints latency,
    /// throughput and both sides' counters.
    Demo(DemoArgs),
    /// Serve RPCs (echo) over TLS 1.3 (--cert/--key, plus --ca for mutual
    /// TLS) or with a pre-shared key (--psk).
    Server(ServerArgs),
    /// Send RPCs to an `smt server` (TLS 1.3 with --ca, or --psk) and
    /// report latency and throughput.
    Client(ClientArgs),
    /// Make a new random pre-shared key (hex) for `server`/`client --psk`:
    /// printed, or written to a private file with --out.
    Keygen(KeygenArgs),
    /// Time to first response with each way of establishing a session
    /// (paper Fig. 12): full TLS 1.3, TLS resumption, 0-RTT SMT-ticket with
    /// and without forward secrecy; plus per-step CPU costs (Table 2).
    BenchHandshake(BenchHandshakeArgs),
    /// Certificate authority files (PEM).
    #[command(subcommand)]
    Ca(CaCommand),
    /// Certificates issued by a CA made with `smt ca init`.
    #[command(subcommand)]
    Cert(CertCommand),
    /// 0-RTT SMT-tickets (seed 001 §4.5.2).
    #[command(subcommand)]
    Ticket(TicketCommand),
    /// Decode a pcap/pcapng capture of SMT; with the key log, decrypt its
    /// messages (docs/observability.md).
    Dump(smt_dump::cli::DumpArgs),
}

/// Whether files that exist already may be replaced.
#[derive(Debug, Args, Clone, Copy)]
pub struct ForceArg {
    /// Overwrite output files that exist (otherwise `smt` refuses).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Write the key to this file (created readable by its owner only)
    /// instead of printing it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub force: ForceArg,
}

#[derive(Debug, Subcommand)]
pub enum TicketCommand {
    /// Issue a ticket signed with a server certificate's key: writes OUT
    /// (base64 ticket) and OUT-static.key (the server's long-term X25519
    /// key, hex; created readable by its owner only).
    Issue {
        /// Server certificate chain (PEM, from `smt cert issue`).
        #[arg(long)]
        cert: PathBuf,
        /// Its private key (PEM).
        #[arg(long)]
        key: PathBuf,
        /// The server's DNS name (in the certificate).
        #[arg(long)]
        name: String,
        /// Validity in seconds (at most 3600).
        #[arg(long, default_value_t = 3600)]
        lifetime: u64,
        /// Output file.
        #[arg(long, default_value = "smt-ticket")]
        out: PathBuf,
        #[command(flatten)]
        force: ForceArg,
    },
    /// Print a ticket's fields; with --ca, verify it.
    Show {
        /// The ticket file (base64).
        #[arg(long, default_value = "smt-ticket")]
        ticket: PathBuf,
        /// CA certificate (PEM) to verify against.
        #[arg(long)]
        ca: Option<PathBuf>,
        /// Expected server name (default: the ticket's).
        #[arg(long)]
        name: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct BenchHandshakeArgs {
    /// Sessions to establish per method.
    /// (1,000: the p99 of 200 is their 2nd slowest, one unlucky session.)
    #[arg(long, default_value_t = 1000, value_parser = count::<1, 100_000>, allow_negative_numbers = true)]
    pub iterations: usize,
    /// Sessions per method run first and reported apart (the first
    /// sessions of a method pay for cold caches, lazy set-up and the
    /// allocator's growth).
    #[arg(long, default_value_t = 20, value_parser = count::<0, 100_000>, allow_negative_numbers = true)]
    pub warmup: usize,
    /// Also read each thread's CPU time, context switches and the page
    /// faults of every session (Linux /proc): one line per session on
    /// stderr and a summary of the sessions slower than 2× the median.
    #[arg(long)]
    pub probe: bool,
    /// Time each client endpoint's first call (its start-up included)
    /// instead of a session opened after one warm-up call to another peer.
    #[arg(long)]
    pub cold: bool,
    /// Print one JSON document instead of the tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum CaCommand {
    /// Make a new CA (ECDSA P-256): writes DIR/ca.pem (certificate) and
    /// DIR/ca-key.pem (certificate and key, created readable by its owner
    /// only).
    Init {
        /// Directory to write into (created private if it does not exist).
        #[arg(long, default_value = "smt-ca")]
        dir: PathBuf,
        /// The CA's name.
        #[arg(long, default_value = "SMT datacenter CA")]
        name: String,
        #[command(flatten)]
        force: ForceArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum CertCommand {
    /// Issue a certificate for NAMES (DNS names or IP addresses): writes
    /// OUT.pem (chain) and OUT-key.pem (created readable by its owner only).
    Issue {
        /// The CA directory (from `smt ca init`).
        #[arg(long, default_value = "smt-ca")]
        ca: PathBuf,
        /// A name the certificate is for, an IP address or a DNS name;
        /// repeat for more. Clients check the address they call.
        #[arg(long = "name", required = true)]
        names: Vec<String>,
        /// A client certificate (for mutual TLS) instead of a server one.
        #[arg(long)]
        client: bool,
        /// Output path prefix.
        #[arg(long, default_value = "smt-cert")]
        out: PathBuf,
        #[command(flatten)]
        force: ForceArg,
    },
}

/// The server's keys: TLS 1.3 files or a pre-shared key (one of the two).
#[derive(Debug, Args, Clone, Default)]
pub struct ServerKeyArgs {
    /// The server's certificate chain (PEM, from `smt cert issue`): TLS 1.3.
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// A CA certificate (PEM): clients must present a certificate it
    /// issued (mutual TLS). Needs --cert and --key.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// A pre-shared key, hex (from `smt keygen`), instead of TLS.
    #[arg(long, env = "SMT_PSK", hide_env_values = true)]
    pub psk: Option<String>,
}

/// The client's keys: TLS 1.3 files or a pre-shared key (one of the two).
#[derive(Debug, Args, Clone, Default)]
pub struct ClientKeyArgs {
    /// The CA certificate (PEM) that issued the server's certificate:
    /// TLS 1.3.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// This client's certificate chain (PEM, from `smt cert issue
    /// --client`), for a server that requires one (mutual TLS).
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// The server's pre-shared key, hex, instead of TLS.
    #[arg(long, env = "SMT_PSK", hide_env_values = true)]
    pub psk: Option<String>,
}

/// 0-RTT SMT-tickets a server answers (with or without TLS or a PSK).
#[derive(Debug, Args, Clone, Default)]
pub struct ServerTicketArgs {
    /// The server's static X25519 key (hex: OUT-static.key from `smt ticket
    /// issue`): answer 0-RTT hellos for its ticket.
    #[arg(long, value_name = "FILE")]
    pub ticket_key: Option<PathBuf>,
    /// The ticket for --ticket-key (base64, from `smt ticket issue`;
    /// default: --ticket-key's path without "-static.key").
    #[arg(long, value_name = "FILE", requires = "ticket_key")]
    pub ticket: Option<PathBuf>,
    /// Publish the ticket in DNS: serve the zone of the ticket's name on
    /// this address (UDP and TCP), TXT record _smt-ticket.NAME., for
    /// `smt client --ticket-dns NAME --dns-server ADDR`.
    #[arg(long, value_name = "ADDR", value_parser = host_port, requires = "ticket_key")]
    pub dns_listen: Option<SocketAddr>,
}

/// A 0-RTT SMT-ticket for the client's sessions (from a file or DNS).
#[derive(Debug, Args, Clone, Default)]
pub struct ClientTicketArgs {
    /// The server's ticket (base64, from `smt ticket issue`): 0-RTT, the
    /// first request goes with the hello. Checked against --ca and the
    /// server's name.
    #[arg(long, value_name = "FILE", conflicts_with = "ticket_dns")]
    pub ticket: Option<PathBuf>,
    /// Look up the ticket of NAME in DNS (TXT _smt-ticket.NAME.) at
    /// --dns-server: 0-RTT. Checked against --ca and NAME.
    #[arg(long, value_name = "NAME", requires = "dns_server")]
    pub ticket_dns: Option<String>,
    /// The DNS server to ask for --ticket-dns (IP:PORT or HOST:PORT).
    #[arg(long, value_name = "ADDR", value_parser = host_port, requires = "ticket_dns")]
    pub dns_server: Option<SocketAddr>,
    /// With a ticket: switch to a forward-secret key after one round trip
    /// (the first flight stays under the ticket's key).
    #[arg(long)]
    pub forward_secrecy: bool,
}

#[derive(Debug, Args, Clone)]
pub struct TransportArgs {
    /// Use SMT's own IP protocol (raw IP; needs CAP_NET_RAW) instead of UDP.
    #[arg(long)]
    pub raw: bool,
    /// IP protocol number in raw mode.
    #[arg(long, default_value_t = smt::DEFAULT_IP_PROTOCOL)]
    pub ip_protocol: u8,
    /// Link MTU; packets are sized to fit it (IP and UDP headers included).
    #[arg(long, default_value_t = 1500, value_parser = count::<68, 65_535>, allow_negative_numbers = true)]
    pub mtu: usize,
    /// Disable UDP segmentation offload (GSO).
    #[arg(long)]
    pub no_gso: bool,
    /// Disable UDP receive offload (GRO).
    #[arg(long)]
    pub no_gro: bool,
    /// Busy-poll the socket (lowest latency, one core spinning).
    #[arg(long)]
    pub busy_poll: bool,
}

/// Recording what the endpoint does (`docs/observability.md`).
#[derive(Debug, Args, Clone, Default)]
pub struct ObserveArgs {
    /// Capture every datagram the endpoint sends and receives into FILE
    /// (pcapng, with IP and UDP headers; Wireshark reads it), and the
    /// session keys into FILE's name with .keys: `smt dump FILE --keylog
    /// FILE.keys` decrypts every message. Anyone with the key file can
    /// decrypt the sessions: for debugging only.
    #[arg(long, value_name = "FILE")]
    pub capture: Option<PathBuf>,
    /// Write the protocol's events (packets, GRANTs, RESENDs,
    /// retransmissions, timeouts, records, handshakes) into FILE, one JSON
    /// object per line: `smt dump --trace FILE` prints each RPC's timeline.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Overwrite the --capture and --trace files (and the capture's .keys)
    /// if they exist (otherwise `smt` refuses).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Seconds to spend per message size (latency and throughput phases).
    #[arg(long, default_value = "1", value_parser = seconds, allow_negative_numbers = true)]
    pub seconds: Duration,
    /// Outstanding RPCs in the throughput phase.
    #[arg(long, default_value_t = 32, value_parser = count::<1, 1024>, allow_negative_numbers = true)]
    pub concurrency: usize,
    /// Install fresh keys directly instead of running a TLS 1.3 handshake
    /// with a throwaway CA.
    #[arg(long)]
    pub no_handshake: bool,
    /// Message sizes to run (bytes), comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [64usize, 1024, 16384, 65536, 1 << 20],
        value_parser = byte_count,
        allow_negative_numbers = true
    )]
    pub sizes: Vec<usize>,
    /// Print one JSON document instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// TLS offload, the engine model's threads standing in for the NIC
    /// (docs/offload.md); its counters are printed.
    #[arg(long)]
    pub offload: bool,
    /// --capture records the client's datagrams (all there are between
    /// the two); --trace both endpoints' events.
    #[command(flatten)]
    pub observe: ObserveArgs,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Address to listen on (IP:PORT or HOST:PORT).
    #[arg(long, default_value = "127.0.0.1:7878", value_parser = host_port)]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub keys: ServerKeyArgs,
    /// Threads answering requests.
    #[arg(long, default_value_t = 2, value_parser = count::<1, 256>, allow_negative_numbers = true)]
    pub threads: usize,
    #[command(flatten)]
    pub tickets: ServerTicketArgs,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long, value_parser = seconds, allow_negative_numbers = true)]
    pub duration: Option<Duration>,
    /// Print the server's counters every SECS seconds (default: never).
    #[arg(long, value_name = "SECS", value_parser = seconds, allow_negative_numbers = true)]
    pub stats_interval: Option<Duration>,
    /// Print those counters as one JSON document per line (all of them,
    /// as `smt::Stats` serialises) instead of a summary line.
    #[arg(long, requires = "stats_interval")]
    pub json: bool,
    /// Serve the counters for Prometheus at http://ADDR/metrics (text
    /// exposition format; docs/observability.md).
    #[arg(long, value_name = "ADDR", value_parser = host_port)]
    pub metrics: Option<SocketAddr>,
    /// With --metrics: also export the N busiest peers' own counters
    /// (`smt_peer_*{peer="IP:PORT"}`; 64 series per peer).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "metrics",
          value_parser = count::<0, 1000>, allow_negative_numbers = true)]
    pub metrics_peers: usize,
    #[command(flatten)]
    pub observe: ObserveArgs,
}

#[derive(Debug, Args)]
pub struct ClientArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// The server's address (IP:PORT or HOST:PORT). With TLS the server's
    /// certificate must name HOST (a name, or the IP address given).
    #[arg(long, default_value = "127.0.0.1:7878", value_parser = server_addr)]
    pub server: ServerAddr,
    /// The name to check in the server's certificate (and its ticket)
    /// instead of --server's HOST: for a server called by IP address whose
    /// certificate holds a DNS name.
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    #[command(flatten)]
    pub keys: ClientKeyArgs,
    #[command(flatten)]
    pub ticket: ClientTicketArgs,
    /// Request size in bytes (the response is as large: the server echoes).
    #[arg(long, default_value_t = 1024, value_parser = byte_count, allow_negative_numbers = true)]
    pub size: usize,
    /// Seconds to run (half one-at-a-time for latency, half concurrent).
    #[arg(long, default_value = "2", value_parser = seconds, allow_negative_numbers = true)]
    pub seconds: Duration,
    /// Outstanding RPCs at once.
    #[arg(long, default_value_t = 16, value_parser = count::<1, 1024>, allow_negative_numbers = true)]
    pub concurrency: usize,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub observe: ObserveArgs,
}
