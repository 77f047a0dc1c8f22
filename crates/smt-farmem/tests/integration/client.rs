//! The page client against a real memory node over SMT (UDP loopback, PSK
//! sessions): round trips in every crypto mode, per-page errors from the
//! node, and refused requests.

use crate::common;

use common::{client, node, page, small_node};
use smt_farmem::PageError;
use smt_memnode::wire::{PageStatus, RequestStatus, Response};
use smt_memnode::StoreConfig;
use smt_pagecrypt::{Crc64, PAGE_SIZE};

#[test]
fn pages_round_trip_in_every_mode() {
    let node = small_node();
    for crc in Crc64::ALL {
        for engine in [false, true] {
            for versioned in [false, true] {
                let mut c = client(&node, crc, engine, versioned);
                let a = 0x10_0000;
                c.write_page(a, &page(1)).unwrap();
                assert_eq!(*c.read_page(a).unwrap(), page(1), "{crc} engine {engine}");
                c.write_page(a, &page(2)).unwrap();
                assert_eq!(*c.read_page(a).unwrap(), page(2));
            }
        }
    }
}

#[test]
fn batches_larger_than_a_message_are_split_and_kept_in_order() {
    let node = small_node();
    for engine in [false, true] {
        let mut c = client(&node, Crc64::Nvme, engine, false);
        let pages: Vec<_> = (0..600u64).map(page).collect();
        let writes: Vec<(u64, &smt_pagecrypt::Page)> = pages
            .iter()
            .enumerate()
            .map(|(i, p)| ((i * PAGE_SIZE) as u64, p))
            .collect();
        for r in c.write_pages(&writes).unwrap() {
            r.unwrap();
        }
        // Reversed, with a repeat, across three messages.
        let mut addrs: Vec<u64> = (0..600u64).rev().map(|i| i * PAGE_SIZE as u64).collect();
        addrs.push(0);
        let got = c.read_pages(&addrs).unwrap();
        for (a, r) in addrs.iter().zip(got) {
            assert_eq!(
                r.unwrap().page(),
                &page(a / PAGE_SIZE as u64),
                "engine {engine}"
            );
        }
    }
}

#[test]
fn the_node_refuses_bad_pages_one_by_one() {
    let node = node(StoreConfig {
        capacity_pages: 2,
        address_limit: 16 * PAGE_SIZE as u64,
    });
    let mut c = client(&node, Crc64::Nvme, false, false);
    let p = page(3);
    let results = c
        .write_pages(&[(0, &p), (1, &p), (1 << 20, &p), (4096, &p), (8192, &p)])
        .unwrap();
    let statuses: Vec<Option<PageStatus>> = results
        .iter()
        .map(|r| match r {
            Ok(()) => None,
            Err(PageError::Node { status, .. }) => Some(*status),
            Err(e) => panic!("{e}"),
        })
        .collect();
    assert_eq!(
        statuses,
        [
            None,
            Some(PageStatus::MISALIGNED),
            Some(PageStatus::OUT_OF_RANGE),
            None,
            Some(PageStatus::NO_CAPACITY)
        ]
    );
    let err = c.read_page(12 * 4096).unwrap_err();
    assert!(matches!(
        err,
        PageError::Node {
            status: PageStatus::NOT_WRITTEN,
            ..
        }
    ));
    assert!(err.to_string().contains("never written"), "{err}");
    let info = c.info().unwrap();
    assert_eq!((info.used_pages, info.capacity_pages), (2, 2));
    assert_eq!(
        (info.page_size, info.sealed_len, info.max_batch),
        (4096, 4112, 256)
    );
    let stats = node.stats();
    assert_eq!((stats.pages_written, stats.page_errors), (2, 4));
}

#[test]
fn malformed_requests_get_a_status_not_silence() {
    let node = small_node();
    let mut c = client(&node, Crc64::Nvme, false, false);
    let cases: [(&[u8], RequestStatus); 4] = [
        (b"hello", RequestStatus::MALFORMED),
        (
            &[9, 1, 0, 0, 0, 0, 0, 0],
            RequestStatus::UNSUPPORTED_VERSION,
        ),
        (&[1, 0x7f, 0, 0, 0, 0, 0, 0], RequestStatus::UNKNOWN_OP),
        (
            &[1, 1, 0xff, 0xff, 0, 0, 0, 0],
            RequestStatus::TOO_MANY_PAGES,
        ),
    ];
    for (bytes, want) in cases {
        let reply = c.call_bytes(bytes).unwrap();
        match Response::parse(&reply).unwrap() {
            Response::Refused { status, .. } => assert_eq!(status, want),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(node.stats().refused, 4);
    // The node still serves.
    c.write_page(0, &page(4)).unwrap();
}

#[test]
fn batch_limits_are_the_callers_to_respect() {
    let node = small_node();
    let mut c = client(&node, Crc64::Nvme, false, false);
    let addrs: Vec<u64> = (0..257).map(|i| i * 4096).collect();
    let err = c.pipeline_mut().start_read(&addrs, 0).unwrap_err();
    assert!(err.to_string().contains("at most 256"), "{err}");
}
