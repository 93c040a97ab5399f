//! Decoding and encoding of [`Ie`] values (TS 29.244 section 8.2): one reader over the value
//! octets, one parser and one emitter per fixed-layout IE.

use super::*;
use crate::error::{DecodeError, EmitError};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Reader over an IE value; every accessor returns `None` past the end.
struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn be(&mut self, n: usize) -> Option<u64> {
        Some(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }
    fn u8(&mut self) -> Option<u8> {
        self.be(1).map(|v| v as u8)
    }
    fn u16(&mut self) -> Option<u16> {
        self.be(2).map(|v| v as u16)
    }
    fn u32(&mut self) -> Option<u32> {
        self.be(4).map(|v| v as u32)
    }
    fn ipv4(&mut self) -> Option<Ipv4Addr> {
        self.u32().map(Ipv4Addr::from)
    }
    fn ipv6(&mut self) -> Option<Ipv6Addr> {
        let b: [u8; 16] = self.take(16)?.try_into().ok()?;
        Some(Ipv6Addr::from(b))
    }
    fn opt<T>(
        &mut self,
        present: bool,
        f: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if present {
            f(self).map(Some)
        } else {
            Some(None)
        }
    }
}

fn put_be(out: &mut Vec<u8>, v: u64, n: usize) {
    out.extend_from_slice(&v.to_be_bytes()[8 - n..]);
}

fn parse_bitmap(v: &[u8]) -> Option<Bitmap> {
    if v.is_empty() {
        return None;
    }
    let mut x = 0u64;
    for (i, b) in v.iter().take(8).enumerate() {
        x |= (*b as u64) << (8 * i);
    }
    Some(Bitmap(x))
}

fn emit_bitmap(out: &mut Vec<u8>, b: Bitmap, min_len: usize) {
    let used = 8 - (b.0.leading_zeros() as usize / 8);
    for i in 0..used.max(min_len) {
        out.push((b.0 >> (8 * i)) as u8);
    }
}

fn parse_volume(v: &[u8], mask: u8) -> Option<Volume> {
    let mut r = Rd(v);
    let f = r.u8()? & mask;
    Some(Volume {
        total: r.opt(f & 0x01 != 0, |r| r.be(8))?,
        ul: r.opt(f & 0x02 != 0, |r| r.be(8))?,
        dl: r.opt(f & 0x04 != 0, |r| r.be(8))?,
        total_packets: r.opt(f & 0x08 != 0, |r| r.be(8))?,
        ul_packets: r.opt(f & 0x10 != 0, |r| r.be(8))?,
        dl_packets: r.opt(f & 0x20 != 0, |r| r.be(8))?,
    })
}

fn emit_volume(out: &mut Vec<u8>, v: &Volume) {
    let all = [
        v.total,
        v.ul,
        v.dl,
        v.total_packets,
        v.ul_packets,
        v.dl_packets,
    ];
    let mut f = 0u8;
    for (i, x) in all.iter().enumerate() {
        if x.is_some() {
            f |= 1 << i;
        }
    }
    out.push(f);
    for x in all.iter().flatten() {
        put_be(out, *x, 8);
    }
}

fn parse_fteid(v: &[u8]) -> Option<FTeid> {
    let mut r = Rd(v);
    let f = r.u8()?;
    let (v4, v6, ch, chid) = (f & 1 != 0, f & 2 != 0, f & 4 != 0, f & 8 != 0);
    if ch {
        Some(FTeid::Choose {
            v4,
            v6,
            choose_id: r.opt(chid, Rd::u8)?,
        })
    } else {
        let teid = r.u32()?;
        let ipv4 = r.opt(v4, Rd::ipv4)?;
        let ipv6 = r.opt(v6, Rd::ipv6)?;
        if ipv4.is_none() && ipv6.is_none() {
            return None; // section 8.2.3: at least one of V4 and V6 shall be set
        }
        Some(FTeid::Assigned { teid, ipv4, ipv6 })
    }
}

