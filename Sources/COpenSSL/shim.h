// OpenSSL 3 for Swift: the parts Swift's C importer cannot reach by itself.
//
// Function-like macros do not import, so each one LiveRelayTLS needs is
// wrapped in a `static inline` function (prefix `lr_`). Constants built from
// macros (SSL_OP_BIT, or'ed flag sets) do not import either, so they are
// re-exported as `static const` values. Everything else is called directly.
#ifndef LIVERELAY_COPENSSL_SHIM_H
#define LIVERELAY_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <string.h>

// MARK: - Constants

static const uint64_t lr_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t lr_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const uint64_t lr_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
static const uint64_t lr_SSL_OP_NO_TICKET = SSL_OP_NO_TICKET;
static const long lr_SSL_MODE_RELEASE_BUFFERS = SSL_MODE_RELEASE_BUFFERS;
static const long lr_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER = SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER;
static const unsigned long lr_XN_FLAG_RFC2253 = XN_FLAG_RFC2253;
static const int lr_SSL_R_UNEXPECTED_EOF_WHILE_READING = SSL_R_UNEXPECTED_EOF_WHILE_READING;

// MARK: - SSL_CTX macros

static inline int lr_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline int lr_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

static inline long lr_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline int lr_SSL_CTX_add0_chain_cert(SSL_CTX *ctx, X509 *x509) {
    return (int)SSL_CTX_add0_chain_cert(ctx, x509);
}

static inline int lr_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}

static inline long lr_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

// MARK: - SSL macros

static inline int lr_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

// MARK: - BIO macros

static inline int lr_BIO_pending(BIO *bio) {
    return BIO_pending(bio);
}

static inline long lr_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

static inline void lr_BIO_set_retry_read(BIO *bio) {
    BIO_set_retry_read(bio);
}

static inline void lr_BIO_clear_retry_flags(BIO *bio) {
    BIO_clear_retry_flags(bio);
}

// MARK: - Errors and keys

// OpenSSL keeps at most this many errors per thread (ERR_NUM_ERRORS, which
// OpenSSL 3 only declares in deprecated API), dropping the oldest beyond it.
static const size_t lr_ERR_QUEUE_CAPACITY = 16;

// The one drain of OpenSSL's per-thread error queue: a stale entry would be
// blamed on the next call, so every failure path empties it, oldest first.
// Writes the messages into `buffer`, joined with "; " and always
// NUL-terminated within `capacity`; what does not fit is cut off, never
// written past the end (the messages are ASCII, so a cut is still text).
// With `reasons`, the first `reasons_capacity` errors' reason codes go there
// too, for callers that act on one. Returns how many errors were drained,
// counting those whose text or reason did not fit.
static inline size_t lr_ERR_drain(char *buffer, size_t capacity, int *reasons, size_t reasons_capacity) {
    size_t count = 0;
    size_t used = 0;
    if (buffer != NULL && capacity > 0) {
        buffer[0] = '\0';
    }
    unsigned long code;
    while ((code = ERR_get_error()) != 0) {
        if (reasons != NULL && count < reasons_capacity) {
            reasons[count] = ERR_GET_REASON(code);
        }
        count += 1;
        if (buffer == NULL || used + 1 >= capacity) {
            continue;
        }
        char message[256];
        ERR_error_string_n(code, message, sizeof message);
        const char *parts[2] = { used > 0 ? "; " : "", message };
        for (int part = 0; part < 2; part++) {
            size_t length = strlen(parts[part]);
            size_t room = capacity - 1 - used;
            if (length > room) {
                length = room;
            }
            memcpy(buffer + used, parts[part], length);
            used += length;
        }
        buffer[used] = '\0';
    }
    return count;
}

// EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen, which Swift cannot call.
static inline EVP_PKEY *lr_EVP_EC_gen(const char *curve) {
    return EVP_EC_gen(curve);
}

#endif
