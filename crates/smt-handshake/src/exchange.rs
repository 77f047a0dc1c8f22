//! The two sides of the 0-RTT exchange (the SMT paper §4.5.2-4.5.3).
//!
//! ```text
//! client                                              server (static key S, ticket)
//! ZeroRttClient::start_at(verified ticket, pool, fs, now)
//!   ── ClientHello0 { H(ticket), client_random, e_c.pub, flags, time } ──►
//!   ── 0-RTT data under the SMT-key (epoch 0) ──────────────────────►
//!                                                     ZeroRttServer::accept(hello, now)
//!                                                       SMT-key; if fs: e_s, fs-key, MAC
//!   ◄── ServerReply0 { e_s.pub, HMAC(finished_key, th1) } (fs only) ─
//!   ◄── data under the fs-key (epoch 1) ─────────────────────────────
//! ZeroRttClient::finish(reply) → fs-key
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use aws_lc_rs::digest;
use smt_proto::{Role, SessionKeys};

use crate::freshness::{unix_millis, Freshness};
use crate::keys::{EphemeralKey, KeyPool, StaticKey};
use crate::message::{ClientHello0, Flags, ServerReply0};
use crate::replay::ReplayCache;
use crate::schedule::{self, Secret, TranscriptHash};
use crate::ticket::{unix_seconds, Ticket, VerifiedTicket};
use crate::TicketError;

/// The client between its hello and the server's reply.
///
/// [`ZeroRttClient::start`] returns the hello, the SMT-key (usable at once
/// for 0-RTT data) and this pending state; [`ZeroRttClient::finish`] turns
/// the ServerReply0 into the fs-key when forward secrecy was requested.
pub struct ZeroRttClient {
    forward_secrecy: bool,
    ephemeral: EphemeralKey,
    early_secret: Secret,
    th0: TranscriptHash,
}

impl ZeroRttClient {
    /// [`ZeroRttClient::start_at`] stamped with the system clock.
    pub fn start(
        verified: &VerifiedTicket,
        pool: &KeyPool,
        fs: bool,
    ) -> (Vec<u8>, SessionKeys, ZeroRttClient) {
        Self::start_at(verified, pool, fs, SystemTime::now())
    }

    /// Builds a ClientHello0 for `verified` with a key from `pool`, a
    /// fresh client random and `now` as its client time, and derives the
    /// SMT-key (`Role::Client`). The server refuses the hello unless `now`
    /// is within its freshness window ([`Freshness`]).
    ///
    /// Cost: one X25519 (plus one key generation if the pool was empty),
    /// a SHA-256 over the hello's 73 bytes, and four HKDF expansions.
    ///
    /// With `fs`, the SMT-key has no key update of its own: its successor is
    /// the fs-key from [`ZeroRttClient::finish`]. Without, the SMT-key
    /// carries a TLS-style key update and protects the whole session.
    pub fn start_at(
        verified: &VerifiedTicket,
        pool: &KeyPool,
        fs: bool,
        now: SystemTime,
    ) -> (Vec<u8>, SessionKeys, ZeroRttClient) {
        let ephemeral = pool.take();
        let mut client_random = [0; 32];
        smt_crypto::fill_random(&mut client_random);
        let hello = ClientHello0 {
            ticket_hash: verified.hash(),
            client_random,
            key_share: ephemeral.public_key(),
            flags: Flags::with_forward_secrecy(fs),
            client_time: unix_millis(now),
        };
        // NOTE(unwrap): `Ticket::verify` refused static keys that are
        // low-order points, the only keys X25519 refuses.
        let dh0 = ephemeral
            .agree(&verified.ticket().static_public_key())
            .expect("a verified ticket's static key is usable");
        let early_secret = schedule::early_secret(&dh0);
        let th0 = th0(verified.transcript_prefix(), &hello);
        let smt_keys = schedule::smt_secrets(&early_secret, &th0).session_keys(Role::Client, !fs);
        let pending = Self {
            forward_secrecy: fs,
            ephemeral,
            early_secret,
            th0,
        };
        (hello.to_bytes(), smt_keys, pending)
    }

    /// Whether the hello asked for forward secrecy (and a reply is due).
    pub fn forward_secrecy(&self) -> bool {
        self.forward_secrecy
    }

