//! Messages in flight: the send side ([`Outgoing`]) keeps sealed records for
//! retransmission; the receive side ([`Incoming`]) reassembles packets into
//! segments and opens records strictly in order.

mod incoming;
mod outgoing;

pub(crate) use incoming::{Accepted, Incoming};
pub(crate) use outgoing::Outgoing;
