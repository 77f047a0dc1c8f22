//! The RPC layer over real SMT endpoints on loopback (issue #24 item 4):
//! typed calls, statuses and metadata both ways; the caller's deadline and
//! cancellation seen by the handler; the caller's identity; client and
//! server under tower layers (timeout, concurrency limit, load shed,
//! retry, balance); graceful shutdown. No timing thresholds: waits are
//! bounded by `GENEROUS` only.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde::{Deserialize, Serialize};
use smt::{Endpoint, EndpointConfig};
use smt_rpc::tower::{Service, ServiceBuilder};
use smt_rpc::{
    balance, BalanceOptions, CancelReason, Channel, Client, Code, Metadata, Method, Request,
    RetryUnavailable, Router, Server, Status,
};
use tokio::sync::{mpsc, oneshot};

/// A server task and the means to stop it.
struct Running {
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<Result<(), Status>>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        let served = tokio::time::timeout(GENEROUS, self.done).await;
        served.expect("shut down in time").unwrap().unwrap();
    }
}

fn spawn_server<S>(server: Server, service: S) -> Running
where
    S: Service<smt_rpc::RawRequest, Response = smt_rpc::RawResponse> + Send + 'static,
    S::Error: Into<smt_rpc::tower::BoxError>,
    S::Future: Send + 'static,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve_with_shutdown(service, async {
        let _ = stopped.await;
    }));
    Running { stop, done }
}

async fn next_held(held: &mut mpsc::UnboundedReceiver<Held>) -> Held {
    tokio::time::timeout(GENEROUS, held.recv())
        .await
        .expect("the handler reported in time")
        .expect("the handler reported")
}

#[test]
fn typed_calls_carry_metadata_and_statuses_both_ways() {
    runtime().block_on(async {
        let (client, server) = pair();
        let (tx, _held) = mpsc::unbounded_channel();
        let running = spawn_server(Server::new(server.clone()), router(tx));
        let channel = Channel::new(client, server.local_addr());
        let mut calc = Client::new(channel).with_timeout(GENEROUS);

        let mut metadata = Metadata::new();
        metadata.insert("x-ping", "42").unwrap();
        let request = Request::new("hello".to_owned()).with_metadata(metadata);
        let response = calc.unary(ECHO, request).await.unwrap();
        assert_eq!(response.message(), "hello");
        assert_eq!(response.metadata().get_str("x-pong"), Some("42"));

        let failed = calc.unary(FAIL, "not now".to_owned()).await.unwrap_err();
        assert_eq!(failed.code(), Code::FailedPrecondition);
        assert_eq!(failed.message(), "not now");
        assert_eq!(&failed.details()[..], b"\x08\x01");
        assert_eq!(failed.metadata().get_str("x-retry-after"), Some("never"));

        const NOPE: Method<(), ()> = Method::new("test.Echo/Nope");
        let missing = calc.unary(NOPE, ()).await.unwrap_err();
        assert_eq!(missing.code(), Code::Unimplemented);

        // Bytes that are no UTF-8 string, sent where a string is expected.
        const ECHO_BYTES: Method<Vec<u8>, String> = Method::new("test.Echo/Echo");
        let garbage = calc.unary(ECHO_BYTES, vec![0xff, 0xfe]).await.unwrap_err();
        assert_eq!(garbage.code(), Code::InvalidArgument, "{garbage}");
        running.stop().await;
    });
}

/// The handler knows how long the caller waits, and hears when that time
/// is up; the caller gets DEADLINE_EXCEEDED.
#[test]
fn the_handler_sees_the_callers_deadline_and_its_expiry() {
    runtime().block_on(async {
        let (client, server) = pair();
        let (tx, mut held) = mpsc::unbounded_channel();
        let running = spawn_server(Server::new(server.clone()), router(tx));
        let mut client = Client::new(Channel::new(client, server.local_addr()));
        let timeout = Duration::from_millis(300);
        let request = Request::new(GENEROUS.as_millis() as u64).with_timeout(timeout);
        let error = client.unary(HOLD, request).await.unwrap_err();
        assert_eq!(error.code(), Code::DeadlineExceeded, "{error}");
        let seen = next_held(&mut held).await;
        let remaining = seen.remaining.expect("the handler has a deadline");
        assert!(
            remaining <= timeout && !remaining.is_zero(),
            "{remaining:?}"
        );
        // The server's timer or the caller's RPC_UNKNOWN, whichever came
        // first (both at the deadline).
        assert!(
            matches!(
                seen.reason,
                Some(CancelReason::DeadlinePassed | CancelReason::CallerGone)
            ),
            "{seen:?}"
        );
        running.stop().await;
    });
}

