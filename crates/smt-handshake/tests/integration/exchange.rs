//! The 0-RTT exchange end to end: keys interoperate, every rejection has
//! its named reason.

use crate::common;

use std::sync::Arc;

use common::*;
use smt_handshake::message::{ClientHello0, CLIENT_HELLO_LEN, SERVER_REPLY_LEN};
use smt_handshake::{
    Freshness, KeyPool, ReplayCache, StaticKey, Ticket, TicketError, ZeroRttClient,
    ZeroRttClientHandshake, ZeroRttServer, ZeroRttServerHandshake,
};
use smt_proto::{Handshake, HandshakeError, Role};

#[test]
fn without_forward_secrecy_the_smt_key_serves_both_directions() {
    let world = World::new();
    let (hello, client_keys, pending) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    assert_eq!(hello.len(), CLIENT_HELLO_LEN);
    assert!(!pending.forward_secrecy());

    let accepted = world.server.accept(&hello, at(NOW + 5)).unwrap();
    assert!(accepted.reply.is_none());
    assert_eq!(client_keys.role, Role::Client);
    assert_eq!(accepted.smt_keys.role, Role::Server);
    assert_interoperate(&client_keys, &accepted.smt_keys);

    // Without FS the SMT-key rekeys itself, TLS-style, and both sides agree.
    let c1 = client_keys.update.as_ref().unwrap().next_epoch();
    let s1 = accepted.smt_keys.update.as_ref().unwrap().next_epoch();
    let sealed = seal(c1.client_to_server.as_ref(), SEQ, b"epoch 1");
    assert_eq!(
        open(s1.client_to_server.as_ref(), SEQ, &sealed).unwrap(),
        b"epoch 1"
    );
    assert_eq!(open(client_keys.tx.as_ref(), SEQ, &sealed), None);

    assert_eq!(
        pending.finish(&[0; SERVER_REPLY_LEN]).unwrap_err(),
        TicketError::Malformed("ServerReply0 received, but forward secrecy was not requested")
    );
}

#[test]
fn with_forward_secrecy_both_sides_switch_to_a_different_fs_key() {
    let world = World::new();
    let (hello, client_smt, pending) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, true, at(NOW + 5));
    let accepted = world.server.accept(&hello, at(NOW + 5)).unwrap();
    assert_interoperate(&client_smt, &accepted.smt_keys);
    assert!(
        client_smt.update.is_none(),
        "the SMT-key's successor is the fs-key"
    );

    let (reply, server_fs) = accepted.reply.unwrap();
    assert_eq!(reply.len(), SERVER_REPLY_LEN);
    let client_fs = pending.finish(&reply).unwrap();
    assert_eq!(client_fs.role, Role::Client);
    assert_eq!(server_fs.role, Role::Server);
    assert_interoperate(&client_fs, &server_fs);
    assert_keys_differ(&client_fs, &client_smt);
    assert_keys_differ(&server_fs, &accepted.smt_keys);

    let c2 = client_fs.update.as_ref().unwrap().next_epoch();
    let s2 = server_fs.update.as_ref().unwrap().next_epoch();
    let sealed = seal(s2.server_to_client.as_ref(), SEQ, b"epoch 2");
    assert_eq!(
        open(c2.server_to_client.as_ref(), SEQ, &sealed).unwrap(),
        b"epoch 2"
    );
}

