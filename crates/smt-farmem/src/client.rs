//! The blocking page client: `read_page`/`write_page` and their batched
//! forms, key rotation, and the raw calls tests and tools need. Built on
//! [`Pipeline`], which the requesters drive directly.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use smt::keys::{AeadAlgorithm, PskClient};
use smt::{EndpointConfig, LocalEndpoint, LocalEvent};
use smt_memnode::wire::{self, Info, Request, Response, StoredPage, MAX_BATCH};
use smt_pagecrypt::{KeyId, Page, PageCipher, XtsKey};

use crate::error::{ClientError, PageError};
use crate::pipeline::{Crypto, Done, PageBuf, Pipeline};

/// A blocking client of one memory node.
pub struct PageClient {
    pipeline: Pipeline,
}

impl fmt::Debug for PageClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageClient")
            .field("pipeline", &self.pipeline)
            .finish()
    }
}

/// A `LocalEndpoint` on loopback that reaches `node` with the PSK nonce
/// exchange (as `smt client --psk`): what tests, examples and the
/// experiment use. `busy_poll` makes it spin instead of sleeping.
pub fn psk_endpoint(psk: &[u8], busy_poll: bool) -> Result<LocalEndpoint, ClientError> {
    let mut config = EndpointConfig::default();
    config.set_busy_poll(busy_poll);
    let mut endpoint = LocalEndpoint::bind(([127, 0, 0, 1], 0).into(), config)?;
    endpoint.set_psk_client(PskClient::new(psk, AeadAlgorithm::Aes128Gcm));
    Ok(endpoint)
}

impl PageClient {
    /// A client driving `pipeline` (CPU or engine decryption, as the
    /// pipeline was made).
    pub fn new(pipeline: Pipeline) -> Self {
        Self { pipeline }
    }

    /// A client over `endpoint` to `node`, decrypting on the CPU.
    pub fn cpu(endpoint: LocalEndpoint, node: SocketAddr, cipher: PageCipher) -> Self {
        Self::new(Pipeline::new(endpoint, node, cipher, Crypto::Cpu))
    }

    /// The pipeline underneath, for its statistics and cipher.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The pipeline underneath, to rotate keys or reach the endpoint.
    pub fn pipeline_mut(&mut self) -> &mut Pipeline {
        &mut self.pipeline
    }

    /// Gives up the blocking interface, for a requester that drives the
    /// pipeline itself.
    pub fn into_pipeline(self) -> Pipeline {
        self.pipeline
    }

    /// Reads and opens one page.
    pub fn read_page(&mut self, address: u64) -> Result<Box<Page>, PageError> {
        let mut pages = self.read_pages(&[address]).map_err(client_to_page)?;
        // NOTE(unwrap): one address in, one result out.
        let page = pages.pop().expect("one result per address")?;
        Ok(Box::new(*page.page()))
    }

    /// Seals and writes one page.
    pub fn write_page(&mut self, address: u64, page: &Page) -> Result<(), PageError> {
        let mut results = self
            .write_pages(&[(address, page)])
            .map_err(client_to_page)?;
        // NOTE(unwrap): one page in, one result out.
        results.pop().expect("one result per page")
    }