fn parse_sdf(v: &[u8]) -> Option<SdfFilter> {
    let mut r = Rd(v);
    let f = r.u8()?;
    r.u8()?; // spare octet
    Some(SdfFilter {
        flow_description: r.opt(f & 1 != 0, |r| {
            let n = r.u16()? as usize;
            r.take(n).map(<[u8]>::to_vec)
        })?,
        tos_traffic_class: r.opt(f & 2 != 0, Rd::u16)?,
        spi: r.opt(f & 4 != 0, Rd::u32)?,
        flow_label: r.opt(f & 8 != 0, |r| r.be(3).map(|x| x as u32))?,
        sdf_filter_id: r.opt(f & 16 != 0, Rd::u32)?,
    })
}

fn parse_ohc(v: &[u8]) -> Option<OuterHeaderCreation> {
    let mut r = Rd(v);
    let d = r.u16()?;
    Some(OuterHeaderCreation {
        description: d,
        teid: r.opt(d & ohc::TEID_PRESENT != 0, Rd::u32)?,
        ipv4: r.opt(d & ohc::IPV4_PRESENT != 0, Rd::ipv4)?,
        ipv6: r.opt(d & ohc::IPV6_PRESENT != 0, Rd::ipv6)?,
        port: r.opt(d & ohc::PORT_PRESENT != 0, Rd::u16)?,
        c_tag: r.opt(d & ohc::C_TAG != 0, |r| r.be(3).map(|x| x as u32))?,
        s_tag: r.opt(d & ohc::S_TAG != 0, |r| r.be(3).map(|x| x as u32))?,
    })
}

fn parse_ueip(v: &[u8]) -> Option<UeIpAddress> {
    let mut r = Rd(v);
    let f = r.u8()?;
    Some(UeIpAddress {
        sd: f & 0x04 != 0,
        chv4: f & 0x10 != 0,
        chv6: f & 0x20 != 0,
        ipv4: r.opt(f & 0x02 != 0, Rd::ipv4)?,
        ipv6: r.opt(f & 0x01 != 0, Rd::ipv6)?,
        ipv6_prefix_delegation_bits: r.opt(f & 0x08 != 0, Rd::u8)?,
        ipv6_prefix_length: r.opt(f & 0x40 != 0, Rd::u8)?,
    })
}

/// Section 8.2.70: flags (V6 0x01, V4 0x02, DI 0x04, NI 0x08), IPv4, IPv6, then the
/// Destination Interface and Network Instance each behind a 2-octet length.
fn parse_remote_gtpu_peer(v: &[u8]) -> Option<RemoteGtpuPeer> {
    let mut r = Rd(v);
    let f = r.u8()?;
    let ipv4 = r.opt(f & 0x02 != 0, Rd::ipv4)?;
    let ipv6 = r.opt(f & 0x01 != 0, Rd::ipv6)?;
    let destination_interface = if f & 0x04 != 0 {
        let n = r.be(2)? as usize;
        let d = r.take(n)?;
        Some(*d.first()? & 0x0f)
    } else {
        None
    };
    let network_instance = if f & 0x08 != 0 {
        let n = r.be(2)? as usize;
        Some(r.take(n)?.to_vec())
    } else {
        None
    };
    Some(RemoteGtpuPeer {
        ipv4,
        ipv6,
        destination_interface,
        network_instance,
    })
}

fn parse_node_id(v: &[u8]) -> Option<NodeId> {
    let mut r = Rd(v);
    match r.u8()? & 0x0f {
        0 => r.ipv4().map(NodeId::Ipv4),
        1 => r.ipv6().map(NodeId::Ipv6),
        2 if !r.0.is_empty() => Some(NodeId::Fqdn(r.0.to_vec())),
        _ => None,
    }
}

