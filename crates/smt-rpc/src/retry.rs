//! Retrying what did not run: a `tower::retry::Policy` that sends a
//! request again only when its status says it never ran
//! ([`crate::Code::Unavailable`]: refused by an overloaded server, shed
//! by a layer, shutting down, nobody there), after a jittered
//! exponential back-off. A request that may have run is never sent twice.

use std::time::Duration;

use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
use tower::retry::Policy;
use tower::util::rng::HasherRng;
use tower::BoxError;

use crate::router::RawRequest;
use crate::Status;

/// Retries requests that did not run, up to `max_retries` times per call,
/// waiting `min`, `2 min`, `4 min`... (at most `max`) plus up to as much
/// again at random between attempts. Use with
/// `ServiceBuilder::new().retry(RetryUnavailable::new(3))`.
#[derive(Clone, Debug)]
pub struct RetryUnavailable {
    retries_left: usize,
    min: Duration,
    max: Duration,
    backoff: Option<ExponentialBackoff>,
}

impl RetryUnavailable {
    /// At most `max_retries` retries, from 10 ms of back-off up to 1 s.
    pub fn new(max_retries: usize) -> Self {
        Self {
            retries_left: max_retries,
            min: Duration::from_millis(10),
            max: Duration::from_secs(1),
            backoff: None,
        }
    }

    /// The first back-off and the longest (`max` at least 1 ms).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.max = max.max(Duration::from_millis(1));
        self.min = min.min(self.max);
        self
    }

    fn next(&mut self) -> Option<tokio::time::Sleep> {
        if self.retries_left == 0 {
            return None;
        }
        self.retries_left -= 1;
        let (min, max) = (self.min, self.max);
        let backoff = self.backoff.get_or_insert_with(|| {
            // A fresh random state per call: callers refused together do
            // not come back together. `backoff` keeps min <= max, max > 0.
            ExponentialBackoffMaker::new(min, max, 1.0, HasherRng::default())
                .map(|mut m| m.make_backoff())
                .unwrap_or_else(|_| {
                    let mut m = ExponentialBackoffMaker::default();
                    m.make_backoff()
                })
        });
        Some(backoff.next_backoff())
    }
}

impl<Res> Policy<RawRequest, Res, Status> for RetryUnavailable {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _: &mut RawRequest,
        result: &mut Result<Res, Status>,
    ) -> Option<Self::Future> {
        match result {
            Err(status) if status.did_not_run() => self.next(),
            _ => None,
        }
    }

    fn clone_request(&mut self, request: &RawRequest) -> Option<RawRequest> {
        Some(request.clone())
    }
}

impl<Res> Policy<RawRequest, Res, BoxError> for RetryUnavailable {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _: &mut RawRequest,
        result: &mut Result<Res, BoxError>,
    ) -> Option<Self::Future> {
        match result {
            Err(e) if did_not_run(e) => self.next(),
            _ => None,
        }
    }

    fn clone_request(&mut self, request: &RawRequest) -> Option<RawRequest> {
        Some(request.clone())
    }
}

/// Whether a boxed error from a stack means the request never ran.
fn did_not_run(error: &BoxError) -> bool {
    if let Some(status) = error.downcast_ref::<Status>() {
        return status.did_not_run();
    }
    error.is::<tower::load_shed::error::Overloaded>()
}
