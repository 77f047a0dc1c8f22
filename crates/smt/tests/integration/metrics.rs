//! `smt::metrics` on real endpoints: several endpoints in one page that
//! Prometheus's own linter accepts (`promtool check metrics`, from
//! Debian's prometheus package, installed by `scripts/promtool-test.sh
//! --install`; without it those checks print SKIPPED), the server's
//! requests served and handler latency, and the page read back with a
//! Prometheus text-format parser. No timing thresholds: a handler that
//! sleeps gives its latency a floor, nothing else is timed.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use prometheus_parse::{Scrape, Value};
use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::metrics::{prometheus_client, EndpointCollector};
use smt::stats::LatencyHistogram;
use smt::{Endpoint, EndpointConfig};

/// How long the handler sleeps before answering (a floor on its latency).
const HANDLER_SLEEP: Duration = Duration::from_millis(20);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A server whose one thread sleeps `HANDLER_SLEEP`, then echoes every
/// request but those starting with `drop`, which it drops unanswered;
/// and `clients` clients with sessions to it.
fn server_and_clients(clients: usize) -> (Endpoint, Vec<Endpoint>) {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            if req.data().starts_with(b"drop") {
                continue;
            }
            std::thread::sleep(HANDLER_SLEEP);
            let data = req.data().to_vec();
            let _ = req.respond(&data);
        }
    });
    let clients = (0..clients)
        .map(|_| {
            let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
            let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
            client.install_session(server.local_addr(), ck).unwrap();
            server.install_session(client.local_addr(), sk).unwrap();
            client
        })
        .collect();
    (server, clients)
}

/// `promtool check metrics` on `page`: `None` when promtool is not
/// installed, else whether it passed and what it said.
fn promtool_check(page: &str) -> Option<(bool, String)> {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("promtool: {e}"),
    };
    let mut stdin = child.stdin.take().unwrap();
    let text = page.to_string();
    // Written from a thread: a page larger than the pipe would otherwise
    // wait for promtool, which waits for the end of its input.
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success() && said.trim().is_empty(), said))
}

fn parse(page: &str) -> Scrape {
    Scrape::parse(page.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text format")
}

/// A counter or gauge by name and labels.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {name} {labels:?}"));
    match sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{name}: {other:?}"),
    }
}

/// A histogram's cumulative counts by upper bound.
fn buckets(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no histogram {name} {labels:?}"));
    match &sample.value {
        Value::Histogram(h) => h.iter().map(|b| (b.less_than, b.count)).collect(),
        other => panic!("{name}: not a histogram: {other:?}"),
    }
}

/// What the issue saw: two endpoints' pages pasted together are refused
/// ("second HELP line"); the collector's one page of both passes, in an
/// application's registry next to its own metrics.
#[test]
fn two_endpoints_in_one_registry_pass_promtool() {
    let (server, clients) = server_and_clients(2);
    for (i, client) in clients.iter().enumerate() {
        for n in 0..3 + i {
            client
                .call(server.local_addr(), vec![n as u8; 100])
                .unwrap();
        }
    }
    let collector = EndpointCollector::new();
    collector.add(&server);
    collector.add_with(&clients[0], &[("endpoint", "client-0")], 4);
    collector.add_with(&clients[1], &[("endpoint", "client-1")], 4);
    let mut registry = prometheus_client::registry::Registry::default();
    let app_counter = prometheus_client::metrics::counter::Counter::<u64>::default();
    registry.register(
        "app_jobs",
        "The application's own jobs",
        app_counter.clone(),
    );
    app_counter.inc();
    registry.register_collector(Box::new(collector.clone()));
    let mut page = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut page, &registry).unwrap();

    // Every family once, a sample per endpoint.
    let helps = page
        .lines()
        .filter(|l| l.starts_with("# HELP smt_rpcs_completed_total "))
        .count();
    assert_eq!(helps, 1, "{page}");
    let scrape = parse(&page);
    let server_label = server.local_addr().to_string();
    assert_eq!(
        value(
            &scrape,
            "smt_rpcs_completed_total",
            &[("endpoint", "client-1")]
        ),
        4.0
    );
    assert_eq!(
        value(
            &scrape,
            "smt_requests_served_total",
            &[("endpoint", &server_label)]
        ),
        7.0
    );
    let by_peer = [("endpoint", "client-0"), ("peer", server_label.as_str())];
    assert_eq!(
        value(&scrape, "smt_peer_rpcs_completed_total", &by_peer),
        3.0
    );
    assert_eq!(value(&scrape, "app_jobs_total", &[]), 1.0);

    let Some((passed, said)) = promtool_check(&page) else {
        println!("SKIPPED: promtool not installed (scripts/promtool-test.sh --install)");
        return;
    };
    println!(
        "promtool check metrics on {} lines: {said:?}",
        page.lines().count()
    );
    assert!(passed, "promtool refused the page: {said}\n{page}");

    // The pages of each endpoint alone pass too, but not pasted together.
    let mut pasted = String::new();
    for (i, ep) in [&server, &clients[0]].into_iter().enumerate() {
        let label = i.to_string();
        let stats = ep.stats().unwrap();
        stats
            .write_prometheus(&[("endpoint", &label)], &mut pasted)
            .unwrap();
        let mut alone = String::new();
        stats.write_prometheus(&[], &mut alone).unwrap();
        assert!(promtool_check(&alone).unwrap().0, "{alone}");
    }
    let (passed, said) = promtool_check(&pasted).unwrap();
    assert!(!passed && said.contains("second HELP line"), "{said}");
}

