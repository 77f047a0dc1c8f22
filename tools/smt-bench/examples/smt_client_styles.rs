//! Which way should smt-bench drive SMT's C outstanding calls? Compares
//! `call_async` tasks on one current-thread tokio runtime (what the tool
//! uses) with C threads each making blocking `call`s, on the same pair of
//! endpoints, 64 B echo, for a few concurrencies.
//!
//! ```sh
//! cargo run --release -p smt-bench --example smt_client_styles
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt_bench::systems::{self, Slot, System};

const TIME: Duration = Duration::from_millis(500);

fn async_rate(slots: Vec<systems::smt::SmtSlot>) -> (f64, Vec<systems::smt::SmtSlot>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let end = Instant::now() + TIME;
        let tasks: Vec<_> = slots
            .into_iter()
            .map(|mut s| {
                tokio::task::spawn_local(async move {
                    let mut n = 0u64;
                    while Instant::now() < end {
                        if s.call(systems::payload(64)).await.is_ok() {
                            n += 1;
                        }
                    }
                    (s, n)
                })
            })
            .collect();
        let mut total = 0;
        let mut back = Vec::new();
        for t in tasks {
            let (s, n) = t.await.expect("task");
            total += n;
            back.push(s);
        }
        (total as f64 / TIME.as_secs_f64(), back)
    })
}

fn threads_rate(client: &smt::Endpoint, server: std::net::SocketAddr, c: usize) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..c)
        .map(|_| {
            let (client, done, stop) = (client.clone(), done.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if client.call(server, systems::payload(64)).is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(TIME);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    done.load(Ordering::Relaxed) as f64 / TIME.as_secs_f64()
}

fn main() {
    for c in [1, 8, 32] {
        let (server, slots) = systems::smt::start(System::SmtAes, c).expect("start");
        let (client, peer) = slots[0].parts();
        let (a, slots) = async_rate(slots);
        let t = threads_rate(&client, peer, c);
        println!(
            "{c:>4} outstanding: call_async tasks {a:>9.0} RPC/s, blocking threads {t:>9.0} RPC/s"
        );
        drop(slots);
        server.stop();
    }
}
