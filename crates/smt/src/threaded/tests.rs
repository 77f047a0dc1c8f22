//! Async callers that lead on the tokio reactor (`drive/tasks.rs`): with
//! no background thread at all, they make progress alone, hand the lead
//! on when dropped, and end with the close. Real loopback sockets; the
//! timeouts only turn a hang into a failure.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use crate::keys::{fresh_session_pair, AeadAlgorithm};
use crate::{Endpoint, EndpointConfig, Error};

const GENEROUS: Duration = Duration::from_secs(20);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A client without a background thread, and a server with one or
/// without.
fn pair(server_background: bool) -> (Endpoint, Endpoint) {
    let config = EndpointConfig::default();
    let client = Endpoint::bind_without_background(any_port(), config.clone()).unwrap();
    let server = if server_background {
        Endpoint::bind(any_port(), config).unwrap()
    } else {
        Endpoint::bind_without_background(any_port(), config).unwrap()
    };
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

/// Answers every request with its own bytes, from a task.
fn echo_task(server: &Endpoint) -> tokio::task::JoinHandle<()> {
    let server = server.clone();
    tokio::spawn(async move {
        while let Ok(mut request) = server.accept_async().await {
            let data = request.take_data();
            let _ = request.respond(data);
        }
    })
}

/// Closes `server` and waits for its echo task to end, each within
/// [`GENEROUS`]: a close that never finishes, or an accept the close did
/// not end, fails here with its name instead of hanging the test run.
async fn close_and_join(server: &Endpoint, echo: tokio::task::JoinHandle<()>) {
    let closed = tokio::time::timeout(GENEROUS, server.close_async()).await;
    closed.expect("the server's close did not finish");
    let ended = tokio::time::timeout(GENEROUS, echo).await;
    ended
        .expect("the close did not end the echo task's accept")
        .unwrap();
}

/// Polls `fut` once (it leads or follows, then waits).
async fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) {
    let mut fut = Some(fut);
    std::future::poll_fn(|cx| {
        if let Some(f) = fut.take() {
            assert!(f.poll(cx).is_pending(), "no reply can be here yet");
        }
        Poll::Ready(())
    })
    .await;
}

async fn calls_complete(threads: bool) {
    let (client, server) = pair(false);
    let echo = echo_task(&server);
    let to = server.local_addr();
    let callers: Vec<_> = (0..16)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                for n in 0..50u32 {
                    let request = format!("{i}:{n}");
                    let reply = client.call_async(to, request.as_bytes()).await?;
                    assert_eq!(&reply[..], request.as_bytes());
                }
                Ok::<_, Error>(())
            })
        })
        .collect();
    for caller in callers {
        let done = tokio::time::timeout(GENEROUS, caller).await;
        let done = done.unwrap_or_else(|_| panic!("calls hang alone (thread pool: {threads})"));
        done.unwrap().unwrap();
    }
    close_and_join(&server, echo).await;
}

#[tokio::test(flavor = "current_thread")]
async fn async_callers_alone_drive_both_ends_on_one_thread() {
    calls_complete(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_callers_alone_drive_both_ends_on_a_thread_pool() {
    calls_complete(true).await;
}

/// A call in a task of its own: polled only when its waker is woken, so
/// it goes on only if a leader hands it the lead (or its reply).
fn spawn_call(
    client: &Endpoint,
    to: SocketAddr,
    data: &'static [u8],
) -> tokio::task::JoinHandle<Result<bytes::Bytes, Error>> {
    let client = client.clone();
    tokio::spawn(async move { client.call_async(to, data).await })
}

/// Lets spawned tasks run until they wait (one runtime thread).
async fn let_tasks_wait() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_leader_hands_the_lead_to_a_follower() {
    let (client, server) = pair(true);
    let to = server.local_addr();
    // Nobody accepts yet: both calls wait.
    let mut leader = Box::pin(client.call_async(to, b"first"));
    poll_once(leader.as_mut()).await;
    assert!(client.shared().task_leads_now(), "the first call leads");
    let follower = spawn_call(&client, to, b"second");
    let_tasks_wait().await;
    drop(leader);
    let echo = echo_task(&server);
    let reply = tokio::time::timeout(GENEROUS, follower).await;
    let reply = reply.expect("the follower was left without a leader");
    assert_eq!(&reply.unwrap().unwrap()[..], b"second");
    close_and_join(&server, echo).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_promoted_future_dropped_before_it_looked_hands_the_lead_on() {
    let (client, server) = pair(true);
    let to = server.local_addr();
    let mut first = Box::pin(client.call_async(to, b"first"));
    let mut second = Box::pin(client.call_async(to, b"second"));
    poll_once(first.as_mut()).await;
    poll_once(second.as_mut()).await;
    let third = spawn_call(&client, to, b"third");
    let_tasks_wait().await;
    // The first resigns and promotes the second (the oldest follower),
    // which goes before it is polled again.
    drop(first);
    drop(second);
    let echo = echo_task(&server);
    let reply = tokio::time::timeout(GENEROUS, third).await;
    let reply = reply.expect("the lead was lost");
    assert_eq!(&reply.unwrap().unwrap()[..], b"third");
    close_and_join(&server, echo).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_close_ends_the_call_that_leads() {
    let (client, server) = pair(true);
    let to = server.local_addr();
    // The server never answers.
    let mut call = Box::pin(client.call_async(to, b"unanswered"));
    poll_once(call.as_mut()).await;
    assert!(client.shared().task_leads_now());
    let closing = client.clone();
    let close = tokio::spawn(async move { closing.close_async().await });
    let ended = tokio::time::timeout(GENEROUS, call).await;
    assert!(matches!(
        ended.expect("the close left the call waiting"),
        Err(Error::Closed)
    ));
    tokio::time::timeout(GENEROUS, close)
        .await
        .unwrap()
        .unwrap();
    server.close_async().await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_accept_that_leads_ends_with_the_close() {
    let (_client, server) = pair(false);
    let mut accept = Box::pin(server.accept_async());
    poll_once(accept.as_mut()).await;
    assert!(server.shared().task_leads_now());
    let closing = server.clone();
    let close = tokio::spawn(async move { closing.close_async().await });
    let ended = tokio::time::timeout(GENEROUS, accept).await;
    assert!(matches!(
        ended.expect("the close left the accept waiting"),
        Err(Error::Closed)
    ));
    tokio::time::timeout(GENEROUS, close)
        .await
        .unwrap()
        .unwrap();
}
