/*
 * libsmt's error paths, from C: each misuse gets its code and a message,
 * and none crashes. Run by tests/c_programs.rs; prints one line per check
 * and a closing "N passed, M failed".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <smt.h>

static int passed, failed;

static void check(int ok, const char *what) {
    if (ok) {
        passed++;
        printf("ok - %s\n", what);
    } else {
        failed++;
        printf("FAILED - %s (last error: %s)\n", what, smt_last_error());
    }
}

/* A call returned `want`, with a message saying why when it is an error. */
static void expect(int got, int want, const char *what) {
    int ok = got == want && (want >= SMT_ERR_AGAIN || strlen(smt_last_error()) > 0);
    if (!ok) printf("  %s: got %d (%s), want %d (%s)\n", what, got, smt_strerror(got), want, smt_strerror(want));
    check(ok, what);
}

static const char *KEYS_PEER = "127.0.0.1:9";

/* 56 bytes of AES-128-GCM keys whose two directions differ. */
static void test_keys(uint8_t keys[56]) {
    for (int i = 0; i < 56; i++) keys[i] = (uint8_t)(i * 7 + 1);
}

static void bad_addresses(void) {
    smt_handle h = 0;
    expect(smt_open("not an address", &h), SMT_ERR_ADDRESS, "open: not an address");
    check(strstr(smt_last_error(), "IP:PORT") != NULL, "open: the message says IP:PORT is expected");
    check(smt_error_blame(SMT_ERR_ADDRESS) == SMT_BLAME_CALLER, "blame: a bad address is the caller's");
    expect(smt_open("127.0.0.1", &h), SMT_ERR_ADDRESS, "open: no port");
    expect(smt_open("localhost:80", &h), SMT_ERR_ADDRESS, "open: a host name, not an IP");
    expect(smt_open("127.0.0.1:99999", &h), SMT_ERR_ADDRESS, "open: port out of range");
    expect(smt_open(NULL, &h), SMT_ERR_INVALID, "open: NULL address");
    expect(smt_open("127.0.0.1:0", NULL), SMT_ERR_INVALID, "open: NULL handle pointer");
    check(h == 0, "open: a failed open leaves the handle alone");
}

static void null_pointers(smt_handle h) {
    uint64_t id;
    smt_msg msg;
    expect(smt_send(h, NULL, "x", 1, &id), SMT_ERR_INVALID, "send: NULL peer");
    expect(smt_send(h, KEYS_PEER, NULL, 5, &id), SMT_ERR_INVALID, "send: NULL data with a length");
    expect(smt_send(h, KEYS_PEER, "x", 1, NULL), SMT_ERR_INVALID, "send: NULL id pointer");
    expect(smt_recv(h, SMT_RECV_NONBLOCKING, NULL), SMT_ERR_INVALID, "recv: NULL message");
    expect(smt_reply(h, 1, NULL, 3), SMT_ERR_INVALID, "reply: NULL data with a length");
    expect(smt_install_keys(h, KEYS_PEER, SMT_ROLE_CLIENT, NULL, 56), SMT_ERR_INVALID, "install_keys: NULL keys");
    expect(smt_set_psk(h, NULL, 32), SMT_ERR_INVALID, "set_psk: NULL key");
    expect(smt_set_tls_server(h, NULL, NULL, NULL), SMT_ERR_INVALID, "set_tls_server: NULL paths");
    expect(smt_set_tls_client(h, NULL, NULL, NULL), SMT_ERR_INVALID, "set_tls_client: NULL CA path");
    expect(smt_local_addr(h, NULL, 64), SMT_ERR_INVALID, "local_addr: NULL buffer");
    smt_msg_release(NULL);
    memset(&msg, 0, sizeof msg);
    smt_msg_release(&msg);
    check(1, "msg_release: NULL and an empty message are no-ops");
}