impl Ie {
    /// The IE type (section 8.1.2).
    pub fn ie_type(&self) -> u16 {
        use ie_type as t;
        match self {
            Ie::Cause(_) => t::CAUSE,
            Ie::SourceInterface(_) => t::SOURCE_INTERFACE,
            Ie::FTeid(_) => t::F_TEID,
            Ie::NetworkInstance(_) => t::NETWORK_INSTANCE,
            Ie::SdfFilter(_) => t::SDF_FILTER,
            Ie::GateStatus(_) => t::GATE_STATUS,
            Ie::Mbr(_) => t::MBR,
            Ie::Gbr(_) => t::GBR,
            Ie::Precedence(_) => t::PRECEDENCE,
            Ie::VolumeThreshold(_) => t::VOLUME_THRESHOLD,
            Ie::TimeThreshold(_) => t::TIME_THRESHOLD,
            Ie::ReportingTriggers(_) => t::REPORTING_TRIGGERS,
            Ie::ReportType(_) => t::REPORT_TYPE,
            Ie::OffendingIe(_) => t::OFFENDING_IE,
            Ie::DestinationInterface(_) => t::DESTINATION_INTERFACE,
            Ie::UpFunctionFeatures(_) => t::UP_FUNCTION_FEATURES,
            Ie::ApplyAction(_) => t::APPLY_ACTION,
            Ie::PfcpsmReqFlags(_) => t::PFCPSMREQ_FLAGS,
            Ie::PdrId(_) => t::PDR_ID,
            Ie::FSeid(_) => t::F_SEID,
            Ie::NodeId(_) => t::NODE_ID,
            Ie::MeasurementMethod(_) => t::MEASUREMENT_METHOD,
            Ie::UsageReportTrigger(_) => t::USAGE_REPORT_TRIGGER,
            Ie::MeasurementPeriod(_) => t::MEASUREMENT_PERIOD,
            Ie::VolumeMeasurement(_) => t::VOLUME_MEASUREMENT,
            Ie::DurationMeasurement(_) => t::DURATION_MEASUREMENT,
            Ie::TimeOfFirstPacket(_) => t::TIME_OF_FIRST_PACKET,
            Ie::TimeOfLastPacket(_) => t::TIME_OF_LAST_PACKET,
            Ie::VolumeQuota(_) => t::VOLUME_QUOTA,
            Ie::TimeQuota(_) => t::TIME_QUOTA,
            Ie::OuterHeaderCreation(_) => t::OUTER_HEADER_CREATION,
            Ie::UeIpAddress(_) => t::UE_IP_ADDRESS,
            Ie::OuterHeaderRemoval(_) => t::OUTER_HEADER_REMOVAL,
            Ie::RecoveryTimeStamp(_) => t::RECOVERY_TIME_STAMP,
            Ie::UrSeqn(_) => t::UR_SEQN,
            Ie::FarId(_) => t::FAR_ID,
            Ie::QerId(_) => t::QER_ID,
            Ie::UrrId(_) => t::URR_ID,
            Ie::BarId(_) => t::BAR_ID,
            Ie::StartTime(_) => t::START_TIME,
            Ie::EndTime(_) => t::END_TIME,
            Ie::FailedRuleId(_) => t::FAILED_RULE_ID,
            Ie::SuggestedBufferingPacketsCount(_) => t::SUGGESTED_BUFFERING_PACKETS_COUNT,
            Ie::Qfi(_) => t::QFI,
            Ie::QueryUrrReference(_) => t::QUERY_URR_REFERENCE,
            Ie::NodeReportType(_) => t::NODE_REPORT_TYPE,
            Ie::RemoteGtpuPeer(_) => t::REMOTE_GTPU_PEER,
            Ie::Grouped(g) => g.ie_type,
            Ie::Raw(r) => r.ie_type,
        }
    }

