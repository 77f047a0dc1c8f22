//! Messages in flight: the send side ([`Outgoing`]) keeps sealed records for
//! retransmission; the receive side ([`Incoming`]) reassembles packets into
//! segments and opens records strictly in order. The RPCs that hold them:
//! [`ClientRpc`] (`client.rs`) and [`ServerRpc`] (`server.rs`), each with
//! its own decision table for control packets.

mod client;
mod handle;
mod incoming;
mod outgoing;
mod server;
mod silence;

pub(crate) use client::{ClientControl, ClientRpc, ClientTick};
pub(crate) use server::{ServerControl, ServerRpc, ServerState, ServerTick};
pub(crate) use silence::{is_resend_tick, missing, Silence};

pub(crate) use handle::{MsgKey, ServerMsg, ServerSlot};
pub use handle::{RpcHandle, ServerRpcHandle};

// The reassembly fuzz harness checks its memory bound with it.
#[cfg(any(fuzzing, test))]
#[allow(unused_imports)]
pub(crate) use incoming::SEGMENT_OVERHEAD;
pub(crate) use incoming::{Accepted, Incoming, SegmentBuf, MESSAGE_OVERHEAD};
pub(crate) use outgoing::{Outgoing, PacketRef};
