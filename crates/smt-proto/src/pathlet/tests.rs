//! Windows per pathlet against one window, on hand-made echoes.

use super::*;

fn params() -> PathletParams {
    PathletParams {
        dctcp: DctcpParams {
            g: 1.0 / 16.0,
            mss: 1000,
            initial_window: 10_000,
            min_window: 1000,
        },
        exclude_alpha: 0.5,
        exclude_after_windows: 2,
        exclude_for: Duration::from_millis(10),
        drain_for: Duration::from_millis(10),
    }
}

#[allow(clippy::disallowed_methods)] // a test may read the clock once, as an origin
fn origin() -> Instant {
    Instant::now()
}

fn at(pathlet: u16) -> PathletClass {
    PathletClass { pathlet, class: 0 }
}

fn echo(sequence: u32, entries: &[(u16, u32, u32, Option<u64>)]) -> PathEchoRepr {
    let mut list = Bounded::new();
    for &(pathlet, bytes, ce_bytes, last_id) in entries {
        list.push(EchoEntry {
            at: at(pathlet),
            bytes,
            ce_bytes,
            queue_bytes: 0,
            last_id,
        });
    }
    PathEchoRepr {
        src_port: 1,
        dst_port: 2,
        key_phase: false,
        sequence,
        overflow: false,
        entries: list,
    }
}

/// Message 1 is marked on pathlet A (window halves, RFC 8257: alpha 1,
/// cwnd · (1 − 1/2)), then the network moves it to B, which is clear:
/// it sends under B's own window at once, and A's window is still there,
/// as it was, when the message comes back. One window for both would
/// carry A's cut onto B.
#[test]
fn a_window_survives_the_message_moving_to_another_pathlet() {
    let now = origin();
    let mut w = PathletWindows::new(params());
    let mut one = SingleWindow::new(params().dctcp);
    assert_eq!(w.allowance(1), 10_000, "the initial window before any echo");
    for cc in [&mut w as &mut dyn Windows, &mut one] {
        cc.on_sent(1, 10_000);
        assert!(cc.on_echo(now, &echo(1, &[(0xa, 10_000, 10_000, Some(1))])));
    }
    assert_eq!(w.pathlet_of(1), Some(at(0xa)));
    assert_eq!(w.window(at(0xa)).unwrap().cwnd(), 5000.0);
    assert_eq!(w.allowance(1), 5000);
    assert_eq!(one.allowance(1), 5000);

    for cc in [&mut w as &mut dyn Windows, &mut one] {
        cc.on_sent(1, 5000);
        assert!(cc.on_echo(now, &echo(2, &[(0xb, 5000, 0, Some(1))])));
    }
    // B: a fresh window, its first observation window unmarked: alpha
    // 15/16, cwnd 10 000 + 1000 · 5000 / 10 000.
    let b = w.window(at(0xb)).unwrap();
    assert_eq!((b.alpha(), b.cwnd()), (15.0 / 16.0, 10_500.0));
    assert_eq!(w.pathlet_of(1), Some(at(0xb)));
    assert_eq!(w.allowance(1), 10_500);
    // The single window only grew from A's cut: 5000 + 1000 · 5000 / 5000.
    assert_eq!(one.window().cwnd(), 6000.0);
    // A kept what it learnt, with nothing in flight (its bytes were
    // acknowledged on B).
    let a = w.window(at(0xa)).unwrap();
    assert_eq!((a.alpha(), a.cwnd(), a.in_flight()), (1.0, 5000.0, 0));

    w.on_sent(1, 4000);
    assert!(w.on_echo(now, &echo(3, &[(0xa, 4000, 0, Some(1))])));
    assert_eq!(w.pathlet_of(1), Some(at(0xa)));
    assert_eq!(
        w.window(at(0xa)).unwrap().cwnd(),
        5000.0 + 1000.0 * 4000.0 / 5000.0
    );
}

