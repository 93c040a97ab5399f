//! The generator (an iterator over a spec's frames) and its outputs: pcap files, counts and
//! the JSON manifest.

use super::build::*;
use super::*;
use crate::pcap::PcapWriter;
use peregrine_wire::ipv6;
use std::collections::BTreeMap;
use std::path::Path;

/// Iterator over the frames of a spec; see [`generate`].
#[derive(Debug, Clone)]
pub struct Generator {
    spec: TrafficSpec,
    sessions: Vec<Session>,
    /// Stream positions of the anomalies, ascending.
    anomaly_at: Vec<u64>,
    /// Anomalies emitted so far (index into `anomaly_at`).
    next_anomaly: usize,
    index: u64,
}

/// Generate the frames of `spec`, in timestamp order.
///
/// # Panics
///
/// If the spec does not pass [`TrafficSpec::validate`].
pub fn generate(spec: &TrafficSpec) -> Generator {
    if let Err(e) = spec.validate() {
        panic!("{e}");
    }
    Generator {
        sessions: spec.sessions(),
        anomaly_at: anomaly_positions(spec),
        next_anomaly: 0,
        index: 0,
        spec: spec.clone(),
    }
}

/// Choose `anomalies` distinct positions in `0..packets` (Floyd's algorithm), sorted.
pub(super) fn anomaly_positions(spec: &TrafficSpec) -> Vec<u64> {
    let (m, n) = (spec.anomalies as u64, spec.packets);
    let mut rng = Rng::new(hash(spec.seed, domain::ANOMALY, 0));
    let mut set = std::collections::BTreeSet::new();
    for j in n - m..n {
        let t = rng.below(j + 1);
        if !set.insert(t) {
            set.insert(j);
        }
    }
    set.into_iter().collect()
}

impl Generator {
    /// The sessions the frames belong to ([`GenPacket::session`] indexes this).
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// The spec being generated.
    pub fn spec(&self) -> &TrafficSpec {
        &self.spec
    }

    fn flow(&self, s: &Session, f: u32) -> Flow {
        let h = hash(
            self.spec.seed,
            domain::FLOW,
            ((s.ue_index as u64) << 8) | f as u64,
        );
        let v6 = match self.spec.inner {
            IpMix::V4 => false,
            IpMix::V6 => true,
            IpMix::Mixed => h & 1 == 1,
        };
        let (server_port, l4) = SERVICES[((h >> 1) % SERVICES.len() as u64) as usize];
        Flow {
            v6,
            l4,
            ue_port: 32768 + ((h >> 8) % 28232) as u16,
            server_port,
            server: ((h >> 24) % DN_SERVERS as u64) as u32,
            qfi: s.qfis[f as usize % s.qfis.len()],
            flow_label: (h >> 32) as u32 & ipv6::FLOW_LABEL_MAX,
            isn: (h >> 40) as u32,
        }
    }

    /// The IP packet of flow `fl` of session `s` in direction `dir`.
    fn ip_spec(&self, s: &Session, fl: &Flow, dir: Dir, rng: &mut Rng) -> IpSpec {
        let a = &self.spec.addressing;
        let (ue, server) = if fl.v6 {
            (IpAddr::V6(s.ue_ipv6), IpAddr::V6(a.dn_server_v6(fl.server)))
        } else {
            (IpAddr::V4(s.ue_ipv4), IpAddr::V4(a.dn_server_v4(fl.server)))
        };
        let ((src, sp), (dst, dp)) = match dir {
            Dir::Ul => ((ue, fl.ue_port), (server, fl.server_port)),
            Dir::Dl => ((server, fl.server_port), (ue, fl.ue_port)),
        };
        let index = self.index;
        IpSpec {
            src,
            dst,
            ttl: DEFAULT_TTL,
            l4: fl.l4,
            src_port: sp,
            dst_port: dp,
            ident: index as u16,
            flow_label: fl.flow_label,
            seq: fl.isn.wrapping_add((index as u32).wrapping_mul(1000)),
            ack: rng.next_u64() as u32,
            tag: index,
        }
    }

    fn tunnel(&self, s: &Session, qfi: u8) -> Tunnel {
        let a = &self.spec.addressing;
        Tunnel {
            outer_src: s.gnb_addr,
            outer_dst: match s.gnb_addr {
                IpAddr::V4(_) => IpAddr::V4(a.upf_n3_v4),
                IpAddr::V6(_) => IpAddr::V6(a.upf_n3_v6),
            },
            teid: s.ul_teid,
            qfi,
        }
    }