/// The envelope as `docs/rpc.md` documents it, built here independently
/// of the crate's own encoder: a request whose caller (a plain SMT call
/// with no deadline of its own) announces 100 ms is cancelled at the
/// server by its deadline, and answered DEADLINE_EXCEEDED (code 4).
#[test]
fn the_servers_deadline_comes_from_the_envelope() {
    #[derive(Serialize)]
    struct Head {
        method: String,
        timeout_us: Option<u64>,
        metadata: Vec<(String, Vec<u8>)>,
    }
    #[derive(Deserialize)]
    struct ResponseHead {
        code: u32,
        message: String,
        _details: Vec<u8>,
        _metadata: Vec<(String, Vec<u8>)>,
    }
    runtime().block_on(async {
        let (client, server) = pair();
        let (tx, mut held) = mpsc::unbounded_channel();
        let running = spawn_server(Server::new(server.clone()), router(tx));
        let head = Head {
            method: HOLD.name().to_owned(),
            timeout_us: Some(100_000),
            metadata: vec![],
        };
        let mut envelope = postcard::to_stdvec(&head).unwrap();
        envelope.insert(0, 1);
        envelope.extend(postcard::to_stdvec(&GENEROUS.as_millis()).unwrap());
        // An SMT call with no timeout: only the server's deadline ends it.
        let reply = client
            .call_async(server.local_addr(), envelope)
            .await
            .unwrap();
        assert_eq!(reply[0], 1, "the envelope's version");
        let (head, _): (ResponseHead, _) = postcard::take_from_bytes(&reply[1..]).unwrap();
        assert_eq!(head.code, 4, "DEADLINE_EXCEEDED: {}", head.message);
        let seen = next_held(&mut held).await;
        assert_eq!(seen.reason, Some(CancelReason::DeadlinePassed));
        running.stop().await;
    });
}

/// A caller that drops its call (here: a tokio timeout around it, with no
/// deadline in the request) cancels the handler.
#[test]
fn a_caller_that_gives_up_cancels_the_handler() {
    runtime().block_on(async {
        let (client, server) = pair();
        let (tx, mut held) = mpsc::unbounded_channel();
        let running = spawn_server(Server::new(server.clone()), router(tx));
        let mut client = Client::new(Channel::new(client, server.local_addr()));
        let hold = GENEROUS.as_millis() as u64;
        let call = client.unary(HOLD, hold);
        assert!(tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err());
        let seen = next_held(&mut held).await;
        assert_eq!(seen.reason, Some(CancelReason::CallerGone));
        assert!(seen.remaining.is_none(), "no deadline was sent");
        running.stop().await;
    });
}

/// Server: load shedding in front of a concurrency limit of one. Client:
/// the shed call is UNAVAILABLE (it did not run); with the retry policy it
/// is sent again until it gets in. A client timeout layer ends a slow
/// call with DEADLINE_EXCEEDED and cancels its handler.
#[test]
fn tower_layers_apply_at_both_ends() {
    runtime().block_on(async {
        let (client, server) = pair();
        let (tx, mut held) = mpsc::unbounded_channel();
        let service = ServiceBuilder::new()
            .load_shed()
            .concurrency_limit(1)
            .service(router(tx));
        let running = spawn_server(Server::new(server.clone()), service);
        let channel = Channel::new(client, server.local_addr());

        // One request holds the only place for 300 ms.
        let mut holder = Client::new(channel.clone()).with_timeout(GENEROUS);
        let holding = tokio::spawn(async move { holder.unary(HOLD, 300).await });
        tokio::time::sleep(Duration::from_millis(50)).await;

        let mut plain = Client::new(channel.clone()).with_timeout(GENEROUS);
        let shed = plain.unary(ECHO, "now?".to_owned()).await.unwrap_err();
        assert_eq!(shed.code(), Code::Unavailable, "{shed}");
        assert!(shed.did_not_run());

        let retrying = ServiceBuilder::new()
            .retry(
                RetryUnavailable::new(1000)
                    .backoff(Duration::from_millis(5), Duration::from_millis(50)),
            )
            .service(channel.clone());
        let mut patient = Client::new(retrying).with_timeout(GENEROUS);
        let answer = patient.unary(ECHO, "eventually".to_owned()).await.unwrap();
        assert_eq!(answer.message(), "eventually");
        holding.await.unwrap().unwrap();
        assert_eq!(next_held(&mut held).await.reason, None, "ran to the end");

        let bounded = ServiceBuilder::new()
            .timeout(Duration::from_millis(100))
            .service(channel);
        let mut hasty = Client::new(bounded);
        let late = hasty
            .unary(HOLD, GENEROUS.as_millis() as u64)
            .await
            .unwrap_err();
        assert_eq!(late.code(), Code::DeadlineExceeded, "{late}");
        let seen = next_held(&mut held).await;
        assert_eq!(seen.reason, Some(CancelReason::CallerGone));
        running.stop().await;
    });
}