static void misuse(smt_handle h) {
    uint64_t id;
    smt_msg msg;
    char small[4];
    uint8_t keys[56];
    expect(smt_local_addr(h, small, sizeof small), SMT_ERR_BUFFER, "local_addr: buffer too small");
    expect(smt_recv(h, 0x100, &msg), SMT_ERR_INVALID, "recv: unknown flag");
    expect(smt_recv(h, SMT_RECV_NONBLOCKING, &msg), SMT_ERR_AGAIN, "recv: nothing ready, non-blocking");
    check(smt_error_blame(SMT_ERR_AGAIN) == SMT_BLAME_NONE, "blame: AGAIN is no one's fault");
    expect(smt_reply(h, 42, "x", 1), SMT_ERR_UNKNOWN_ID, "reply: unknown request id");
    expect(smt_abort(h, 42), SMT_ERR_UNKNOWN_ID, "abort: unknown id");
    expect(smt_set_psk(h, (const uint8_t *)"short", 5), SMT_ERR_INVALID, "set_psk: key too short");
    test_keys(keys);
    expect(smt_install_keys(h, KEYS_PEER, SMT_ROLE_CLIENT, keys, 10), SMT_ERR_INVALID, "install_keys: wrong length");
    expect(smt_install_keys(h, KEYS_PEER, 7, keys, 56), SMT_ERR_INVALID, "install_keys: unknown role");
    memcpy(keys + 28, keys, 28);
    expect(smt_install_keys(h, KEYS_PEER, SMT_ROLE_CLIENT, keys, 56), SMT_ERR_CONFIG,
           "install_keys: the same key both ways is refused");
    expect(smt_set_server_name(h, KEYS_PEER, "not a name!"), SMT_ERR_INVALID, "set_server_name: not a DNS name");
    expect(smt_send(h, "127.0.0.1", "x", 1, &id), SMT_ERR_ADDRESS, "send: peer without a port");
}

static void files(smt_handle h, const char *dir) {
    char garbage[512];
    snprintf(garbage, sizeof garbage, "%s/garbage.pem", dir);
    FILE *f = fopen(garbage, "w");
    if (f != NULL) {
        fputs("this is not PEM\n", f);
        fclose(f);
    }
    expect(smt_set_tls_server(h, "/nonexistent/cert.pem", "/nonexistent/key.pem", NULL), SMT_ERR_FILE,
           "set_tls_server: missing files");
    check(smt_error_blame(SMT_ERR_FILE) == SMT_BLAME_ENVIRONMENT, "blame: an unreadable file is the environment's");
    check(strstr(smt_last_error(), "/nonexistent/cert.pem") != NULL, "set_tls_server: the message names the file");
    expect(smt_set_tls_client(h, garbage, NULL, NULL), SMT_ERR_CONFIG, "set_tls_client: a CA file that is not PEM");
    expect(smt_set_tls_client(h, garbage, garbage, NULL), SMT_ERR_INVALID, "set_tls_client: a cert without its key");
    expect(smt_set_zero_rtt_ticket(h, KEYS_PEER, "/nonexistent/ticket", garbage, "host.test", 0), SMT_ERR_FILE,
           "set_zero_rtt_ticket: missing ticket");
    expect(smt_set_zero_rtt_ticket(h, KEYS_PEER, garbage, garbage, "host.test", 0), SMT_ERR_CONFIG,
           "set_zero_rtt_ticket: a file that is not a ticket");
    expect(smt_set_zero_rtt_server(h, garbage, garbage), SMT_ERR_CONFIG, "set_zero_rtt_server: not a static key");
}

static void unknown_peer_and_too_large(smt_handle h) {
    uint64_t id = 0;
    expect(smt_send(h, KEYS_PEER, "x", 1, &id), SMT_ERR_NO_KEYS, "send: unknown peer (no keys)");
    check(smt_error_blame(SMT_ERR_NO_KEYS) == SMT_BLAME_CALLER, "blame: no keys is the caller's");
    check(strstr(smt_last_error(), KEYS_PEER) != NULL, "send: the message names the peer");

    char *big = calloc(1, (size_t)SMT_MAX_MESSAGE_LEN + 1);
    if (big == NULL) {
        check(0, "calloc of SMT_MAX_MESSAGE_LEN + 1 bytes");
        return;
    }
    expect(smt_send(h, KEYS_PEER, big, (size_t)SMT_MAX_MESSAGE_LEN + 1, &id), SMT_ERR_TOO_LARGE,
           "send: one byte over SMT_MAX_MESSAGE_LEN");
    expect(smt_reply(h, 1, big, (size_t)SMT_MAX_MESSAGE_LEN + 1), SMT_ERR_TOO_LARGE,
           "reply: one byte over SMT_MAX_MESSAGE_LEN");
    free(big);
    expect(smt_send(h, KEYS_PEER, NULL, SIZE_MAX, &id), SMT_ERR_TOO_LARGE,
           "send: a huge length is refused before the memory is read");
}

/* A call to a port where nothing listens, with keys: the call fails, and
 * smt_recv reports it as SMT_MSG_FAILED with its id and a reason. */