    /// Decode one TLV found at nesting `depth` (0 for a message's own IEs). Unknown and
    /// vendor-specific IEs become [`Ie::Raw`]; a known IE whose value does not decode is
    /// `IeIncorrect`.
    pub fn parse(raw: RawIeRef<'_>, depth: usize) -> Result<Ie, DecodeError> {
        use ie_type as t;
        let ty = raw.ie_type;
        let v = raw.value;
        if raw.enterprise_id.is_some() {
            return Ok(Ie::Raw(RawIe {
                ie_type: ty,
                enterprise_id: raw.enterprise_id,
                value: v.to_vec(),
            }));
        }
        if t::is_grouped(ty) {
            return Grouped::parse(ty, v, depth + 1).map(Ie::Grouped);
        }
        let mut r = Rd(v);
        let ie = match ty {
            t::CAUSE => r.u8().map(Ie::Cause),
            t::SOURCE_INTERFACE => r.u8().map(|x| Ie::SourceInterface(x & 0x0f)),
            t::F_TEID => parse_fteid(v).map(Ie::FTeid),
            t::NETWORK_INSTANCE => Some(Ie::NetworkInstance(v.to_vec())),
            t::SDF_FILTER => parse_sdf(v).map(Ie::SdfFilter),
            t::GATE_STATUS => r.u8().map(|x| {
                Ie::GateStatus(GateStatus {
                    ul: (x >> 2) & 3,
                    dl: x & 3,
                })
            }),
            t::MBR | t::GBR => (|| {
                let b = BitRate {
                    ul: r.be(5)?,
                    dl: r.be(5)?,
                };
                Some(if ty == t::MBR { Ie::Mbr(b) } else { Ie::Gbr(b) })
            })(),
            t::PRECEDENCE => r.u32().map(Ie::Precedence),
            t::VOLUME_THRESHOLD => parse_volume(v, 0x07).map(Ie::VolumeThreshold),
            t::VOLUME_QUOTA => parse_volume(v, 0x07).map(Ie::VolumeQuota),
            t::VOLUME_MEASUREMENT => parse_volume(v, 0x3f).map(Ie::VolumeMeasurement),
            t::TIME_THRESHOLD => r.u32().map(Ie::TimeThreshold),
            t::TIME_QUOTA => r.u32().map(Ie::TimeQuota),
            t::QUERY_URR_REFERENCE => r.u32().map(Ie::QueryUrrReference),
            t::NODE_REPORT_TYPE => parse_bitmap(v).map(Ie::NodeReportType),
            t::REMOTE_GTPU_PEER => parse_remote_gtpu_peer(v).map(Ie::RemoteGtpuPeer),
            t::REPORTING_TRIGGERS => parse_bitmap(v).map(Ie::ReportingTriggers),
            t::REPORT_TYPE => parse_bitmap(v).map(Ie::ReportType),
            t::UP_FUNCTION_FEATURES => parse_bitmap(v).map(Ie::UpFunctionFeatures),
            t::APPLY_ACTION => parse_bitmap(v).map(Ie::ApplyAction),
            t::PFCPSMREQ_FLAGS => parse_bitmap(v).map(Ie::PfcpsmReqFlags),
            t::MEASUREMENT_METHOD => parse_bitmap(v).map(Ie::MeasurementMethod),
            t::USAGE_REPORT_TRIGGER => parse_bitmap(v).map(Ie::UsageReportTrigger),
            t::OFFENDING_IE => r.u16().map(Ie::OffendingIe),
            t::DESTINATION_INTERFACE => r.u8().map(|x| Ie::DestinationInterface(x & 0x0f)),
            t::PDR_ID => r.u16().map(Ie::PdrId),
            t::F_SEID => (|| {
                let f = r.u8()?;
                let seid = r.be(8)?;
                let ipv4 = r.opt(f & 2 != 0, Rd::ipv4)?;
                let ipv6 = r.opt(f & 1 != 0, Rd::ipv6)?;
                Some(Ie::FSeid(FSeid { seid, ipv4, ipv6 }))
            })(),
            t::NODE_ID => parse_node_id(v).map(Ie::NodeId),
            t::MEASUREMENT_PERIOD => r.u32().map(Ie::MeasurementPeriod),
            t::DURATION_MEASUREMENT => r.u32().map(Ie::DurationMeasurement),
            t::TIME_OF_FIRST_PACKET => r.u32().map(Ie::TimeOfFirstPacket),
            t::TIME_OF_LAST_PACKET => r.u32().map(Ie::TimeOfLastPacket),
            t::OUTER_HEADER_CREATION => parse_ohc(v).map(Ie::OuterHeaderCreation),
            t::UE_IP_ADDRESS => parse_ueip(v).map(Ie::UeIpAddress),
            t::OUTER_HEADER_REMOVAL => (|| {
                Some(Ie::OuterHeaderRemoval(OuterHeaderRemoval {
                    description: r.u8()?,
                    ext_header_deletion: r.u8(),
                }))
            })(),
            t::RECOVERY_TIME_STAMP => r.u32().map(Ie::RecoveryTimeStamp),
            t::UR_SEQN => r.u32().map(Ie::UrSeqn),
            t::FAR_ID => r.u32().map(Ie::FarId),
            t::QER_ID => r.u32().map(Ie::QerId),
            t::URR_ID => r.u32().map(Ie::UrrId),
            t::BAR_ID => r.u8().map(Ie::BarId),
            t::START_TIME => r.u32().map(Ie::StartTime),
            t::END_TIME => r.u32().map(Ie::EndTime),
            t::FAILED_RULE_ID => (|| {
                Some(Ie::FailedRuleId(match r.u8()? & 0x1f {
                    0 => FailedRuleId::Pdr(r.u16()?),
                    1 => FailedRuleId::Far(r.u32()?),
                    2 => FailedRuleId::Qer(r.u32()?),
                    3 => FailedRuleId::Urr(r.u32()?),
                    4 => FailedRuleId::Bar(r.u8()?),
                    _ => return None,
                }))
            })(),
            t::SUGGESTED_BUFFERING_PACKETS_COUNT => r.u8().map(Ie::SuggestedBufferingPacketsCount),
            t::QFI => r.u8().map(|x| Ie::Qfi(x & 0x3f)),
            _ => Some(Ie::Raw(RawIe {
                ie_type: ty,
                enterprise_id: None,
                value: v.to_vec(),
            })),
        };
        ie.ok_or(DecodeError::IeIncorrect { ie_type: ty })
    }

