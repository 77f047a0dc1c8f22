//! A key-value service on three replicas (one shared store behind them,
//! as a database would be), called through a balanced client under tower
//! layers: a timeout, a retry of what did not run, and a token in the
//! metadata that the handlers check. Ends with a graceful shutdown.
//!
//! ```text
//! cargo run -p smt-rpc --example kv_service
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig};
use smt_rpc::tower::ServiceBuilder;
use smt_rpc::{
    balance, BalanceOptions, Client, Code, Metadata, Method, Request, Response, RetryUnavailable,
    Router, Server, Status,
};

// ---- the service's interface, shared by clients and servers ----

#[derive(Debug, Serialize, Deserialize)]
pub struct Put {
    pub key: String,
    pub value: Vec<u8>,
}

pub const PUT: Method<Put, ()> = Method::new("kv.Store/Put");
pub const GET: Method<String, Vec<u8>> = Method::new("kv.Store/Get");

const TOKEN: &str = "s3cret";

// ---- the server ----

type Store = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// Who may call: the token in the `authorization` metadata.
fn authorise<T>(req: &Request<T>) -> Result<(), Status> {
    match req.metadata().get_str("authorization") {
        Some(TOKEN) => Ok(()),
        _ => Err(Status::unauthenticated("send the token in `authorization`")),
    }
}

fn router(store: Store, replica: usize) -> Result<Router, Status> {
    let put_store = store.clone();
    Router::new()
        .unary(PUT, move |req: Request<Put>| {
            let store = put_store.clone();
            async move {
                authorise(&req)?;
                let Put { key, value } = req.into_message();
                store
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, value);
                Ok(())
            }
        })?
        .unary(GET, move |req: Request<String>| {
            let store = store.clone();
            async move {
                authorise(&req)?;
                let found = store
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(req.message())
                    .cloned();
                let value = found.ok_or_else(|| Status::not_found(req.message().clone()))?;
                let mut metadata = Metadata::new();
                metadata.insert("x-replica", replica.to_string())?;
                Ok(Response::new(value).with_metadata(metadata))
            }
        })
}

/// A request carrying the token.
fn with_token<T>(message: T) -> Request<T> {
    let mut metadata = Metadata::new();
    // NOTE(unwrap): a constant, valid key.
    metadata.insert("authorization", TOKEN).unwrap();
    Request::new(message).with_metadata(metadata)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let any: SocketAddr = "127.0.0.1:0".parse()?;
    let client = Endpoint::bind(any, EndpointConfig::default())?;
    let store = Store::default();
    let (stop, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut servers = Vec::new();
    let mut targets = Vec::new();
    for replica in 0..3 {
        let endpoint = Endpoint::bind(any, EndpointConfig::default())?;
        // Sessions from installed keys keep the example short; TLS works
        // alike (`set_tls_server` / `set_tls_client`).
        let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
        client.install_session(endpoint.local_addr(), ck)?;
        endpoint.install_session(client.local_addr(), sk)?;
        targets.push(endpoint.local_addr().to_string());
        let mut stopped = stop.subscribe();
        let server = Server::new(endpoint).drain_timeout(Duration::from_secs(2));
        let service = router(store.clone(), replica)?;
        servers.push(tokio::spawn(server.serve_with_shutdown(
            service,
            async move {
                let _ = stopped.recv().await;
            },
        )));
    }

    let channel = balance(client, targets, BalanceOptions::default());
    let stack = ServiceBuilder::new()
        .retry(RetryUnavailable::new(3))
        .timeout(Duration::from_secs(5))
        .service(channel);
    let mut kv = Client::new(stack).with_timeout(Duration::from_secs(2));

    for i in 0..30 {
        let put = Put {
            key: format!("k{i}"),
            value: format!("v{i}").into_bytes(),
        };
        kv.unary(PUT, with_token(put)).await?;
    }
    let mut per_replica = [0usize; 3];
    for i in 0..30 {
        let reply = kv.unary(GET, with_token(format!("k{i}"))).await?;
        assert_eq!(reply.message(), format!("v{i}").as_bytes());
        let replica: usize = reply
            .metadata()
            .get_str("x-replica")
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        per_replica[replica % 3] += 1;
    }
    println!("30 GETs served by the replicas: {per_replica:?}");

    let missing = kv.unary(GET, with_token("nope".to_owned())).await;
    println!("GET nope: {:?}", missing.as_ref().map_err(Status::code));
    let anonymous = kv.unary(GET, "k1".to_owned()).await;
    assert_eq!(
        anonymous.map_err(|s| s.code()).err(),
        Some(Code::Unauthenticated)
    );
    println!("GET without the token: UNAUTHENTICATED");

    let _ = stop.send(());
    for server in servers {
        server.await??;
    }
    println!("all replicas drained and closed");
    Ok(())
}
