// SPDX-License-Identifier: Apache-2.0
#include "harness/protocol.h"

namespace conformance {
namespace {

// Vector lengths come from the other process; this bound keeps a corrupt frame from allocating
// gigabytes before the Reader notices it ran out of bytes.
constexpr uint32_t kMaxItems = 1u << 16;

template <typename T, typename F>
void put_vec(Writer& w, const std::vector<T>& v, F put) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (const T& x : v) put(w, x);
}

template <typename T, typename F>
void get_vec(Reader& r, std::vector<T>* v, F get) {
  const uint32_t n = r.u32();
  v->clear();
  if (n > kMaxItems) {
    r.fail();
    return;
  }
  v->resize(n);
  for (T& x : *v) get(r, &x);
}

void put_outcome(Writer& w, const CallOutcome& c) {
  w.i32(c.rc);
  w.boolean(c.done);
  w.u32(c.calls);
  w.u64(c.elapsed_us);
  w.i32(c.close_listen_rc);
}

void get_outcome(Reader& r, CallOutcome* c) {
  c->rc = r.i32();
  c->done = r.boolean();
  c->calls = r.u32();
  c->elapsed_us = r.u64();
  c->close_listen_rc = r.i32();
}

void put_u32(Writer& w, const uint32_t& v) {
  w.u32(v);
}
void get_u32(Reader& r, uint32_t* v) {
  *v = r.u32();
}

}  // namespace

void encode(Writer& w, const InitRequest& m) {
  w.u8(m.version);
  w.u8(m.contexts);
}
void decode(Reader& r, InitRequest* m) {
  m->version = r.u8();
  m->contexts = r.u8();
}

void encode(Writer& w, const InitReply& m) {
  w.i32(m.rc);
  w.i32(m.ndev);
  w.u32(m.inherited_fds);
  w.str(m.error);
}
void decode(Reader& r, InitReply* m) {
  m->rc = r.i32();
  m->ndev = r.i32();
  m->inherited_fds = r.u32();
  m->error = r.str();
}

void encode(Writer& w, const ListenRequest& m) {
  w.u32(m.ctx);
  w.i32(m.dev);
  w.u32(m.count);
}
void decode(Reader& r, ListenRequest* m) {
  m->ctx = r.u32();
  m->dev = r.i32();
  m->count = r.u32();
}

void encode(Writer& w, const ListenReply& m) {
  w.str(m.error);
  put_vec(w, m.listen_ids, put_u32);
  put_vec(w, m.handles, [](Writer& ww, const HandleBytes& h) { ww.bytes(h.data(), h.size()); });
}
void decode(Reader& r, ListenReply* m) {
  m->error = r.str();
  get_vec(r, &m->listen_ids, get_u32);
  get_vec(r, &m->handles, [](Reader& rr, HandleBytes* h) { rr.bytes(h->data(), h->size()); });
}

void encode(Writer& w, const EstablishRequest& m) {
  w.u32(m.timeout_ms);
  put_vec(w, m.connects, [](Writer& ww, const RemoteConnect& c) {
    ww.u32(c.ctx);
    ww.i32(c.dev);
    ww.bytes(c.handle.data(), c.handle.size());
    ww.boolean(c.expect_error);
  });
  put_vec(w, m.accepts, put_u32);
}
void decode(Reader& r, EstablishRequest* m) {
  m->timeout_ms = r.u32();
  get_vec(r, &m->connects, [](Reader& rr, RemoteConnect* c) {
    c->ctx = rr.u32();
    c->dev = rr.i32();
    rr.bytes(c->handle.data(), c->handle.size());
    c->expect_error = rr.boolean();
  });
  get_vec(r, &m->accepts, get_u32);
}