static void failed_call(void) {
    smt_handle gone, h;
    char port[SMT_PEER_LEN];
    uint8_t keys[56];
    uint64_t id;
    smt_msg msg;
    smt_open("127.0.0.1:0", &gone);
    smt_local_addr(gone, port, sizeof port);
    smt_close(gone); /* its port is free now: nothing listens there */
    expect(smt_open("127.0.0.1:0", &h), SMT_OK, "open");
    test_keys(keys);
    expect(smt_install_keys(h, port, SMT_ROLE_CLIENT, keys, 56), SMT_OK, "install_keys");
    expect(smt_send(h, port, "hello?", 6, &id), SMT_OK, "send to a closed port");
    int kind = smt_recv(h, 0, &msg);
    check(kind == SMT_MSG_FAILED && msg.kind == SMT_MSG_FAILED && msg.id == id, "recv: the call is reported failed");
    check(msg.error == SMT_ERR_UNREACHABLE || msg.error == SMT_ERR_TIMEOUT, "recv: unreachable (or timed out)");
    check(smt_error_blame(msg.error) == SMT_BLAME_NETWORK, "blame: an unreachable peer is the network's");
    check(msg.len > 0 && strlen((const char *)msg.data) == msg.len && strcmp(msg.peer, port) == 0,
          "recv: the failure carries its reason as text and the peer");
    printf("  (reason: %s)\n", (const char *)msg.data);
    smt_msg_release(&msg);
    check(msg.data == NULL && msg.len == 0, "msg_release: empties the message");
    smt_msg_release(&msg);
    smt_close(h);
}

/* A server and a client handle on loopback with each other's keys. */
struct pair {
    smt_handle server, client;
    char server_addr[SMT_PEER_LEN], client_addr[SMT_PEER_LEN];
};

static void open_pair(struct pair *p) {
    uint8_t keys[56];
    smt_open("127.0.0.1:0", &p->server);
    smt_open("127.0.0.1:0", &p->client);
    smt_local_addr(p->server, p->server_addr, sizeof p->server_addr);
    smt_local_addr(p->client, p->client_addr, sizeof p->client_addr);
    test_keys(keys);
    expect(smt_install_keys(p->client, p->server_addr, SMT_ROLE_CLIENT, keys, 56), SMT_OK, "install_keys (client)");
    expect(smt_install_keys(p->server, p->client_addr, SMT_ROLE_SERVER, keys, 56), SMT_OK, "install_keys (server)");
}

/* The client first: its close sends the acknowledgements of the responses
 * it received, which the server's close waits for (at most 2 s). */
static void close_pair(struct pair *p) {
    expect(smt_close(p->client), SMT_OK, "close (client)");
    expect(smt_close(p->server), SMT_OK, "close (server)");
}

/* A request the server drops with smt_abort: the client hears at once that
 * no answer will come (SMT_ERR_ABANDONED, the peer's doing). */
static void abandoned_request(void) {
    struct pair p;
    uint64_t id;
    smt_msg req, msg;
    open_pair(&p);
    expect(smt_send(p.client, p.server_addr, "drop me", 7, &id), SMT_OK, "send a request the server will drop");
    check(smt_recv(p.server, 0, &req) == SMT_MSG_REQUEST, "the server receives it");
    expect(smt_abort(p.server, req.id), SMT_OK, "abort: the server drops the request");
    expect(smt_reply(p.server, req.id, "x", 1), SMT_ERR_UNKNOWN_ID, "reply after abort: unknown id");
    smt_msg_release(&req);
    int kind = smt_recv(p.client, 0, &msg);
    check(kind == SMT_MSG_FAILED && msg.id == id && msg.error == SMT_ERR_ABANDONED,
          "the client's call fails with SMT_ERR_ABANDONED");
    check(smt_error_blame(SMT_ERR_ABANDONED) == SMT_BLAME_PEER, "blame: an abandoned request is the peer's");
    close_pair(&p);
    /* A message outlives its handle until released. */
    check(msg.kind == SMT_MSG_FAILED && strlen((const char *)msg.data) == msg.len && msg.len > 0,
          "a message is still readable after its handle is closed");
    smt_msg_release(&msg);
}

/* A call the client gives up on with smt_abort: no message reports it,
 * even though the server answers. */
