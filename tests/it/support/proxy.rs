//! A fault-injecting HTTP/1.1 proxy for end-to-end tests: it sits on 127.0.0.1 (a
//! port chosen by the kernel) between the job and a real S3 server and forwards every
//! request byte for byte (the Host header included, which SigV4 signs), until a test
//! arms a [`Rule`]: a [`Match`] on the request (method or S3 operation, key, query,
//! headers), a [`Fault`] and how many times it fires ([`Times`], after skipping the
//! first matching requests if asked). The proxy records every request it saw and
//! which rule fired on it, so a test can assert that its fault actually happened.
//!
//! Plain threads and `std::net`, not hyper: hyper re-frames chunked bodies (it drops
//! chunk extensions and undeclared trailers, and re-cuts chunks), and the proxy must
//! forward them byte for byte (docs/testing.md says more). One
//! thread accepts, one thread serves each client connection (keep-alive, requests in
//! order), and each forwarded request gets its own upstream connection. Bodies are
//! framed by `Content-Length` or `Transfer-Encoding: chunked` (aws-chunked uploads
//! are either: their HTTP framing is one of these two, the aws-chunked encoding
//! inside is forwarded untouched). Request bodies are read whole before anything is
//! decided, so a fault answered by the proxy leaves the connection in sync.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest request or status line, or header line, the proxy accepts.
const MAX_LINE: usize = 64 << 10;

// ------------------------------------------------------------------ requests

/// The S3 operation a request is, told from its method, query and headers
/// (path-style or virtual-host addressing alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    ListBuckets,
    ListObjectsV2,
    ListMultipartUploads,
    GetObject,
    HeadObject,
    PutObject,
    CopyObject,
    CreateMultipartUpload,
    UploadPart,
    UploadPartCopy,
    CompleteMultipartUpload,
    AbortMultipartUpload,
    DeleteObject,
    Other,
}

