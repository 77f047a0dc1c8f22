//! Calling a set of replicas: tower's power-of-two-choices balancer over
//! one [`Channel`] per server address, each weighed by its outstanding
//! requests (`PendingRequests`), fed by a discovery task that resolves the
//! targets' names again every [`BalanceOptions::refresh`].
//!
//! Per pick, the balancer draws two ready replicas at random and sends to
//! the one with fewer requests in flight (Mitzenmacher's two choices: the
//! maximum load drops from log n / log log n to log log n). A replica
//! whose name no longer resolves to it leaves the set; requests in flight
//! to it finish. A resolution that fails keeps the target's last
//! addresses (a DNS hiccup empties no pool).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use smt::tls::ServerName;
use smt::Endpoint;
use tokio::sync::mpsc;
use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::Change;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::util::BoxCloneService;
use tower::BoxError;

use crate::router::{RawRequest, RawResponse};
use crate::Channel;

/// A balanced, buffered channel: `Clone`, errors boxed (a [`crate::Client`]
/// maps them to statuses).
pub type BalancedChannel = BoxCloneService<RawRequest, RawResponse, BoxError>;

/// Turns a target (`HOST:PORT`) into addresses.
pub trait Resolve: Send + Sync + 'static {
    /// The addresses `target` names now (called again on each refresh).
    fn resolve(&self, target: &str) -> io::Result<Vec<SocketAddr>>;
}

impl<F> Resolve for F
where
    F: Fn(&str) -> io::Result<Vec<SocketAddr>> + Send + Sync + 'static,
{
    fn resolve(&self, target: &str) -> io::Result<Vec<SocketAddr>> {
        self(target)
    }
}

/// The system resolver (`getaddrinfo`), every address it returns.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, target: &str) -> io::Result<Vec<SocketAddr>> {
        Ok(target.to_socket_addrs()?.collect())
    }
}

/// How [`balance`] finds its replicas.
#[derive(Clone)]
pub struct BalanceOptions {
    refresh: Duration,
    buffer: usize,
    resolver: Arc<dyn Resolve>,
}

impl std::fmt::Debug for BalanceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalanceOptions")
            .field("refresh", &self.refresh)
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl Default for BalanceOptions {
    fn default() -> Self {
        Self {
            refresh: Duration::from_secs(30),
            buffer: 1024,
            resolver: Arc::new(SystemResolver),
        }
    }
}

impl BalanceOptions {
    /// How often the targets are resolved again (default 30 s).
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every.max(Duration::from_millis(10));
        self
    }

    /// Requests that may wait for the balancer (default 1024): the
    /// buffer between the clones and the one balancer.
    pub fn buffer(mut self, requests: usize) -> Self {
        self.buffer = requests.max(1);
        self
    }

    /// Resolves targets with `resolver` instead of the system's.
    pub fn resolver(mut self, resolver: impl Resolve) -> Self {
        self.resolver = Arc::new(resolver);
        self
    }
}

/// A channel that balances over every address the `targets`
/// (`HOST:PORT`, names or IP addresses) resolve to, of the endpoint's
/// address family. A target named by host name has TLS verify each of its
/// addresses against that name. Must be called inside a tokio runtime
/// (the discovery task and the buffer's worker are spawned on it); they
/// end when every clone of the channel is dropped.
///
/// Until the first resolution has found a server, calls wait (bound them
/// with a timeout layer or [`crate::Client::with_timeout`]).
pub fn balance(
    endpoint: Endpoint,
    targets: impl IntoIterator<Item = impl Into<String>>,
    options: BalanceOptions,
) -> BalancedChannel {
    let targets: Vec<String> = targets.into_iter().map(Into::into).collect();
    let (changes, receive) = mpsc::channel(64);
    let discovery = Discovery {
        endpoint,
        targets,
        resolver: options.resolver.clone(),
        refresh: options.refresh,
        changes,
    };
    tokio::spawn(discovery.run());
    let mut receive = receive;
    let discover = futures_util::stream::poll_fn(move |cx| receive.poll_recv(cx));
    let balancer = Balance::new(discover);
    BoxCloneService::new(Buffer::new(balancer, options.buffer))
}

type Replica = PendingRequests<Channel, CompleteOnResponse>;

/// The task that resolves targets and tells the balancer what changed.
struct Discovery {
    endpoint: Endpoint,
    targets: Vec<String>,
    resolver: Arc<dyn Resolve>,
    refresh: Duration,
    changes: mpsc::Sender<Result<Change<SocketAddr, Replica>, Infallible>>,
}

impl Discovery {
    async fn run(self) {
        let mut by_target: HashMap<String, HashSet<SocketAddr>> = HashMap::new();
        let mut current: HashSet<SocketAddr> = HashSet::new();
        loop {
            let resolved = self.resolve_all().await;
            for (target, addrs) in resolved {
                match addrs {
                    Ok(addrs) => {
                        by_target.insert(target, addrs);
                    }
                    Err(e) => tracing::warn!(%target, "cannot resolve, keeping its addresses: {e}"),
                }
            }
            let next: HashSet<SocketAddr> = by_target.values().flatten().copied().collect();
            if self.send_changes(&current, &next).await.is_err() {
                return;
            }
            current = next;
            tokio::select! {
                () = tokio::time::sleep(self.refresh) => {}
                () = self.changes.closed() => return,
            }
        }
    }

    /// Every target's addresses of the endpoint's family (the lookups
    /// block, so they run on tokio's blocking pool).
    async fn resolve_all(&self) -> Vec<(String, io::Result<HashSet<SocketAddr>>)> {
        let targets = self.targets.clone();
        let resolver = self.resolver.clone();
        let v4 = self.endpoint.local_addr().is_ipv4();
        let lookups = tokio::task::spawn_blocking(move || {
            targets
                .into_iter()
                .map(|t| {
                    let addrs = resolver.resolve(&t).map(|all| {
                        all.into_iter()
                            .filter(|a| a.is_ipv4() == v4)
                            .collect::<HashSet<_>>()
                    });
                    (t, addrs)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (target, addrs) in &lookups {
            if let (Some(name), Ok(addrs)) = (dns_name(target), addrs) {
                for addr in addrs {
                    let _ = self.endpoint.set_server_name(*addr, name.clone());
                }
            }
        }
        lookups
    }

    async fn send_changes(
        &self,
        current: &HashSet<SocketAddr>,
        next: &HashSet<SocketAddr>,
    ) -> Result<(), ()> {
        for gone in current.difference(next) {
            tracing::debug!(%gone, "replica left the set");
            self.send(Change::Remove(*gone)).await?;
        }
        for new in next.difference(current) {
            tracing::debug!(%new, "replica joined the set");
            let channel = Channel::new(self.endpoint.clone(), *new);
            let replica = PendingRequests::new(channel, CompleteOnResponse::default());
            self.send(Change::Insert(*new, replica)).await?;
        }
        Ok(())
    }

    async fn send(&self, change: Change<SocketAddr, Replica>) -> Result<(), ()> {
        self.changes.send(Ok(change)).await.map_err(|_| ())
    }
}

/// The DNS name in `HOST:PORT`, if HOST is one (not an IP address).
fn dns_name(target: &str) -> Option<ServerName<'static>> {
    if target.parse::<SocketAddr>().is_ok() {
        return None;
    }
    let (host, _) = target.rsplit_once(':')?;
    match ServerName::try_from(host.to_owned()).ok()? {
        name @ ServerName::DnsName(_) => Some(name),
        _ => None,
    }
}
