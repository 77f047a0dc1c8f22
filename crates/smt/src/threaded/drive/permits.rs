//! The bound on outstanding calls: tokens in a bounded channel.

/// At most [`crate::EndpointConfig::max_outstanding_calls`] calls at
/// once: a call takes a token before it starts and gives it back when it
/// ends. The free tokens wait in a bounded channel, which serves blocking
/// callers (`recv`) and async ones (`recv_async`) alike, in order.
///
/// A close must wake the callers waiting for a token even when the calls
/// holding every token are not given back (an async call's future kept
/// but no longer polled holds its token until dropped): it adds one
/// token beyond the limit (see [`Permits::relay_close`]).
pub(super) struct Permits {
    give: flume::Sender<()>,
    take: flume::Receiver<()>,
}

impl Permits {
    pub(super) fn new(max: usize) -> Self {
        let (give, take) = flume::bounded(max);
        for _ in 0..max {
            // Room for exactly `max`: cannot fail.
            let _ = give.try_send(());
        }
        Self { give, take }
    }

    /// Waits (blocking) for a free token.
    pub(super) fn wait(&self) -> Permit<'_> {
        // Both ends live in `self`: the channel never disconnects.
        let _ = self.take.recv();
        Permit(self)
    }

    /// Waits (asynchronously) for a free token.
    pub(super) async fn wait_async(&self) -> Permit<'_> {
        let _ = self.take.recv_async().await;
        Permit(self)
    }

    /// Wakes the callers waiting for a token once the endpoint is closed:
    /// one extra token relays from waiter to waiter, since each sees the
    /// close, fails with [`crate::Error::Closed`] and gives it back. A full
    /// channel refuses it, and then nobody waits.
    pub(super) fn relay_close(&self) {
        let _ = self.give.try_send(());
    }
}

/// One call's token; dropping it frees the place.
pub(crate) struct Permit<'a>(&'a Permits);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let _ = self.0.give.try_send(());
    }
}