/// One request as the proxy parsed it. Header names are lowercase.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The raw request target (`/bucket/key?query`).
    pub target: String,
    /// The target before `?`, still percent-encoded.
    pub path: String,
    /// The target after `?` (empty without one), still percent-encoded.
    pub query: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }

    /// A query parameter, percent-decoded (`Some("")` for a bare `?uploads`).
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or((p, "")))
            .find(|(k, _)| percent_decode(k) == name)
            .map(|(_, v)| percent_decode(v))
    }

    pub fn has_query(&self, name: &str) -> bool {
        self.query_param(name).is_some()
    }

    /// The object key: the decoded path without its leading `/`, and without the
    /// bucket when the request is path-style (its Host is an IP or `localhost`).
    pub fn key(&self) -> String {
        let path = percent_decode(self.path.trim_start_matches('/'));
        let host = self.header("host").unwrap_or_default();
        let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
        let path_style = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok();
        if path_style {
            path.split_once('/')
                .map(|(_, k)| k.to_owned())
                .unwrap_or_default()
        } else {
            path
        }
    }

    /// How the body is framed on the wire (see [`Seen::framing`]).
    pub fn framing(&self) -> String {
        let mut f = if is_chunked(&self.headers) {
            "chunked".to_owned()
        } else if let Some(n) = content_length(&self.headers) {
            format!("length {n}")
        } else {
            "none".to_owned()
        };
        if self
            .header("content-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("aws-chunked"))
        {
            f.push_str(" aws-chunked");
        }
        f
    }

    pub fn op(&self) -> Op {
        let copy = self.has_header("x-amz-copy-source");
        let part = self.has_query("partNumber") && self.has_query("uploadId");
        let bucket_level = self.key().is_empty();
        match self.method.as_str() {
            "GET" if bucket_level && self.path.trim_matches('/').is_empty() => Op::ListBuckets,
            "GET" if self.has_query("uploads") => Op::ListMultipartUploads,
            "GET" if bucket_level => Op::ListObjectsV2,
            "GET" => Op::GetObject,
            "HEAD" => Op::HeadObject,
            "PUT" if part && copy => Op::UploadPartCopy,
            "PUT" if part => Op::UploadPart,
            "PUT" if copy => Op::CopyObject,
            "PUT" if !bucket_level => Op::PutObject,
            "POST" if self.has_query("uploads") => Op::CreateMultipartUpload,
            "POST" if self.has_query("uploadId") => Op::CompleteMultipartUpload,
            "DELETE" if self.has_query("uploadId") => Op::AbortMultipartUpload,
            "DELETE" if !bucket_level => Op::DeleteObject,
            _ => Op::Other,
        }
    }
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ------------------------------------------------------------------ rules

type Predicate = Arc<dyn Fn(&Request) -> bool + Send + Sync>;

/// Which requests a rule applies to: every condition given must hold.
#[derive(Clone, Default)]
pub struct Match {
    method: Option<String>,
    op: Option<Op>,
    key_prefix: Option<String>,
    query: Vec<(String, Option<String>)>,
    headers: Vec<String>,
    when: Vec<Predicate>,
    label: Vec<String>,
}

impl Match {
    /// Requests with this HTTP method.
    pub fn method(method: &str) -> Match {
        let mut m = Match {
            method: Some(method.to_ascii_uppercase()),
            ..Match::default()
        };
        m.label.push(method.to_ascii_uppercase());
        m
    }

    /// Requests that are this S3 operation.
    pub fn op(op: Op) -> Match {
        let mut m = Match {
            op: Some(op),
            ..Match::default()
        };
        m.label.push(format!("{op:?}"));
        m
    }

    /// The object key (bucket excluded) starts with `prefix`.
    pub fn key_under(mut self, prefix: &str) -> Match {
        self.label.push(format!("key {prefix}*"));
        self.key_prefix = Some(prefix.to_owned());
        self
    }

    /// The query carries `name=value`.
    pub fn query(mut self, name: &str, value: &str) -> Match {
        self.label.push(format!("{name}={value}"));
        self.query.push((name.to_owned(), Some(value.to_owned())));
        self
    }

    /// The request carries header `name`.
    pub fn header(mut self, name: &str) -> Match {
        self.label.push(format!("header {name}"));
        self.headers.push(name.to_ascii_lowercase());
        self
    }

    /// Any other predicate.
    pub fn when(mut self, f: impl Fn(&Request) -> bool + Send + Sync + 'static) -> Match {
        self.label.push("when(..)".into());
        self.when.push(Arc::new(f));
        self
    }

    pub fn matches(&self, r: &Request) -> bool {
        self.method.as_ref().is_none_or(|m| *m == r.method)
            && self.op.is_none_or(|op| op == r.op())
            && self
                .key_prefix
                .as_ref()
                .is_none_or(|p| r.key().starts_with(p.as_str()))
            && self.query.iter().all(|(n, v)| match v {
                None => r.has_query(n),
                Some(v) => r.query_param(n).as_deref() == Some(v.as_str()),
            })
            && self.headers.iter().all(|h| r.has_header(h))
            && self.when.iter().all(|f| f(r))
    }
}

impl fmt::Debug for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.label.is_empty() {
            f.write_str("any request")
        } else {
            f.write_str(&self.label.join(" "))
        }
    }
}

/// What the proxy does to a matched request instead of forwarding it faithfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer `500 InternalError` (S3 XML error body); the request is not forwarded.
    InternalError,
    /// Answer `503 SlowDown` (S3 XML error body); the request is not forwarded.
    SlowDown,
    /// Reset the connection (RST) without answering; the request is not forwarded.
    Reset,
    /// Forward the request, then reset the connection instead of relaying the
    /// server's answer: the operation happened, the client never hears of it.
    ResetAfterForward,
    /// Forward, relay the answer's head (with its full `Content-Length`) and the first
    /// `after` bytes of its body, then close the connection.
    CutBody { after: usize },
    /// Forward, relay the answer's head and the first `after` bytes of its body, then
    /// hold the connection open without sending anything more.
    StallBody { after: usize },
    /// Answer `200 OK` with an S3 `<Error>` body carrying `code` (what S3 can do for
    /// CopyObject, UploadPartCopy and CompleteMultipartUpload); not forwarded.
    ErrorIn200 { code: String },
    /// Forward the request (the server performs it), then answer `200 OK` with an S3
    /// `<Error>` body carrying `code` instead of the server's answer.
    ErrorIn200AfterForward { code: String },
    /// A slow server: hold the request this long, then forward it faithfully.
    Delay { ms: u64 },
}

impl Fault {
    pub fn error_in_200(code: &str) -> Fault {
        Fault::ErrorIn200 {
            code: code.to_owned(),
        }
    }