    /// Checks the server's ServerReply0 and derives the fs-key
    /// (`Role::Client`), which carries a TLS-style key update.
    ///
    /// Fails with [`TicketError::Malformed`] for bytes that are not one
    /// ServerReply0 (or any reply when forward secrecy was not requested)
    /// and [`TicketError::BadConfirmation`] when the MAC does not prove the
    /// reply came from the holder of the ticket's static key.
    pub fn finish(self, reply: &[u8]) -> Result<SessionKeys, TicketError> {
        if !self.forward_secrecy {
            return Err(TicketError::Malformed(
                "ServerReply0 received, but forward secrecy was not requested",
            ));
        }
        let reply = ServerReply0::decode(reply)?;
        let dh1 = self
            .ephemeral
            .agree(&reply.key_share)
            .ok_or(TicketError::Malformed(
                "ServerReply0 key share is a low-order point",
            ))?;
        let fs_secret = schedule::fs_secret(&self.early_secret, &dh1);
        let th1 = schedule::th1(&self.th0, &reply.key_share);
        if !schedule::confirmation_is_valid(&fs_secret, &th1, &reply.confirm) {
            return Err(TicketError::BadConfirmation);
        }
        Ok(schedule::fs_secrets(&fs_secret, &th1).session_keys(Role::Client, true))
    }
}

impl fmt::Debug for ZeroRttClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZeroRttClient")
            .field("forward_secrecy", &self.forward_secrecy)
            .field("ephemeral", &self.ephemeral)
            .finish_non_exhaustive()
    }
}

/// The server side: its static key, the ticket it published, a pool of
/// ephemeral keys for forward-secrecy replies and the replay cache.
///
/// `accept` takes `&self` and the server is `Sync`: share it in an `Arc`
/// between the handshakes of many peers (the replay cache and the pool lock
/// internally).
///
/// **Restarts.** The replay cache lives in memory, so a restarted server
/// no longer knows which randoms it accepted. Every hello carries its
/// client's time, bound into the keys; the server refuses hellos stamped
/// before its start (plus the clock skew bound) or outside its freshness
/// window ([`Freshness`], [`TicketError::SentBeforeStart`],
/// [`TicketError::NotFresh`]). A flight captured before a restart is
/// therefore refused even by a server handed the same ticket and static
/// key. Issuing a new ticket and static key at every start is still good
/// practice (old hellos then fail as [`TicketError::UnknownTicket`]).
pub struct ZeroRttServer {
    static_key: StaticKey,
    ticket: Ticket,
    ticket_hash: TranscriptHash,
    prefix: digest::Context,
    pool: Arc<KeyPool>,
    replay: ReplayCache,
    freshness: Freshness,
}

/// What [`ZeroRttServer::accept`] yields for an accepted hello.
#[derive(Debug)]
#[non_exhaustive]
pub struct Accepted {
    /// The SMT-key (`Role::Server`): opens the client's 0-RTT data; epoch 0.
    pub smt_keys: SessionKeys,
    /// With forward secrecy: the ServerReply0 to send, and the fs-key
    /// (`Role::Server`, epoch 1).
    pub reply: Option<(Vec<u8>, SessionKeys)>,
}

impl ZeroRttServer {
    /// A server for `ticket`, which must carry `static_key`'s public key
    /// ([`TicketError::InvalidInput`] otherwise), with the default
    /// [`Freshness`] policy and the system clock's *now* as its start (the
    /// replay cache is assumed to hold nothing from before). See the type's
    /// docs on restarts; [`ZeroRttServer::with_freshness`] sets another
    /// policy.
    pub fn new(
        static_key: StaticKey,
        ticket: Ticket,
        pool: Arc<KeyPool>,
        replay: ReplayCache,
    ) -> Result<Self, TicketError> {
        if ticket.static_public_key() != static_key.public_key() {
            return Err(TicketError::InvalidInput(
                "the ticket carries another static key than the one given".to_owned(),
            ));
        }
        Ok(Self {
            static_key,
            ticket_hash: ticket.hash(),
            prefix: ticket.transcript_prefix(),
            ticket,
            pool,
            replay,
            freshness: Freshness::new(SystemTime::now()),
        })
    }

    /// The same server with another freshness policy (its start time,
    /// window and clock skew bound).
    pub fn with_freshness(mut self, freshness: Freshness) -> Self {
        self.freshness = freshness;
        self
    }

    /// The freshness policy in force.
    pub fn freshness(&self) -> &Freshness {
        &self.freshness
    }