#[test]
fn every_session_gets_its_own_keys() {
    let world = World::new();
    let (hello_a, keys_a, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    let (hello_b, keys_b, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    assert_ne!(hello_a, hello_b);
    assert_keys_differ(&keys_a, &keys_b);
}

#[test]
fn a_replayed_hello_is_refused() {
    let world = World::new();
    let (hello, _, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, true, at(NOW + 5));
    world.server.accept(&hello, at(NOW + 5)).unwrap();
    let again = world.server.accept(&hello, at(NOW + 6)).unwrap_err();
    assert_eq!(again, TicketError::Replayed);
    assert_eq!(
        HandshakeError::from(again),
        HandshakeError::BadTicket("hello replayed: its client random was already used".to_owned())
    );
    // A replay with another key share but the same random is refused too.
    let mut altered = ClientHello0::decode(&hello).unwrap();
    altered.key_share = StaticKey::generate().public_key();
    assert_eq!(
        world
            .server
            .accept(&altered.to_bytes(), at(NOW + 7))
            .unwrap_err(),
        TicketError::Replayed
    );
    let stats = world.server.replay_cache().stats();
    assert_eq!((stats.accepted, stats.replayed), (1, 2));
}

#[test]
fn a_full_replay_cache_refuses_new_hellos() {
    let world = World::with_replay_capacity(2);
    for _ in 0..2 {
        let (hello, _, _) =
            ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
        world.server.accept(&hello, at(NOW + 5)).unwrap();
    }
    let (hello, _, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    assert_eq!(
        world.server.accept(&hello, at(NOW + 5)).unwrap_err(),
        TicketError::ReplayCacheFull
    );
}

#[test]
fn a_hello_for_another_ticket_is_unknown() {
    let world = World::new();
    let other = World::new();
    let (hello, _, _) =
        ZeroRttClient::start_at(&other.verified, &world.client_pool, false, at(NOW + 5));
    assert_eq!(
        world.server.accept(&hello, at(NOW + 5)).unwrap_err(),
        TicketError::UnknownTicket
    );
}

#[test]
fn a_hello_outside_the_ticket_validity_is_refused() {
    let world = World::new();
    let (hello, _, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    assert_eq!(
        world.server.accept(&hello, at(NOW + 3600)).unwrap_err(),
        TicketError::Expired {
            not_after: NOW + 3600,
            now: NOW + 3600
        }
    );
    assert_eq!(
        world.server.accept(&hello, at(NOW - 1)).unwrap_err(),
        TicketError::NotYetValid {
            not_before: NOW,
            now: NOW - 1
        }
    );
    // Refusals for time do not consume the random.
    assert!(world.server.accept(&hello, at(NOW + 3599)).is_ok());
}

#[test]
fn a_tampered_reply_is_refused_by_the_client() {
    let world = World::new();
    for at_byte in [4, 35, 36, 67] {
        let (hello, _, pending) =
            ZeroRttClient::start_at(&world.verified, &world.client_pool, true, at(NOW + 5));
        let (mut reply, _) = world
            .server
            .accept(&hello, at(NOW + 5))
            .unwrap()
            .reply
            .unwrap();
        reply[at_byte] ^= 0x01;
        assert_eq!(
            pending.finish(&reply).unwrap_err(),
            TicketError::BadConfirmation,
            "byte {at_byte}"
        );
    }
}

#[test]
fn a_reply_to_another_hello_is_refused() {
    let world = World::new();
    let (_, _, pending) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, true, at(NOW + 5));
    let (hello, _, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, true, at(NOW + 5));
    let (reply, _) = world
        .server
        .accept(&hello, at(NOW + 5))
        .unwrap()
        .reply
        .unwrap();
    assert_eq!(
        pending.finish(&reply).unwrap_err(),
        TicketError::BadConfirmation
    );
}

/// An attacker who strips the FS flag from the hello only gets the server
/// to derive other keys: the flags are in th0.
#[test]
fn the_flags_are_bound_into_the_smt_key() {
    let world = World::new();
    let (hello, client_keys, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, true, at(NOW + 5));
    let mut stripped = ClientHello0::decode(&hello).unwrap();
    stripped.flags = smt_handshake::message::Flags::NONE;
    let accepted = world
        .server
        .accept(&stripped.to_bytes(), at(NOW + 5))
        .unwrap();
    assert!(accepted.reply.is_none());
    let sealed = seal(client_keys.tx.as_ref(), SEQ, b"data");
    assert_eq!(open(accepted.smt_keys.rx.as_ref(), SEQ, &sealed), None);
}

#[test]
fn low_order_key_shares_are_malformed() {
    let world = World::new();
    let (hello, _, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    let mut bad = ClientHello0::decode(&hello).unwrap();
    bad.key_share = [0; 32];
    assert!(matches!(
        world.server.accept(&bad.to_bytes(), at(NOW + 5)),
        Err(TicketError::Malformed(_))
    ));
    assert_eq!(
        world.server.replay_cache().len(),
        0,
        "no entry for a refused hello"
    );
}

#[test]
fn the_server_needs_the_ticket_of_its_static_key() {
    let world = World::new();
    let err = ZeroRttServer::new(
        StaticKey::generate(),
        world.ticket.clone(),
        Arc::new(KeyPool::new(0)),
        ReplayCache::new(1),
    )
    .unwrap_err();
    assert!(matches!(err, TicketError::InvalidInput(_)), "{err}");
}

/// Restart rule: a new process issues a new ticket; hellos under the old
/// one are refused as unknown even with the same static key.
#[test]
fn after_a_restart_with_a_new_ticket_old_hellos_are_unknown() {
    let pki = Pki::new("SMT test datacenter CA");
    let (chain, key) = pki.leaf(&[NAME]);
    let static_key = StaticKey::generate();
    let stored = static_key.to_bytes();
    let old = Ticket::issue(&static_key, &chain, &key, NAME, at(NOW), HOUR).unwrap();
    let verified = old.verify(&pki.ca_der, NAME, at(NOW)).unwrap();
    let (hello, _, _) = ZeroRttClient::start_at(&verified, &KeyPool::new(1), false, at(NOW));

    let restarted_key = StaticKey::from_bytes(&stored).unwrap();
    let fresh = Ticket::issue(&restarted_key, &chain, &key, NAME, at(NOW + 60), HOUR).unwrap();
    let server = ZeroRttServer::new(
        restarted_key,
        fresh,
        Arc::new(KeyPool::new(1)),
        ReplayCache::new(16),
    )
    .unwrap();
    assert_eq!(
        server.accept(&hello, at(NOW + 61)).unwrap_err(),
        TicketError::UnknownTicket
    );
}

/// Restart reusing the ticket and the static key: the new run refuses
/// every hello stamped before its start (its replay cache is empty), and
/// accepts hellos stamped after its start plus the skew bound.
#[test]
fn after_a_restart_with_the_same_ticket_old_hellos_are_refused() {
    let pki = Pki::new("SMT test datacenter CA");
    let (chain, key) = pki.leaf(&[NAME]);
    let static_key = StaticKey::generate();
    let stored = static_key.to_bytes();
    let ticket = Ticket::issue(&static_key, &chain, &key, NAME, at(NOW), HOUR).unwrap();
    let verified = ticket.verify(&pki.ca_der, NAME, at(NOW)).unwrap();
    let (old_hello, _, _) =
        ZeroRttClient::start_at(&verified, &KeyPool::new(1), false, at(NOW + 30));

    let restarted = ZeroRttServer::new(
        StaticKey::from_bytes(&stored).unwrap(),
        ticket,
        Arc::new(KeyPool::new(1)),
        ReplayCache::new(16),
    )
    .unwrap()
    .with_freshness(Freshness::new(at(NOW + 31)));
    assert!(matches!(
        restarted.accept(&old_hello, at(NOW + 32)).unwrap_err(),
        TicketError::SentBeforeStart { .. }
    ));
    let (new_hello, _, _) =
        ZeroRttClient::start_at(&verified, &KeyPool::new(1), false, at(NOW + 33));
    assert!(restarted.accept(&new_hello, at(NOW + 33)).is_ok());
}

#[test]
fn a_stale_or_future_hello_is_refused() {
    let pki = Pki::new("SMT test datacenter CA");
    let (chain, key) = pki.leaf(&[NAME]);
    let static_key = StaticKey::generate();
    let ticket = Ticket::issue(&static_key, &chain, &key, NAME, at(NOW), HOUR).unwrap();
    let verified = ticket.verify(&pki.ca_der, NAME, at(NOW)).unwrap();
    let server = ZeroRttServer::new(
        static_key,
        ticket,
        Arc::new(KeyPool::new(1)),
        ReplayCache::new(16),
    )
    .unwrap()
    .with_freshness(Freshness::new(at(NOW)));
    let (hello, _, _) = ZeroRttClient::start_at(&verified, &KeyPool::new(1), false, at(NOW + 60));
    // The default window is 10 s either way.
    for now in [NOW + 71, NOW + 49] {
        let err = server.accept(&hello, at(now)).unwrap_err();
        assert!(matches!(err, TicketError::NotFresh { .. }), "{now}: {err}");
    }
    assert!(server.accept(&hello, at(NOW + 69)).is_ok());
}

/// The client time is in the transcript: a hello whose time was changed
/// (to pass the freshness check) yields other keys than the client's.
#[test]
fn the_client_time_is_bound_into_the_smt_key() {
    let world = World::new();
    let (hello, client_keys, _) =
        ZeroRttClient::start_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    let mut moved = ClientHello0::decode(&hello).unwrap();
    moved.client_time += 1000;
    let accepted = world.server.accept(&moved.to_bytes(), at(NOW + 5)).unwrap();
    let sealed = seal(client_keys.tx.as_ref(), SEQ, b"data");
    assert_eq!(open(accepted.smt_keys.rx.as_ref(), SEQ, &sealed), None);
}

#[test]
fn handshake_adapters_deliver_smt_keys_at_once_and_fs_keys_after_the_reply() {
    let world = World::new();
    let mut client =
        ZeroRttClientHandshake::new_at(&world.verified, &world.client_pool, true, at(NOW + 5));
    let mut server = ZeroRttServerHandshake::new(world.server.clone(), at(NOW + 5));

    let client_smt = client.take_keys().expect("0-RTT: keys before any reply");
    assert!(client.take_keys().is_none(), "keys are handed out once");
    let mut flight = Vec::new();
    client.write(&mut flight);
    assert_eq!(flight.len(), CLIENT_HELLO_LEN);
    client.write(&mut flight);
    assert_eq!(flight.len(), CLIENT_HELLO_LEN, "the hello is written once");

    // The endpoint may deliver the stream in pieces.
    for chunk in flight.chunks(7) {
        assert!(server.take_keys().is_none());
        server.read(chunk).unwrap();
    }
    let server_smt = server.take_keys().unwrap();
    assert_interoperate(&client_smt, &server_smt);

    let mut reply = Vec::new();
    server.write(&mut reply);
    assert_eq!(reply.len(), SERVER_REPLY_LEN);
    let server_fs = server.take_fs_keys().unwrap();
    assert!(!client.is_complete());
    client.read(&reply[..10]).unwrap();
    assert!(client.take_fs_keys().is_none());
    client.read(&reply[10..]).unwrap();
    assert!(client.is_complete());
    let client_fs = client.take_fs_keys().unwrap();
    assert_interoperate(&client_fs, &server_fs);

    assert!(matches!(
        client.read(&[0]),
        Err(HandshakeError::Protocol(_))
    ));
    assert!(matches!(
        server.read(&[0]),
        Err(HandshakeError::Protocol(_))
    ));
}

#[test]
fn handshake_adapters_report_ticket_failures_as_bad_ticket() {
    let world = World::new();
    let mut client =
        ZeroRttClientHandshake::new_at(&world.verified, &world.client_pool, false, at(NOW + 5));
    assert!(client.is_complete());
    let mut hello = Vec::new();
    client.write(&mut hello);

    let mut first = ZeroRttServerHandshake::new(world.server.clone(), at(NOW + 5));
    first.read(&hello).unwrap();
    let mut nothing = Vec::new();
    first.write(&mut nothing);
    assert!(nothing.is_empty() && first.take_fs_keys().is_none());

    let mut replay = ZeroRttServerHandshake::new(world.server.clone(), at(NOW + 6));
    assert!(matches!(
        replay.read(&hello),
        Err(HandshakeError::BadTicket(_))
    ));

    let mut late = ZeroRttServerHandshake::new(world.server.clone(), at(NOW + 4000));
    let err = late.read(&hello).unwrap_err();
    assert!(
        matches!(&err, HandshakeError::BadTicket(m) if m.contains("expired")),
        "{err}"
    );

    let mut trailing = ZeroRttServerHandshake::new(world.server.clone(), at(NOW + 5));
    let mut long = hello.clone();
    long.push(0);
    assert!(trailing.read(&long).is_err());

    assert!(matches!(
        client.read(&[2, 1, 0, 64]),
        Err(HandshakeError::Protocol(_))
    ));
}