    pub fn error_in_200_after_forward(code: &str) -> Fault {
        Fault::ErrorIn200AfterForward {
            code: code.to_owned(),
        }
    }

    fn forwards(&self) -> bool {
        matches!(
            self,
            Fault::ResetAfterForward
                | Fault::CutBody { .. }
                | Fault::StallBody { .. }
                | Fault::ErrorIn200AfterForward { .. }
                | Fault::Delay { .. }
        )
    }
}

/// How many times a rule fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    Once,
    Always,
}

impl Times {
    fn allows(self, fired: usize) -> bool {
        match self {
            Times::Once => fired < 1,
            Times::Always => true,
        }
    }
}

/// A fault armed on matching requests.
#[derive(Debug, Clone)]
pub struct Rule {
    pub matcher: Match,
    pub fault: Fault,
    pub times: Times,
    /// Matching requests let through before the rule starts firing.
    pub skip: usize,
}

impl Rule {
    /// Fire `fault` once, on the first request `matcher` accepts.
    pub fn new(matcher: Match, fault: Fault) -> Rule {
        Rule {
            matcher,
            fault,
            times: Times::Once,
            skip: 0,
        }
    }

    pub fn times(mut self, times: Times) -> Rule {
        self.times = times;
        self
    }

    pub fn always(self) -> Rule {
        self.times(Times::Always)
    }

    /// Let the first `n` matching requests through untouched.
    pub fn skip(mut self, n: usize) -> Rule {
        self.skip = n;
        self
    }
}

/// Handle of an armed rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleId(usize);

struct Armed {
    rule: Rule,
    matched: usize,
    fired: usize,
}

