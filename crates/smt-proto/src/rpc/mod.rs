//! Messages in flight: the send side ([`Outgoing`]) keeps sealed records for
//! retransmission; the receive side ([`Incoming`]) reassembles packets into
//! segments and opens records strictly in order.

mod handle;
mod incoming;
mod outgoing;

pub(crate) use handle::{MsgKey, ServerMsg, ServerSlot};
pub use handle::{RpcHandle, ServerRpcHandle};

// The reassembly fuzz harness checks its memory bound with it.
#[cfg(any(fuzzing, test))]
#[allow(unused_imports)]
pub(crate) use incoming::SEGMENT_OVERHEAD;
pub(crate) use incoming::{Accepted, Incoming, SegmentBuf, MESSAGE_OVERHEAD};
pub(crate) use outgoing::Outgoing;
