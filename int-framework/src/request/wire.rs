//! The serde form of rule messages: every field a `Scalar`, so that type errors name the
//! field; validation into the model ([`Request::try_from`]) and back ([`WireRequest::from`]).

use super::*;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

impl Mode {
    fn setting_scalar(self) -> Scalar {
        match self {
            Mode::Count(n) | Mode::Frequency(n) => Scalar::U(n as u64),
            Mode::Probability(p) => Scalar::F(p),
        }
    }
}

/// Any JSON/CBOR value, reduced to what the schema needs. Arrays and maps are drained (depth is
/// bounded by [`MAX_DEPTH`]) and remembered only by kind.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    U(u64),
    I(i64),
    F(f64),
    S(String),
    B(bool),
    Other(&'static str),
}

impl Scalar {
    fn kind(&self) -> &'static str {
        match self {
            Scalar::U(_) | Scalar::I(_) | Scalar::F(_) => "number",
            Scalar::S(_) => "string",
            Scalar::B(_) => "boolean",
            Scalar::Other(k) => k,
        }
    }
    fn show(&self) -> String {
        match self {
            Scalar::U(v) => v.to_string(),
            Scalar::I(v) => v.to_string(),
            Scalar::F(v) => v.to_string(),
            Scalar::S(s) => format!("{:?}", truncate(s)),
            Scalar::B(b) => b.to_string(),
            Scalar::Other(k) => (*k).to_string(),
        }
    }
    fn number(&self, field: &'static str) -> Result<f64, RequestError> {
        match *self {
            Scalar::U(v) => Ok(v as f64),
            Scalar::I(v) => Ok(v as f64),
            Scalar::F(v) => Ok(v),
            _ => Err(wrong(field, "number", self)),
        }
    }
    /// Unsigned integer (integral floats accepted); `Err(None)` = a number but not such an
    /// integer, `Err(Some(e))` = not a number.
    fn uint(&self, field: &'static str) -> Result<u64, Option<RequestError>> {
        match *self {
            Scalar::U(v) => Ok(v),
            Scalar::I(_) => Err(None),
            Scalar::F(v) => exact_uint(v).ok_or(None),
            _ => Err(Some(wrong(field, "number", self))),
        }
    }
    fn string(&self, field: &'static str) -> Result<&str, RequestError> {
        match self {
            Scalar::S(s) => Ok(s),
            _ => Err(wrong(field, "string", self)),
        }
    }
    fn boolean(&self, field: &'static str) -> Result<bool, RequestError> {
        match *self {
            Scalar::B(b) => Ok(b),
            _ => Err(wrong(field, "boolean", self)),
        }
    }
}

fn wrong(field: &'static str, expected: &'static str, got: &Scalar) -> RequestError {
    RequestError::WrongType {
        field,
        expected,
        got: got.kind(),
    }
}

impl Serialize for Scalar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Scalar::U(v) => s.serialize_u64(*v),
            Scalar::I(v) => s.serialize_i64(*v),
            Scalar::F(v) => s.serialize_f64(*v),
            Scalar::S(v) => s.serialize_str(v),
            Scalar::B(v) => s.serialize_bool(*v),
            Scalar::Other(_) => s.serialize_unit(),
        }
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a scalar value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::B(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::U(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(if v >= 0 {
            Scalar::U(v as u64)
        } else {
            Scalar::I(v)
        })
    }
    fn visit_u128<E>(self, _v: u128) -> Result<Scalar, E> {
        Ok(Scalar::Other("big integer"))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Scalar, E> {
        Ok(match i64::try_from(v) {
            Ok(v) => Scalar::I(v),
            Err(_) => Scalar::Other("big integer"),
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::F(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::S(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar::S(v))
    }
    fn visit_bytes<E>(self, _v: &[u8]) -> Result<Scalar, E> {
        Ok(Scalar::Other("byte string"))
    }
    fn visit_none<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other("null"))
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other("null"))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("map"))
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

/// A list of scalars, or a remembered non-list.
#[derive(Debug, Clone, PartialEq)]
enum ScalarList {
    List(Vec<Scalar>),
    NotList(Scalar),
}

impl Serialize for ScalarList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ScalarList::List(v) => v.serialize(s),
            ScalarList::NotList(v) => v.serialize(s),
        }
    }
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = ScalarList;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<ScalarList, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = a.next_element::<Scalar>()? {
            if v.len() > MAX_HOP_LIST {
                // Keep draining (bounded by the payload cap) but stop storing.
                continue;
            }
            v.push(x);
        }
        Ok(ScalarList::List(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<ScalarList, A::Error> {
        ScalarVisitor.visit_map(a).map(ScalarList::NotList)
    }
    fn visit_bool<E>(self, v: bool) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::B(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::U(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::I(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::F(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::S(v.to_owned())))
    }
    fn visit_bytes<E>(self, _v: &[u8]) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::Other("byte string")))
    }
    fn visit_unit<E>(self) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::Other("null")))
    }
    fn visit_none<E>(self) -> Result<ScalarList, E> {
        Ok(ScalarList::NotList(Scalar::Other("null")))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<ScalarList, D::Error> {
        d.deserialize_any(ListVisitor)
    }
}