/// One request the proxy saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub op: Op,
    pub method: String,
    pub target: String,
    pub key: String,
    /// How its body was framed: `none`, `length N` or `chunked`, plus `aws-chunked`
    /// when the SDK streamed it with the aws-chunked content encoding.
    pub framing: String,
    /// The rule that fired on it, if any.
    pub fired: Option<RuleId>,
    /// Status of the answer relayed or made up (`None`: no answer was sent, or the
    /// upstream server could not be reached).
    pub status: Option<u16>,
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} {} {} ({})",
            self.op, self.method, self.target, self.framing
        )?;
        match self.status {
            Some(s) => write!(f, " -> {s}")?,
            None => write!(f, " -> (no answer)")?,
        }
        if let Some(id) = self.fired {
            write!(f, " [fault #{}]", id.0)?;
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ proxy

#[derive(Default)]
struct State {
    rules: Mutex<Vec<Armed>>,
    seen: Mutex<Vec<Seen>>,
    /// Open client connections, so dropping the proxy can end stalled ones, and
    /// [`Proxy::wait_idle`] can tell when none is left. A connection is registered
    /// before its thread starts and removed when that thread ends, and only ends after
    /// the answer to each request it forwarded arrived (or its upstream connection
    /// failed).
    clients: Mutex<HashMap<u64, TcpStream>>,
    /// Notified whenever `clients` gains or loses a connection.
    clients_changed: Condvar,
    next_client: AtomicU64,
    stopping: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking connection thread must not take every later assertion with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// Record `req` and pick the fault to apply, if a rule fires on it.
    fn decide(&self, req: &Request) -> (usize, Option<(RuleId, Fault)>) {
        let mut fired = None;
        for (i, a) in lock(&self.rules).iter_mut().enumerate() {
            if !a.rule.matcher.matches(req) {
                continue;
            }
            a.matched += 1;
            if fired.is_none() && a.matched > a.rule.skip && a.rule.times.allows(a.fired) {
                a.fired += 1;
                fired = Some((RuleId(i), a.rule.fault.clone()));
            }
        }
        let mut seen = lock(&self.seen);
        seen.push(Seen {
            op: req.op(),
            method: req.method.clone(),
            target: req.target.clone(),
            key: req.key(),
            framing: req.framing(),
            fired: fired.as_ref().map(|(id, _)| *id),
            status: None,
        });
        (seen.len() - 1, fired)
    }

    fn answered(&self, index: usize, status: u16) {
        if let Some(s) = lock(&self.seen).get_mut(index) {
            s.status = Some(status);
        }
    }
}

/// A running proxy; dropping it stops accepting and ends open connections.
pub struct Proxy {
    addr: SocketAddr,
    state: Arc<State>,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Start a proxy in front of `upstream` (`http://host:port`). It is listening when
    /// this returns.
    pub fn start(upstream: &str) -> Proxy {
        let authority = upstream
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("the proxy forwards plain http only, got {upstream}"))
            .trim_end_matches('/')
            .to_owned();
        assert!(
            !authority.contains('/'),
            "upstream {upstream} must have no path"
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let state = Arc::new(State::default());
        let acceptor = {
            let state = state.clone();
            let upstream = authority.clone();
            std::thread::Builder::new()
                .name(format!("proxy-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, upstream, state))
                .expect("spawn the proxy")
        };
        Proxy {
            addr,
            state,
            acceptor: Some(acceptor),
        }
    }

    /// The endpoint URL clients use (`AWS_ENDPOINT_URL`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Arm a rule; rules are tried in the order armed, and at most one fires per request.
    pub fn arm(&self, rule: Rule) -> RuleId {
        let mut rules = lock(&self.state.rules);
        rules.push(Armed {
            rule,
            matched: 0,
            fired: 0,
        });
        RuleId(rules.len() - 1)
    }

    /// How many times the rule fired.
    pub fn fired(&self, id: RuleId) -> usize {
        lock(&self.state.rules)[id.0].fired
    }

    /// How many requests the rule's matcher accepted (fired, skipped or after it ran out).
    pub fn matched(&self, id: RuleId) -> usize {
        lock(&self.state.rules)[id.0].matched
    }

    /// Every request seen so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.state.seen).clone()
    }

    /// [`Proxy::seen`] once every client has hung up ([`Proxy::wait_idle`]): an answer
    /// is marked after its last byte went out, so a client that read it may look
    /// before the proxy has.
    pub fn settled(&self) -> Vec<Seen> {
        self.wait_idle(Duration::from_secs(120));
        self.seen()
    }

    /// How many requests were this operation, leaving out the job's probe of copy
    /// conditions (scratch keys `…/probe-source/…`, `…/probe-target/…` in its
    /// staging), which is not a contract step.
    pub fn count(&self, op: Op) -> usize {
        lock(&self.state.seen)
            .iter()
            .filter(|s| s.op == op && !s.key.contains("/probe-"))
            .count()
    }

    /// Wait until no client connection is left, so no request that reached the proxy
    /// is still on its way to the server or waiting for its answer there: for after
    /// every client has exited (a live client's keep-alive connection keeps the proxy
    /// busy). A connection a dead client left in the listen backlog, perhaps with a
    /// whole request in it, counts too: this first connects a marker and waits until
    /// the proxy has registered it, and since the kernel hands connections over in
    /// arrival order, every earlier one is registered by then. Waits on the registry's
    /// condition variable; panics if it takes longer than `bound`.
    pub fn wait_idle(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        let marker = TcpStream::connect(self.addr).expect("connect a marker to the proxy");
        let marker_addr = marker.local_addr().expect("the marker's address");
        let mut clients = lock(&self.state.clients);
        while !clients
            .values()
            .any(|c| c.peer_addr().is_ok_and(|a| a == marker_addr))
        {
            clients = self.wait_for_clients(clients, deadline, bound, "accept the marker");
        }
        // The marker sent nothing; its connection ends at this shutdown.
        let _ = marker.shutdown(Shutdown::Both);
        drop(marker);
        while !clients.is_empty() {
            clients = self.wait_for_clients(clients, deadline, bound, "end every connection");
        }
    }

    /// One bounded wait for a change of the connection registry.
    fn wait_for_clients<'a>(
        &self,
        clients: MutexGuard<'a, HashMap<u64, TcpStream>>,
        deadline: Instant,
        bound: Duration,
        what: &str,
    ) -> MutexGuard<'a, HashMap<u64, TcpStream>> {
        let open = clients.len();
        let Some(left) = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        else {
            drop(clients);
            let pending: Vec<String> = self
                .seen()
                .iter()
                .filter(|s| s.status.is_none())
                .map(|s| format!("  {s}"))
                .collect();
            panic!(
                "the proxy did not {what} within {bound:?}: {open} client connection(s) still \
                 open; requests without an answer (in flight or cut):\n{}",
                pending.join("\n")
            );
        };
        self.state
            .clients_changed
            .wait_timeout(clients, left)
            .map_or_else(|e| e.into_inner().0, |(g, _)| g)
    }

    /// A readable log of what the proxy saw, for assertion messages.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for (i, a) in lock(&self.state.rules).iter().enumerate() {
            out.push_str(&format!(
                "rule #{i}: {:?} on [{:?}] {:?} skip {}: matched {}, fired {}\n",
                a.rule.fault, a.rule.matcher, a.rule.times, a.rule.skip, a.matched, a.fired
            ));
        }
        for s in lock(&self.state.seen).iter() {
            out.push_str(&format!("  {s}\n"));
        }
        out
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        for (_, c) in lock(&self.state.clients).drain() {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: TcpListener, upstream: String, state: Arc<State>) {
    for conn in listener.incoming() {
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = conn else { continue };
        // An answer goes out as a head and a body, two writes: with Nagle's algorithm
        // the body waits for the client's delayed ACK of the head (40 ms on Linux).
        let _ = client.set_nodelay(true);
        let id = state.next_client.fetch_add(1, Ordering::Relaxed);
        // A connection the registry cannot hold is refused: it could neither be ended
        // when the proxy is dropped nor be waited for by `wait_idle`.
        let Ok(registered) = client.try_clone() else {
            continue;
        };
        lock(&state.clients).insert(id, registered);
        state.clients_changed.notify_all();
        let conn_state = state.clone();
        let upstream = upstream.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("proxy-conn-{id}"))
            .spawn(move || {
                let end = serve(client, &upstream, &conn_state);
                // Drop our registry clone first: a reset must close the last descriptor.
                let registered = lock(&conn_state.clients).remove(&id);
                drop(registered);
                drop(end);
                conn_state.clients_changed.notify_all();
            });
        if spawned.is_err() {
            lock(&state.clients).remove(&id);
            state.clients_changed.notify_all();
        }
    }
}

