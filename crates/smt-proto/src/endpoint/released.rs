//! Large buffers the endpoint is done with, handed to the driver to free
//! outside the calls that finish with them (see `buffers.rs`).

use super::Endpoint;
use crate::buffers::{released_limit, Released};

impl Endpoint {
    /// Whether the driver frees the endpoint's large buffers itself (off
    /// by default). When on, a buffer of a megabyte or more that a call
    /// is done with — a finished message's wire form, reassembly memory,
    /// a buffer handed back with [`Endpoint::recycle`], a large message the
    /// application handed over as owned bytes — is not freed in that call
    /// but kept for [`Endpoint::take_released`], which the driver calls
    /// after its calls and whose result it drops where freeing takes no
    /// one's time (outside the lock a threaded driver calls the endpoint
    /// under: freeing a 256 MiB buffer unmaps its pages, a tenth of a
    /// second or more). A driver that stops taking them loses nothing:
    /// once 256 MiB or four of the largest messages
    /// (`Config::max_message_len`) wait, whichever is more, they are freed
    /// in the next call that releases one. Off, they are freed where they
    /// are released, as small buffers always are (the pool keeps those for
    /// reuse); turning it off frees what is waiting.
    pub fn set_collect_released(&mut self, on: bool) {
        let limit = released_limit(self.config.max_message_len);
        self.buffers.pool.collect_released(on.then_some(limit));
    }

    /// The large buffers released since the last call (empty unless
    /// [`Endpoint::set_collect_released`] is on), to drop when the
    /// driver's time is its own. O(1): nothing is freed here.
    pub fn take_released(&mut self) -> Released {
        self.buffers.pool.take_released()
    }
}