/// The server counts the requests it served and those it dropped, and
/// how long its handler took: at least the handler's sleep, per request.
#[test]
fn a_server_exports_requests_served_and_handler_latency() {
    let (server, clients) = server_and_clients(1);
    let to = server.local_addr();
    for i in 0..5u8 {
        clients[0].call(to, vec![i; 300]).unwrap();
    }
    let dropped = clients[0].call_with(to, b"drop me", Duration::from_secs(20));
    assert!(dropped.is_err(), "{dropped:?}");

    let stats = server.stats().unwrap();
    assert_eq!(stats.total.rpcs.served, 5);
    assert_eq!(stats.total.rpcs.abandoned, 1);
    let latency = &stats.total.handler_latency;
    assert_eq!(latency.count(), 5);
    assert!(latency.sum() >= 5 * HANDLER_SLEEP, "{latency:?}");
    assert!(
        latency.quantile(0.0).unwrap() >= HANDLER_SLEEP,
        "{latency:?}"
    );
    // The client's calls waited for the handler too.
    let rtt = clients[0].stats().unwrap().total.rtt;
    assert_eq!(rtt.count(), 5, "the abandoned call has no round trip");
    assert!(rtt.quantile(0.0).unwrap() >= HANDLER_SLEEP, "{rtt:?}");
    // A client serves nothing.
    assert_eq!(clients[0].stats().unwrap().total.rpcs.served, 0);

    let mut page = String::new();
    stats.write_prometheus(&[], &mut page).unwrap();
    let scrape = parse(&page);
    assert_eq!(value(&scrape, "smt_requests_served_total", &[]), 5.0);
    assert_eq!(value(&scrape, "smt_requests_abandoned_total", &[]), 1.0);
    let histogram = buckets(&scrape, "smt_handler_latency_seconds", &[]);
    assert_eq!(histogram.len(), LatencyHistogram::BUCKETS);
    assert_eq!(histogram.last().unwrap(), &(f64::INFINITY, 5.0));
    // No request took less than the sleep: every bucket below it is empty.
    let floor = HANDLER_SLEEP.as_secs_f64();
    for (le, count) in &histogram {
        if *le < floor {
            assert_eq!(*count, 0.0, "le={le}");
        }
    }
    let sum = value(&scrape, "smt_handler_latency_seconds_sum", &[]);
    assert!((sum - latency.sum().as_secs_f64()).abs() < 1e-9, "{sum}");
}

/// The collector holds no endpoint open: a closed or dropped one leaves
/// its list, and the page stays valid.
#[test]
fn closed_and_dropped_endpoints_leave_the_collector() {
    let (server, clients) = server_and_clients(1);
    let collector = EndpointCollector::new();
    collector.add(&server);
    collector.add_with(&clients[0], &[("endpoint", "gone")], 0);
    // The same labels again replace the first.
    collector.add_with(&clients[0], &[("endpoint", "gone")], 2);
    let count = |c: &EndpointCollector| {
        let mut page = String::new();
        c.write(&mut page).unwrap();
        parse(&page)
            .samples
            .iter()
            .filter(|s| s.metric == "smt_sessions")
            .count()
    };
    assert_eq!(count(&collector), 2);
    let [client] = <[Endpoint; 1]>::try_from(clients).unwrap();
    drop(client);
    assert_eq!(count(&collector), 1);
    server.close();
    assert_eq!(count(&collector), 0);
    let mut page = String::new();
    collector.write(&mut page).unwrap();
    if let Some((passed, said)) = promtool_check(&page) {
        assert!(passed, "{said}\n{page}");
    }
}