#[test]
fn a_copied_or_older_echo_changes_nothing() {
    let now = origin();
    let mut w = PathletWindows::new(params());
    w.on_sent(1, 10_000);
    assert!(w.on_echo(now, &echo(5, &[(0xa, 10_000, 10_000, Some(1))])));
    let before = w.window(at(0xa)).unwrap().clone();
    assert!(!w.on_echo(now, &echo(5, &[(0xa, 10_000, 10_000, Some(1))])));
    assert!(!w.on_echo(now, &echo(4, &[(0xa, 10_000, 10_000, Some(1))])));
    assert_eq!(w.window(at(0xa)), Some(&before));
}

/// A pathlet that keeps marking is excluded once its alpha has seen a few
/// windows, while another pathlet of its class is usable; the exclusion
/// ends after `exclude_for`, or at once with an unmarked echo.
#[test]
fn a_congested_pathlet_is_excluded_while_there_is_another() {
    let now = origin();
    let mut w = PathletWindows::new(params());
    let mut seq = 0;
    let mut marked = |w: &mut PathletWindows, pathlet, ce| {
        seq += 1;
        w.on_sent(7, 2000);
        w.on_echo(now, &echo(seq, &[(pathlet, 2000, ce, Some(7))]));
    };
    for _ in 0..3 {
        marked(&mut w, 0xa, 2000);
    }
    assert!(w.window(at(0xa)).unwrap().alpha() > 0.5);
    assert!(
        w.excluded(now).is_empty(),
        "the only pathlet known is never excluded"
    );
    marked(&mut w, 0xb, 0);
    assert_eq!(w.excluded(now).as_slice(), &[at(0xa)]);
    assert!(w.excluded(now + Duration::from_millis(10)).is_empty());
    marked(&mut w, 0xa, 0);
    assert!(w.excluded(now).is_empty(), "an unmarked echo lifts it");
}

/// The same hand-made history through both: per-pathlet windows hold two
/// different states, the single window one mixture.
#[test]
fn the_single_window_sums_every_entry_of_an_echo() {
    let now = origin();
    let mut one = SingleWindow::new(params().dctcp);
    one.on_sent(1, 10_000);
    one.on_echo(
        now,
        &echo(1, &[(0xa, 6000, 6000, None), (0xb, 4000, 0, None)]),
    );
    // F = 6000 / 10 000: alpha = 15/16 + 1/16 · 3/5 = 0.975.
    assert_eq!(one.window().alpha(), 15.0 / 16.0 + 0.6 / 16.0);
    assert_eq!(
        one.window().cwnd(),
        10_000.0 * (1.0 - one.window().alpha() / 2.0)
    );
    assert!(one.excluded(now).is_empty());
}

/// After the network moves a message from A to B, echoes of the packets
/// still draining on A do not move it back; once A has echoed what was in
/// flight there, an echo from A means new packets went there.
#[test]
fn echoes_of_a_draining_path_do_not_move_the_message_back() {
    let now = origin();
    let mut w = PathletWindows::new(params());
    w.on_sent(1, 1000);
    w.on_echo(now, &echo(1, &[(0xa, 1000, 0, Some(1))]));
    // 4000 bytes sent under A; the network moves the message to B after
    // the first 1000, so 3000 are still in flight on A when B is heard of.
    w.on_sent(1, 4000);
    w.on_echo(now, &echo(2, &[(0xb, 1000, 0, Some(1))]));
    assert_eq!(w.pathlet_of(1), Some(at(0xb)));
    w.on_echo(now, &echo(3, &[(0xa, 2000, 0, Some(1))]));
    assert_eq!(w.pathlet_of(1), Some(at(0xb)), "old packets of A");
    w.on_echo(now, &echo(4, &[(0xa, 1000, 0, Some(1))]));
    assert_eq!(w.pathlet_of(1), Some(at(0xb)), "the last of them");
    w.on_sent(1, 1000);
    w.on_echo(now, &echo(5, &[(0xa, 1000, 0, Some(1))]));
    assert_eq!(w.pathlet_of(1), Some(at(0xa)), "new packets on A");
}