static void cancelled_call(void) {
    struct pair p;
    uint64_t id, id2;
    smt_msg req, msg;
    open_pair(&p);
    expect(smt_send(p.client, p.server_addr, "never mind", 10, &id), SMT_OK, "send a call the client will cancel");
    check(smt_recv(p.server, 0, &req) == SMT_MSG_REQUEST, "the server receives it");
    expect(smt_abort(p.client, id), SMT_OK, "abort: the client cancels its call");
    expect(smt_abort(p.client, id), SMT_ERR_UNKNOWN_ID, "abort twice: unknown id");
    int rc = smt_reply(p.server, req.id, "too late", 8);
    check(rc == SMT_OK || rc == SMT_ERR_UNKNOWN_ID, "the server may still answer (or already knows)");
    smt_msg_release(&req);
    /* A second call, answered: the first one's fate is settled by then. */
    expect(smt_send(p.client, p.server_addr, "next", 4, &id2), SMT_OK, "send a second call");
    check(smt_recv(p.server, 0, &req) == SMT_MSG_REQUEST && req.len == 4, "the server receives the second");
    expect(smt_reply(p.server, req.id, "NEXT", 4), SMT_OK, "reply to the second");
    smt_msg_release(&req);
    int kind = smt_recv(p.client, 0, &msg);
    check(kind == SMT_MSG_RESPONSE && msg.id == id2, "only the second call is reported");
    smt_msg_release(&msg);
    expect(smt_recv(p.client, SMT_RECV_NONBLOCKING, &msg), SMT_ERR_AGAIN, "nothing else arrives");
    close_pair(&p);
}

/* smt_set_call_timeout: a request the server sits on fails with
 * SMT_ERR_TIMEOUT after the timeout, no sooner. */