/// One replica of the balancing test: the test service, plus `Which`
/// (answers this replica's address, counted) and `Park` (held until
/// released, flagged while held).
struct Replica {
    addr: SocketAddr,
    served: Arc<AtomicUsize>,
    parked: Arc<AtomicBool>,
    running: Running,
}

const WHICH: Method<(), String> = Method::new("test.Replica/Which");
const PARK: Method<(), ()> = Method::new("test.Replica/Park");

fn replica(client: &Endpoint, release: Arc<tokio::sync::Notify>) -> Replica {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    connect(client, &server);
    let addr = server.local_addr();
    let served = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicBool::new(false));
    let (tx, _held) = mpsc::unbounded_channel();
    let (count, flag) = (served.clone(), parked.clone());
    let router = router(tx)
        .unary(WHICH, move |_: Request<()>| {
            count.fetch_add(1, Ordering::SeqCst);
            async move { Ok(addr.to_string()) }
        })
        .unwrap()
        .unary(PARK, move |_: Request<()>| {
            let (flag, release) = (flag.clone(), release.clone());
            async move {
                flag.store(true, Ordering::SeqCst);
                release.notified().await;
                Ok(())
            }
        })
        .unwrap();
    let running = spawn_server(Server::new(server), router);
    Replica {
        addr,
        served,
        parked,
        running,
    }
}

