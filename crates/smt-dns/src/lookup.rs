//! Looking a ticket up through one given DNS server (hickory-resolver).

use std::{io, net::SocketAddr, sync::Arc, time::Duration};

use hickory_resolver::{
    config::{NameServerConfig, ResolveHosts, ResolverConfig},
    net::{runtime::TokioRuntimeProvider, NetError},
    proto::rr::{Name, RData, RecordType},
    TokioResolver,
};
use tracing::debug;

use crate::{
    error::{DnsError, MalformedRecord},
    record::{is_ticket_record, ticket_from_txt, ticket_name},
};

/// How a lookup talks to the DNS server.
///
/// The resolver is built for one lookup, pointed only at the given server (UDP first, TCP
/// when the answer is truncated), with no system configuration: no `/etc/resolv.conf`, no
/// hosts file, no search domains.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LookupOptions {
    /// Time allowed for each query attempt.
    pub timeout: Duration,
    /// Query attempts before giving up with [`DnsError::Timeout`].
    pub attempts: usize,
}

impl Default for LookupOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2),
            attempts: 2,
        }
    }
}

impl LookupOptions {
    /// Looks up the ticket of `host` at `resolver`, blocking the calling thread.
    ///
    /// Runs its own single-threaded runtime; called from inside a tokio runtime, it runs that
    /// on a scoped helper thread rather than panic (prefer [`Self::lookup_async`] there).
    pub fn lookup(&self, resolver: SocketAddr, host: &str) -> Result<Vec<u8>, DnsError> {
        let run = || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(self.lookup_async(resolver, host))
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return run();
        }
        std::thread::scope(|scope| {
            scope.spawn(run).join().unwrap_or_else(|_| {
                Err(DnsError::Io(io::Error::other(
                    "ticket lookup thread panicked",
                )))
            })
        })
    }

    /// Looks up the ticket of `host` at `resolver`. Needs a tokio runtime with I/O and time
    /// enabled.
    pub async fn lookup_async(
        &self,
        resolver: SocketAddr,
        host: &str,
    ) -> Result<Vec<u8>, DnsError> {
        let name = ticket_name(host)?;
        let client = self.resolver(resolver)?;
        let lookup = client
            .lookup(name.clone(), RecordType::TXT)
            .await
            .map_err(|e| lookup_error(e, &name))?;
        debug!(%name, answers = lookup.answers().len(), "ticket lookup answered");
        let records: Vec<Vec<&[u8]>> = lookup
            .answers()
            .iter()
            .filter_map(|record| match &record.data {
                RData::TXT(txt) => Some(txt.txt_data.iter().map(|s| &s[..]).collect()),
                _ => None,
            })
            .collect();
        ticket_from_records(&records, &name)
    }

    /// A resolver that asks only `server`.
    fn resolver(&self, server: SocketAddr) -> Result<TokioResolver, DnsError> {
        let mut name_server = NameServerConfig::udp_and_tcp(server.ip());
        for connection in &mut name_server.connections {
            connection.port = server.port();
        }
        let config = ResolverConfig::from_parts(None, Vec::new(), vec![name_server]);
        let mut builder =
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
        let options = builder.options_mut();
        options.timeout = self.timeout;
        options.attempts = self.attempts;
        options.use_hosts_file = ResolveHosts::Never;
        options.ndots = 0;
        builder
            .build()
            .map_err(|e| DnsError::Resolve(e.to_string()))
    }
}

/// Looks up the ticket published for `host` (at `_smt-ticket.<host>.`) by asking only the
/// DNS server at `resolver`, with [`LookupOptions::default`]. Blocks the calling thread.
pub fn lookup_ticket(resolver: SocketAddr, host: &str) -> Result<Vec<u8>, DnsError> {
    LookupOptions::default().lookup(resolver, host)
}

/// [`lookup_ticket`] for async callers (tokio, with I/O and time enabled).
pub async fn lookup_ticket_async(resolver: SocketAddr, host: &str) -> Result<Vec<u8>, DnsError> {
    LookupOptions::default().lookup_async(resolver, host).await
}

/// Picks the one SMT ticket record among the TXT records at a name and decodes it. TXT
/// records of other kinds are ignored; several SMT records are ambiguous and rejected.
fn ticket_from_records(records: &[Vec<&[u8]>], name: &Name) -> Result<Vec<u8>, DnsError> {
    let mut tickets = records.iter().filter(|strings| is_ticket_record(strings));
    match (tickets.next(), tickets.next()) {
        (Some(strings), None) => ticket_from_txt(strings),
        (Some(_), Some(_)) => {
            let n = records.iter().filter(|s| is_ticket_record(s)).count();
            Err(MalformedRecord::MultipleRecords(n).into())
        }
        (None, _) if records.is_empty() => Err(DnsError::NotFound {
            name: name.to_ascii(),
        }),
        (None, _) => Err(MalformedRecord::NoTicketRecord(records.len()).into()),
    }
}

/// Sorts a resolver error into the crate's kinds.
fn lookup_error(e: NetError, name: &Name) -> DnsError {
    if e.is_no_records_found() {
        return DnsError::NotFound {
            name: name.to_ascii(),
        };
    }
    match e {
        NetError::Timeout => DnsError::Timeout,
        NetError::Io(e) => DnsError::Io(
            Arc::try_unwrap(e)
                .unwrap_or_else(|shared| io::Error::new(shared.kind(), shared.to_string())),
        ),
        other => DnsError::Resolve(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> Name {
        Name::from_ascii("_smt-ticket.a.test.").unwrap()
    }

    #[test]
    fn ignores_other_txt_records() {
        let records = vec![
            vec![&b"v=spf1 -all"[..]],
            vec![&b"v=smt1;"[..], &b"Zm9v"[..]],
        ];
        assert_eq!(ticket_from_records(&records, &name()).unwrap(), b"foo");
    }

    #[test]
    fn rejects_ambiguous_and_foreign_records() {
        let two = vec![vec![&b"v=smt1;Zm9v"[..]], vec![&b"v=smt1;"[..]]];
        let foreign = vec![vec![&b"hello"[..]]];
        let err = |records: &[Vec<&[u8]>]| match ticket_from_records(records, &name()) {
            Err(DnsError::Malformed(why)) => why,
            other => panic!("expected Malformed, got {other:?}"),
        };
        assert_eq!(err(&two), MalformedRecord::MultipleRecords(2));
        assert_eq!(err(&foreign), MalformedRecord::NoTicketRecord(1));
    }

    #[test]
    fn no_txt_record_is_not_found() {
        assert!(matches!(
            ticket_from_records(&[], &name()),
            Err(DnsError::NotFound { .. })
        ));
    }
}