/// How a client connection ended; dropped after the registry entry, so for a reset the
/// socket's last descriptor closes with SO_LINGER 0 set.
struct End(#[expect(dead_code, reason = "held only to be dropped")] Option<TcpStream>);

/// Serve one client connection: requests in order until it closes or a fault ends it.
fn serve(client: TcpStream, upstream: &str, state: &State) -> End {
    let Ok(read_half) = client.try_clone() else {
        return End(None);
    };
    let mut from_client = BufReader::new(read_half);
    let mut to_client = client;
    loop {
        let Some((head, req, body)) = read_request(&mut from_client, &mut to_client) else {
            return End(Some(to_client));
        };
        let client_close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let (index, fault) = state.decide(&req);
        let fault = fault.map(|(_, f)| f);

        // Faults answered without asking the server.
        if let Some((status, reason, code)) = fault.as_ref().and_then(local_answer) {
            let r = error_answer(&req, status, reason, code);
            if to_client.write_all(&r).is_err() {
                return End(Some(to_client));
            }
            state.answered(index, status);
            continue;
        }
        if matches!(fault, Some(Fault::Reset)) {
            return reset(to_client);
        }
        debug_assert!(fault.as_ref().is_none_or(Fault::forwards));
        if let Some(Fault::Delay { ms }) = &fault {
            std::thread::sleep(Duration::from_millis(*ms));
        }

        // Forward to the server on a fresh connection.
        let Some((to_up, mut from_up)) = forward(upstream, &head, &body) else {
            return reset(to_client);
        };
        let Some((resp_head, status)) = read_response_head(&mut from_up) else {
            return reset(to_client);
        };
        let resp_headers = parse_headers(&resp_head);
        let no_body =
            req.method == "HEAD" || status == 204 || status == 304 || (100..200).contains(&status);

        match &fault {
            Some(Fault::ResetAfterForward) => {
                // Let the server finish the operation: read its whole answer first.
                if !no_body {
                    let _ = read_body(&mut from_up, &resp_headers, true);
                }
                return reset(to_client);
            }
            Some(Fault::ErrorIn200AfterForward { code }) => {
                if !no_body && read_body(&mut from_up, &resp_headers, true).is_err() {
                    return reset(to_client);
                }
                let r = error_answer(&req, 200, "OK", code);
                if to_client.write_all(&r).is_err() {
                    return End(Some(to_client));
                }
                state.answered(index, 200);
                continue;
            }
            Some(Fault::CutBody { after }) | Some(Fault::StallBody { after }) => {
                if relay_prefix(&mut to_client, &mut from_up, &resp_head, *after).is_err() {
                    return End(Some(to_client));
                }
                state.answered(index, status);
                drop(from_up);
                drop(to_up);
                if matches!(fault, Some(Fault::CutBody { .. })) {
                    let _ = to_client.shutdown(Shutdown::Write);
                    return End(Some(to_client));
                }
                hold_until_hangup(&mut from_client);
                return End(Some(to_client));
            }
            _ => {}
        }

        // Faithful relay.
        if to_client.write_all(&resp_head).is_err() {
            return End(Some(to_client));
        }
        let relayed = if no_body {
            Ok(true)
        } else {
            relay_body(&mut from_up, &mut to_client, &resp_headers)
        };
        match relayed {
            Ok(framed) => {
                state.answered(index, status);
                let server_close = header(&resp_headers, "connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"));
                if !framed || server_close || client_close {
                    let _ = to_client.flush();
                    let _ = to_client.shutdown(Shutdown::Write);
                    return End(Some(to_client));
                }
            }
            Err(_) => return reset(to_client),
        }
    }
}

