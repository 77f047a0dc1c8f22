/*
 * An SMT server in C: answers each request with its bytes in upper case,
 * from its own epoll loop (smt_fd + smt_timeout_ms, then non-blocking
 * smt_recv until SMT_ERR_AGAIN), and stops after answering "quit".
 *
 *   server ADDR [--psk HEX] [--cert PEM --key PEM [--client-ca PEM]]
 *               [--ticket-key FILE --ticket FILE]
 *
 * ADDR is IP:PORT (port 0: any free port). It prints "listening on
 * IP:PORT" once it is ready, and "served N requests" when it stops.
 *
 * Build: cc server.c -I ../include -L ../../../target/release -lsmt
 *        (or: cc server.c $(pkg-config --cflags --libs smt))
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include <smt.h>

static int fail(const char *what, int rc) {
    fprintf(stderr, "server: %s: %s (%s)\n", what, smt_strerror(rc), smt_last_error());
    return 1;
}

/* Hex text into bytes; returns the length, or -1. */
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

/* Answers one request; returns 1 if it was "quit". */
static int answer(smt_handle h, const smt_msg *msg, long *served) {
    int quit = msg->len == 4 && memcmp(msg->data, "quit", 4) == 0;
    char *upper = malloc(msg->len + 1);
    if (upper == NULL) {
        fprintf(stderr, "server: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < msg->len; i++) upper[i] = (char)toupper(msg->data[i]);
    int rc = quit ? smt_reply(h, msg->id, "bye", 3) : smt_reply(h, msg->id, upper, msg->len);
    free(upper);
    if (rc != SMT_OK) fail("smt_reply", rc);
    (*served)++;
    return quit;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: server IP:PORT [--psk HEX] [--cert PEM --key PEM [--client-ca PEM]] "
                        "[--ticket-key FILE --ticket FILE]\n");
        return 2;
    }
    const char *psk = NULL, *cert = NULL, *key = NULL, *client_ca = NULL;
    const char *ticket_key = NULL, *ticket = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--psk") == 0) psk = argv[i + 1];
        else if (strcmp(argv[i], "--cert") == 0) cert = argv[i + 1];
        else if (strcmp(argv[i], "--key") == 0) key = argv[i + 1];
        else if (strcmp(argv[i], "--client-ca") == 0) client_ca = argv[i + 1];
        else if (strcmp(argv[i], "--ticket-key") == 0) ticket_key = argv[i + 1];
        else if (strcmp(argv[i], "--ticket") == 0) ticket = argv[i + 1];
        else return fprintf(stderr, "server: unknown option %s\n", argv[i]), 2;
    }

    smt_handle h;
    int rc = smt_open(argv[1], &h);
    if (rc != SMT_OK) return fail("smt_open", rc);
    if (psk != NULL) {
        uint8_t bytes[256];
        long n = from_hex(psk, bytes, sizeof bytes);
        if (n < 0) return fprintf(stderr, "server: --psk is not hex\n"), 2;
        if ((rc = smt_set_psk(h, bytes, (size_t)n)) != SMT_OK) return fail("smt_set_psk", rc);
    }
    if (cert != NULL && (rc = smt_set_tls_server(h, cert, key, client_ca)) != SMT_OK)
        return fail("smt_set_tls_server", rc);
    if (ticket_key != NULL && (rc = smt_set_zero_rtt_server(h, ticket_key, ticket)) != SMT_OK)
        return fail("smt_set_zero_rtt_server", rc);

    char addr[SMT_PEER_LEN];
    if ((rc = smt_local_addr(h, addr, sizeof addr)) != SMT_OK) return fail("smt_local_addr", rc);
    printf("listening on %s\n", addr);
    fflush(stdout);

    /* The endpoint's socket in our own epoll set. */
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = h};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, smt_fd(h), &ev) != 0) {
        perror("server: epoll");
        return 1;
    }

    long served = 0;
    int quit = 0, watching_out = 0;
    while (!quit) {
        struct epoll_event ready;
        int n = epoll_wait(ep, &ready, 1, smt_timeout_ms(h));
        if (n < 0 && errno != EINTR) {
            perror("server: epoll_wait");
            return 1;
        }
        /* Readable or a timer due: take everything that is ready. */
        smt_msg msg;
        while ((rc = smt_recv(h, SMT_RECV_NONBLOCKING, &msg)) > 0) {
            if (rc == SMT_MSG_REQUEST) quit |= answer(h, &msg, &served);
            smt_msg_release(&msg);
        }
        if (rc != SMT_ERR_AGAIN) return fail("smt_recv", rc);
        /* While the socket is full, wait for room as well. */
        int want_out = smt_wants_writable(h) == 1;
        if (want_out != watching_out) {
            ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0);
            epoll_ctl(ep, EPOLL_CTL_MOD, smt_fd(h), &ev);
            watching_out = want_out;
        }
    }

    printf("served %ld requests\n", served);
    rc = smt_close(h); /* lets the last answers reach their clients */
    if (rc != SMT_OK) return fail("smt_close", rc);
    return 0;
}