    fn make(&self, anomaly: Option<(Anomaly, Dir)>) -> GenPacket {
        let spec = &self.spec;
        let a = &spec.addressing;
        let index = self.index;
        let mut rng = Rng::new(hash(spec.seed, domain::PACKET, index));
        let ul = rng.next_f64() < spec.ul_ratio;
        let si = rng.below(spec.ues as u64) as usize;
        let fi = rng.below(FLOWS_PER_UE as u64) as u32;
        let s = &self.sessions[si];
        let mut fl = self.flow(s, fi);
        let size = spec.sizes.size_for(index) as usize;
        let mut pkt = GenPacket {
            index,
            dir: if ul { Dir::Ul } else { Dir::Dl },
            ts_ns: spec.ts_ns(index),
            frame: Vec::new(),
            session: Some(si),
            qfi: Some(fl.qfi),
            anomaly: anomaly.map(|(k, _)| k),
        };
        let Some((kind, dir)) = anomaly else {
            let ip = self.ip_spec(s, &fl, pkt.dir, &mut rng);
            pkt.frame = match pkt.dir {
                Dir::Ul => build_ul(size, a, &self.tunnel(s, fl.qfi), &ip),
                Dir::Dl => build_dl(size, a, &ip),
            };
            return pkt;
        };
        pkt.dir = dir;
        if matches!(kind, Anomaly::BadIpv4Checksum | Anomaly::NoRoute) {
            fl.v6 = false;
        }
        let mut ip = self.ip_spec(s, &fl, dir, &mut rng);
        let mut tunnel = self.tunnel(s, fl.qfi);
        let mut frame = match kind {
            Anomaly::BadIpv4Checksum if dir == Dir::Ul => {
                tunnel.outer_src = IpAddr::V4(a.gnb_v4(s.gnb_index));
                tunnel.outer_dst = IpAddr::V4(a.upf_n3_v4);
                build_ul(size, a, &tunnel, &ip)
            }
            Anomaly::Ttl1 => {
                ip.ttl = 1;
                match dir {
                    Dir::Ul => build_ul(size, a, &tunnel, &ip),
                    Dir::Dl => build_dl(size, a, &ip),
                }
            }
            Anomaly::NoRoute => {
                ip.dst = IpAddr::V4(NO_ROUTE_V4);
                match dir {
                    Dir::Ul => build_ul(size, a, &tunnel, &ip),
                    Dir::Dl => {
                        pkt.session = None;
                        pkt.qfi = None;
                        build_dl(size, a, &ip)
                    }
                }
            }
            Anomaly::UnknownTeid => {
                tunnel.teid = UNKNOWN_TEID;
                pkt.session = None;
                build_ul(size, a, &tunnel, &ip)
            }
            Anomaly::EchoRequest => {
                (pkt.session, pkt.qfi) = (None, None);
                build_echo(a, tunnel.outer_src, tunnel.outer_dst, index as u16)
            }
            Anomaly::ArpRequest => {
                (pkt.session, pkt.qfi) = (None, None);
                build_arp(a, s.gnb_index)
            }
            Anomaly::BadIpv4Checksum | Anomaly::Truncated | Anomaly::UnknownEthertype => {
                match dir {
                    Dir::Ul => build_ul(size, a, &tunnel, &ip),
                    Dir::Dl => build_dl(size, a, &ip),
                }
            }
        };
        match kind {
            Anomaly::BadIpv4Checksum => {
                // Flip low-order bits: never turns the field into the other one's-complement
                // zero, so the header cannot verify.
                frame[ETH_LEN + 11] ^= 0xff;
            }
            Anomaly::Truncated => {
                let hl = match dir {
                    Dir::Ul => ip_header_len(tunnel.outer_src),
                    Dir::Dl => ip_header_len(ip.src),
                };
                frame.truncate(ETH_LEN + hl / 2);
            }
            Anomaly::UnknownEthertype => {
                ethernet::Frame::new_unchecked(&mut frame[..]).set_ethertype(UNKNOWN_ETHERTYPE);
            }
            _ => {}
        }
        pkt.frame = frame;
        pkt
    }
}

impl Iterator for Generator {
    type Item = GenPacket;