/// Read the client's next request: its raw head, the parsed request and its body as
/// on the wire, answering `100 Continue` first when the client waits for it. `None`
/// when the connection ends or cannot carry another request.
fn read_request(
    from_client: &mut impl BufRead,
    to_client: &mut impl Write,
) -> Option<(Vec<u8>, Request, Vec<u8>)> {
    let head = read_head(from_client).ok()??;
    let req = parse_request(&head)?;
    if req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        && to_client
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .is_err()
    {
        return None;
    }
    let body = read_body(from_client, &req.headers, false).ok()?;
    Some((head, req, body))
}

/// The error answer (status, reason, S3 code) of a fault the proxy gives in the
/// server's stead, so the request is never forwarded; `None` for any other fault.
fn local_answer(fault: &Fault) -> Option<(u16, &'static str, &str)> {
    match fault {
        Fault::InternalError => Some((500, "Internal Server Error", "InternalError")),
        Fault::SlowDown => Some((503, "Slow Down", "SlowDown")),
        Fault::ErrorIn200 { code } => Some((200, "OK", code)),
        _ => None,
    }
}

/// Send the request, as received, to the server on a fresh connection: its write half
/// and buffered read half. `None` if that fails, and the client connection is reset.
fn forward(upstream: &str, head: &[u8], body: &[u8]) -> Option<(TcpStream, BufReader<TcpStream>)> {
    let up = TcpStream::connect(upstream).ok()?;
    let _ = up.set_nodelay(true);
    let mut to_up = up.try_clone().ok()?;
    to_up
        .write_all(head)
        .and_then(|_| to_up.write_all(body))
        .ok()?;
    Some((to_up, BufReader::new(up)))
}

/// Read the server's answer head and status, skipping interim answers (100 Continue),
/// which are not relayed. `None` if no answer can be read.
fn read_response_head(from_up: &mut impl BufRead) -> Option<(Vec<u8>, u16)> {
    loop {
        let h = read_head(from_up).ok()??;
        let status = parse_status(&h).unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            continue; // interim answer (100 Continue): not relayed
        }
        return Some((h, status));
    }
}

/// Relay the answer's head and the first `after` bytes of its body (fewer if the
/// server's answer ends first), flushed, for `CutBody` and `StallBody`.
fn relay_prefix(
    to_client: &mut impl Write,
    from_up: &mut impl Read,
    resp_head: &[u8],
    after: usize,
) -> io::Result<()> {
    to_client.write_all(resp_head)?;
    let mut part = Vec::new();
    let _ = from_up.take(after as u64).read_to_end(&mut part);
    to_client.write_all(&part)?;
    to_client.flush()
}