void encode(Writer& w, const EstablishReply& m) {
  w.boolean(m.outcome.ok);
  w.str(m.outcome.error);
  w.u64(m.outcome.max_call_us);
  put_vec(w, m.outcome.connects, put_outcome);
  put_vec(w, m.outcome.accepts, put_outcome);
  put_vec(w, m.send_ids, put_u32);
  put_vec(w, m.recv_ids, put_u32);
}
void decode(Reader& r, EstablishReply* m) {
  m->outcome.ok = r.boolean();
  m->outcome.error = r.str();
  m->outcome.max_call_us = r.u64();
  get_vec(r, &m->outcome.connects, get_outcome);
  get_vec(r, &m->outcome.accepts, get_outcome);
  get_vec(r, &m->send_ids, get_u32);
  get_vec(r, &m->recv_ids, get_u32);
}

void encode(Writer& w, const TransferRequest& m) {
  w.u32(m.timeout_ms);
  put_vec(w, m.streams, [](Writer& ww, const StreamSpec& s) {
    ww.u8(static_cast<uint8_t>(s.dir));
    ww.u32(s.comm_id);
    ww.u64(s.seed);
    ww.i32(s.tag);
    ww.u32(s.window);
    ww.boolean(s.post_window_first);
    ww.boolean(s.preset_optional_completion);
    ww.i32(s.expect_error_at);
    ww.i32(s.tolerate_error_from);
    ww.boolean(s.tolerate_timeout);
    ww.u32(s.first_post_delay_ms);
    put_vec(ww, s.messages, [](Writer& w3, const MessageSpec& msg) {
      w3.u64(msg.size);
      w3.u64(msg.capacity);
    });
  });
}
void decode(Reader& r, TransferRequest* m) {
  m->timeout_ms = r.u32();
  get_vec(r, &m->streams, [](Reader& rr, StreamSpec* s) {
    s->dir = rr.u8() == 0 ? Direction::kSend : Direction::kRecv;
    s->comm_id = rr.u32();
    s->seed = rr.u64();
    s->tag = rr.i32();
    s->window = rr.u32();
    s->post_window_first = rr.boolean();
    s->preset_optional_completion = rr.boolean();
    s->expect_error_at = rr.i32();
    s->tolerate_error_from = rr.i32();
    s->tolerate_timeout = rr.boolean();
    s->first_post_delay_ms = rr.u32();
    get_vec(rr, &s->messages, [](Reader& r3, MessageSpec* msg) {
      msg->size = r3.u64();
      msg->capacity = r3.u64();
    });
  });
}

void encode(Writer& w, const TransferReply& m) {
  put_vec(w, m.results, [](Writer& ww, const StreamResult& s) {
    ww.boolean(s.ok);
    ww.str(s.error);
    ww.u32(s.completed);
    ww.i32(s.failed_at);
    ww.i32(s.rc);
    ww.u64(s.max_call_us);
    ww.u64(s.error_after_us);
  });
}
void decode(Reader& r, TransferReply* m) {
  get_vec(r, &m->results, [](Reader& rr, StreamResult* s) {
    s->ok = rr.boolean();
    s->error = rr.str();
    s->completed = rr.u32();
    s->failed_at = rr.i32();
    s->rc = rr.i32();
    s->max_call_us = rr.u64();
    s->error_after_us = rr.u64();
  });
}

void encode(Writer& w, const CloseRequest& m) {
  w.u8(static_cast<uint8_t>(m.kind));
  w.u32(m.id);
}
void decode(Reader& r, CloseRequest* m) {
  m->kind = static_cast<CommKind>(r.u8());
  m->id = r.u32();
}

void encode(Writer& w, const StatusReply& m) {
  w.i32(m.rc);
  w.u64(m.call_us);
  w.str(m.error);
}
void decode(Reader& r, StatusReply* m) {
  m->rc = r.i32();
  m->call_us = r.u64();
  m->error = r.str();
}

void encode(Writer& w, const FinalizeRequest& m) {
  w.u32(m.ctx);
}
void decode(Reader& r, FinalizeRequest* m) {
  m->ctx = r.u32();
}

void encode(Writer& w, const WarningsReply& m) {
  put_vec(w, m.lines, [](Writer& ww, const std::string& s) { ww.str(s); });
}
void decode(Reader& r, WarningsReply* m) {
  get_vec(r, &m->lines, [](Reader& rr, std::string* s) { *s = rr.str(); });
}

}  // namespace conformance
