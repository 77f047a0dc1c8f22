/*
 * An SMT client in C: sends a few requests at once (smt_send returns an
 * id at once), waits for their responses with blocking smt_recv, matches
 * them by id and checks them, then sends "quit" to stop the server.
 *
 *   client SERVER [--psk HEX] [--ca PEM [--name NAME] [--cert PEM --key PEM]]
 *                 [--ticket FILE --ca PEM --name NAME [--fs]]
 *
 * SERVER is IP:PORT, or HOST:PORT (looked up, and HOST checked in the
 * server's certificate). --cert and --key: this client's certificate, for
 * a server that requires one. Exit status 0 when every response was right.
 *
 * Build: cc client.c -I ../include -L ../../../target/release -lsmt
 *        (or: cc client.c $(pkg-config --cflags --libs smt))
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smt.h>

#define CALLS 3
#define BIG (100 * 1000)

static int fail(const char *what, int rc) {
    fprintf(stderr, "client: %s: %s (%s)\n", what, smt_strerror(rc), smt_last_error());
    return 1;
}

static long from_hex(const char *hex, uint8_t *out, size_t cap) {
    size_t n = strlen(hex);
    if (n % 2 != 0 || n / 2 > cap) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned byte;
        if (sscanf(hex + 2 * i, "%2x", &byte) != 1) return -1;
        out[i] = (uint8_t)byte;
    }
    return (long)(n / 2);
}

/* Whether `got` is `sent` in upper case. */
static int is_upper_of(const uint8_t *got, size_t got_len, const char *sent, size_t len) {
    if (got_len != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (got[i] != (uint8_t)toupper((unsigned char)sent[i])) return 0;
    return 1;
}

/* Waits (blocking) for the outcome of call `id`; 0 if it is `want`. */
static int await(smt_handle h, uint64_t id, const char *want, size_t len) {
    smt_msg msg;
    int kind = smt_recv(h, 0, &msg);
    if (kind < 0) return fail("smt_recv", kind);
    int ok = kind == SMT_MSG_RESPONSE && msg.id == id && msg.len == len &&
             memcmp(msg.data, want, len) == 0;
    if (!ok) fprintf(stderr, "client: call %llu: unexpected message (kind %d, id %llu, %s): %.*s\n",
                     (unsigned long long)id, kind, (unsigned long long)msg.id, smt_strerror(msg.error),
                     (int)msg.len, msg.data);
    smt_msg_release(&msg);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: client IP:PORT|HOST:PORT [--psk HEX] "
                        "[--ca PEM [--name NAME] [--cert PEM --key PEM]] "
                        "[--ticket FILE --ca PEM --name NAME [--fs]]\n");
        return 2;
    }
    const char *psk = NULL, *ca = NULL, *name = NULL, *ticket = NULL, *cert = NULL, *key = NULL;
    int fs = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--fs") == 0) fs = 1;
        else if (i + 1 == argc) return fprintf(stderr, "client: %s needs a value\n", argv[i]), 2;
        else if (strcmp(argv[i], "--psk") == 0) psk = argv[++i];
        else if (strcmp(argv[i], "--ca") == 0) ca = argv[++i];
        else if (strcmp(argv[i], "--name") == 0) name = argv[++i];
        else if (strcmp(argv[i], "--ticket") == 0) ticket = argv[++i];
        else if (strcmp(argv[i], "--cert") == 0) cert = argv[++i];
        else if (strcmp(argv[i], "--key") == 0) key = argv[++i];
        else return fprintf(stderr, "client: unknown option %s\n", argv[i]), 2;
    }

    smt_handle h;
    int rc = smt_open("127.0.0.1:0", &h);
    if (rc != SMT_OK) return fail("smt_open", rc);

    /* The server's address; a host name is looked up (and checked by TLS). */
    char server[SMT_PEER_LEN];
    if ((rc = smt_resolve(h, argv[1], server, sizeof server)) != SMT_OK) return fail("smt_resolve", rc);

    if (psk != NULL) {
        uint8_t bytes[256];
        long n = from_hex(psk, bytes, sizeof bytes);
        if (n < 0) return fprintf(stderr, "client: --psk is not hex\n"), 2;
        if ((rc = smt_set_psk(h, bytes, (size_t)n)) != SMT_OK) return fail("smt_set_psk", rc);
    }
    if (ca != NULL && (rc = smt_set_tls_client(h, ca, cert, key)) != SMT_OK)
        return fail("smt_set_tls_client", rc);
    if (name != NULL && (rc = smt_set_server_name(h, server, name)) != SMT_OK)
        return fail("smt_set_server_name", rc);
    if (ticket != NULL && (rc = smt_set_zero_rtt_ticket(h, server, ticket, ca, name, fs)) != SMT_OK)
        return fail("smt_set_zero_rtt_ticket", rc);

    /* Three calls in flight at once: each smt_send returns its id. */
    char *big = malloc(BIG);
    if (big == NULL) return fprintf(stderr, "client: out of memory\n"), 1;
    for (size_t i = 0; i < BIG; i++) big[i] = (char)('a' + i % 26);
    const char *requests[CALLS] = {"hello", "secure message transport", big};
    size_t lens[CALLS] = {5, strlen(requests[1]), BIG};
    uint64_t ids[CALLS];
    int answered[CALLS] = {0};
    for (int i = 0; i < CALLS; i++) {
        if ((rc = smt_send(h, server, requests[i], lens[i], &ids[i])) != SMT_OK) return fail("smt_send", rc);
    }

    /* Their responses, in whatever order they complete. */
    int bad = 0;
    for (int done = 0; done < CALLS; done++) {
        smt_msg msg;
        int kind = smt_recv(h, 0, &msg);
        if (kind < 0) return fail("smt_recv", kind);
        int i = 0;
        while (i < CALLS && ids[i] != msg.id) i++;
        if (kind != SMT_MSG_RESPONSE || i == CALLS || answered[i]) {
            /* A failed call says why: its code in msg.error, the details as text in msg.data. */
            fprintf(stderr, "client: unexpected message (kind %d, id %llu, %s): %.*s\n", kind,
                    (unsigned long long)msg.id, smt_strerror(msg.error), (int)msg.len, msg.data);
            bad = 1;
        } else if (!is_upper_of(msg.data, msg.len, requests[i], lens[i])) {
            fprintf(stderr, "client: call %llu: wrong response\n", (unsigned long long)msg.id);
            bad = 1;
        } else if (msg.len > 64) {
            printf("call %llu: %zu bytes from %s, all upper case\n", (unsigned long long)msg.id, msg.len, msg.peer);
        } else {
            printf("call %llu: \"%.*s\" from %s\n", (unsigned long long)msg.id, (int)msg.len, msg.data, msg.peer);
        }
        if (i < CALLS) answered[i] = 1;
        smt_msg_release(&msg);
    }
    free(big);

    /* Stop the server. */
    uint64_t quit;
    if ((rc = smt_send(h, server, "quit", 4, &quit)) != SMT_OK) return fail("smt_send", rc);
    bad |= await(h, quit, "bye", 3);
    if (!bad) printf("all %d responses right\n", CALLS + 1);
    smt_close(h);
    return bad;
}