/// Stall: hold the connection, silent, until the client hangs up (or the proxy is
/// dropped, which shuts the socket down).
fn hold_until_hangup(from_client: &mut impl Read) {
    let mut sink = [0u8; 4096];
    loop {
        match from_client.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Close with RST: SO_LINGER on, zero seconds, then the caller drops the socket.
fn reset(sock: TcpStream) -> End {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a properly sized `linger` value.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    End(Some(sock))
}

/// An S3-style error answer to `req` (no body for HEAD, as S3 does).
fn error_answer(req: &Request, status: u16, reason: &str, code: &str) -> Vec<u8> {
    let body = if req.method == "HEAD" {
        String::new()
    } else {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>fault injected by the test proxy</Message><Resource>{}</Resource><RequestId>proxy-fault</RequestId></Error>",
            xml_escape(&req.path)
        )
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nx-amz-request-id: proxy-fault\r\nServer: fault-proxy\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

// ------------------------------------------------------------------ HTTP/1.1 framing

/// Read a message head (start line and headers, through the empty line), raw.
/// `Ok(None)` on a clean end of stream before any byte.
fn read_head(r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let start = head.len();
        let n = read_line(r, &mut head)?;
        if n == 0 {
            if head.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "head cut short",
            ));
        }
        let line = &head[start..];
        if line == b"\r\n" || line == b"\n" {
            if start == 0 {
                // Stray empty line between messages (allowed before a request).
                head.clear();
                continue;
            }
            return Ok(Some(head));
        }
        if head.len() > 16 * MAX_LINE {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
        }
    }
}

fn read_line(r: &mut impl BufRead, out: &mut Vec<u8>) -> io::Result<usize> {
    let n = r.take(MAX_LINE as u64).read_until(b'\n', out)?;
    if n > 0 && out.last() != Some(&b'\n') && n == MAX_LINE {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
    }
    Ok(n)
}

fn parse_headers(head: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(head)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn parse_request(head: &[u8]) -> Option<Request> {
    let text = String::from_utf8_lossy(head);
    let line = text.lines().next()?;
    let mut parts = line.split(' ');
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (target.clone(), String::new()),
    };
    Some(Request {
        method,
        target,
        path,
        query,
        headers: parse_headers(head),
    })
}

fn parse_status(head: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(head);
    text.lines().next()?.split(' ').nth(1)?.parse().ok()
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    header(headers, "transfer-encoding").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("chunked"))
    })
}

fn content_length(headers: &[(String, String)]) -> Option<u64> {
    header(headers, "content-length").and_then(|v| v.trim().parse().ok())
}

/// Read a whole body as it is on the wire (chunk framing included). A response
/// (`response`) without framing runs to the end of the stream; a request without
/// framing has none.
fn read_body(
    r: &mut impl BufRead,
    headers: &[(String, String)],
    response: bool,
) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    if is_chunked(headers) {
        copy_chunked(r, &mut out)?;
    } else if let Some(n) = content_length(headers) {
        r.take(n).read_to_end(&mut out)?;
        if out.len() as u64 != n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "body cut short",
            ));
        }
    } else if response {
        r.read_to_end(&mut out)?;
    }
    Ok(out)
}

/// Relay a response body as it arrives. `Ok(false)`: it ran to the end of the
/// stream, so the client connection must close after it.
fn relay_body(
    r: &mut impl BufRead,
    w: &mut impl Write,
    headers: &[(String, String)],
) -> io::Result<bool> {
    if is_chunked(headers) {
        copy_chunked(r, w)?;
        Ok(true)
    } else if let Some(n) = content_length(headers) {
        let copied = io::copy(&mut r.take(n), w)?;
        if copied != n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "body cut short",
            ));
        }
        Ok(true)
    } else {
        io::copy(r, w)?;
        Ok(false)
    }
}

/// Copy one chunked body, framing and trailers included, from `r` to `w`.
fn copy_chunked(r: &mut impl BufRead, w: &mut impl Write) -> io::Result<()> {
    loop {
        let mut line = Vec::new();
        if read_line(r, &mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "chunk size line",
            ));
        }
        w.write_all(&line)?;
        let text = String::from_utf8_lossy(&line);
        let size_hex = text.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size_hex, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            // Trailers, through the empty line.
            loop {
                let mut t = Vec::new();
                if read_line(r, &mut t)? == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "trailers"));
                }
                w.write_all(&t)?;
                if t == b"\r\n" || t == b"\n" {
                    return Ok(());
                }
            }
        }
        // The chunk's data and its CRLF.
        let copied = io::copy(&mut r.take(size + 2), w)?;
        if copied != size + 2 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "chunk cut short",
            ));
        }
    }
}
