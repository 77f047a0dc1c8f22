//! SMT through the caller-driven `LocalEndpoint`: no driver thread, the
//! client thread sends inside `call` and receives inside `poll`, the echo
//! thread owns the server endpoint.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use smt::{Bytes, CallId, LocalEndpoint, LocalEvent};

use super::{check_echo, ServerThread, Slot, System};

/// How long a call may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the echo thread checks whether to stop.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// How long a slot driving the endpoint for everyone sleeps in `poll` when
/// nothing is ready: short, because the open loop's arrival timer cannot
/// fire while the thread sleeps there.
const BLOCK: Duration = Duration::from_micros(50);

/// The client endpoint and the outcomes of calls whose slots have not
/// collected them yet.
struct Shared {
    client: LocalEndpoint,
    server: SocketAddr,
    done: HashMap<CallId, io::Result<usize>>,
    wakers: HashMap<CallId, Waker>,
    /// A slot is inside `poll` on everyone's behalf.
    polling: bool,
}

/// A share of the client endpoint. All slots live on the client thread;
/// whichever slot finds nobody polling drives the endpoint for all (the
/// endpoint has no thread of its own) and wakes the slots whose responses
/// it received. Alone (one RPC at a time) a slot simply blocks in `poll`.
pub struct LocalSlot {
    shared: Rc<RefCell<Shared>>,
    alone: bool,
}

impl std::fmt::Debug for LocalSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSlot")
            .field("alone", &self.alone)
            .finish_non_exhaustive()
    }
}

/// What an event means for the call it names.
fn outcome(event: LocalEvent) -> Option<(CallId, io::Result<usize>)> {
    match event {
        LocalEvent::Response { call, data } => Some((call, Ok(data.len()))),
        LocalEvent::Failed { call, error } => Some((call, Err(io::Error::other(error)))),
        _ => None,
    }
}

impl Shared {
    /// Records an outcome and wakes its slot; true if it was `mine`.
    fn deliver(&mut self, call: CallId, result: io::Result<usize>, mine: CallId) -> bool {
        self.done.insert(call, result);
        if let Some(w) = self.wakers.remove(&call) {
            w.wake();
        }
        call == mine
    }

    /// Receives what is ready. If nothing is, and no woken slot is still
    /// to run (it would issue its next call), sleeps up to `BLOCK` for one
    /// event: sleeping while slots wait to send would keep the pipeline
    /// from filling. Returns whether any call completed.
    fn drive(&mut self, mine: CallId) -> io::Result<bool> {
        let mut any = false;
        let mut mine_done = false;
        while let Some(event) = self
            .client
            .poll(Some(Duration::ZERO))
            .map_err(io::Error::other)?
        {
            if let Some((call, result)) = outcome(event) {
                any = true;
                mine_done |= self.deliver(call, result, mine);
            }
        }
        let others_runnable = self.done.keys().any(|c| *c != mine);
        if any || mine_done || others_runnable {
            return Ok(any);
        }
        if let Some(event) = self.client.poll(Some(BLOCK)).map_err(io::Error::other)? {
            if let Some((call, result)) = outcome(event) {
                self.deliver(call, result, mine);
                any = true;
            }
        }
        Ok(any)
    }

    /// Gives up the polling role and hands it to a waiting slot.
    fn release(&mut self) {
        self.polling = false;
        if let Some(&call) = self.wakers.keys().next() {
            if let Some(w) = self.wakers.remove(&call) {
                w.wake();
            }
        }
    }
}

/// Resolves when `call` has an outcome or nobody is polling.
struct Turn<'a> {
    shared: &'a RefCell<Shared>,
    call: CallId,
}

impl Future for Turn<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.shared.borrow_mut();
        if s.done.contains_key(&self.call) || !s.polling {
            return Poll::Ready(());
        }
        s.wakers.insert(self.call, cx.waker().clone());
        Poll::Pending
    }
}