    /// Append the whole TLV to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        let ty = self.ie_type();
        let start = out.len();
        out.extend_from_slice(&ty.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        self.emit_value(out)?;
        let len = u16::try_from(out.len() - start - HEADER_LEN)
            .map_err(|_| EmitError::IeTooLong { ie_type: ty })?;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        Ok(())
    }

    fn emit_value(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        match self {
            Ie::Cause(x) | Ie::BarId(x) | Ie::SuggestedBufferingPacketsCount(x) => out.push(*x),
            Ie::FailedRuleId(f) => {
                let (ty, v, n) = match *f {
                    FailedRuleId::Pdr(x) => (0, x as u64, 2),
                    FailedRuleId::Far(x) => (1, x as u64, 4),
                    FailedRuleId::Qer(x) => (2, x as u64, 4),
                    FailedRuleId::Urr(x) => (3, x as u64, 4),
                    FailedRuleId::Bar(x) => (4, x as u64, 1),
                };
                out.push(ty);
                put_be(out, v, n);
            }
            Ie::SourceInterface(x) | Ie::DestinationInterface(x) => out.push(x & 0x0f),
            Ie::Qfi(x) => out.push(x & 0x3f),
            Ie::FTeid(f) => match *f {
                FTeid::Assigned { teid, ipv4, ipv6 } => {
                    if ipv4.is_none() && ipv6.is_none() {
                        return Err(EmitError::FieldRange("F-TEID without address"));
                    }
                    out.push(ipv4.is_some() as u8 | (ipv6.is_some() as u8) << 1);
                    put_be(out, teid as u64, 4);
                    if let Some(a) = ipv4 {
                        out.extend_from_slice(&a.octets());
                    }
                    if let Some(a) = ipv6 {
                        out.extend_from_slice(&a.octets());
                    }
                }
                FTeid::Choose { v4, v6, choose_id } => {
                    out.push(v4 as u8 | (v6 as u8) << 1 | 4 | (choose_id.is_some() as u8) << 3);
                    out.extend(choose_id);
                }
            },
            Ie::NetworkInstance(v) => out.extend_from_slice(v),
            Ie::SdfFilter(s) => {
                let f = s.flow_description.is_some() as u8
                    | (s.tos_traffic_class.is_some() as u8) << 1
                    | (s.spi.is_some() as u8) << 2
                    | (s.flow_label.is_some() as u8) << 3
                    | (s.sdf_filter_id.is_some() as u8) << 4;
                out.extend_from_slice(&[f, 0]);
                if let Some(fd) = &s.flow_description {
                    let n = u16::try_from(fd.len()).map_err(|_| EmitError::IeTooLong {
                        ie_type: ie_type::SDF_FILTER,
                    })?;
                    out.extend_from_slice(&n.to_be_bytes());
                    out.extend_from_slice(fd);
                }
                if let Some(x) = s.tos_traffic_class {
                    put_be(out, x as u64, 2);
                }
                if let Some(x) = s.spi {
                    put_be(out, x as u64, 4);
                }
                if let Some(x) = s.flow_label {
                    if x > 0x00ff_ffff {
                        return Err(EmitError::FieldRange("flow label"));
                    }
                    put_be(out, x as u64, 3);
                }
                if let Some(x) = s.sdf_filter_id {
                    put_be(out, x as u64, 4);
                }
            }
            Ie::GateStatus(g) => out.push((g.ul & 3) << 2 | (g.dl & 3)),
            Ie::Mbr(b) | Ie::Gbr(b) => {
                if b.ul >> 40 != 0 || b.dl >> 40 != 0 {
                    return Err(EmitError::FieldRange("bit rate"));
                }
                put_be(out, b.ul, 5);
                put_be(out, b.dl, 5);
            }
            Ie::Precedence(x)
            | Ie::TimeThreshold(x)
            | Ie::TimeQuota(x)
            | Ie::QueryUrrReference(x)
            | Ie::MeasurementPeriod(x)
            | Ie::DurationMeasurement(x)
            | Ie::TimeOfFirstPacket(x)
            | Ie::TimeOfLastPacket(x)
            | Ie::RecoveryTimeStamp(x)
            | Ie::StartTime(x)
            | Ie::EndTime(x)
            | Ie::UrSeqn(x)
            | Ie::FarId(x)
            | Ie::QerId(x)
            | Ie::UrrId(x) => put_be(out, *x as u64, 4),
            Ie::VolumeThreshold(v) | Ie::VolumeQuota(v) => {
                if v.total_packets.is_some() || v.ul_packets.is_some() || v.dl_packets.is_some() {
                    return Err(EmitError::FieldRange(
                        "packet counts outside Volume Measurement",
                    ));
                }
                emit_volume(out, v)
            }
            Ie::VolumeMeasurement(v) => emit_volume(out, v),
            Ie::ReportingTriggers(b) | Ie::UsageReportTrigger(b) => emit_bitmap(out, *b, 3),
            Ie::UpFunctionFeatures(b) => emit_bitmap(out, *b, 6),
            Ie::ApplyAction(b) => emit_bitmap(out, *b, 2),
            Ie::PfcpsmReqFlags(b) => emit_bitmap(out, *b, 1),
            Ie::ReportType(b) | Ie::MeasurementMethod(b) | Ie::NodeReportType(b) => {
                emit_bitmap(out, *b, 1)
            }
            Ie::OffendingIe(x) | Ie::PdrId(x) => put_be(out, *x as u64, 2),
            Ie::RemoteGtpuPeer(p) => {
                out.push(
                    (p.network_instance.is_some() as u8) << 3
                        | (p.destination_interface.is_some() as u8) << 2
                        | (p.ipv4.is_some() as u8) << 1
                        | p.ipv6.is_some() as u8,
                );
                if let Some(a) = p.ipv4 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(a) = p.ipv6 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(d) = p.destination_interface {
                    put_be(out, 1, 2);
                    out.push(d & 0x0f);
                }
                if let Some(n) = &p.network_instance {
                    let len = u16::try_from(n.len())
                        .map_err(|_| EmitError::FieldRange("network instance"))?;
                    put_be(out, u64::from(len), 2);
                    out.extend_from_slice(n);
                }
            }
            Ie::FSeid(f) => {
                out.push((f.ipv4.is_some() as u8) << 1 | f.ipv6.is_some() as u8);
                put_be(out, f.seid, 8);
                if let Some(a) = f.ipv4 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(a) = f.ipv6 {
                    out.extend_from_slice(&a.octets());
                }
            }
            Ie::NodeId(n) => match n {
                NodeId::Ipv4(a) => {
                    out.push(0);
                    out.extend_from_slice(&a.octets());
                }
                NodeId::Ipv6(a) => {
                    out.push(1);
                    out.extend_from_slice(&a.octets());
                }
                NodeId::Fqdn(b) => {
                    if b.is_empty() {
                        return Err(EmitError::FieldRange("empty FQDN"));
                    }
                    out.push(2);
                    out.extend_from_slice(b);
                }
            },
            Ie::OuterHeaderCreation(o) => {
                let d = o.description;
                put_be(out, d as u64, 2);
                let missing = EmitError::FieldRange("outer header creation field");
                if d & ohc::TEID_PRESENT != 0 {
                    put_be(out, o.teid.ok_or(missing)? as u64, 4);
                }
                if d & ohc::IPV4_PRESENT != 0 {
                    out.extend_from_slice(&o.ipv4.ok_or(missing)?.octets());
                }
                if d & ohc::IPV6_PRESENT != 0 {
                    out.extend_from_slice(&o.ipv6.ok_or(missing)?.octets());
                }
                if d & ohc::PORT_PRESENT != 0 {
                    put_be(out, o.port.ok_or(missing)? as u64, 2);
                }
                for (bit, tag) in [(ohc::C_TAG, o.c_tag), (ohc::S_TAG, o.s_tag)] {
                    if d & bit != 0 {
                        let t = tag.ok_or(missing)?;
                        if t > 0x00ff_ffff {
                            return Err(missing);
                        }
                        put_be(out, t as u64, 3);
                    }
                }
            }
            Ie::UeIpAddress(u) => {
                let f = u.ipv6.is_some() as u8
                    | (u.ipv4.is_some() as u8) << 1
                    | (u.sd as u8) << 2
                    | (u.ipv6_prefix_delegation_bits.is_some() as u8) << 3
                    | (u.chv4 as u8) << 4
                    | (u.chv6 as u8) << 5
                    | (u.ipv6_prefix_length.is_some() as u8) << 6;
                out.push(f);
                if let Some(a) = u.ipv4 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(a) = u.ipv6 {
                    out.extend_from_slice(&a.octets());
                }
                out.extend(u.ipv6_prefix_delegation_bits);
                out.extend(u.ipv6_prefix_length);
            }
            Ie::OuterHeaderRemoval(o) => {
                out.push(o.description);
                out.extend(o.ext_header_deletion);
            }
            Ie::Grouped(g) => {
                for ie in &g.ies {
                    ie.emit(out)?;
                }
            }
            Ie::Raw(r) => {
                if let Some(e) = r.enterprise_id {
                    if r.ie_type & ENTERPRISE_BIT == 0 {
                        return Err(EmitError::FieldRange("enterprise ID on a 3GPP IE type"));
                    }
                    out.extend_from_slice(&e.to_be_bytes());
                } else if r.ie_type & ENTERPRISE_BIT != 0 {
                    return Err(EmitError::FieldRange("vendor IE without enterprise ID"));
                }
                out.extend_from_slice(&r.value);
            }
        }
        Ok(())
    }
}