/// Bytes sent under A's window just before the network moved the message
/// to B are echoed from B while B already carries newer bytes. Each byte
/// leaves the flight once, whichever pathlet echoes it: the allowance on B
/// is B's window less what is really in flight, and nothing stays counted
/// on A (counted per window, those bytes stayed in A's flight for good,
/// and B's allowance ignored the bytes B still carried).
#[test]
fn bytes_echoed_from_another_pathlet_leave_the_flight_once() {
    let now = origin();
    let mut w = PathletWindows::new(params());
    w.on_sent(1, 1000);
    w.on_echo(now, &echo(1, &[(0xa, 1000, 0, Some(1))]));
    // 4000 bytes under A's window, all of which the network sends on B.
    w.on_sent(1, 4000);
    w.on_echo(now, &echo(2, &[(0xb, 1000, 0, Some(1))]));
    assert_eq!(w.pathlet_of(1), Some(at(0xb)));
    w.on_sent(1, 3000);
    w.on_echo(now, &echo(3, &[(0xb, 3000, 0, Some(1))]));
    w.on_sent(1, 3000);
    w.on_echo(now, &echo(4, &[(0xb, 3000, 0, Some(1))]));
    // Sent 11 000, echoed 8000: 3000 in flight, all of it on B.
    let b = w.window(at(0xb)).unwrap().cwnd() as u64;
    assert_eq!(w.allowance(1), b - 3000);
    w.on_echo(now, &echo(5, &[(0xb, 3000, 0, Some(1))]));
    assert_eq!(
        w.allowance(1),
        w.window(at(0xb)).unwrap().cwnd() as u64,
        "nothing in flight"
    );
    // Back on A (after the drain time, since A never echoed the 3000 it
    // was left with): A's whole window is there at once.
    let later = now + Duration::from_millis(10);
    w.on_sent(1, 1000);
    w.on_echo(later, &echo(6, &[(0xa, 1000, 0, Some(1))]));
    assert_eq!(w.pathlet_of(1), Some(at(0xa)));
    assert_eq!(w.allowance(1), w.window(at(0xa)).unwrap().cwnd() as u64);
}

/// Two messages on one pathlet share its window: each one's allowance is
/// the window less both flights; a finished message's flight is gone.
#[test]
fn messages_on_one_pathlet_share_its_window() {
    let now = origin();
    let mut w = PathletWindows::new(params());
    for id in [1, 2] {
        w.on_sent(id, 1000);
    }
    w.on_echo(
        now,
        &echo(1, &[(0xa, 1000, 0, Some(1)), (0xa, 1000, 0, Some(2))]),
    );
    assert_eq!(w.pathlet_of(2), Some(at(0xa)));
    let cwnd = w.window(at(0xa)).unwrap().cwnd() as u64;
    w.on_sent(1, 2000);
    w.on_sent(2, 3000);
    assert_eq!(w.allowance(1), cwnd - 5000);
    assert_eq!(w.allowance(2), cwnd - 5000);
    w.on_finished(2);
    assert_eq!(w.allowance(1), cwnd - 2000);
    w.on_lost(1, 2000);
    let cut = w.window(at(0xa)).unwrap().cwnd() as u64;
    assert_eq!(w.allowance(1), cut, "lost bytes are not in flight");
}

/// A new message starts under the window of the pathlet the last echo
/// placed a message on (not unlimited until its own first echo), and
/// messages with nothing in flight follow a message the network moved.
#[test]
fn new_and_idle_messages_go_where_the_peer_s_traffic_was_seen() {
    let now = origin();
    let mut w = PathletWindows::new(params());
    w.adopt(1);
    assert_eq!(w.pathlet_of(1), None, "no echo yet: nowhere to go");
    w.on_sent(1, 1000);
    w.on_echo(now, &echo(1, &[(0xa, 1000, 0, Some(1))]));
    w.adopt(2);
    assert_eq!(w.pathlet_of(2), Some(at(0xa)));
    w.on_sent(1, 2000);
    w.on_echo(now, &echo(2, &[(0xb, 2000, 0, Some(1))]));
    assert_eq!(w.pathlet_of(1), Some(at(0xb)));
    assert_eq!(w.pathlet_of(2), Some(at(0xb)), "idle on A: follows to B");
}