impl LocalSlot {
    /// One RPC at a time: block the thread in `poll` until the response.
    fn call_alone(&mut self, request: &'static [u8]) -> io::Result<usize> {
        let mut s = self.shared.borrow_mut();
        let server = s.server;
        let request = Bytes::from_static(request);
        let id = s.client.call(server, request).map_err(io::Error::other)?;
        loop {
            match s
                .client
                .poll(Some(CALL_TIMEOUT))
                .map_err(io::Error::other)?
            {
                None => return Err(io::Error::new(io::ErrorKind::TimedOut, "no response")),
                Some(event) => match outcome(event) {
                    Some((call, result)) if call == id => return result,
                    Some((call, result)) => drop(s.done.insert(call, result)),
                    None => {}
                },
            }
        }
    }
}

impl Slot for LocalSlot {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        if self.alone {
            let n = self.call_alone(request)?;
            return check_echo(request.len(), n);
        }
        let id = {
            let mut s = self.shared.borrow_mut();
            let server = s.server;
            let shared = Bytes::from_static(request);
            s.client.call(server, shared).map_err(io::Error::other)?
        };
        // Let the other runnable slots queue their calls first: the next
        // `poll` then sends them together (one system call, coalesced
        // datagrams), as an application issuing a batch would.
        tokio::task::yield_now().await;
        loop {
            if let Some(result) = self.shared.borrow_mut().done.remove(&id) {
                return check_echo(request.len(), result?);
            }
            let mine = {
                let mut s = self.shared.borrow_mut();
                !std::mem::replace(&mut s.polling, true)
            };
            if !mine {
                Turn {
                    shared: &self.shared,
                    call: id,
                }
                .await;
                continue;
            }
            let driven = self.shared.borrow_mut().drive(id);
            self.shared.borrow_mut().release();
            driven?;
            // Let the slots just woken (and the arrival timer) run.
            tokio::task::yield_now().await;
        }
    }

    fn set_alone(&mut self, alone: bool) {
        self.alone = alone;
    }
}

/// Answers requests until `stop` is set.
fn echo(mut server: LocalEndpoint, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match server.poll(Some(STOP_CHECK)) {
            Ok(Some(LocalEvent::Request { request, data })) => {
                let _ = server.respond(request, data);
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// Binds the client here and the server on its own thread (each endpoint
/// belongs to the thread that drives it), and installs fresh keys.
pub fn start(system: System, slots: usize) -> io::Result<(ServerThread, Vec<LocalSlot>)> {
    let any = super::link::LOOPBACK;
    let config = super::smt::config(system);
    let mut client = LocalEndpoint::bind(any, config.clone()).map_err(io::Error::other)?;
    let (client_keys, server_keys) = super::smt::keys(system);
    let client_addr = client.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("smt-local-echo".into())
        .spawn(move || {
            let bound = LocalEndpoint::bind(any, config).and_then(|mut server| {
                server.install_session(client_addr, server_keys)?;
                Ok(server)
            });
            match bound {
                Ok(server) => {
                    let _ = addr_tx.send(Ok(server.local_addr()));
                    echo(server, &stopping);
                }
                Err(e) => drop(addr_tx.send(Err(io::Error::other(e)))),
            }
        })?;
    let stop_fn = Box::new(move || stop.store(true, Ordering::Relaxed));
    let mut server_thread = ServerThread::new(stop_fn, thread);
    if system.at_link_mtu() {
        let note = super::link::note(system.name(), any);
        server_thread = server_thread.with_report(Box::new(move || vec![note.clone()]));
    }
    let server = addr_rx
        .recv()
        .map_err(|_| io::Error::other("SMT echo thread ended"))??;
    client
        .install_session(server, client_keys)
        .map_err(io::Error::other)?;
    let shared = Rc::new(RefCell::new(Shared {
        client,
        server,
        done: HashMap::new(),
        wakers: HashMap::new(),
        polling: false,
    }));
    let slots = (0..slots)
        .map(|_| LocalSlot {
            shared: shared.clone(),
            alone: false,
        })
        .collect();
    Ok((server_thread, slots))
}