static void call_timeout(void) {
    struct pair p;
    uint64_t id;
    smt_msg req, msg;
    struct timespec t0, t1;
    open_pair(&p);
    expect(smt_set_call_timeout(p.client, 100), SMT_OK, "set_call_timeout: 100 ms");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect(smt_send(p.client, p.server_addr, "slow job", 8, &id), SMT_OK, "send a call the server sits on");
    check(smt_recv(p.server, 0, &req) == SMT_MSG_REQUEST, "the server receives it (and does not answer)");
    int kind = smt_recv(p.client, 0, &msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    check(kind == SMT_MSG_FAILED && msg.id == id && msg.error == SMT_ERR_TIMEOUT,
          "the call fails with SMT_ERR_TIMEOUT");
    check(ms >= 95 && ms < 5000, "after its timeout");
    printf("  (failed after %ld ms: %.*s)\n", ms, (int)msg.len, (const char *)msg.data);
    smt_msg_release(&msg);
    smt_msg_release(&req);
    expect(smt_set_call_timeout(p.client, 0), SMT_OK, "set_call_timeout: 0, no deadline");
    close_pair(&p);
}

/* At most SMT_MAX_OUTSTANDING_CALLS calls at once per handle: the next one
 * is refused until some end (here none will: nothing listens at KEYS_PEER). */
static void too_many_calls(void) {
    smt_handle h;
    uint8_t keys[56];
    uint64_t id;
    int rc = SMT_OK, sent = 0;
    expect(smt_open("127.0.0.1:0", &h), SMT_OK, "open");
    test_keys(keys);
    smt_install_keys(h, KEYS_PEER, SMT_ROLE_CLIENT, keys, 56);
    while (sent <= SMT_MAX_OUTSTANDING_CALLS && (rc = smt_send(h, KEYS_PEER, "x", 1, &id)) == SMT_OK) sent++;
    expect(rc, SMT_ERR_TOO_MANY_CALLS, "send: too many calls outstanding");
    check(sent == SMT_MAX_OUTSTANDING_CALLS, "refused at SMT_MAX_OUTSTANDING_CALLS calls");
    check(smt_error_blame(SMT_ERR_TOO_MANY_CALLS) == SMT_BLAME_CALLER, "blame: too many calls is the caller's");
    expect(smt_close(h), SMT_OK, "close cancels them all");
}

static void address_in_use(smt_handle h) {
    char addr[SMT_PEER_LEN];
    smt_handle other = 0;
    smt_local_addr(h, addr, sizeof addr);
    expect(smt_open(addr, &other), SMT_ERR_SOCKET, "open: address in use");
    check(smt_error_blame(SMT_ERR_SOCKET) == SMT_BLAME_ENVIRONMENT, "blame: a socket error is the environment's");
}

static void use_after_close(smt_handle h) {
    uint64_t id;
    smt_msg msg;
    char addr[SMT_PEER_LEN];
    expect(smt_close(h), SMT_OK, "close");
    expect(smt_send(h, KEYS_PEER, "x", 1, &id), SMT_ERR_HANDLE, "after close: send");
    expect(smt_recv(h, 0, &msg), SMT_ERR_HANDLE, "after close: blocking recv returns at once");
    expect(smt_reply(h, 1, "x", 1), SMT_ERR_HANDLE, "after close: reply");
    expect(smt_abort(h, 1), SMT_ERR_HANDLE, "after close: abort");
    expect(smt_fd(h), SMT_ERR_HANDLE, "after close: fd");
    expect(smt_wants_writable(h), SMT_ERR_HANDLE, "after close: wants_writable");
    expect(smt_local_addr(h, addr, sizeof addr), SMT_ERR_HANDLE, "after close: local_addr");
    check(smt_timeout_ms(h) == 0, "after close: timeout_ms is 0, so a loop calls recv and sees the error");
    expect(smt_close(h), SMT_ERR_HANDLE, "after close: close again");
    smt_handle next;
    expect(smt_open("127.0.0.1:0", &next), SMT_OK, "open a new handle (may reuse the slot)");
    check(next != h, "the new handle differs from the closed one");
    expect(smt_fd(h), SMT_ERR_HANDLE, "the closed handle stays closed after its slot is reused");
    check(smt_fd(next) >= 0, "the new handle works");
    smt_close(next);
    expect(smt_fd(0), SMT_ERR_HANDLE, "handle 0 is never valid");
    expect(smt_fd(UINT64_MAX), SMT_ERR_HANDLE, "a made-up handle");
    expect(smt_close(12345), SMT_ERR_HANDLE, "close of a made-up handle");
}

/* One thread blocks in smt_recv on a server handle; another thread's call
 * on the same handle gets SMT_ERR_BUSY, not a data race. */
struct blocked {
    smt_handle h;
    int kind;
    smt_msg msg;
};

static void *blocking_recv(void *arg) {
    struct blocked *b = arg;
    b->kind = smt_recv(b->h, 0, &b->msg);
    return NULL;
}

static void busy(void) {
    struct pair p;
    uint64_t id;
    open_pair(&p);
    smt_handle server = p.server, client = p.client;
    const char *server_addr = p.server_addr, *client_addr = p.client_addr;

    struct blocked b = {.h = server};
    pthread_t thread;
    pthread_create(&thread, NULL, blocking_recv, &b);
    int rc = 0;
    for (int i = 0; i < 500 && rc != SMT_ERR_BUSY; i++) {
        rc = smt_wants_writable(server);
        if (rc != SMT_ERR_BUSY) usleep(10 * 1000);
    }
    expect(rc, SMT_ERR_BUSY, "another thread's call while one blocks in recv: busy");
    expect(smt_send(server, client_addr, "x", 1, &id), SMT_ERR_BUSY, "busy: send");
    expect(smt_close(server), SMT_ERR_BUSY, "busy: close refuses, the handle stays open");

    expect(smt_send(client, server_addr, "ping", 4, &id), SMT_OK, "send ping (wakes the blocked thread)");
    pthread_join(thread, NULL);
    check(b.kind == SMT_MSG_REQUEST && b.msg.len == 4 && memcmp(b.msg.data, "ping", 4) == 0,
          "the blocked thread received the request");
    expect(smt_reply(server, b.msg.id, "pong", 4), SMT_OK, "reply from another thread than the one that received");
    smt_msg_release(&b.msg);
    smt_msg msg;
    int kind = smt_recv(client, 0, &msg);
    check(kind == SMT_MSG_RESPONSE && msg.id == id && msg.len == 4 && memcmp(msg.data, "pong", 4) == 0,
          "the client got the answer");
    smt_msg_release(&msg);
    close_pair(&p);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    check(smt_version() != NULL && strlen(smt_version()) > 0, "version");
    check(strcmp(smt_strerror(-12345), "unknown SMT error code") == 0, "strerror: unknown codes");
    check(smt_last_error() != NULL, "last_error is never NULL");

    bad_addresses();
    smt_handle h;
    expect(smt_open("127.0.0.1:0", &h), SMT_OK, "open");
    check(smt_fd(h) >= 0 && smt_timeout_ms(h) >= -1 && smt_wants_writable(h) == 0, "fd, timeout_ms, wants_writable");
    null_pointers(h);
    misuse(h);
    files(h, dir);
    unknown_peer_and_too_large(h);
    address_in_use(h);
    use_after_close(h);
    failed_call();
    abandoned_request();
    cancelled_call();
    call_timeout();
    too_many_calls();
    busy();

    printf("errors.c: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