impl<'de> Deserialize<'de> for ScalarList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ScalarList, D::Error> {
        d.deserialize_any(ListVisitor)
    }
}

/// Listing 1, field for field (plus the optional Listing 2 flags).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WireRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ns_id: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    app_id: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    src_ip: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dst_ip: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    src_port: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dst_port: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    protocol: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trace_type: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode_setting: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transmit_report: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    piggyback_report: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extract_report: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hop_enabled: Option<Scalar>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireModify {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ns_id: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode_setting: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trace_type: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transmit_report: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    piggyback_report: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extract_report: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hop_enabled: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enable_hops: Option<ScalarList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    disable_hops: Option<ScalarList>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireNs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ns_id: Option<Scalar>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEmpty {}

/// A request in its field-by-field serde form: every field a scalar, so that type errors
/// name the field. Decode it with any serde format (`peregrine_int_manager::codec` does JSON
/// and CBOR with size and depth limits), then validate it with [`Request::try_from`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WireRequest(WireMessage);

impl TryFrom<WireRequest> for Request {
    type Error = RequestError;
    fn try_from(w: WireRequest) -> Result<Request, RequestError> {
        validate(w.0)
    }
}

impl From<&Request> for WireRequest {
    fn from(r: &Request) -> WireRequest {
        WireRequest(r.to_wire())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
enum WireMessage {
    #[serde(rename = "int_request")]
    Install(WireRule),
    #[serde(rename = "int_modify")]
    Modify(WireModify),
    #[serde(rename = "int_remove")]
    Remove(WireNs),
    #[serde(rename = "int_list")]
    List(WireEmpty),
    #[serde(rename = "int_stats")]
    Stats(WireNs),
}

fn required<'a>(v: &'a Option<Scalar>, field: &'static str) -> Result<&'a Scalar, RequestError> {
    v.as_ref().ok_or(RequestError::MissingField { field })
}

fn parse_ns(v: &Scalar) -> Result<u16, RequestError> {
    match v.uint("ns_id") {
        Ok(n) if (1..=65535).contains(&n) => Ok(n as u16),
        Err(Some(e)) => Err(e),
        _ => Err(RequestError::NamespaceOutOfRange { value: v.show() }),
    }
}

fn parse_port(v: &Scalar, field: &'static str) -> Result<u16, RequestError> {
    match v.uint(field) {
        Ok(n) if n <= 65535 => Ok(n as u16),
        Err(Some(e)) => Err(e),
        _ => Err(RequestError::PortOutOfRange {
            field,
            value: v.show(),
        }),
    }
}

fn parse_ip(v: &Scalar, field: &'static str) -> Result<Ipv6Addr, RequestError> {
    let s = v.string(field)?;
    s.parse::<Ipv6Addr>()
        .map_err(|_| RequestError::BadIpAddress {
            field,
            value: truncate(s),
        })
}

fn parse_protocol(v: &Scalar) -> Result<Protocol, RequestError> {
    let s = v.string("protocol")?;
    match s.to_ascii_lowercase().as_str() {
        "tcp" => Ok(Protocol::Tcp),
        "udp" => Ok(Protocol::Udp),
        "icmp" | "icmpv6" => Ok(Protocol::Icmp),
        _ => Err(RequestError::UnknownProtocol { value: truncate(s) }),
    }
}

fn parse_trace_type(v: &Scalar) -> Result<TraceType, RequestError> {
    let s = v.string("trace_type")?;
    let bad = |reason| RequestError::BadTraceType {
        value: truncate(s),
        reason,
    };
    let hex = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if hex.is_empty() || hex.len() > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad("is not a hex number of at most 8 digits"));
    }
    let value = u32::from_str_radix(hex, 16).map_err(|_| bad("is not a hex number"))?;
    let unknown = value & !TraceType::KNOWN;
    if unknown != 0 {
        return Err(RequestError::UnknownTraceTypeBits { unknown });
    }
    if value == 0 {
        return Err(bad("selects no metadata"));
    }
    Ok(TraceType(value))
}