    /// Reads many pages, [`MAX_BATCH`] per SMT message, all messages in
    /// flight at once; one result per address, in order.
    pub fn read_pages(
        &mut self,
        addresses: &[u64],
    ) -> Result<Vec<Result<PageBuf, PageError>>, ClientError> {
        let chunks: Vec<&[u64]> = addresses.chunks(MAX_BATCH).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            self.pipeline.start_read(chunk, i as u64)?;
        }
        let done = self.collect(addresses.len())?;
        Ok(place(&chunks, done)
            .into_iter()
            .map(|r| r.map(|p| p.expect("a read returns its page")))
            .collect())
    }

    /// Writes many pages, [`MAX_BATCH`] per SMT message; one result per
    /// page, in order.
    pub fn write_pages(
        &mut self,
        pages: &[(u64, &Page)],
    ) -> Result<Vec<Result<(), PageError>>, ClientError> {
        let chunks: Vec<&[(u64, &Page)]> = pages.chunks(MAX_BATCH).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            self.pipeline.start_write(chunk, i as u64)?;
        }
        let done = self.collect(pages.len())?;
        let addrs: Vec<Vec<u64>> = chunks
            .iter()
            .map(|c| c.iter().map(|(a, _)| *a).collect())
            .collect();
        let addr_chunks: Vec<&[u64]> = addrs.iter().map(Vec::as_slice).collect();
        Ok(place(&addr_chunks, done)
            .into_iter()
            .map(|r| r.map(|_| ()))
            .collect())
    }

    fn collect(&mut self, n: usize) -> Result<Vec<Done>, ClientError> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.pipeline.poll(None)? {
                Some(d) => out.push(d),
                None => break,
            }
        }
        Ok(out)
    }

    /// The stored copy of a page, not decrypted: what the memory node
    /// holds (tests give it to an independent implementation).
    pub fn read_sealed(&mut self, address: u64) -> Result<StoredPage, PageError> {
        match self.raw(&Request::Read(vec![address]))? {
            Response::Read(mut pages) if pages.len() == 1 => pages
                .pop()
                .expect("one page")
                .map_err(|status| PageError::Node { address, status }),
            other => Err(unexpected(other)),
        }
    }

    /// The node's size and use.
    pub fn info(&mut self) -> Result<Info, PageError> {
        match self.raw(&Request::Info)? {
            Response::Info(i) => Ok(i),
            other => Err(unexpected(other)),
        }
    }

    /// Sends raw bytes as a request and returns the raw response (for
    /// tests of the node's handling of malformed input).
    pub fn call_bytes(&mut self, request: &[u8]) -> Result<Vec<u8>, PageError> {
        let node = self.pipeline.node();
        let call = self
            .pipeline_endpoint()
            .call(node, request)
            .map_err(|e| PageError::Transport(e.into()))?;
        loop {
            let event = self
                .pipeline_endpoint()
                .poll(Some(Duration::from_secs(1)))
                .map_err(|e| PageError::Transport(e.into()))?;
            match event {
                Some(LocalEvent::Response { call: c, data }) if c == call => {
                    return Ok(data.to_vec())
                }
                Some(LocalEvent::Failed { call: c, error }) if c == call => {
                    return Err(PageError::Transport(error.into()))
                }
                _ => {}
            }
        }
    }

    fn raw(&mut self, request: &Request) -> Result<Response, PageError> {
        let mut bytes = Vec::new();
        request.emit(&mut bytes);
        let reply = self.call_bytes(&bytes)?;
        match Response::parse(&reply) {
            Ok(Response::Refused { status, .. }) => Err(PageError::Refused { status }),
            Ok(r) => Ok(r),
            Err(e) => Err(PageError::BadResponse(e)),
        }
    }

    fn pipeline_endpoint(&mut self) -> &mut LocalEndpoint {
        self.pipeline.endpoint_mut()
    }

    /// Adds a key and makes it current: new writes are sealed under it
    /// (and the engine, if any, gets it too). Pages under older keys still
    /// open until those are retired; [`PageClient::rewrap`] moves them.
    pub fn rotate_key(&mut self, key: XtsKey) -> KeyId {
        let id = self.pipeline.cipher_mut().rotate(key.clone());
        if let crate::pipeline::Crypto::Engine(q) = self.pipeline.crypto() {
            q.engine().load_key(id, key);
        }
        id
    }

    /// Reads `addresses` and writes them back under the current key.
    pub fn rewrap(&mut self, addresses: &[u64]) -> Result<Vec<Result<(), PageError>>, ClientError> {
        let pages = self.read_pages(addresses)?;
        let mut out: Vec<Result<(), PageError>> = Vec::with_capacity(addresses.len());
        let mut good = Vec::new();
        for (&a, p) in addresses.iter().zip(pages) {
            match p {
                Ok(p) => {
                    good.push((a, Box::new(*p.page())));
                    out.push(Ok(()));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        let refs: Vec<(u64, &Page)> = good.iter().map(|(a, p)| (*a, &**p)).collect();
        let written = self.write_pages(&refs)?;
        let mut written = written.into_iter();
        for r in out.iter_mut().filter(|r| r.is_ok()) {
            // NOTE(unwrap): one write result per page that was read.
            *r = written.next().expect("a result per rewritten page");
        }
        Ok(out)
    }

    /// Forgets a key (here and at the engine).
    pub fn retire_key(&mut self, id: KeyId) -> Result<(), smt_pagecrypt::KeyRingError> {
        self.pipeline.cipher_mut().retire(id)?;
        if let crate::pipeline::Crypto::Engine(q) = self.pipeline.crypto() {
            q.engine().unload_key(id);
        }
        Ok(())
    }
}

/// Puts each page's outcome at its position: pages of chunk `user` are
/// matched by address to that chunk's first unfilled slot.
fn place(chunks: &[&[u64]], done: Vec<Done>) -> Vec<Result<Option<PageBuf>, PageError>> {
    let mut starts = Vec::with_capacity(chunks.len());
    let mut n = 0;
    for c in chunks {
        starts.push(n);
        n += c.len();
    }
    let mut slots: Vec<Option<Result<Option<PageBuf>, PageError>>> = (0..n).map(|_| None).collect();
    for d in done {
        let chunk = d.user as usize;
        let Some(addrs) = chunks.get(chunk) else {
            continue;
        };
        let at = addrs
            .iter()
            .enumerate()
            .position(|(i, a)| *a == d.address && slots[starts[chunk] + i].is_none());
        if let Some(i) = at {
            slots[starts[chunk] + i] = Some(d.result);
        }
    }
    slots
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Err(PageError::Transport(smt::Error::Closed.into()))))
        .collect()
}

fn client_to_page(e: ClientError) -> PageError {
    match e {
        ClientError::Smt(e) => PageError::Transport(e.into()),
        other => {
            PageError::Transport(smt::Error::Io(std::io::Error::other(other.to_string())).into())
        }
    }
}

fn unexpected(r: Response) -> PageError {
    tracing::debug!(?r, "unexpected response");
    PageError::BadResponse(wire::WireError::Reserved("response does not match request"))
}