/// Three replicas behind names that resolve (through a resolver the test
/// controls) to their addresses: calls spread over all three; a replica
/// with a request outstanding gets no new ones while the others are idle
/// (two choices by outstanding requests); a replica whose name stops
/// resolving to it gets nothing after the next refreshes.
#[test]
fn a_balanced_client_spreads_calls_and_follows_resolution() {
    runtime().block_on(async {
        let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
        let release = Arc::new(tokio::sync::Notify::new());
        let replicas: Vec<Replica> = (0..3).map(|_| replica(&client, release.clone())).collect();
        let names: Arc<Mutex<HashMap<String, Vec<SocketAddr>>>> = Arc::default();
        names.lock().unwrap().extend([
            ("a.test:1".to_owned(), vec![replicas[0].addr]),
            (
                "bc.test:1".to_owned(),
                vec![replicas[1].addr, replicas[2].addr],
            ),
        ]);
        let table = names.clone();
        let resolver = move |target: &str| -> std::io::Result<Vec<SocketAddr>> {
            Ok(table
                .lock()
                .unwrap()
                .get(target)
                .cloned()
                .unwrap_or_default())
        };
        let options = BalanceOptions::default()
            .refresh(Duration::from_millis(50))
            .resolver(resolver);
        let channel = balance(client, ["a.test:1", "bc.test:1"], options);
        let mut calc = Client::new(channel).with_timeout(GENEROUS);
        let counts = |rs: &[Replica]| -> Vec<usize> {
            rs.iter().map(|r| r.served.load(Ordering::SeqCst)).collect()
        };

        for _ in 0..60 {
            calc.unary(WHICH, ()).await.unwrap();
        }
        let spread = counts(&replicas);
        assert!(
            spread.iter().all(|&n| n > 0),
            "every replica served: {spread:?}"
        );

        // One request parks on some replica; while it is outstanding and
        // the others idle, two choices never pick that replica.
        let mut parker = calc.clone();
        let park = tokio::spawn(async move { parker.unary(PARK, ()).await });
        let busy = loop {
            if let Some(i) = replicas
                .iter()
                .position(|r| r.parked.load(Ordering::SeqCst))
            {
                break i;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let before = counts(&replicas);
        for _ in 0..30 {
            calc.unary(WHICH, ()).await.unwrap();
        }
        let after = counts(&replicas);
        assert_eq!(
            after[busy], before[busy],
            "the busy replica was avoided: {before:?} -> {after:?}"
        );
        release.notify_waiters();
        tokio::time::timeout(GENEROUS, park)
            .await
            .unwrap()
            .unwrap()
            .unwrap();

        // Replica 0's name stops resolving to it.
        names.lock().unwrap().insert("a.test:1".to_owned(), vec![]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = counts(&replicas);
        for _ in 0..30 {
            calc.unary(WHICH, ()).await.unwrap();
        }
        let after = counts(&replicas);
        assert_eq!(
            after[0], before[0],
            "replica 0 left the set: {before:?} -> {after:?}"
        );
        assert_eq!(
            after.iter().sum::<usize>() - before.iter().sum::<usize>(),
            30
        );
        for r in replicas {
            r.running.stop().await;
        }
    });
}

/// A shutdown stops taking requests (a late one is UNAVAILABLE: it did
/// not run), lets the one in flight finish, and closes the endpoint.
#[test]
fn a_graceful_shutdown_drains_then_closes() {
    runtime().block_on(async {
        let (client, server) = pair();
        let (tx, mut held) = mpsc::unbounded_channel();
        let running = spawn_server(Server::new(server.clone()), router(tx));
        let channel = Channel::new(client, server.local_addr());
        let mut slow = Client::new(channel.clone()).with_timeout(GENEROUS);
        let in_flight = tokio::spawn(async move { slow.unary(HOLD, 400).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = running.stop.send(());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut late = Client::new(channel.clone()).with_timeout(GENEROUS);
        let refused = late.unary(ECHO, "late".to_owned()).await.unwrap_err();
        assert_eq!(refused.code(), Code::Unavailable, "{refused}");
        let finished = in_flight.await.unwrap().unwrap();
        assert!(*finished.message() >= 400, "ran to the end");
        assert_eq!(next_held(&mut held).await.reason, None);
        let served = tokio::time::timeout(GENEROUS, running.done).await;
        served.unwrap().unwrap().unwrap();
        assert!(server.stats().is_err(), "the endpoint is closed");
    });
}

/// With mutual TLS, the handler sees the client's verified certificate,
/// the name it asked for, and one session ID for the session's calls.
#[test]
fn the_handler_knows_the_callers_certificate_and_session() {
    use smt::tls::certs::Ca;
    use smt::tls::{ServerName, TlsClient, TlsServer};
    runtime().block_on(async {
        let ca = Ca::generate("smt-rpc test ca").unwrap();
        let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
        let cert = ca.issue(&["api.test"], false).unwrap();
        let tls = TlsServer::new(
            cert.chain_pem().as_bytes(),
            cert.key_pem().as_bytes(),
            Some(ca.cert_pem().as_bytes()),
        )
        .unwrap();
        server.set_tls_server(tls).unwrap();
        let (tx, _held) = mpsc::unbounded_channel();
        let running = spawn_server(Server::new(server.clone()), router(tx));

        let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
        let mine = ca.issue(&["client-42"], true).unwrap();
        let tls = TlsClient::new(
            ca.cert_pem().as_bytes(),
            Some((mine.chain_pem().as_bytes(), mine.key_pem().as_bytes())),
        )
        .unwrap();
        client.set_tls_client(tls).unwrap();
        let to = server.local_addr();
        client
            .set_server_name(to, ServerName::try_from("api.test").unwrap())
            .unwrap();
        let mut rpc = Client::new(Channel::new(client.clone(), to)).with_timeout(GENEROUS);
        let first = rpc.unary(WHOAMI, ()).await.unwrap().into_message();
        let second = rpc.unary(WHOAMI, ()).await.unwrap().into_message();
        assert_eq!(first.peer, client.local_addr().to_string());
        assert_eq!(
            first.certificate.as_deref(),
            mine.chain_der().first().copied()
        );
        assert_eq!(first.server_name.as_deref(), Some("api.test"));
        assert_eq!(first.session, second.session);
        running.stop().await;
    });
}

/// Messages generated from `.proto` files travel with the prost codec.
#[test]
fn prost_messages_travel_with_the_prost_codec() {
    #[derive(Clone, PartialEq, prost::Message)]
    struct Point {
        #[prost(sint32, tag = "1")]
        x: i32,
        #[prost(sint32, tag = "2")]
        y: i32,
    }
    const MIRROR: Method<Point, Point, smt_rpc::Prost> = Method::new("geo.Plane/Mirror");
    runtime().block_on(async {
        let (client, server) = pair();
        let router = Router::new()
            .unary(MIRROR, |req: Request<Point>| async move {
                let p = req.into_message();
                Ok(Point { x: -p.x, y: -p.y })
            })
            .unwrap();
        let running = spawn_server(Server::new(server.clone()), router);
        let mut plane =
            Client::new(Channel::new(client, server.local_addr())).with_timeout(GENEROUS);
        let back = plane.unary(MIRROR, Point { x: 3, y: -4 }).await.unwrap();
        assert_eq!(*back.message(), Point { x: -3, y: 4 });
        running.stop().await;
    });
}