fn parse_mode_kind(v: &Scalar) -> Result<ModeKind, RequestError> {
    ModeKind::parse(v.string("mode")?)
}

fn parse_hops(v: &ScalarList, field: &'static str) -> Result<Vec<u16>, RequestError> {
    let items = match v {
        ScalarList::List(items) => items,
        ScalarList::NotList(s) => return Err(wrong(field, "array", s)),
    };
    if items.len() > MAX_HOP_LIST {
        return Err(RequestError::BadHopList {
            field,
            reason: format!("more than {MAX_HOP_LIST} node ids"),
        });
    }
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        match it.uint(field) {
            Ok(n) if (1..=65535).contains(&n) => out.push(n as u16),
            Err(Some(e)) => return Err(e),
            _ => {
                return Err(RequestError::BadHopList {
                    field,
                    reason: format!("node id {} out of range 1..=65535", it.show()),
                })
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

impl TryFrom<WireRule> for Rule {
    type Error = RequestError;
    fn try_from(w: WireRule) -> Result<Rule, RequestError> {
        let ns_id = parse_ns(required(&w.ns_id, "ns_id")?)?;
        let app = required(&w.app_id, "app_id")?;
        let app_id = match app.uint("app_id") {
            Ok(n) if n <= u32::MAX as u64 => n as u32,
            Err(Some(e)) => return Err(e),
            _ => return Err(RequestError::AppIdOutOfRange { value: app.show() }),
        };
        let src_ip = parse_ip(required(&w.src_ip, "src_ip")?, "src_ip")?;
        let dst_ip = parse_ip(required(&w.dst_ip, "dst_ip")?, "dst_ip")?;
        let src_port = parse_port(required(&w.src_port, "src_port")?, "src_port")?;
        let dst_port = parse_port(required(&w.dst_port, "dst_port")?, "dst_port")?;
        let protocol = parse_protocol(required(&w.protocol, "protocol")?)?;
        if protocol == Protocol::Icmp {
            if src_port != 0 {
                return Err(RequestError::PortWithIcmp { field: "src_port" });
            }
            if dst_port != 0 {
                return Err(RequestError::PortWithIcmp { field: "dst_port" });
            }
        }
        let trace_type = parse_trace_type(required(&w.trace_type, "trace_type")?)?;
        let kind = parse_mode_kind(required(&w.mode, "mode")?)?;
        let setting = required(&w.mode_setting, "mode_setting")?.number("mode_setting")?;
        let mode = Mode::from_parts(kind, setting)?;
        let d = Flags::default();
        let flag = |v: &Option<Scalar>, f: &'static str, def: bool| match v {
            Some(s) => s.boolean(f),
            None => Ok(def),
        };
        let flags = Flags {
            transmit_report: flag(&w.transmit_report, "transmit_report", d.transmit_report)?,
            piggyback_report: flag(&w.piggyback_report, "piggyback_report", d.piggyback_report)?,
            extract_report: flag(&w.extract_report, "extract_report", d.extract_report)?,
            hop_enabled: flag(&w.hop_enabled, "hop_enabled", d.hop_enabled)?,
        };
        Ok(Rule {
            ns_id,
            app_id,
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            protocol,
            trace_type,
            mode,
            flags,
        })
    }
}

impl From<Rule> for WireRule {
    fn from(r: Rule) -> WireRule {
        let d = Flags::default();
        let flag = |v: bool, def: bool| (v != def).then_some(Scalar::B(v));
        WireRule {
            ns_id: Some(Scalar::U(r.ns_id as u64)),
            app_id: Some(Scalar::U(r.app_id as u64)),
            src_ip: Some(Scalar::S(r.src_ip.to_string())),
            dst_ip: Some(Scalar::S(r.dst_ip.to_string())),
            src_port: Some(Scalar::U(r.src_port as u64)),
            dst_port: Some(Scalar::U(r.dst_port as u64)),
            protocol: Some(Scalar::S(r.protocol.name().to_owned())),
            trace_type: Some(Scalar::S(to_hex(r.trace_type))),
            mode: Some(Scalar::S(r.mode.kind().name().to_owned())),
            mode_setting: Some(r.mode.setting_scalar()),
            transmit_report: flag(r.flags.transmit_report, d.transmit_report),
            piggyback_report: flag(r.flags.piggyback_report, d.piggyback_report),
            extract_report: flag(r.flags.extract_report, d.extract_report),
            hop_enabled: flag(r.flags.hop_enabled, d.hop_enabled),
        }
    }
}

fn validate(w: WireMessage) -> Result<Request, RequestError> {
    Ok(match w {
        WireMessage::Install(r) => Request::Install(Rule::try_from(r)?),
        WireMessage::Modify(m) => {
            let namespace = parse_ns(required(&m.ns_id, "ns_id")?)?;
            let opt_bool = |v: &Option<Scalar>, f| v.as_ref().map(|s| s.boolean(f)).transpose();
            let mode = m.mode.as_ref().map(parse_mode_kind).transpose()?;
            let mode_setting = m
                .mode_setting
                .as_ref()
                .map(|s| s.number("mode_setting"))
                .transpose()?;
            if let Some(v) = mode_setting {
                if !v.is_finite() || v <= 0.0 {
                    // Invalid for every mode; report it against the mode it would apply to.
                    match mode {
                        Some(k) => {
                            Mode::from_parts(k, v)?;
                        }
                        None if v == 0.0 => {
                            return Err(RequestError::BadModeSetting {
                                mode: "any",
                                value: v,
                                reason: "must be positive",
                            })
                        }
                        None => {
                            return Err(RequestError::BadModeSetting {
                                mode: "any",
                                value: v,
                                reason: "must be a positive finite number",
                            })
                        }
                    }
                }
            }
            if let (Some(k), Some(v)) = (mode, mode_setting) {
                Mode::from_parts(k, v)?;
            }
            let enable_hops = match &m.enable_hops {
                Some(l) => parse_hops(l, "enable_hops")?,
                None => Vec::new(),
            };
            let disable_hops = match &m.disable_hops {
                Some(l) => parse_hops(l, "disable_hops")?,
                None => Vec::new(),
            };
            if let Some(n) = enable_hops.iter().find(|n| disable_hops.contains(n)) {
                return Err(RequestError::BadHopList {
                    field: "disable_hops",
                    reason: format!("node id {n} is also in enable_hops"),
                });
            }
            let changes = ModifyFields {
                mode,
                mode_setting,
                trace_type: m.trace_type.as_ref().map(parse_trace_type).transpose()?,
                transmit_report: opt_bool(&m.transmit_report, "transmit_report")?,
                piggyback_report: opt_bool(&m.piggyback_report, "piggyback_report")?,
                extract_report: opt_bool(&m.extract_report, "extract_report")?,
                hop_enabled: opt_bool(&m.hop_enabled, "hop_enabled")?,
                enable_hops,
                disable_hops,
            };
            if changes.is_empty() {
                return Err(RequestError::EmptyModify { ns_id: namespace });
            }
            Request::Modify { namespace, changes }
        }
        WireMessage::Remove(n) => Request::Remove {
            namespace: parse_ns(required(&n.ns_id, "ns_id")?)?,
        },
        WireMessage::List(WireEmpty {}) => Request::List,
        WireMessage::Stats(n) => Request::Stats {
            namespace: n.ns_id.as_ref().map(parse_ns).transpose()?,
        },
    })
}

impl Request {
    fn to_wire(&self) -> WireMessage {
        let u = |n: u16| Some(Scalar::U(n as u64));
        match self {
            Request::Install(r) => WireMessage::Install(r.clone().into()),
            Request::Modify { namespace, changes } => {
                let hops = |v: &Vec<u16>| {
                    (!v.is_empty())
                        .then(|| ScalarList::List(v.iter().map(|n| Scalar::U(*n as u64)).collect()))
                };
                WireMessage::Modify(WireModify {
                    ns_id: u(*namespace),
                    mode: changes.mode.map(|k| Scalar::S(k.name().to_owned())),
                    mode_setting: changes.mode_setting.map(|v| match exact_uint(v) {
                        Some(n) => Scalar::U(n),
                        None => Scalar::F(v),
                    }),
                    trace_type: changes.trace_type.map(|t| Scalar::S(to_hex(t))),
                    transmit_report: changes.transmit_report.map(Scalar::B),
                    piggyback_report: changes.piggyback_report.map(Scalar::B),
                    extract_report: changes.extract_report.map(Scalar::B),
                    hop_enabled: changes.hop_enabled.map(Scalar::B),
                    enable_hops: hops(&changes.enable_hops),
                    disable_hops: hops(&changes.disable_hops),
                })
            }
            Request::Remove { namespace } => WireMessage::Remove(WireNs {
                ns_id: u(*namespace),
            }),
            Request::List => WireMessage::List(WireEmpty {}),
            Request::Stats { namespace } => WireMessage::Stats(WireNs {
                ns_id: namespace.and_then(u),
            }),
        }
    }

    /// CBOR encoding (same logical schema).
    pub fn to_cbor(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = ciborium::ser::into_writer(&self.to_wire(), &mut out);
        out
    }
}
