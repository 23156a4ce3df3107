//! A real Prometheus Pushgateway (Debian's `prometheus-pushgateway`, installed and
//! version-checked by `scripts/test`) on a free 127.0.0.1 port, one per test, and
//! its `/metrics` scraped and parsed. A missing binary fails the test, never skips
//! it. `LANDING_TEST_PUSHGATEWAY` may name the binary; PATH is searched otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Pushgateway, stopped when dropped.
pub struct Pushgateway {
    child: Child,
    port: u16,
    /// Its own route prefix: tests start Pushgateways in parallel, and a port picked
    /// free can be taken by another one before this one binds it; only this one
    /// answers under its prefix. (It also puts a path in the URL the job is given.)
    prefix: String,
}

static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A port nothing listens on once this returns (bound, then closed).
pub fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

impl Pushgateway {
    /// Start one and wait until it answers `/-/ready` (another port if the first
    /// was taken in between).
    pub fn start() -> Pushgateway {
        let bin =
            std::env::var("LANDING_TEST_PUSHGATEWAY").unwrap_or("prometheus-pushgateway".into());
        for _ in 0..5 {
            let port = closed_port();
            let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let prefix = format!("/gw-{}-{n}", std::process::id());
            let child = Command::new(&bin)
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg(format!("--web.route-prefix={prefix}"))
                // Debian's default persists to one file under /var/lib: in memory only.
                .arg("--persistence.file=")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot start {bin} ({e}): scripts/test installs Debian's prometheus-pushgateway")
                });
            let mut gw = Pushgateway {
                child,
                port,
                prefix,
            };
            if gw.wait_ready() {
                return gw;
            }
        }
        panic!("{bin} did not become ready on any of 5 ports");
    }

    /// Ready, or exited (its port was taken); bounded by 30 s.
    fn wait_ready(&mut self) -> bool {
        let bound = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok((200, _)) = http_get(self.port, &format!("{}/-/ready", self.prefix)) {
                return true;
            }
            assert!(
                Instant::now() < bound,
                "the Pushgateway is not ready after 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.prefix)
    }

    /// `GET /metrics`, parsed.
    pub fn scrape(&self) -> Scrape {
        let path = format!("{}/metrics", self.prefix);
        let (status, body) = http_get(self.port, &path).expect("scrape the Pushgateway");
        assert_eq!(status, 200, "GET /metrics: {body}");
        Scrape::parse(&body)
    }
}

impl Drop for Pushgateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.0 GET on 127.0.0.1: status and body.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_owned()))
}

/// One sample of a scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A scrape in the text exposition format, as Prometheus would read it.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub text: String,
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// The text format, read by nom-openmetrics' Prometheus parser: one sample per
    /// sample line (a summary's quantiles, `_sum` and `_count` each their own), label
    /// values unescaped.
    pub fn parse(text: &str) -> Scrape {
        let (rest, families) = nom_openmetrics::parser::prometheus(text)
            .unwrap_or_else(|e| panic!("the scrape is not the text format: {e:?}\n{text}"));
        assert!(rest.trim().is_empty(), "unparsed scrape text: {rest:?}");
        let samples = families
            .iter()
            .flat_map(|f| &f.samples)
            .map(|s| Sample {
                name: s.name().to_owned(),
                labels: s
                    .labels()
                    .iter()
                    .map(|l| (l.name.to_owned(), l.value.clone()))
                    .collect(),
                value: s.number(),
            })
            .collect();
        Scrape {
            text: text.to_owned(),
            samples,
        }
    }

    /// The samples of `name` whose labels include `labels`.
    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The one value of `name` with `labels`; fails the test if there is not exactly one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.find(name, labels).as_slice() {
            [one] => one.value,
            other => panic!(
                "{name}{labels:?}: {} samples, want 1; the scrape:\n{}",
                other.len(),
                self.landing_lines()
            ),
        }
    }

    /// Every metric name in the scrape.
    pub fn names(&self) -> BTreeSet<String> {
        self.samples.iter().map(|s| s.name.clone()).collect()
    }

    /// The scrape's lines about the job (its own metrics and the groups' push times).
    pub fn landing_lines(&self) -> String {
        self.text
            .lines()
            .filter(|l| {
                let l = l
                    .trim_start_matches("# HELP ")
                    .trim_start_matches("# TYPE ");
                l.starts_with("landing_") || l.starts_with("push_")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
