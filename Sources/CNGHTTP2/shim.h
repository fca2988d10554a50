// libnghttp2 for Swift: the calls LiveRelayHTTP2 makes, behind one name each
// whatever the installed release.
//
// nghttp2 1.61 renamed the calls that move bytes (`mem_recv2`, `mem_send2`) and
// the request's body provider (`nghttp2_data_provider2`, `submit_request2`),
// deprecating the old ones; Debian 12 ships 1.52, which has only the old ones.
// Both return a signed byte count (`ssize_t` before, `nghttp2_ssize` after, a
// `long` on every platform we build on), so one Swift callback type serves both.
#ifndef LIVERELAY_CNGHTTP2_SHIM_H
#define LIVERELAY_CNGHTTP2_SHIM_H

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <string.h>

#if NGHTTP2_VERSION_NUM >= 0x013d00
#define LR_NGHTTP2_NEW_API 1
#else
#define LR_NGHTTP2_NEW_API 0
#endif

/// Copies up to `length` body bytes into `buffer`, sets NGHTTP2_DATA_FLAG_EOF
/// in `flags` at the end; returns the count copied.
typedef long (*lr_nghttp2_body_reader)(nghttp2_session *session, int32_t stream_id, uint8_t *buffer,
                                       size_t length, uint32_t *flags, nghttp2_data_source *source,
                                       void *user_data);

static inline long lr_nghttp2_mem_recv(nghttp2_session *session, const uint8_t *in, size_t length) {
#if LR_NGHTTP2_NEW_API
    return (long)nghttp2_session_mem_recv2(session, in, length);
#else
    return (long)nghttp2_session_mem_recv(session, in, length);
#endif
}

/// The next run of bytes to write; `*data` stays valid until the next call on `session`.
static inline long lr_nghttp2_mem_send(nghttp2_session *session, const uint8_t **data) {
#if LR_NGHTTP2_NEW_API
    return (long)nghttp2_session_mem_send2(session, data);
#else
    return (long)nghttp2_session_mem_send(session, data);
#endif
}

/// A request; with a body when `reader` is not NULL. Returns its stream id, or a negative error.
static inline int32_t lr_nghttp2_submit_request(nghttp2_session *session, const nghttp2_nv *fields, size_t count,
                                                lr_nghttp2_body_reader reader) {
#if LR_NGHTTP2_NEW_API
    nghttp2_data_provider2 provider;
    memset(&provider, 0, sizeof provider);
    provider.read_callback = (nghttp2_data_source_read_callback2)reader;
    return nghttp2_submit_request2(session, NULL, fields, count, reader ? &provider : NULL, NULL);
#else
    nghttp2_data_provider provider;
    memset(&provider, 0, sizeof provider);
    provider.read_callback = (nghttp2_data_source_read_callback)reader;
    return nghttp2_submit_request(session, NULL, fields, count, reader ? &provider : NULL, NULL);
#endif
}

/// The 8 opaque bytes of a PING frame, as one big-endian number.
static inline uint64_t lr_nghttp2_ping_data(const nghttp2_frame *frame) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = (value << 8) | frame->ping.opaque_data[i];
    return value;
}

#endif