    /// Accepts or refuses a ClientHello0 at `now`.
    ///
    /// In order: the bytes parse ([`TicketError::Malformed`]); the hello
    /// names this server's ticket ([`TicketError::UnknownTicket`]); the
    /// ticket is valid at `now` ([`TicketError::NotYetValid`],
    /// [`TicketError::Expired`]); the hello's time is fresh and after the
    /// server's start ([`TicketError::NotFresh`],
    /// [`TicketError::SentBeforeStart`]); the client's key share is usable
    /// (`Malformed`); its random is new ([`TicketError::Replayed`],
    /// [`TicketError::ReplayCacheFull`]; remembered until the hello would be
    /// stale anyway). Then the SMT-key, and with forward
    /// secrecy an ephemeral key from the pool, the fs-key and the reply.
    ///
    /// Cost: one X25519 (two with forward secrecy, plus a key generation if
    /// the pool is empty), a SHA-256 over 65 bytes (97 with FS), four HKDF
    /// expansions (eleven with FS) and one HMAC with FS.
    pub fn accept(&self, hello: &[u8], now: SystemTime) -> Result<Accepted, TicketError> {
        let hello = ClientHello0::decode(hello)?;
        if hello.ticket_hash != self.ticket_hash {
            return Err(TicketError::UnknownTicket);
        }
        self.ticket.check_validity(unix_seconds(now))?;
        let forget_at = self.freshness.check(hello.client_time, now)?;
        let dh0 = self
            .static_key
            .agree(&hello.key_share)
            .ok_or(TicketError::Malformed(
                "ClientHello0 key share is a low-order point",
            ))?;
        let forget_at = forget_at.min(self.ticket.not_after());
        self.replay
            .check_and_insert(&hello.client_random, forget_at, unix_seconds(now))?;
        let fs = hello.flags.forward_secrecy();
        let early_secret = schedule::early_secret(&dh0);
        let th0 = th0(self.prefix.clone(), &hello);
        let smt_keys = schedule::smt_secrets(&early_secret, &th0).session_keys(Role::Server, !fs);
        let reply = if fs {
            Some(self.forward_secret_reply(&early_secret, &th0, &hello)?)
        } else {
            None
        };
        Ok(Accepted { smt_keys, reply })
    }

    fn forward_secret_reply(
        &self,
        early_secret: &Secret,
        th0: &TranscriptHash,
        hello: &ClientHello0,
    ) -> Result<(Vec<u8>, SessionKeys), TicketError> {
        let ephemeral = self.pool.take();
        let dh1 = ephemeral
            .agree(&hello.key_share)
            .ok_or(TicketError::Malformed(
                "ClientHello0 key share is a low-order point",
            ))?;
        let fs_secret = schedule::fs_secret(early_secret, &dh1);
        let key_share = ephemeral.public_key();
        let th1 = schedule::th1(th0, &key_share);
        let reply = ServerReply0 {
            key_share,
            confirm: schedule::confirmation(&fs_secret, &th1),
        };
        let keys = schedule::fs_secrets(&fs_secret, &th1).session_keys(Role::Server, true);
        Ok((reply.to_bytes(), keys))
    }

    /// The ticket this server accepts hellos for.
    pub fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    /// The replay cache (for its counters).
    pub fn replay_cache(&self) -> &ReplayCache {
        &self.replay
    }

    /// The ephemeral-key pool; refill it off the hot path.
    pub fn pool(&self) -> &Arc<KeyPool> {
        &self.pool
    }
}

impl fmt::Debug for ZeroRttServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZeroRttServer")
            .field("static_key", &self.static_key)
            .field("ticket", &self.ticket)
            .field("pool", &self.pool)
            .field("replay", &self.replay)
            .finish()
    }
}

/// `th0 = SHA-256(ticket || client_random || e_c.pub || flags ||
/// client_time)`, from a hash state already fed with the ticket: the time
/// is bound into the keys, so an attacker who changes it to make an old
/// hello look fresh gets keys that open none of the flight's data.
fn th0(mut prefix: digest::Context, hello: &ClientHello0) -> TranscriptHash {
    prefix.update(&hello.client_random);
    prefix.update(&hello.key_share);
    prefix.update(&[hello.flags.bits()]);
    prefix.update(&hello.client_time.to_be_bytes());
    // NOTE(unwrap): SHA-256 digests are 32 bytes.
    prefix
        .finish()
        .as_ref()
        .try_into()
        .expect("SHA-256 output is 32 bytes")
}
