//! Prometheus metrics: a page of families the daemon and its features write
//! ([`Exposition`]), encoded in the OpenMetrics text format by `prometheus-client`, and a
//! small HTTP endpoint that serves the latest page.
//!
//! The control thread renders the page from the counters it already aggregates (once a
//! second) and hands it to [`MetricsServer::set`]; the server thread only copies the last
//! page out, so a scrape never touches the workers and a slow or hostile client (each
//! connection has a 1 s I/O deadline, and requests are served one at a time) never reaches
//! the packet path.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The page's content type (OpenMetrics 1.0 text).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

#[derive(Debug, Clone)]
struct Family {
    /// As written on the page: counters end in `_total`.
    name: String,
    kind: Kind,
    help: String,
    samples: Vec<(Vec<(String, String)>, f64)>,
}

/// Builds one exposition page: families in the order first announced, each with its
/// samples. Label values are escaped by the encoder as the format requires.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Announce a family; later calls with the same name do nothing. Counter names end in
    /// `_total` (OpenMetrics adds it to the family's name on the samples).
    pub fn family(&mut self, name: &'static str, kind: Kind, help: &str) {
        if !self.families.iter().any(|f| f.name == name) {
            self.families.push(Family {
                name: name.to_string(),
                kind,
                help: help.to_string(),
                samples: Vec::new(),
            });
        }
    }

    /// One sample of family `name`. A sample of a family never announced is kept as an
    /// undocumented gauge, so a missing `family` call shows on the page instead of
    /// dropping data.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    kind: Kind::Gauge,
                    help: "(undocumented)".to_string(),
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.families[i].samples.push((labels, value));
    }

    /// Shorthand: announce and add one sample.
    pub fn one(&mut self, name: &'static str, kind: Kind, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// The page in the OpenMetrics text format (ends with `# EOF`).
    pub fn finish(self) -> String {
        let mut reg = Registry::default();
        reg.register_collector(Box::new(Page(self.families)));
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &reg) {
            tracing::error!(%e, "metrics page not encoded");
        }
        out
    }
}

/// The page's families as a `prometheus-client` collector.
#[derive(Debug)]
struct Page(Vec<Family>);

impl Collector for Page {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            let (name, ty) = match f.kind {
                Kind::Counter => (
                    f.name.strip_suffix("_total").unwrap_or(&f.name),
                    MetricType::Counter,
                ),
                Kind::Gauge => (f.name.as_str(), MetricType::Gauge),
            };
            let mut me = enc.encode_descriptor(name, &f.help, None, ty)?;
            let (plain, labelled): (Vec<_>, Vec<_>) =
                f.samples.iter().partition(|(l, _)| l.is_empty());
            for (labels, v) in labelled {
                value(f.kind, *v, me.encode_family(labels)?)?;
            }
            // At most one sample without labels (the family's only one).
            if let Some((_, v)) = plain.first() {
                value(f.kind, *v, me)?;
            }
        }
        Ok(())
    }
}

fn value(kind: Kind, v: f64, me: MetricEncoder) -> Result<(), std::fmt::Error> {
    let integral = v.fract() == 0.0 && v.abs() < 1e15;
    match kind {
        Kind::Counter if integral && v >= 0.0 => ConstCounter::new(v as u64).encode(me),
        Kind::Counter => ConstCounter::new(v).encode(me),
        Kind::Gauge if integral => ConstGauge::new(v as i64).encode(me),
        Kind::Gauge => ConstGauge::new(v).encode(me),
    }
}

/// The HTTP endpoint (`GET /metrics`).
#[derive(Debug)]
pub struct MetricsServer {
    page: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    handle: Option<JoinHandle<()>>,
}

/// Longest request head we read before answering.
const MAX_REQUEST: usize = 8192;

impl MetricsServer {
    /// Listen on `addr` (port 0 picks a free port; see [`local_addr`](Self::local_addr)).
    pub fn start(addr: SocketAddr) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let page = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (page.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("pg-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if s.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Ok(c) = conn {
                        if let Err(e) = serve(c, &p) {
                            tracing::debug!(%e, "metrics connection");
                        }
                    }
                }
            })?;
        Ok(MetricsServer {
            page,
            stop,
            addr,
            handle: Some(handle),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replace the page served from now on.
    pub fn set(&self, text: String) {
        if let Ok(mut p) = self.page.lock() {
            *p = text;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(mut c: TcpStream, page: &Mutex<String>) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(1)))?;
    c.set_write_timeout(Some(Duration::from_secs(1)))?;
    let mut buf = [0u8; MAX_REQUEST];
    let mut n = 0;
    // Read until the end of the request head, the size cap, EOF or the deadline.
    while n < buf.len() {
        let k = match c.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => k,
            // Deadline: answer what we have (a client that never finishes gets an error page).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            Err(e) => return Err(e),
        };
        n += k;
        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || buf[..n].ends_with(b"\n\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buf[..n]);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = if method != "GET" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n".to_string(),
        )
    } else if path == "/metrics" || path.starts_with("/metrics?") {
        let body = page.lock().map(|p| p.clone()).unwrap_or_default();
        ("200 OK", CONTENT_TYPE, body)
    } else {
        ("404 Not Found", "text/plain", "try /metrics\n".to_string())
    };
    write!(
        c,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    c.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, req: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(req).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn exposition_format() {
        let mut e = Exposition::new();
        e.family(
            "pg_drops_total",
            Kind::Counter,
            "Packets dropped, by reason.",
        );
        e.sample("pg_drops_total", &[("reason", "gate_closed")], 3.0);
        e.sample("pg_drops_total", &[("reason", "we\"ird\\\n")], 1.0);
        e.one("pg_sessions", Kind::Gauge, "Sessions.", 2.5);
        let t = e.finish();
        // OpenMetrics: the counter family is named without `_total`, its samples with it.
        assert_eq!(
            t,
            "# HELP pg_drops Packets dropped, by reason.\n# TYPE pg_drops counter\n\
             pg_drops_total{reason=\"gate_closed\"} 3\n\
             pg_drops_total{reason=\"we\\\"ird\\\\\\n\"} 1\n\
             # HELP pg_sessions Sessions.\n# TYPE pg_sessions gauge\npg_sessions 2.5\n# EOF\n"
        );
    }

    #[test]
    fn a_sample_of_an_unannounced_family_shows_rather_than_vanishes() {
        let mut e = Exposition::new();
        e.sample("pg_forgot", &[("k", "v")], 1.0);
        assert_eq!(
            e.finish(),
            "# HELP pg_forgot (undocumented)\n# TYPE pg_forgot gauge\npg_forgot{k=\"v\"} 1\n# EOF\n"
        );
    }

    #[test]
    fn serves_latest_page_and_survives_bad_clients() {
        let s = MetricsServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
        s.set("a 1\n".into());
        let r = get(s.local_addr(), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\na 1\n"), "{r}");
        // A client that connects and says nothing is cut off by the deadline, not forever.
        let idle = TcpStream::connect(s.local_addr()).unwrap();
        let t0 = std::time::Instant::now();
        s.set("a 2\n".into());
        let r = get(s.local_addr(), b"GET /metrics HTTP/1.0\r\n\r\n");
        assert!(r.ends_with("a 2\n"), "{r}");
        assert!(t0.elapsed() < Duration::from_secs(5));
        drop(idle);
        // Garbage, wrong method, wrong path.
        assert!(get(s.local_addr(), &[0xff; 100]).starts_with("HTTP/1.1 405"));
        assert!(get(s.local_addr(), b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get(s.local_addr(), b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        drop(s);
    }
}