    fn next(&mut self) -> Option<GenPacket> {
        if self.index >= self.spec.packets {
            return None;
        }
        let anomaly = if self.anomaly_at.get(self.next_anomaly) == Some(&self.index) {
            let k = self.next_anomaly;
            self.next_anomaly += 1;
            let kind = Anomaly::ALL[k % Anomaly::ALL.len()];
            let dir = if kind.both_directions() && (k / Anomaly::ALL.len()) % 2 == 1 {
                Dir::Dl
            } else {
                Dir::Ul
            };
            Some((kind, dir))
        } else {
            None
        };
        let p = self.make(anomaly);
        self.index += 1;
        Some(p)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.spec.packets - self.index).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Generator {}

// ---------------------------------------------------------------------------------------
// Output

/// Packets and bytes of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirCount {
    pub packets: u64,
    pub bytes: u64,
    /// Of `packets`, how many are anomalies.
    pub anomalies: u64,
}

/// Per-direction count of one anomaly kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PerDir {
    pub ul: u64,
    pub dl: u64,
}

/// Counts over a generated stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub packets: u64,
    pub ul: DirCount,
    pub dl: DirCount,
    /// By [`Anomaly::name`].
    pub anomalies: BTreeMap<&'static str, PerDir>,
}

impl Summary {
    /// Count one packet.
    pub fn add(&mut self, p: &GenPacket) {
        self.packets += 1;
        let c = match p.dir {
            Dir::Ul => &mut self.ul,
            Dir::Dl => &mut self.dl,
        };
        c.packets += 1;
        c.bytes += p.frame.len() as u64;
        if let Some(k) = p.anomaly {
            c.anomalies += 1;
            let e = self.anomalies.entry(k.name()).or_default();
            match p.dir {
                Dir::Ul => e.ul += 1,
                Dir::Dl => e.dl += 1,
            }
        }
    }

    /// Generate `spec` and count it.
    ///
    /// # Panics
    ///
    /// As [`generate`].
    pub fn of(spec: &TrafficSpec) -> Summary {
        let mut s = Summary::default();
        generate(spec).for_each(|p| s.add(&p));
        s
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} packets: {} UL ({} bytes), {} DL ({} bytes), {} anomalies",
            self.packets,
            self.ul.packets,
            self.ul.bytes,
            self.dl.packets,
            self.dl.bytes,
            self.ul.anomalies + self.dl.anomalies
        )
    }
}

/// Why writing the capture files failed.
#[derive(Debug)]
pub enum GenError {
    Spec(SpecError),
    Pcap(std::io::Error),
}

impl fmt::Display for GenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenError::Spec(e) => e.fmt(f),
            GenError::Pcap(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for GenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GenError::Spec(e) => Some(e),
            GenError::Pcap(e) => Some(e),
        }
    }
}

impl From<SpecError> for GenError {
    fn from(e: SpecError) -> Self {
        GenError::Spec(e)
    }
}

impl From<std::io::Error> for GenError {
    fn from(e: std::io::Error) -> Self {
        GenError::Pcap(e)
    }
}

/// Write the uplink frames to `ul_path` and the downlink frames to `dl_path`, as classic
/// pcap with nanosecond timestamps. Returns the counts.
pub fn write_pcaps(
    spec: &TrafficSpec,
    ul_path: impl AsRef<Path>,
    dl_path: impl AsRef<Path>,
) -> Result<Summary, GenError> {
    spec.validate()?;
    let mut ul = PcapWriter::create(ul_path)?;
    let mut dl = PcapWriter::create(dl_path)?;
    let mut summary = Summary::default();
    for p in generate(spec) {
        match p.dir {
            Dir::Ul => ul.write(p.ts_ns, &p.frame)?,
            Dir::Dl => dl.write(p.ts_ns, &p.frame)?,
        }
        summary.add(&p);
    }
    ul.flush()?;
    dl.flush()?;
    Ok(summary)
}

/// A JSON description of the traffic: the spec, every session, the anomaly kinds and the
/// counts per direction and anomaly. Generates the stream once to count it.
///
/// # Panics
///
/// As [`generate`].
pub fn manifest(spec: &TrafficSpec) -> serde_json::Value {
    manifest_with_summary(spec, &Summary::of(spec))
}

/// [`manifest`] with counts already at hand (from [`write_pcaps`]).
pub fn manifest_with_summary(spec: &TrafficSpec, summary: &Summary) -> serde_json::Value {
    let kinds: serde_json::Map<String, serde_json::Value> = Anomaly::ALL
        .iter()
        .map(|k| (k.name().to_owned(), k.description().into()))
        .collect();
    serde_json::json!({
        "format": "peregrine-traffic-manifest",
        "version": 1,
        "start_ts_ns": START_TS_NS,
        "period_ns": spec.period_ns(),
        "spec": spec,
        "sessions": spec.sessions(),
        "anomaly_kinds": kinds,
        "counts": summary,
    })
}
